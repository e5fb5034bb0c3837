package formsclient_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/formsapi/formsapi/formsclient"
)

// TestRedirectsKeepTheKeyHome: a redirect to another origin than the
// base URL's (another scheme, port or host) is not followed with the API
// key: the call fails, not retryable, and the other origin never sees
// the key. Go's http.Client copies Authorization to a redirect of the
// same host name whatever its scheme and port (https to http, or to
// another service of the host), and to its subdomains. A redirect within
// the origin is followed, with the key, and so is an upgrade from http
// to https of the same host; a CheckRedirect of the caller's still
// applies, and the caller's http.Client is left as it was.
func TestRedirectsKeepTheKeyHome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var leaked atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		writeJSON(w, 200, page(""))
	}))
	t.Cleanup(elsewhere.Close)
	other, _ := url.Parse(elsewhere.URL)
	_, otherPort, _ := strings.Cut(other.Host, ":")

	redirecting := func(to func(r *http.Request) string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if loc := to(r); loc != "" {
				http.Redirect(w, r, loc, http.StatusFound)
				return
			}
			if r.Header.Get("Authorization") != "Bearer "+key {
				writeJSON(w, 401, `{"success":false,"message":"invalid API key"}`)
				return
			}
			if strings.HasSuffix(r.URL.Path, "/export") {
				w.Header().Set("Content-Type", "application/x-ndjson")
				w.Header().Set("Sync-Token", "tok")
				io.WriteString(w, `{"ref":"r","position":"p1","submission":{}}`+"\n")
				return
			}
			writeJSON(w, 200, page(""))
		}))
	}
	for _, tc := range []struct {
		name string
		to   func(r *http.Request) string
	}{
		// The same host name (127.0.0.1), another port: Go keeps the key.
		{"another port of the host", func(r *http.Request) string { return elsewhere.URL + r.URL.RequestURI() }},
		// Another host name: Go drops the key, and the request goes on
		// without it, to be answered 401 or worse.
		{"another host", func(r *http.Request) string { return "http://localhost:" + otherPort + r.URL.RequestURI() }},
	} {
		srv := redirecting(tc.to)
		t.Cleanup(srv.Close)
		c := newClient(t, srv.URL, key)
		_, _, err := c.SubmissionsPage(ctx, "contact")
		if err == nil || formsclient.IsRetryable(err) || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("%s: SubmissionsPage: %v, want a redirect refused, not retryable", tc.name, err)
		}
		var buf bytes.Buffer
		if _, err := c.Export(ctx, "contact", &buf, formsclient.ExportOptions{}); err == nil || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("%s: Export: %v, want a redirect refused", tc.name, err)
		}
	}
	if n := leaked.Load(); n != 0 {
		t.Errorf("the other origin was sent an Authorization header %d times", n)
	}

	// Within the origin: followed, with the key.
	var custom atomic.Int64
	own := redirecting(func(r *http.Request) string {
		if strings.HasPrefix(r.URL.Path, "/old") {
			return strings.TrimPrefix(r.URL.RequestURI(), "/old")
		}
		return ""
	})
	t.Cleanup(own.Close)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { custom.Add(1); return nil }}
	c := newClient(t, own.URL+"/old", key, formsclient.WithHTTPClient(hc))
	if _, _, err := c.SubmissionsPage(ctx, "contact"); err != nil {
		t.Errorf("a redirect within the origin: %v", err)
	}
	var buf bytes.Buffer
	if _, err := c.Export(ctx, "contact", &buf, formsclient.ExportOptions{}); err != nil || buf.Len() == 0 {
		t.Errorf("an export redirected within the origin: %v, %q", err, buf.String())
	}
	if custom.Load() != 2 {
		t.Errorf("the caller's CheckRedirect ran %d times, want 2", custom.Load())
	}
	plain := &http.Client{}
	newClient(t, own.URL, key, formsclient.WithHTTPClient(plain))
	if plain.CheckRedirect != nil {
		t.Errorf("New changed the caller's http.Client")
	}
}

// TestExportLineIsBounded: an export line (one submission) is read
// within WithMaxResponseSize, like a page: a server that sends a line
// without end, or a CSV quote never closed, ends the export with an
// *Error, having held about the bound, not the whole stream.
func TestExportLineIsBounded(t *testing.T) {
	t.Parallel()
	const bound = 64 << 10
	for _, csv := range []bool{false, true} {
		var sent atomic.Int64
		f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Sync-Token", "tok")
			w.Header().Set("X-Request-Id", "endless")
			start := `{"ref":"r","position":"p1","submission":{"data":"`
			if csv {
				w.Header().Set("Content-Type", "text/csv")
				start = "ref,position,data.a\nr,p1,\"never closed\n"
			}
			io.WriteString(w, start)
			chunk := bytes.Repeat([]byte("x"), 32<<10)
			for range 16 << 20 / len(chunk) { // 16 MiB
				if _, err := w.Write(chunk); err != nil {
					return
				}
				sent.Add(int64(len(chunk)))
			}
		})
		c := newClient(t, f.URL, key, formsclient.WithMaxResponseSize(bound))
		var buf bytes.Buffer
		_, err := c.Export(context.Background(), "contact", &buf, formsclient.ExportOptions{CSV: csv})
		var e *formsclient.Error
		if !errors.As(err, &e) || !strings.Contains(e.Message, "larger than") || formsclient.RequestID(err) != "endless" {
			t.Errorf("csv %v: %v, want an *Error of a line over the bound, with the request ID", csv, err)
		}
		if f.requests.Load() != 1 {
			t.Errorf("csv %v: %d requests, want 1 (not retried)", csv, f.requests.Load())
		}
	}
}

// TestCutBodyKeepsTheRequestID: a page whose body is cut short came
// from an answer, and its error keeps the answer's request ID; it is
// retryable.
func TestCutBodyKeepsTheRequestID(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "cut-1")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, `{"success":true,"forms":[`)
	})
	_, resp, err := newClient(t, f.URL, key, formsclient.WithRetries(1, 0, 0)).FormsPage(context.Background())
	if err == nil || formsclient.RequestID(err) != "cut-1" || !formsclient.IsRetryable(err) {
		t.Errorf("a cut body: %v (request ID %q, retryable %v), want the answer's request ID", err, formsclient.RequestID(err), formsclient.IsRetryable(err))
	}
	if resp == nil || resp.RequestID != "cut-1" {
		t.Errorf("a cut body: Response %+v, want the answer's", resp)
	}
}

// TestCertificateErrorsAreNotRetryable: a server whose certificate the
// client does not trust fails the same way on every try: not retryable,
// unlike a refused or broken connection.
func TestCertificateErrorsAreNotRetryable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, page("")) }))
	t.Cleanup(srv.Close)
	_, _, err := newClient(t, srv.URL, key).SubmissionsPage(context.Background(), "contact")
	if err == nil || formsclient.IsRetryable(err) {
		t.Errorf("an untrusted certificate: %v, retryable %v", err, formsclient.IsRetryable(err))
	}
	// The same server trusted: a page.
	if _, _, err := newClient(t, srv.URL, key, formsclient.WithHTTPClient(srv.Client())).SubmissionsPage(context.Background(), "contact"); err != nil {
		t.Errorf("a trusted certificate: %v", err)
	}
}

// TestCanceledRetryKeepsTheRequestID: a call whose context ends while
// it waits to retry a 429 came from an answer, and its error keeps that
// answer's request ID (and is not retryable: it was canceled).
func TestCanceledRetryKeepsTheRequestID(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "limited-1")
		w.Header().Set("Retry-After", "1")
		writeJSON(w, 429, `{"success":false,"message":"rate limit exceeded"}`)
	})
	// The caller gives up once the 429 is read, while the client waits.
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		res, err := http.DefaultTransport.RoundTrip(r)
		if err == nil {
			res.Body = &onEOF{ReadCloser: res.Body, fn: cancel}
		}
		return res, err
	})}
	_, _, err := newClient(t, f.URL, key, formsclient.WithHTTPClient(hc)).SubmissionsPage(ctx, "contact")
	if !errors.Is(err, context.Canceled) || formsclient.RequestID(err) != "limited-1" || formsclient.IsRetryable(err) {
		t.Errorf("%v: request ID %q, retryable %v; want context.Canceled with the 429's request ID", err, formsclient.RequestID(err), formsclient.IsRetryable(err))
	}
	if f.requests.Load() != 1 {
		t.Errorf("%d requests, want 1", f.requests.Load())
	}
}

// onEOF calls fn once its reader is read to the end.
type onEOF struct {
	io.ReadCloser
	fn func()
}

func (o *onEOF) Read(p []byte) (int, error) {
	n, err := o.ReadCloser.Read(p)
	if err == io.EOF {
		o.fn()
	}
	return n, err
}

// TestIfNoneMatchRefusesWhatNoHeaderHolds: a tag with a control
// character (a line break from a file it was saved in, say) is an error
// before any request, like an empty one, rather than a transport error
// that IsRetryable took for a connection to try again.
func TestIfNoneMatchRefusesWhatNoHeaderHolds(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, page("")) })
	c := newClient(t, f.URL, key)
	for _, tag := range []string{"W/\"abc\"\n", "W/\"a\rb\"", "\"a\x00\"", "\"a\x7f\""} {
		_, resp, err := c.SubmissionsPage(context.Background(), "contact", formsclient.IfNoneMatch(tag))
		if err == nil || formsclient.IsRetryable(err) || resp != nil || !strings.Contains(err.Error(), "IfNoneMatch") {
			t.Errorf("IfNoneMatch(%q): %v, Response %v; want an error before any request", tag, err, resp)
		}
	}
	if f.requests.Load() != 0 {
		t.Errorf("%d requests", f.requests.Load())
	}
}

// TestExportNotFoundIsTheForms: Export's 404 matches IsNotFound only
// when it is the API's answer for the form, as the page calls' does: a
// proxy's 404 page, or the API's 404 for a path it does not serve (a
// wrong base URL), is not a form that does not exist.
func TestExportNotFoundIsTheForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ct, body string
		notFound       bool
	}{
		{"the API's 404 of the form", "application/json", `{"success":false,"message":"form not found"}`, true},
		{"the API's 404 of a path it does not serve", "application/json", `{"success":false,"message":"not found: the API serves GET /v1/forms"}`, false},
		{"a proxy's page", "text/html", `<h1>Not Found</h1>`, false},
	} {
		f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", tc.ct)
			w.WriteHeader(404)
			io.WriteString(w, tc.body)
		})
		var buf bytes.Buffer
		_, err := newClient(t, f.URL, key).Export(context.Background(), "contact", &buf, formsclient.ExportOptions{})
		if formsclient.IsNotFound(err) != tc.notFound {
			t.Errorf("%s: IsNotFound %v (%v)", tc.name, formsclient.IsNotFound(err), err)
		}
	}
}
