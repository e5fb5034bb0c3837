package formsclient_test

// Tests against the real handler over real HTTP, on memstore, sqlitestore
// and (with FORMSAPI_TEST_POSTGRES set) pgstore, mounted at the root and
// under a prefix.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// backend is a store loaded with storetest.DefaultSeed.
type backend struct {
	name string
	open func(t *testing.T) (formsapi.Store, formsapi.KeyResolver)
}

var backends = []backend{
	{"memstore", func(t *testing.T) (formsapi.Store, formsapi.KeyResolver) {
		s := memstore.New()
		if err := storetest.Load(context.Background(), s, storetest.DefaultSeed()); err != nil {
			t.Fatal(err)
		}
		return s, s
	}},
	{"sqlitestore", func(t *testing.T) (formsapi.Store, formsapi.KeyResolver) {
		s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "f.db"), sqlitestore.WithSortIndex())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := storetest.Load(context.Background(), s, storetest.DefaultSeed()); err != nil {
			t.Fatal(err)
		}
		return s, s
	}},
	{"pgstore", func(t *testing.T) (formsapi.Store, formsapi.KeyResolver) {
		dsn, schema := pgtest.Schema(t) // skips without FORMSAPI_TEST_POSTGRES
		s, err := pgstore.Open(context.Background(), dsn, pgstore.WithSchema(schema), pgstore.WithSortIndex())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := storetest.Load(context.Background(), s, storetest.DefaultSeed()); err != nil {
			t.Fatal(err)
		}
		return s, s
	}},
}

// server is the API over httptest, counting the requests that reach it.
type server struct {
	base     string // what a client is given: the server's URL plus the prefix
	requests atomic.Int64
}

// serve mounts h at the root (prefix "") or under prefix, as a host
// would, behind a counter of API requests.
func serve(t *testing.T, h http.Handler, prefix string) *server {
	t.Helper()
	s := &server{}
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	if prefix == "" {
		mux.Handle("/", counted)
	} else {
		mux.Handle(prefix+"/", http.StripPrefix(prefix, counted))
		mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
			t.Errorf("request outside the prefix: %s", r.URL)
			http.NotFound(w, r)
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.base = srv.URL + prefix
	return s
}

// newClient is formsclient.New for arguments it must accept.
func newClient(t testing.TB, base, key string, opts ...formsclient.Option) *formsclient.Client {
	t.Helper()
	c, err := formsclient.New(base, key, opts...)
	if err != nil {
		t.Fatalf("formsclient.New(%q, …): %v", base, err)
	}
	return c
}

// collect runs a list to its end; the error, if any, must be the last
// thing yielded.
func collect[T any](t *testing.T, seq iter.Seq2[T, error]) ([]T, error) {
	t.Helper()
	var items []T
	var err error
	for it, e := range seq {
		if err != nil {
			t.Fatalf("yielded after the error %v", err)
		}
		if e != nil {
			err = e
			continue
		}
		items = append(items, it)
	}
	return items, err
}

func mustCollect[T any](t *testing.T, seq iter.Seq2[T, error]) []T {
	t.Helper()
	items, err := collect(t, seq)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

func reversed[T any](s []T) []T {
	s = slices.Clone(s)
	slices.Reverse(s)
	return s
}

// fingerprint is a submission in a form independent of time zones and
// JSON spacing, to compare what the client yields with the seed.
func fingerprint(t *testing.T, s formsapi.Submission) string {
	t.Helper()
	var data bytes.Buffer
	if err := json.Compact(&data, s.Data); err != nil {
		t.Fatal(err)
	}
	att, err := json.Marshal(s.Attachments)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Attachments) == 0 {
		att = []byte("[]")
	}
	return fmt.Sprintf("%s %s %s %s", s.FormID, s.CreatedAt.UTC().Format(time.RFC3339Nano), data.String(), att)
}

func seedFingerprints(t *testing.T, formID string) []string {
	var fps []string
	for _, s := range storetest.DefaultSeed().Submissions {
		if s.Submission.FormID == formID {
			fps = append(fps, fingerprint(t, s.Submission))
		}
	}
	sort.Strings(fps)
	return fps
}

func TestWalksTheRealHandler(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		for _, prefix := range []string{"", "/api"} {
			t.Run(b.name+"/prefix="+prefix, func(t *testing.T) {
				t.Parallel()
				store, keys := b.open(t)
				srv := serve(t, formsapi.NewHandler(store, keys), prefix)
				testWalks(t, srv)
			})
		}
	}
}

func testWalks(t *testing.T, srv *server) {
	ctx := context.Background()
	c := newClient(t, srv.base, storetest.KeyA)

	// The reference: each list in one page.
	subs := mustCollect(t, c.Submissions(ctx, storetest.FormBusy, formsclient.PageSize(1000)))
	var got []string
	for i, s := range subs {
		got = append(got, fingerprint(t, s))
		if i > 0 && s.CreatedAt.After(subs[i-1].CreatedAt) {
			t.Fatalf("submission %d is newer than the one before", i)
		}
	}
	sort.Strings(got)
	if diff := cmp.Diff(seedFingerprints(t, storetest.FormBusy), got); diff != "" {
		t.Fatalf("submissions differ from the seed (-seed +client):\n%s", diff)
	}
	forms := mustCollect(t, c.Forms(ctx, formsclient.PageSize(1000)))
	var ids []string
	for _, f := range forms {
		ids = append(ids, f.ID)
	}
	if want := []string{storetest.FormSmall, storetest.FormEmpty, storetest.FormBusy, "feedback-a"}; !cmp.Equal(ids, want) {
		// signup-a and survey-a share a creation time: either may come first.
		if want[0], want[1] = want[1], want[0]; !cmp.Equal(ids, want) {
			t.Fatalf("forms of account A: got %v", ids)
		}
	}

	// Every item exactly once and in order, for both orders and small
	// pages, each page one request.
	n := int64(len(subs))
	for _, size := range []int{0, 1, 2, 3, 4, 7, 22, 23, 24} {
		for _, oldest := range []bool{false, true} {
			opts, want := []formsclient.ListOption{formsclient.Newest()}, subs
			if oldest {
				opts, want = []formsclient.ListOption{formsclient.Oldest()}, reversed(subs)
			}
			pages := int64(1)
			if size > 0 {
				opts = append(opts, formsclient.PageSize(size))
				pages = max(1, (n+int64(size)-1)/int64(size))
			}
			before := srv.requests.Load()
			if diff := cmp.Diff(want, mustCollect(t, c.Submissions(ctx, storetest.FormBusy, opts...))); diff != "" {
				t.Errorf("size %d, oldest %v (-want +got):\n%s", size, oldest, diff)
			}
			if got := srv.requests.Load() - before; got != pages {
				t.Errorf("size %d, oldest %v: %d requests, want %d", size, oldest, got, pages)
			}
		}
	}
	for _, size := range []int{1, 2, 3} {
		if diff := cmp.Diff(forms, mustCollect(t, c.Forms(ctx, formsclient.PageSize(size)))); diff != "" {
			t.Errorf("forms, size %d (-want +got):\n%s", size, diff)
		}
		if diff := cmp.Diff(reversed(forms), mustCollect(t, c.Forms(ctx, formsclient.PageSize(size), formsclient.Oldest()))); diff != "" {
			t.Errorf("forms oldest first, size %d (-want +got):\n%s", size, diff)
		}
	}

	// since and until, alone and together, in the zone of the caller.
	cet := time.FixedZone("CET", 3600)
	since, until := subs[17].CreatedAt.In(cet), subs[4].CreatedAt.In(cet)
	var inRange, fromSince, beforeUntil []formsapi.Submission
	for _, s := range subs {
		if !s.CreatedAt.Before(since) && s.CreatedAt.Before(until) {
			inRange = append(inRange, s)
		}
		if !s.CreatedAt.Before(since) {
			fromSince = append(fromSince, s)
		}
		if s.CreatedAt.Before(until) {
			beforeUntil = append(beforeUntil, s)
		}
	}
	if len(inRange) < 5 || len(inRange) == len(subs) {
		t.Fatalf("the range holds %d of %d submissions: not a useful test", len(inRange), len(subs))
	}
	for _, size := range []int{1, 3, 100} {
		for _, tc := range []struct {
			opts []formsclient.ListOption
			want []formsapi.Submission
		}{
			{[]formsclient.ListOption{formsclient.Since(since), formsclient.Until(until)}, inRange},
			{[]formsclient.ListOption{formsclient.Since(since)}, fromSince},
			{[]formsclient.ListOption{formsclient.Until(until)}, beforeUntil},
		} {
			opts := append(slices.Clone(tc.opts), formsclient.PageSize(size))
			if diff := cmp.Diff(tc.want, mustCollect(t, c.Submissions(ctx, storetest.FormBusy, opts...))); diff != "" {
				t.Errorf("range, size %d, newest first (-want +got):\n%s", size, diff)
			}
			opts = append(opts, formsclient.Oldest())
			if diff := cmp.Diff(reversed(tc.want), mustCollect(t, c.Submissions(ctx, storetest.FormBusy, opts...))); diff != "" {
				t.Errorf("range, size %d, oldest first (-want +got):\n%s", size, diff)
			}
		}
	}

	// An empty form is an empty list in one request.
	before := srv.requests.Load()
	if got := mustCollect(t, c.Submissions(ctx, storetest.FormEmpty, formsclient.PageSize(1))); len(got) != 0 {
		t.Errorf("empty form yielded %d submissions", len(got))
	}
	if got := srv.requests.Load() - before; got != 1 {
		t.Errorf("empty form: %d requests", got)
	}

	// Another account sees its own forms only, and not A's submissions.
	cb := newClient(t, srv.base, storetest.KeyB)
	for _, f := range mustCollect(t, cb.Forms(ctx, formsclient.PageSize(1))) {
		if !slices.Contains([]string{storetest.FormB, "survey-b", "orders-b"}, f.ID) {
			t.Errorf("account B sees form %q", f.ID)
		}
	}
	_, err := collect(t, cb.Submissions(ctx, storetest.FormBusy))
	if !errors.Is(err, formsapi.ErrFormNotFound) {
		t.Errorf("account B reading A's form: %v, want ErrFormNotFound", err)
	}

	// One client, many goroutines.
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			got, err := collect(t, c.Submissions(ctx, storetest.FormBusy, formsclient.PageSize(i+1), formsclient.Oldest()))
			if err != nil || !cmp.Equal(got, reversed(subs)) {
				t.Errorf("concurrent walk %d: %d items, %v", i, len(got), err)
			}
		})
	}
	wg.Wait()
}

func TestErrorsOfTheRealHandler(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		for _, prefix := range []string{"", "/api"} {
			t.Run(b.name+"/prefix="+prefix, func(t *testing.T) {
				t.Parallel()
				store, keys := b.open(t)
				srv := serve(t, formsapi.NewHandler(store, keys), prefix)
				ctx := context.Background()
				c := newClient(t, srv.base, storetest.KeyA)

				for _, tc := range []struct {
					name   string
					seq    iter.Seq2[formsapi.Submission, error]
					status int
					is     error
					msg    string
				}{
					{"unknown form", c.Submissions(ctx, storetest.FormNone), 404, formsapi.ErrFormNotFound, "form not found"},
					{"another account's form", c.Submissions(ctx, storetest.FormB), 404, formsapi.ErrFormNotFound, "form not found"},
					{"escaped ID", c.Submissions(ctx, "a/b?c#d e"), 404, formsapi.ErrFormNotFound, "form not found"},
					{"unknown key", newClient(t, srv.base, storetest.KeyNotAdded).Submissions(ctx, storetest.FormBusy), 401, formsapi.ErrInvalidKey, "invalid API key"},
					{"revoked key", newClient(t, srv.base, storetest.KeyRevoked).Submissions(ctx, storetest.FormBusy), 401, formsapi.ErrInvalidKey, "invalid API key"},
					{"wrong base URL", newClient(t, srv.base+"/wrong", storetest.KeyA).Submissions(ctx, storetest.FormBusy), 404, nil, "not found: the API serves GET /v1/forms, GET /v1/forms/{formId}/submissions, GET /v1/forms/{formId}/export, GET /v1/forms/{formId}/summary and GET /v1/openapi.json"},
					{"page too large", c.Submissions(ctx, storetest.FormBusy, formsclient.PageSize(1001)), 400, nil, "invalid limit: must be a whole number from 1 to 1000"},
					{"until before since", c.Submissions(ctx, storetest.FormBusy, formsclient.Since(time.Now()), formsclient.Until(time.Now().Add(-time.Hour))), 400, nil, "invalid until: must be later than since"},
				} {
					before := srv.requests.Load()
					items, err := collect(t, tc.seq)
					var e *formsclient.Error
					if !errors.As(err, &e) {
						t.Errorf("%s: %v, want a *formsclient.Error", tc.name, err)
						continue
					}
					if len(items) != 0 || e.StatusCode != tc.status || e.Message != tc.msg || e.RequestID == "" {
						t.Errorf("%s: %d items, %+v", tc.name, len(items), e)
					}
					if tc.is != nil && !errors.Is(err, tc.is) {
						t.Errorf("%s: errors.Is(%v, %v) is false", tc.name, err, tc.is)
					}
					for _, other := range []error{formsapi.ErrFormNotFound, formsapi.ErrInvalidKey} {
						if other != tc.is && errors.Is(err, other) {
							t.Errorf("%s: %v matches %v", tc.name, err, other)
						}
					}
					if got := srv.requests.Load() - before; got != 1 {
						t.Errorf("%s: %d requests, want 1 (no retry)", tc.name, got)
					}
				}
				_, err := collect(t, newClient(t, srv.base, storetest.KeyNotAdded).Forms(ctx))
				if !errors.Is(err, formsapi.ErrInvalidKey) {
					t.Errorf("forms with an unknown key: %v", err)
				}
			})
		}
	}
}

func TestBreakStopsFetching(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store, keys := b.open(t)
			srv := serve(t, formsapi.NewHandler(store, keys), "/api")
			c := newClient(t, srv.base, storetest.KeyA)
			for _, tc := range []struct{ size, take, requests int }{
				{2, 1, 1}, {2, 2, 1}, {2, 3, 2}, {2, 4, 2}, {5, 11, 3}, {100, 23, 1}, {1, 1, 1},
			} {
				before := srv.requests.Load()
				n := 0
				for _, err := range c.Submissions(context.Background(), storetest.FormBusy, formsclient.PageSize(tc.size)) {
					if err != nil {
						t.Fatal(err)
					}
					if n++; n == tc.take {
						break
					}
				}
				if got := srv.requests.Load() - before; n != tc.take || got != int64(tc.requests) {
					t.Errorf("pages of %d, break after %d: took %d in %d requests, want %d", tc.size, tc.take, n, got, tc.requests)
				}
			}
			// Forms too.
			before := srv.requests.Load()
			for range c.Forms(context.Background(), formsclient.PageSize(1)) {
				break
			}
			if got := srv.requests.Load() - before; got != 1 {
				t.Errorf("forms: %d requests after a break on the first", got)
			}
		})
	}
}

func TestCancelStopsTheWalk(t *testing.T) {
	t.Parallel()
	store, keys := backends[0].open(t)
	srv := serve(t, formsapi.NewHandler(store, keys), "")
	c := newClient(t, srv.base, storetest.KeyA)

	// Canceled between two items of one page: the next thing is the error.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, errs := 0, 0
	for _, err := range c.Submissions(ctx, storetest.FormBusy, formsclient.PageSize(5)) {
		if err != nil {
			errs++
			if !errors.Is(err, context.Canceled) {
				t.Errorf("error %v, want context.Canceled", err)
			}
			continue
		}
		if n++; n == 2 {
			cancel()
		}
	}
	if n != 2 || errs != 1 || srv.requests.Load() != 1 {
		t.Errorf("%d items, %d errors, %d requests after a cancel at the second item", n, errs, srv.requests.Load())
	}

	// Canceled before the first request: nothing is sent.
	_, err := collect(t, c.Forms(ctx))
	if !errors.Is(err, context.Canceled) || srv.requests.Load() != 1 {
		t.Errorf("canceled context: %v, %d requests", err, srv.requests.Load())
	}
}

// A page over the response size limit is asked for again with fewer
// items: every submission still comes exactly once, in order.
func TestPagesOverTheSizeLimitShrink(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	seed := storetest.Seed{
		Forms: []storetest.SeedForm{{AccountID: "acct", Form: formsapi.Form{ID: "big", CreatedAt: base}}},
		Keys:  []storetest.SeedKey{{Key: "big-key", AccountID: "acct"}},
	}
	for i := range 20 {
		data := fmt.Sprintf(`{"n":%d,"text":%q}`, i, strings.Repeat("x", 10000))
		if i == 7 {
			data = fmt.Sprintf(`{"n":%d,"text":%q}`, i, strings.Repeat("y", 70000)) // alone over the limit
		}
		seed.Submissions = append(seed.Submissions, storetest.SeedSubmission{
			Submission: formsapi.Submission{FormID: "big", Data: []byte(data), CreatedAt: base.Add(time.Duration(i/3) * time.Minute)},
		})
	}
	s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "f.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := storetest.Load(ctx, s, seed); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, formsapi.NewHandler(s, s), "/api")
	all := mustCollect(t, newClient(t, srv.base, "big-key").Submissions(ctx, "big", formsclient.Oldest()))
	if len(all) != 20 {
		t.Fatalf("%d submissions", len(all))
	}

	small := newClient(t, srv.base, "big-key", formsclient.WithMaxResponseSize(60000))
	for _, tc := range []struct {
		opts     []formsclient.ListOption
		requests int64
	}{
		// 16 and 8 items are too large, 4 fit.
		{[]formsclient.ListOption{formsclient.PageSize(16), formsclient.Since(all[9].CreatedAt)}, 2 + 3},
		// The server's 100, then 50, 25, 12 and 6 are too large; 3 fit.
		{[]formsclient.ListOption{formsclient.Since(all[9].CreatedAt)}, 5 + 4},
	} {
		before := srv.requests.Load()
		got := mustCollect(t, small.Submissions(ctx, "big", append(tc.opts, formsclient.Oldest())...))
		if diff := cmp.Diff(all[9:], got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if n := srv.requests.Load() - before; n != tc.requests {
			t.Errorf("%d requests, want %d", n, tc.requests)
		}
	}

	// Submission 7 alone is over the limit: the walk gets the six before it,
	// then halves down to one item and stops with the error.
	got, err := collect(t, small.Submissions(ctx, "big", formsclient.Oldest(), formsclient.PageSize(2)))
	var e *formsclient.Error
	if !errors.As(err, &e) || e.StatusCode != 200 || !strings.Contains(e.Message, "larger than 60000 bytes") {
		t.Errorf("%v", err)
	}
	if diff := cmp.Diff(all[:7], got); diff != "" {
		t.Errorf("before the large one (-want +got):\n%s", diff)
	}
}
