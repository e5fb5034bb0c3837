package formsclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
)

// failingStore is a store whose submission lists fail with err.
type failingStore struct {
	formsapi.Store
	err error
}

func (s failingStore) ListSubmissions(context.Context, string, string, formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	return formsapi.Page[formsapi.Submission]{}, s.err
}

// TestPredicates makes the real handler give every answer a caller
// branches on (and a connection that fails, a canceled call, a server
// that breaks the paging rules) and checks every predicate on each: the
// one that names it holds, the others do not, errors.Is agrees with
// them, and the error keeps the answer's request ID.
func TestPredicates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.WithClock(clock.Now), memstore.WithTombstoneRetention(time.Hour))
	if err := storetest.Load(ctx, store, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	quiet := formsapi.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := serve(t, formsapi.NewHandler(store, store, quiet), "")
	c := newClient(t, srv.base, storetest.KeyA, formsclient.WithRetries(1, 0, 0))
	add := func(form, id string) {
		t.Helper()
		if err := store.AddSubmission(ctx, formsapi.Submission{FormID: form, Data: []byte(`{"id":"` + id + `"}`)}, formsapi.Metadata{ID: id}); err != nil {
			t.Fatal(err)
		}
	}

	// A sync token older than a deletion the server has forgotten.
	add(storetest.FormEmpty, "a")
	add(storetest.FormEmpty, "b")
	stale, err := c.Sync(ctx, storetest.FormEmpty, formsclient.SyncStart, func(formsclient.Change) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := store.DeleteSubmission(ctx, storetest.AccountA, storetest.FormEmpty, "b"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	add(storetest.FormEmpty, "c")
	if err := store.DeleteSubmission(ctx, storetest.AccountA, storetest.FormEmpty, "c"); err != nil {
		t.Fatal(err)
	}
	// A cursor of a form deleted and created again.
	again := formsapi.Form{ID: "form-created-again", Title: "Again", CreatedAt: clock.Now()}
	if err := store.AddForm(ctx, storetest.AccountA, again); err != nil {
		t.Fatal(err)
	}
	add(again.ID, "x")
	add(again.ID, "y")
	_, first, err := c.SubmissionsPage(ctx, again.ID, formsclient.PageSize(1))
	if err != nil || first.NextCursor == "" {
		t.Fatalf("the first page of a form of two: %+v, %v", first, err)
	}
	if err := store.DeleteForm(ctx, storetest.AccountA, again.ID); err != nil {
		t.Fatal(err)
	}
	if err := store.AddForm(ctx, storetest.AccountA, again); err != nil {
		t.Fatal(err)
	}
	// A page's tag.
	_, tagged, err := c.SubmissionsPage(ctx, storetest.FormBusy)
	if err != nil {
		t.Fatal(err)
	}
	// Servers that answer 429, 503 and 500, and one that is gone.
	limitedSrv := serve(t, formsapi.NewHandler(store, store, limited(1)), "")
	timeoutSrv := serve(t, formsapi.NewHandler(failingStore{store, fmt.Errorf("slow disk: %w", context.DeadlineExceeded)}, store, quiet), "")
	brokenSrv := serve(t, formsapi.NewHandler(failingStore{store, errors.New("disk on fire")}, store, quiet), "")
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	looping := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", fmt.Sprint("loop-", n))
		writeJSON(w, 200, page("same", 50-int(n)))
	})

	type answer struct {
		err  error
		resp *formsclient.Response
	}
	page := func(c *formsclient.Client, form string, opts ...formsclient.ListOption) answer {
		_, resp, err := c.SubmissionsPage(ctx, form, opts...)
		return answer{err, resp}
	}
	const (
		retryable = 1 << iota
		rateLimited
		notModified
		resync
		unauthorized
		notFound
	)
	for _, tc := range []struct {
		name   string
		answer answer
		status int // of the *Error; 0 for none
		holds  int // the predicates that hold
	}{
		{"304", page(c, storetest.FormBusy, formsclient.IfNoneMatch(tagged.ETag)), 304, notModified},
		{"429", func() answer {
			c := newClient(t, limitedSrv.base, storetest.KeyA, formsclient.WithRetries(1, 0, 0))
			page(c, storetest.FormBusy) // the quota's one request
			return page(c, storetest.FormBusy)
		}(), 429, retryable | rateLimited},
		{"401", page(newClient(t, srv.base, "unknown-key"), storetest.FormBusy), 401, unauthorized},
		{"404 of a form", page(c, "no-such-form"), 404, notFound},
		{"404 of another account's form", page(c, storetest.FormB), 404, notFound},
		{"404 of a wrong base URL", page(newClient(t, srv.base+"/wrong", storetest.KeyA), storetest.FormBusy), 404, 0},
		{"410 of a sync token past the deletions kept", func() answer {
			_, resp, err := c.SyncPage(ctx, storetest.FormEmpty, stale)
			return answer{err, resp}
		}(), 410, resync},
		{"410 of a cursor of a form created again", page(c, again.ID, formsclient.Cursor(first.NextCursor)), 410, resync},
		{"400 of a sync token the server refuses", func() answer {
			_, resp, err := c.SyncPage(ctx, storetest.FormEmpty, "not-a-token")
			return answer{err, resp}
		}(), 400, resync},
		{"400 of a parameter", page(c, storetest.FormBusy, formsclient.Search("ab")), 400, 0},
		{"503 of a store too slow", page(newClient(t, timeoutSrv.base, storetest.KeyA, formsclient.WithRetries(1, 0, 0)), storetest.FormBusy), 503, retryable},
		{"500 of a store that failed", page(newClient(t, brokenSrv.base, storetest.KeyA), storetest.FormBusy), 500, retryable},
		{"no server", page(newClient(t, gone.URL, storetest.KeyA), storetest.FormBusy), 0, retryable},
		{"a canceled context", func() answer {
			_, resp, err := c.SubmissionsPage(canceled, storetest.FormBusy)
			return answer{err, resp}
		}(), 0, 0},
		{"pages that loop", func() answer {
			_, err := collect(t, newClient(t, looping.URL, key).Submissions(ctx, "contact"))
			return answer{err: err}
		}(), 0, 0},
	} {
		err, resp := tc.answer.err, tc.answer.resp
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		wait, limitedNow := formsclient.RateLimited(err)
		got := map[int]bool{
			retryable:    formsclient.IsRetryable(err),
			rateLimited:  limitedNow,
			notModified:  formsclient.IsNotModified(err),
			resync:       formsclient.NeedsResync(err),
			unauthorized: formsclient.IsUnauthorized(err),
			notFound:     formsclient.IsNotFound(err),
		}
		is := map[int]bool{
			rateLimited:  errors.Is(err, formsclient.ErrRateLimited),
			notModified:  errors.Is(err, formsclient.ErrNotModified),
			resync:       errors.Is(err, formsclient.ErrResync),
			unauthorized: errors.Is(err, formsapi.ErrInvalidKey),
			notFound:     errors.Is(err, formsapi.ErrFormNotFound),
		}
		names := map[int]string{retryable: "IsRetryable", rateLimited: "RateLimited", notModified: "IsNotModified", resync: "NeedsResync", unauthorized: "IsUnauthorized", notFound: "IsNotFound"}
		for p, name := range names {
			if got[p] != (tc.holds&p != 0) {
				t.Errorf("%s: %s is %v (%v)", tc.name, name, got[p], err)
			}
			if s, ok := is[p]; ok && s != got[p] {
				t.Errorf("%s: errors.Is disagrees with %s (%v)", tc.name, name, err)
			}
		}
		var e *formsclient.Error
		switch {
		case tc.status == 0 && errors.As(err, &e):
			t.Errorf("%s: an *Error %v", tc.name, err)
		case tc.status != 0 && (!errors.As(err, &e) || e.StatusCode != tc.status):
			t.Errorf("%s: %v, want an *Error of status %d", tc.name, err, tc.status)
		case tc.status != 0:
			// Every answer of the handler has a request ID, and the error
			// and the Response keep it.
			if e.RequestID == "" || formsclient.RequestID(err) != e.RequestID || resp == nil || resp.RequestID != e.RequestID || resp.StatusCode != tc.status {
				t.Errorf("%s: request ID %q, Response %+v", tc.name, e.RequestID, resp)
			}
		case tc.name == "pages that loop":
			if id := formsclient.RequestID(err); id != "loop-2" || !errors.Is(err, formsclient.ErrPaging) {
				t.Errorf("%s: request ID %q of %v; want loop-2's, the page that repeated a cursor", tc.name, id, err)
			}
		case resp != nil || formsclient.RequestID(err) != "":
			t.Errorf("%s: no answer came, yet Response %+v, request ID %q", tc.name, resp, formsclient.RequestID(err))
		}
		if tc.holds&rateLimited != 0 {
			// A quota of 1 a year: the next unit is a year away.
			if wait < 300*24*time.Hour || wait != e.RetryAfter || resp.RateLimit == nil || resp.RateLimit.Remaining != 0 || resp.RetryAfter != wait {
				t.Errorf("%s: wait %v, RetryAfter %v, Response %+v", tc.name, wait, e.RetryAfter, resp)
			}
		}
	}
}

// TestRateLimitedWaits: the wait of a 429 is its Retry-After, or else
// the t of its RateLimit field, or else 0, still rate limited.
func TestRateLimitedWaits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		header map[string]string
		wait   time.Duration
	}{
		{"Retry-After", map[string]string{"Retry-After": "3", "RateLimit": `"default";r=0;t=9`}, 3 * time.Second},
		{"RateLimit alone", map[string]string{"RateLimit": `"default";r=0;t=7`}, 7 * time.Second},
		{"neither", nil, 0},
	} {
		f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
			for k, v := range tc.header {
				w.Header().Set(k, v)
			}
			writeJSON(w, 429, `{"success":false,"message":"rate limit exceeded"}`)
		})
		_, resp, err := newClient(t, f.URL, key, formsclient.WithRetries(1, 0, 0)).FormsPage(context.Background())
		wait, ok := formsclient.RateLimited(err)
		if !ok || wait != tc.wait || !formsclient.IsRetryable(err) || resp == nil || resp.StatusCode != 429 {
			t.Errorf("%s: RateLimited %v, %v (%v)", tc.name, wait, ok, err)
		}
	}
}
