package formsclient_test

// Tests against fake servers that misbehave in ways the real handler
// never does: retries, proxies' answers, broken paging.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/storetest"
)

const key = "test-key"

// fake serves the answers of fn, counting requests.
type fake struct {
	*httptest.Server
	requests atomic.Int64
}

func newFake(t *testing.T, fn func(n int64, w http.ResponseWriter, r *http.Request)) *fake {
	t.Helper()
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fn(f.requests.Add(1), w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// page is a submissions page of the items created at the given minutes
// past 2024-01-01T00:00Z, with next as its nextCursor ("" for none).
func page(next string, minutes ...int) string {
	var items []string
	for _, m := range minutes {
		at := time.Date(2024, 1, 1, 0, m, 0, 0, time.UTC).Format(time.RFC3339)
		items = append(items, fmt.Sprintf(`{"formId":"contact","data":{"m":%d},"attachments":[],"createdAt":%q}`, m, at))
	}
	s := `{"success":true,"message":"submissions retrieved","submissions":[` + strings.Join(items, ",") + `]`
	if next != "" {
		s += `,"nextCursor":` + fmt.Sprintf("%q", next)
	}
	return s + "}"
}

// recordWaits makes c record its retry waits instead of spending them.
func recordWaits(c *formsclient.Client) *[]time.Duration {
	var mu sync.Mutex
	waits := &[]time.Duration{}
	formsclient.SetSleep(c, func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		*waits = append(*waits, d)
		return ctx.Err()
	})
	return waits
}

func TestRequestShape(t *testing.T) {
	t.Parallel()
	type seen struct{ path, query, auth, ua, accept string }
	var got []seen
	var mu sync.Mutex
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("User-Agent"), r.Header.Get("Accept")})
		mu.Unlock()
		if n == 1 {
			writeJSON(w, 200, page("c1/+=", 9))
			return
		}
		writeJSON(w, 200, page("", 8))
	})
	since := time.Date(2024, 1, 1, 1, 0, 0, 5, time.FixedZone("CET", 3600))
	until := time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)
	c := newClient(t, f.URL+"/my%20api/", key, formsclient.WithUserAgent("nightly-export/2"))
	items := mustCollect(t, c.Submissions(context.Background(), "a/b?c#d e", formsclient.Since(since), formsclient.Until(until), formsclient.PageSize(1)))
	if len(items) != 2 || string(items[1].Data) != `{"m":8}` {
		t.Fatalf("items %+v", items)
	}
	path := "/my%20api/v1/forms/a%2Fb%3Fc%23d%20e/submissions"
	want := []seen{
		{path, "limit=1&order=desc&since=2024-01-01T00%3A00%3A00.000000005Z&until=2024-01-02T00%3A00%3A00Z", "Bearer " + key, "nightly-export/2", "application/json"},
		{path, "cursor=c1%2F%2B%3D&limit=1", "Bearer " + key, "nightly-export/2", "application/json"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests\n got %v\nwant %v", got, want)
	}

	// Forms at a base without a path, with the default User-Agent and
	// without limit; and through the caller's http.Client.
	got = nil
	var trips atomic.Int64
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		trips.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}
	f2 := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("User-Agent"), r.Header.Get("Accept")})
		mu.Unlock()
		writeJSON(w, 200, `{"success":true,"message":"forms retrieved","forms":[]}`)
	})
	mustCollect(t, newClient(t, f2.URL, key, formsclient.WithHTTPClient(hc)).Forms(context.Background(), formsclient.Oldest()))
	want = []seen{{"/v1/forms", "order=asc", "Bearer " + key, formsclient.DefaultUserAgent, "application/json"}}
	if fmt.Sprint(got) != fmt.Sprint(want) || trips.Load() != 1 {
		t.Errorf("forms request %v (%d round trips through the caller's client), want %v", got, trips.Load(), want)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// New refuses, with an error naming each problem, what no request could
// work with, and returns no client; it sends nothing.
func TestNewRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		t.Errorf("request sent: %s", r.URL)
	})
	k, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	badSum := k[:len(k)-1] + "x"
	if strings.HasSuffix(k, "x") {
		badSum = k[:len(k)-1] + "y"
	}
	for _, tc := range []struct {
		name, base, key string
		opts            []formsclient.Option
		is              error
		msgs            []string
	}{
		{"no scheme", "forms.example.com/api", key, nil, nil, []string{"must start with https://"}},
		{"ftp", "ftp://" + f.Listener.Addr().String(), key, nil, nil, []string{"must start with https://"}},
		{"relative", "/api", key, nil, nil, []string{"must start with https://"}},
		{"unparsable", "http://[::1", key, nil, nil, []string{"base URL"}},
		{"bad port", "http://example.com:port", key, nil, nil, []string{"base URL"}},
		{"empty", "", key, nil, nil, []string{"no base URL (the URL given is empty)"}},
		{"host and port without a scheme", "127.0.0.1:8080", key, nil, nil, []string{`base URL "127.0.0.1:8080": must start with https://`}},
		{"host name and port without a scheme", "localhost:8080/api", key, nil, nil, []string{`base URL "localhost:8080/api": must start with https://`}},
		{"user and password without a scheme", "user:s3cret@example.com", key, nil, nil, []string{"must start with https://", "not shown"}},
		{"user and password, no host", "http://user:s3cret@/api", key, nil, nil, []string{"must not carry a user name"}},
		{"query", f.URL + "/api?x=1", key, nil, nil, []string{"must not have a query"}},
		{"empty query", f.URL + "/api?", key, nil, nil, []string{"must not have a query"}},
		{"fragment", f.URL + "/api#top", key, nil, nil, []string{"must not have a query or fragment"}},
		{"no host", "https:///api", key, nil, nil, []string{"has no host"}},
		{"user info", "https://u:p@example.com", key, nil, nil, []string{"user name"}},
		{"malformed key", f.URL, "two words", nil, formsapi.ErrInvalidKey, []string{"API key is malformed"}},
		{"empty key", f.URL, "", nil, formsapi.ErrInvalidKey, []string{"no API key (the key given is empty)"}},
		{"key too long", f.URL, strings.Repeat("k", 257), nil, formsapi.ErrInvalidKey, []string{"API key is malformed"}},
		{"bad checksum", f.URL, badSum, nil, formsapi.ErrInvalidKey, []string{"API key is malformed"}},
		{"nil option", f.URL, key, []formsclient.Option{formsclient.WithUserAgent("x/1"), nil}, nil, []string{"option 2 of New is nil"}},
		{"nil HTTP client", f.URL, key, []formsclient.Option{formsclient.WithHTTPClient(nil)}, nil, []string{"WithHTTPClient(nil)"}},
		{"empty user agent", f.URL, key, []formsclient.Option{formsclient.WithUserAgent("")}, nil, []string{`WithUserAgent("")`}},
		{"user agent with a newline", f.URL, key, []formsclient.Option{formsclient.WithUserAgent("x/1\r\nX-Evil: 1")}, nil, []string{"WithUserAgent", "control characters"}},
		{"no tries", f.URL, key, []formsclient.Option{formsclient.WithRetries(0, time.Second, time.Minute)}, nil, []string{"WithRetries(0, 1s, 1m0s)", "maxTries must be at least 1"}},
		{"negative waits", f.URL, key, []formsclient.Option{formsclient.WithRetries(3, -1, -time.Second)}, nil, []string{"backoff must not be negative", "maxWait must not be negative"}},
		{"size 0", f.URL, key, []formsclient.Option{formsclient.WithMaxResponseSize(0)}, nil, []string{"WithMaxResponseSize(0): must be at least 1 byte"}},
		{"everything at once", "ftp://x", "", []formsclient.Option{formsclient.WithMaxResponseSize(-1)}, formsapi.ErrInvalidKey,
			[]string{"must start with https://", "no API key", "WithMaxResponseSize(-1)"}},
	} {
		c, err := formsclient.New(tc.base, tc.key, tc.opts...)
		if err == nil || c != nil {
			t.Errorf("%s: client %v, error %v; want no client and an error", tc.name, c, err)
			continue
		}
		for _, msg := range tc.msgs {
			if !strings.Contains(err.Error(), msg) {
				t.Errorf("%s: %v, want it to say %q", tc.name, err, msg)
			}
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: %v does not match %v", tc.name, err, tc.is)
		}
		if tc.is == nil && errors.Is(err, formsapi.ErrInvalidKey) {
			t.Errorf("%s: %v matches ErrInvalidKey for a good key", tc.name, err)
		}
		for _, secret := range []string{"two words", badSum, "s3cret"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the key is in the message: %v", tc.name, err)
			}
		}
	}

	// What New accepts: a fapi_ key with its checksum, a host's own token
	// format, a base with a path and a trailing slash, every option.
	for _, good := range []struct{ base, key string }{{f.URL, k}, {f.URL + "/api/", "host-format-key=="}, {"HTTPS://forms.example.com", key}} {
		_, err := formsclient.New(good.base, good.key, formsclient.WithRetries(1, 0, 0), formsclient.WithMaxResponseSize(1),
			formsclient.WithUserAgent("a\tb/1"), formsclient.WithHTTPClient(&http.Client{}))
		if err != nil {
			t.Errorf("New(%q, …): %v", good.base, err)
		}
	}
}

// A call refuses what it was given, before any request, as its only error.
func TestCallsRefuseBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		t.Errorf("request sent: %s", r.URL)
	})
	ctx := context.Background()
	c := newClient(t, f.URL, key)
	var zero formsclient.Client
	var none *formsclient.Client
	for _, tc := range []struct {
		name string
		seq  func() error
		is   error
		msg  string
	}{
		{"dot-dot ID", func() error { _, err := collect(t, c.Submissions(ctx, "..")); return err }, formsapi.ErrFormNotFound, "form not found"},
		{"empty ID", func() error { _, err := collect(t, c.Submissions(ctx, "")); return err }, formsapi.ErrFormNotFound, "form not found"},
		{"page size 0", func() error {
			_, err := collect(t, c.Submissions(ctx, "x", formsclient.PageSize(0)))
			return err
		}, nil, "PageSize(0): must be at least 1"},
		{"forms, page size -1", func() error {
			_, err := collect(t, c.Forms(ctx, formsclient.Oldest(), formsclient.PageSize(-1)))
			return err
		}, nil, "PageSize(-1)"},
		{"nil list option", func() error { _, err := collect(t, c.Forms(ctx, formsclient.Oldest(), nil)); return err }, nil, "list option 2 is nil"},
		{"zero Client", func() error { _, err := collect(t, zero.Forms(ctx)); return err }, nil, "not made by formsclient.New"},
		{"nil Client", func() error { _, err := collect(t, none.Submissions(ctx, "x")); return err }, nil, "not made by formsclient.New"},
		{"zero Client syncs", func() error {
			_, err := zero.Sync(ctx, "x", formsclient.SyncStart, func(formsclient.Change) error { return nil })
			return err
		}, nil, "not made by formsclient.New"},
	} {
		err := tc.seq()
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.msg) || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("%s: %v, want an error with %q matching %v", tc.name, err, tc.msg, tc.is)
		}
	}
}

func TestRetriesHonourRetryAfter(t *testing.T) {
	t.Parallel()
	var date string
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "3")
			writeJSON(w, 503, `{"success":false,"message":"service unavailable: the request took too long, try again"}`)
		case 2:
			date = time.Now().Add(5 * time.Second).UTC().Format(http.TimeFormat)
			w.Header().Set("Retry-After", date)
			writeJSON(w, 429, `{"success":false,"message":"too many requests"}`)
		case 3:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(503) // a proxy's, without Retry-After
			io.WriteString(w, "<html>busy</html>")
		case 4:
			w.Header().Set("Retry-After", "soon") // malformed: plain backoff
			writeJSON(w, 429, `{"success":false,"message":"too many requests"}`)
		case 5:
			writeJSON(w, 200, page("next", 5, 4))
		case 6:
			w.Header().Set("Retry-After", "0")
			writeJSON(w, 503, `{"success":false,"message":"later"}`)
		default:
			writeJSON(w, 200, page("", 3))
		}
	})
	backoff := 10 * time.Millisecond
	c := newClient(t, f.URL, key, formsclient.WithRetries(5, backoff, time.Minute))
	waits := recordWaits(c)
	items := mustCollect(t, c.Submissions(context.Background(), "contact"))
	if len(items) != 3 || f.requests.Load() != 7 {
		t.Fatalf("%d items in %d requests", len(items), f.requests.Load())
	}
	w := *waits
	if len(w) != 5 {
		t.Fatalf("waits %v", w)
	}
	check := func(i int, lo, hi time.Duration) {
		t.Helper()
		if w[i] < lo || w[i] > hi {
			t.Errorf("wait %d is %v, want %v to %v", i, w[i], lo, hi)
		}
	}
	check(0, 3*time.Second, 3*time.Second+backoff/2)             // Retry-After: 3, plus jitter
	check(1, 3*time.Second, 5*time.Second+backoff/2)             // an HTTP date 5 s ahead, at one-second resolution
	check(2, 2*backoff, 4*backoff)                               // third try: backoff·4, jittered
	check(3, 4*backoff, 8*backoff)                               // fourth try: backoff·8
	check(4, backoff/2, backoff)                                 // a new page starts its own count
	if _, err := time.Parse(http.TimeFormat, date); err != nil { // the fake did send a date
		t.Fatal(err)
	}
}

func TestRetryWaitsForReal(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, 429, `{"success":false,"message":"too many requests"}`)
			return
		}
		writeJSON(w, 200, `{"success":true,"message":"forms retrieved","forms":[]}`)
	})
	start := time.Now()
	mustCollect(t, newClient(t, f.URL, key, formsclient.WithRetries(2, time.Millisecond, time.Minute)).Forms(context.Background()))
	if d := time.Since(start); d < time.Second || f.requests.Load() != 2 {
		t.Errorf("retried after %v (%d requests); the server asked for 1 s", d, f.requests.Load())
	}
}

func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", fmt.Sprint("req-", n))
		w.Header().Set("Retry-After", "2")
		writeJSON(w, 503, `{"success":false,"message":"down for maintenance"}`)
	})
	c := newClient(t, f.URL, key, formsclient.WithRetries(3, time.Millisecond, time.Minute))
	waits := recordWaits(c)
	_, err := collect(t, c.Forms(context.Background()))
	var e *formsclient.Error
	if !errors.As(err, &e) || e.StatusCode != 503 || e.Message != "down for maintenance" || e.RequestID != "req-3" || e.RetryAfter != 2*time.Second {
		t.Fatalf("%v (%+v)", err, e)
	}
	if f.requests.Load() != 3 || len(*waits) != 2 {
		t.Errorf("%d requests, waits %v; want 3 and 2", f.requests.Load(), *waits)
	}

	// A Retry-After beyond the longest wait ends the retries at once.
	f2 := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		writeJSON(w, 429, `{"success":false,"message":"quota exhausted"}`)
	})
	c = newClient(t, f2.URL, key, formsclient.WithRetries(5, time.Millisecond, 30*time.Second))
	waits = recordWaits(c)
	_, err = collect(t, c.Submissions(context.Background(), "contact"))
	if !errors.As(err, &e) || e.StatusCode != 429 || e.RetryAfter != time.Hour || f2.requests.Load() != 1 || len(*waits) != 0 {
		t.Errorf("%v (%+v), %d requests, waits %v", err, e, f2.requests.Load(), *waits)
	}

	// WithRetries(1, ...) turns retries off.
	f3 := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 503, `{"success":false,"message":"x"}`)
	})
	_, err = collect(t, newClient(t, f3.URL, key, formsclient.WithRetries(1, 0, 0)).Forms(context.Background()))
	if !errors.As(err, &e) || e.StatusCode != 503 || f3.requests.Load() != 1 {
		t.Errorf("%v, %d requests", err, f3.requests.Load())
	}
}

func TestCancelEndsARetryWait(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "600")
		writeJSON(w, 503, `{"success":false,"message":"later"}`)
	})
	c := newClient(t, f.URL, key, formsclient.WithRetries(5, time.Millisecond, time.Hour))
	waiting := make(chan time.Duration, 1)
	formsclient.SetSleep(c, func(ctx context.Context, d time.Duration) error {
		waiting <- d
		return formsclient.Sleep(ctx, d) // the real wait
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := collect(t, c.Forms(ctx)); done <- err }()
	if d := <-waiting; d < 600*time.Second {
		t.Errorf("waiting %v", d)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting to retry after 503") {
			t.Errorf("%v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("still waiting a minute after the cancel")
	}
	if f.requests.Load() != 1 {
		t.Errorf("%d requests", f.requests.Load())
	}

	// A deadline works the same way.
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	c = newClient(t, f.URL, key, formsclient.WithRetries(5, time.Millisecond, time.Hour))
	if _, err := collect(t, c.Forms(ctx)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v", err)
	}
}

func TestAnswersThatAreNotTheAPIs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		serve  func(w http.ResponseWriter)
		status int
		msg    string
	}{
		{"proxy 502", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		}, 502, "the answer is text/html, not the API's JSON"},
		{"wrong base URL", func(w http.ResponseWriter) { http.NotFound(w, nil) }, 404, "the answer is text/plain; charset=utf-8, not the API's JSON"},
		{"no content type", func(w http.ResponseWriter) { w.Header()["Content-Type"] = nil; w.WriteHeader(500) }, 500, "without a Content-Type"},
		{"server error", func(w http.ResponseWriter) { writeJSON(w, 500, `{"success":false,"message":"internal server error"}`) }, 500, "internal server error"},
		{"JSON that is not the envelope", func(w http.ResponseWriter) { writeJSON(w, 500, `{"error":"boom"}`) }, 500, "not the API's JSON"},
		{"captive portal 200", func(w http.ResponseWriter) { w.Header().Set("Content-Type", "text/html"); io.WriteString(w, "<html>") }, 200, "the answer is text/html"},
		{"truncated", func(w http.ResponseWriter) { writeJSON(w, 200, page("", 1)[:40]) }, 200, "its body is not JSON"},
		{"array", func(w http.ResponseWriter) { writeJSON(w, 200, `[]`) }, 200, "its body is not a JSON object"},
		{"no items", func(w http.ResponseWriter) { writeJSON(w, 200, `{"success":true,"message":"ok"}`) }, 200, `"submissions" is not an array`},
		{"null items", func(w http.ResponseWriter) { writeJSON(w, 200, `{"success":true,"message":"ok","submissions":null}`) }, 200, `"submissions" is not an array`},
		{"success false", func(w http.ResponseWriter) { writeJSON(w, 200, `{"success":false,"message":"odd"}`) }, 200, "odd"},
		{"no success", func(w http.ResponseWriter) { writeJSON(w, 200, `{"submissions":[]}`) }, 200, `"success" is not true`},
		{"bad item", func(w http.ResponseWriter) {
			writeJSON(w, 200, `{"success":true,"message":"ok","submissions":[{"createdAt":"yesterday"}]}`)
		}, 200, `the response is not a page of the API: parsing time "yesterday"`},
		{"wrong item type", func(w http.ResponseWriter) {
			writeJSON(w, 200, `{"success":true,"message":"ok","submissions":[{"attachments":"none"}]}`)
		}, 200, `"submissions.attachments" is a JSON string where the API sends an array`},
		{"wrong items type", func(w http.ResponseWriter) { writeJSON(w, 200, `{"success":true,"message":"ok","submissions":{}}`) }, 200,
			`"submissions" is a JSON object where the API sends an array`},
		{"bad cursor", func(w http.ResponseWriter) {
			writeJSON(w, 200, `{"success":true,"message":"ok","submissions":[],"nextCursor":7}`)
		}, 200, `"nextCursor" is a JSON number where the API sends a string`},
		{"too large", func(w http.ResponseWriter) { writeJSON(w, 200, page("", 1, 2, 3, 4, 5, 6, 7, 8)) }, 200, "larger than 500 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Request-Id", "rid-1")
				tc.serve(w)
			})
			c := newClient(t, f.URL, key, formsclient.WithMaxResponseSize(500))
			items, err := collect(t, c.Submissions(context.Background(), "contact"))
			var e *formsclient.Error
			if !errors.As(err, &e) {
				t.Fatalf("%v, want a *formsclient.Error", err)
			}
			if len(items) != 0 || e.StatusCode != tc.status || !strings.Contains(e.Message, tc.msg) || e.RequestID != "rid-1" {
				t.Errorf("%d items, %+v; want %d and %q", len(items), e, tc.status, tc.msg)
			}
			if errors.Is(err, formsapi.ErrFormNotFound) || errors.Is(err, formsapi.ErrInvalidKey) {
				t.Errorf("%v matches a formsapi sentinel", err)
			}
			if !strings.HasPrefix(err.Error(), `formsclient: list submissions of form "contact": `) {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestErrorIs(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/forms" {
			writeJSON(w, 404, `{"success":false,"message":"not found: the API serves GET /v1/forms, GET /v1/forms/{formId}/submissions, GET /v1/forms/{formId}/export, GET /v1/forms/{formId}/summary and GET /v1/openapi.json"}`)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="formsapi"`)
		writeJSON(w, 401, `{"success":false,"message":"invalid API key"}`)
	})
	c := newClient(t, f.URL, key)
	_, err := collect(t, c.Submissions(context.Background(), "contact"))
	if !errors.Is(err, formsapi.ErrInvalidKey) || errors.Is(err, formsapi.ErrFormNotFound) {
		t.Errorf("401: %v", err)
	}
	// The forms list's 404 means the URL is wrong, not that a form is missing.
	_, err = collect(t, c.Forms(context.Background()))
	var e *formsclient.Error
	if !errors.As(err, &e) || e.StatusCode != 404 || errors.Is(err, formsapi.ErrFormNotFound) {
		t.Errorf("forms 404: %v", err)
	}
}

func TestPagingLoopsEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		serve    func(n int64) string
		items    int
		requests int64
		msg      string
	}{
		{"the same nextCursor forever", func(n int64) string { return page("same", 50-int(n)) }, 2, 2,
			"returned a nextCursor it had returned before"},
		{"an earlier cursor again", func(n int64) string { return page(fmt.Sprint("c", n%3), 50-int(n)) }, 4, 4,
			"returned a nextCursor it had returned before"},
		{"the first page again, fresh cursors", func(n int64) string { return page(fmt.Sprint("c", n), 9, 8) }, 2, 2,
			"follows one created at"},
		{"the same page again, equal times, fresh cursors", func(n int64) string { return page(fmt.Sprint("c", n), 7, 7) }, 20, 11,
			"11 pages in a row repeat the items"},
		{"empty pages with cursors", func(n int64) string { return page(fmt.Sprint("c", n)) }, 0, 5,
			"5 empty pages in a row"},
		{"items out of order", func(n int64) string { return page("", 3, 4) }, 1, 1,
			"in newest-first order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				if n > 100 {
					w.WriteHeader(500) // the client should have stopped long before
					return
				}
				writeJSON(w, 200, tc.serve(n))
			})
			items, err := collect(t, newClient(t, f.URL, key).Submissions(context.Background(), "contact", formsclient.PageSize(2)))
			if !errors.Is(err, formsclient.ErrPaging) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%v, want ErrPaging with %q", err, tc.msg)
			}
			if len(items) != tc.items || f.requests.Load() != tc.requests {
				t.Errorf("%d items in %d requests, want %d in %d", len(items), f.requests.Load(), tc.items, tc.requests)
			}
		})
	}

	// Out of the requested range, oldest first.
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, page("", 1, 2, 30)) })
	c := newClient(t, f.URL, key)
	at := func(m int) time.Time { return time.Date(2024, 1, 1, 0, m, 0, 0, time.UTC) }
	items, err := collect(t, c.Submissions(context.Background(), "contact", formsclient.Oldest(), formsclient.Since(at(2))))
	if !errors.Is(err, formsclient.ErrPaging) || !strings.Contains(err.Error(), "before since") || len(items) != 0 {
		t.Errorf("since: %d items, %v", len(items), err)
	}
	items, err = collect(t, c.Submissions(context.Background(), "contact", formsclient.Oldest(), formsclient.Until(at(30))))
	if !errors.Is(err, formsclient.ErrPaging) || !strings.Contains(err.Error(), "not before until") || len(items) != 2 {
		t.Errorf("until: %d items, %v", len(items), err)
	}
}

// A proxy that drops the query string makes the real handler answer the
// first page again and again, each time with a freshly sealed cursor.
func TestProxyDroppingTheQueryDoesNotLoop(t *testing.T) {
	t.Parallel()
	store, keys := backends[0].open(t)
	h := formsapi.NewHandler(store, keys, formsapi.WithPageSize(2, 1000))
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) > 100 {
			w.WriteHeader(500)
			return
		}
		r.URL.RawQuery = ""
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL, storetest.KeyA)
	for _, oldest := range []bool{false, true} {
		opts := []formsclient.ListOption{formsclient.PageSize(2)}
		if oldest {
			opts = append(opts, formsclient.Oldest()) // dropped by the proxy: the pages come newest first
		}
		_, err := collect(t, c.Submissions(context.Background(), storetest.FormBusy, opts...))
		if !errors.Is(err, formsclient.ErrPaging) {
			t.Errorf("oldest %v: %v, want ErrPaging", oldest, err)
		}
	}
	if requests.Load() > 2*11 {
		t.Errorf("%d requests", requests.Load())
	}
}

func TestAnErrorEndsTheIteration(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			writeJSON(w, 200, page("c1", 2, 1))
			return
		}
		writeJSON(w, 500, `{"success":false,"message":"internal server error"}`)
	})
	items, errs := 0, 0
	for s, err := range newClient(t, f.URL, key).Submissions(context.Background(), "contact") {
		if err != nil {
			errs++
			if s.FormID != "" || s.Data != nil {
				t.Errorf("the error came with an item: %+v", s)
			}
			continue // the iterator, not the loop, must end it
		}
		items++
	}
	if items != 2 || errs != 1 || f.requests.Load() != 2 {
		t.Errorf("%d items, %d errors, %d requests", items, errs, f.requests.Load())
	}
}

func TestRetryAfterAndBackoff(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                               0,
		"0":                              0,
		" 7 ":                            7 * time.Second,
		"-1":                             0,
		"1.5":                            0,
		"soon":                           0,
		"99999999999999999999":           1<<63 - 1,
		"Sun, 22 Nov 2026 12:00:30 GMT":  30 * time.Second,
		"Sunday, 22-Nov-26 12:01:00 GMT": time.Minute,
		"Sun Nov 22 12:00:05 2026":       5 * time.Second,
		"Sun, 22 Nov 2026 11:00:00 GMT":  0, // in the past
	} {
		if got := formsclient.RetryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}

	c := newClient(t, "https://example.com", key, formsclient.WithRetries(20, time.Second, 10*time.Second))
	for try, hi := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 19: 10 * time.Second} {
		for range 50 {
			if d := formsclient.Backoff(c, try, 0); d < hi/2 || d > hi {
				t.Fatalf("try %d: %v, want %v to %v", try, d, hi/2, hi)
			}
		}
	}
	distinct := map[time.Duration]bool{}
	for range 50 {
		d := formsclient.Backoff(c, 1, 5*time.Second)
		if d < 5*time.Second || d > 5*time.Second+time.Second/2 {
			t.Fatalf("Retry-After 5 s: %v", d)
		}
		distinct[d] = true
	}
	if len(distinct) < 2 {
		t.Error("no jitter on top of Retry-After")
	}
}

// A connection cut in the middle of a body is a transport error, reported
// with what the client was doing, not a panic or a short page.
func TestBodyCutShort(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		body := page("", 2, 1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		io.WriteString(w, body[:len(body)/2])
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	items, err := collect(t, newClient(t, f.URL, key, formsclient.WithRetries(1, 0, 0)).Submissions(context.Background(), "contact"))
	if len(items) != 0 || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), `list submissions of form "contact": reading the 200 response`) {
		t.Errorf("%d items, %v", len(items), err)
	}
}
