package formsclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/memstore"
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
			record := func(ch formsclient.Change) error {
				seen = append(seen, string(ch.Submission.Data))
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
			from, err := c.Sync(ctx, storetest.FormSmall, formsclient.SyncStart, func(formsclient.Change) error { return boom }, formsclient.PageSize(2))
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
	_, err := c.Sync(context.Background(), "f", formsclient.SyncStart, func(formsclient.Change) error { return nil })
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
	ok := func(formsclient.Change) error { return nil }
	now := time.Now()
	for _, tc := range []struct {
		name, form, token string
		fn                func(formsclient.Change) error
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
	count := func(formsclient.Change) error { n++; return nil }
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

// TestSyncDeletionsAndResync keeps a copy of a form by Ref through Sync
// while the host deletes and erases: after each call the copy is exactly
// the form's submissions, a deletion carries the Ref its submission came
// with, and a token older than a deletion the server has forgotten gets
// ErrResync, after which a copy read again from SyncStart is exact.
func TestSyncDeletionsAndResync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.WithClock(clock.Now), memstore.WithTombstoneRetention(time.Hour))
	if err := storetest.Load(ctx, store, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, formsapi.NewHandler(store, store), "")
	c := newClient(t, srv.base, storetest.KeyA)
	add := func(id, data string) {
		t.Helper()
		if err := store.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormEmpty, Data: []byte(data)}, formsapi.Metadata{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	copyOf := map[string]string{}
	deleted := map[string]bool{}
	apply := func(ch formsclient.Change) error {
		if ch.Deleted {
			deleted[ch.Ref] = true
			delete(copyOf, ch.Ref)
			return nil
		}
		copyOf[ch.Ref] = string(ch.Submission.Data)
		return nil
	}
	exact := func(when string) {
		t.Helper()
		var want, got []string
		p, err := store.ListSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, formsapi.Query{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Items {
			want = append(want, string(s.Data))
		}
		for _, v := range copyOf {
			got = append(got, v)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the copy holds %v, the form %v", when, got, want)
		}
	}
	add("a", `{"email":"a@x.org"}`)
	add("b", `{"email":"b@x.org"}`)
	add("c", `{"email":"a@x.org","n":2}`)
	token, err := c.Sync(ctx, storetest.FormEmpty, formsclient.SyncStart, apply, formsclient.PageSize(2))
	if err != nil || len(copyOf) != 3 {
		t.Fatalf("first sync: %v, copy %v", err, copyOf)
	}
	refOfB := ""
	for ref, v := range copyOf {
		if v == `{"email":"b@x.org"}` {
			refOfB = ref
		}
	}
	stale := token
	if err := store.DeleteSubmission(ctx, storetest.AccountA, storetest.FormEmpty, "b"); err != nil {
		t.Fatal(err)
	}
	if n, err := store.Erase(ctx, storetest.AccountA, "email", "a@x.org"); err != nil || n != 2 {
		t.Fatalf("Erase: %d, %v", n, err)
	}
	add("d", `{"email":"d@x.org"}`)
	token, err = c.Sync(ctx, storetest.FormEmpty, token, apply, formsclient.PageSize(2))
	if err != nil {
		t.Fatal(err)
	}
	exact("after deletions and an erasure")
	if len(deleted) != 3 || !deleted[refOfB] {
		t.Errorf("deletions handed over: %v; want 3, with b's ref %q", deleted, refOfB)
	}
	clock.Advance(time.Hour)
	if err := store.DeleteSubmission(ctx, storetest.AccountA, storetest.FormEmpty, "d"); err != nil {
		t.Fatal(err) // the earlier deletions are an hour old: forgotten
	}
	if _, err := c.Sync(ctx, storetest.FormEmpty, token, apply); err != nil {
		t.Fatalf("a token newer than every forgotten deletion: %v", err)
	}
	exact("after a deletion past which earlier ones were forgotten")
	got, err := c.Sync(ctx, storetest.FormEmpty, stale, apply)
	if !errors.Is(err, formsclient.ErrResync) || got != stale {
		t.Fatalf("a token older than forgotten deletions: token %q, %v; want ErrResync and the token unchanged", got, err)
	}
	clear(copyOf)
	if _, err := c.Sync(ctx, storetest.FormEmpty, formsclient.SyncStart, apply, formsclient.PageSize(1)); err != nil {
		t.Fatal(err)
	}
	exact("read again from the start")
}

// TestSyncAcrossASecretChange restarts the server under a running Sync
// with another cursor secret (a host's own store restarted without
// WithCursorSecret, or a secret rotated): the next page's token is
// refused, Sync returns ErrResync with the token after the last page it
// handed over whole, and a copy emptied and read again from SyncStart is
// exactly the form's submissions, under the new refs, with no duplicate
// kept from the old ones; its token then works across a later restart
// with the same secret. A token that was never the server's is ErrResync
// too, while a 400 for another parameter is not.
func TestSyncAcrossASecretChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := memstore.New()
	if err := storetest.Load(ctx, store, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	var current atomic.Pointer[http.Handler]
	restart := func(secret string) {
		h := formsapi.NewHandler(store, store, formsapi.WithCursorSecret([]byte(secret)), formsapi.WithPageSize(10, 10))
		current.Store(&h)
	}
	restart("the secret before the deploy, 32+ bytes")
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*current.Load()).ServeHTTP(w, r) }), "")
	c := newClient(t, srv.base, storetest.KeyA)

	want, err := store.ListSubmissions(ctx, storetest.AccountA, storetest.FormBusy, formsapi.Query{Limit: 1000})
	if err != nil || len(want.Items) < 6 {
		t.Fatalf("seed: %d submissions, %v", len(want.Items), err)
	}
	copyOf := map[string]string{}
	pages := 0
	apply := func(ch formsclient.Change) error {
		if ch.Deleted {
			delete(copyOf, ch.Ref)
			return nil
		}
		copyOf[ch.Ref] = string(ch.Submission.Data) + ch.Submission.CreatedAt.String()
		if len(copyOf)%2 == 0 {
			if pages++; pages == 2 {
				restart("the secret after the deploy, also 32+ bytes") // between two pages of the call
			}
		}
		return nil
	}
	token, err := c.Sync(ctx, storetest.FormBusy, formsclient.SyncStart, apply, formsclient.PageSize(2))
	var e *formsclient.Error
	if !errors.Is(err, formsclient.ErrResync) || !errors.As(err, &e) || e.StatusCode != http.StatusBadRequest {
		t.Fatalf("Sync across the restart: %v; want ErrResync from a 400", err)
	}
	if token == formsclient.SyncStart || len(copyOf) != 4 {
		t.Fatalf("Sync returned token %q with %d kept; want the token after the second page, with 4", token, len(copyOf))
	}
	if _, err := c.Sync(ctx, storetest.FormBusy, token, apply); !errors.Is(err, formsclient.ErrResync) {
		t.Fatalf("resuming from that token: %v; want ErrResync again", err)
	}

	clear(copyOf) // what ErrResync asks for
	token, err = c.Sync(ctx, storetest.FormBusy, formsclient.SyncStart, apply, formsclient.PageSize(3))
	if err != nil {
		t.Fatal(err)
	}
	if len(copyOf) != len(want.Items) {
		t.Fatalf("after the resync the copy holds %d, the form %d", len(copyOf), len(want.Items))
	}
	var got, all []string
	for _, v := range copyOf {
		got = append(got, v)
	}
	for _, s := range want.Items {
		all = append(all, string(s.Data)+s.CreatedAt.String())
	}
	slices.Sort(got)
	slices.Sort(all)
	if !slices.Equal(got, all) {
		t.Fatalf("the copy after the resync differs from the form")
	}

	restart("the secret after the deploy, also 32+ bytes") // the same secret: a plain restart
	if _, err := c.Sync(ctx, storetest.FormBusy, token, apply); err != nil {
		t.Fatalf("after a restart with the same secret: %v", err)
	}
	if _, err := c.Sync(ctx, storetest.FormBusy, "not-a-token", apply); !errors.Is(err, formsclient.ErrResync) {
		t.Fatalf("a token the server never issued: %v; want ErrResync", err)
	}
	h := formsapi.NewHandler(store, store, formsapi.WithCursorSecret([]byte("the secret after the deploy, also 32+ bytes")),
		formsapi.WithPageSize(1, 1)) // limit=2 is past its largest page
	current.Store(&h)
	if _, err := c.Sync(ctx, storetest.FormBusy, token, apply, formsclient.PageSize(2)); !errors.As(err, &e) || e.StatusCode != 400 ||
		!strings.HasPrefix(e.Message, "invalid limit") || errors.Is(err, formsclient.ErrResync) {
		t.Fatalf("a 400 for the limit: %v; want one that is not ErrResync", err)
	}
}
