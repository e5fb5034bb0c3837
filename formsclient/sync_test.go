package formsclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/storetest"
)

// TestSyncAgainstTheRealHandler reads a form's feed, adds submissions that
// go back in createdAt, and resumes from the stored token: it gets exactly
// the new ones, then nothing; a callback that fails leaves its page to be
// read again from the token returned.
func TestSyncAgainstTheRealHandler(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			store, keys := b.open(t)
			srv := serve(t, formsapi.NewHandler(store, keys), "/api")
			c := newClient(t, srv.base, storetest.KeyA)
			var seen []string
			record := func(s formsapi.Submission) error {
				seen = append(seen, string(s.Data))
				return nil
			}
			token, err := c.Sync(ctx, storetest.FormSmall, formsclient.SyncStart, record, formsclient.PageSize(2))
			if err != nil || len(seen) != 3 {
				t.Fatalf("first sync: %d items, %v; want the seed's 3", len(seen), err)
			}
			w := store.(formsapi.Writer)
			for i := range 2 {
				old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(i) * time.Hour)
				if err := w.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(fmt.Sprintf(`{"late":%d}`, i)), CreatedAt: old}, formsapi.Metadata{}); err != nil {
					t.Fatal(err)
				}
			}
			seen = nil
			token, err = c.Sync(ctx, storetest.FormSmall, token, record, formsclient.PageSize(2))
			if err != nil || fmt.Sprint(seen) != `[{"late":0} {"late":1}]` {
				t.Fatalf("resumed sync: %v, %v; want the two late submissions in commit order", seen, err)
			}
			seen = nil
			again, err := c.Sync(ctx, storetest.FormSmall, token, record)
			if err != nil || len(seen) != 0 || again == "" {
				t.Fatalf("sync with nothing new: %v, %v, token %q", seen, err, again)
			}
			boom := errors.New("boom")
			from, err := c.Sync(ctx, storetest.FormSmall, formsclient.SyncStart, func(formsapi.Submission) error { return boom }, formsclient.PageSize(2))
			if !errors.Is(err, boom) || from != formsclient.SyncStart {
				t.Fatalf("a failing callback: token %q, %v; want the starting token and the error", from, err)
			}
			// The case: Since narrows the list to one submission;
			// the feed cannot, so Sync refuses it rather than hand over all.
			since := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
			listed := mustCollect(t, c.Submissions(ctx, storetest.FormSmall, formsclient.Since(since)))
			seen = nil
			got, err := c.Sync(ctx, storetest.FormSmall, token, record, formsclient.Since(since))
			if err == nil || !strings.Contains(err.Error(), "Since cannot be used with Sync") || got != token || len(seen) != 0 {
				t.Fatalf("Sync with Since (the list has %d): token %q, %d handed over, %v; want an error naming Since", len(listed), got, len(seen), err)
			}
			var other *formsclient.Error
			if _, err := c.Sync(ctx, storetest.FormB, formsclient.SyncStart, record); !errors.As(err, &other) || !errors.Is(err, formsapi.ErrFormNotFound) {
				t.Fatalf("another account's form: %v, want a 404 Error", err)
			}
		})
	}
}

// TestSyncStopsOnAServerThatPromisesMore never loops on a server whose
// pages keep saying hasMore without bringing anything.
func TestSyncStopsOnAServerThatPromisesMore(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, `{"success":true,"message":"submissions retrieved","submissions":[],"syncToken":"same","hasMore":true}`)
	})
	c := newClient(t, f.URL, "key")
	_, err := c.Sync(context.Background(), "f", formsclient.SyncStart, func(formsapi.Submission) error { return nil })
	if !errors.Is(err, formsclient.ErrPaging) {
		t.Fatalf("got %v, want ErrPaging", err)
	}
	if n := f.requests.Load(); n > 3 {
		t.Errorf("%d requests to a server that never ends", n)
	}
}

// Sync refuses, before any request and with the token unchanged, every
// list option the feed cannot honour, and the arguments no request could
// work with.
func TestSyncRefusesWhatTheFeedCannotHonour(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		t.Errorf("request sent: %s", r.URL)
	})
	c := newClient(t, f.URL, key)
	ctx := context.Background()
	ok := func(formsapi.Submission) error { return nil }
	now := time.Now()
	for _, tc := range []struct {
		name, form, token string
		fn                func(formsapi.Submission) error
		opts              []formsclient.ListOption
		msg               string
	}{
		{"Since", "f", "tok", ok, []formsclient.ListOption{formsclient.Since(now)}, "Since cannot be used with Sync"},
		{"Until", "f", "tok", ok, []formsclient.ListOption{formsclient.PageSize(5), formsclient.Until(now)}, "Until cannot be used with Sync"},
		{"Oldest", "f", "tok", ok, []formsclient.ListOption{formsclient.Oldest()}, "Oldest cannot be used with Sync"},
		{"Newest", "f", "tok", ok, []formsclient.ListOption{formsclient.Newest()}, "Newest cannot be used with Sync"},
		{"zero Since", "f", "tok", ok, []formsclient.ListOption{formsclient.Since(time.Time{})}, "Since cannot be used with Sync"},
		{"PageSize(0)", "f", "tok", ok, []formsclient.ListOption{formsclient.PageSize(0)}, "PageSize(0): must be at least 1"},
		{"nil option", "f", "tok", ok, []formsclient.ListOption{nil}, "list option 1 is nil"},
		{"nil fn", "f", "tok", nil, nil, "a nil fn"},
		{"empty token", "f", "", ok, nil, "an empty token"},
		{"empty form ID", "", "tok", ok, nil, "form not found"},
	} {
		got, err := c.Sync(ctx, tc.form, tc.token, tc.fn, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.msg)
		}
		if got != tc.token {
			t.Errorf("%s: token %q, want %q unchanged", tc.name, got, tc.token)
		}
	}
}

// PageSize is sent as the feed's limit; a feed page over the size limit
// is asked for again from the same token with half as many items, and the
// call goes on with that size.
func TestSyncPageSizeAndOversizedPages(t *testing.T) {
	t.Parallel()
	item := `{"formId":"f","data":{"pad":"` + strings.Repeat("x", 400) + `"},"attachments":[],"createdAt":"2024-01-01T00:00:00Z"}`
	var mu sync.Mutex
	var queries []string
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		q := r.URL.Query()
		var limit int
		fmt.Sscan(q.Get("limit"), &limit)
		if limit == 0 {
			limit = 100
		}
		if limit > 3 { // more than 3 items of 400 bytes: over the client's 2000
			writeJSON(w, 200, `{"success":true,"message":"submissions retrieved","submissions":[`+strings.Repeat(item+",", limit-1)+item+`],"syncToken":"t","hasMore":true}`)
			return
		}
		next, more := "t1", "true"
		if q.Get("sync") == "t1" {
			next, more = "t2", "false"
		}
		writeJSON(w, 200, `{"success":true,"message":"submissions retrieved","submissions":[`+strings.Repeat(item+",", limit-1)+item+`],"syncToken":"`+next+`","hasMore":`+more+`}`)
	})
	c := newClient(t, f.URL, key, formsclient.WithMaxResponseSize(2000))
	n := 0
	count := func(formsapi.Submission) error { n++; return nil }
	token, err := c.Sync(context.Background(), "f", formsclient.SyncStart, count, formsclient.PageSize(2))
	if err != nil || token != "t2" || n != 4 {
		t.Errorf("PageSize(2): token %q, %d items, %v", token, n, err)
	}
	n = 0
	token, err = c.Sync(context.Background(), "f", formsclient.SyncStart, count)
	if err != nil || token != "t2" || n != 6 {
		t.Errorf("default page size: token %q, %d items, %v", token, n, err)
	}
	want := []string{
		"limit=2&sync=start", "limit=2&sync=t1",
		"sync=start", "limit=50&sync=start", "limit=25&sync=start", "limit=12&sync=start", "limit=6&sync=start", "limit=3&sync=start", "limit=3&sync=t1",
	}
	if fmt.Sprint(queries) != fmt.Sprint(want) {
		t.Errorf("queries\n got %v\nwant %v", queries, want)
	}

	// One item over the limit ends the call with the error and the token
	// it started from.
	c = newClient(t, f.URL, key, formsclient.WithMaxResponseSize(300))
	token, err = c.Sync(context.Background(), "f", "t1", count, formsclient.PageSize(1))
	var e *formsclient.Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, "larger than 300 bytes") || token != "t1" {
		t.Errorf("an item over the limit: token %q, %v", token, err)
	}
}
