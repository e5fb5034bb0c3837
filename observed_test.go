package formsapi_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// recordingObserver keeps what it is told. Each Call's context carries
// the call's op, so a store can show it was called with it.
type recordingObserver struct {
	mu       sync.Mutex
	calls    []string // op, then "ok" or "error" once done
	requests []observe.Request
}

type opKey struct{}

func (o *recordingObserver) Call(ctx context.Context, c observe.Call) (context.Context, func(error)) {
	o.mu.Lock()
	o.calls = append(o.calls, c.Op)
	o.mu.Unlock()
	return context.WithValue(ctx, opKey{}, c.Op), func(err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		if err != nil {
			o.calls = append(o.calls, c.Op+":error")
			return
		}
		o.calls = append(o.calls, c.Op+":ok")
	}
}

func (o *recordingObserver) Request(_ context.Context, r observe.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests = append(o.requests, r)
}

// take returns what o was told since the last take.
func (o *recordingObserver) take() ([]string, []observe.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, r := o.calls, o.requests
	o.calls, o.requests = nil, nil
	return c, r
}

// ctxStore records the op its callers' contexts carry.
type ctxStore struct {
	formsapi.Store
	seen *[]any
}

func (s ctxStore) ListForms(ctx context.Context, a string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	*s.seen = append(*s.seen, ctx.Value(opKey{}))
	return s.Store.ListForms(ctx, a, q)
}

// TestObserverSeesRequestsAndCalls: every request is reported once, with
// its route, status, body length, account, form, feed flag and rate-limit
// decision, and every call to the key resolver, the limiter and the store
// in order, each done with its outcome; the context an observer returns
// is the one the store is called with.
func TestObserverSeesRequestsAndCalls(t *testing.T) {
	is := is.New(t)
	o := &recordingObserver{}
	s := seeded(t)
	var seen []any
	limit := ratelimit.Policy{Name: "test", Quota: 3, Window: time.Hour}
	h := formsapi.NewHandler(ctxStore{s, &seen}, s, formsapi.WithFeed(s), formsapi.WithObserver(o), formsapi.WithRateLimit(ratelimit.Options{Limiter: ratelimit.NewMemory(), Policy: limit}))

	res := do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions?limit=2", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200)
	calls, reqs := o.take()
	is.Equal(calls, []string{"authorize", "authorize:ok", "rate_limit", "rate_limit:ok", "list_submissions", "list_submissions:ok"}) // in order, each done
	is.Equal(len(reqs), 1)                                                                                                           // one report per request
	r := reqs[0]
	is.Equal(r.Method, "GET")
	is.Equal(r.Route, "GET /v1/forms/{formId}/submissions")
	is.Equal(r.Status, 200)
	is.Equal(r.BodyBytes, int64(len(res.body))) // the body as written
	is.Equal(r.AccountID, storetest.AccountA)
	is.Equal(r.FormID, storetest.FormBusy)
	is.Equal(r.RateLimit, observe.RateLimitAllowed)
	is.True(!r.Feed && !r.KeyRefused)
	is.True(r.Duration > 0)

	res = do(t, h, "GET", "/v1/forms", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200)
	is.Equal(seen, []any{"list_forms"}) // the store got the observer's context
	_, reqs = o.take()
	is.Equal(reqs[0].Route, "GET /v1/forms")

	res = do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions?sync=start&limit=1", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200)
	calls, reqs = o.take()
	is.True(reqs[0].Feed)        // a feed page
	is.True(reqs[0].FeedHasMore) // one of many: more follow
	is.Equal(calls[len(calls)-1], "sync_submissions:ok")

	res = do(t, h, "GET", "/v1/forms", bearer(storetest.KeyA)...)
	is.Equal(res.status, 429)
	_, reqs = o.take()
	is.Equal(reqs[0].RateLimit, observe.RateLimitRefused) // the fourth of a quota of three

	res = do(t, h, "GET", "/v1/forms", bearer(storetest.KeyNotAdded)...)
	is.Equal(res.status, 401)
	calls, reqs = o.take()
	is.True(reqs[0].KeyRefused)                               // a key, refused
	is.Equal(calls, []string{"authorize", "authorize:error"}) // and nothing after it
	is.Equal(reqs[0].AccountID, "")

	res = do(t, h, "GET", "/v1/forms")
	is.Equal(res.status, 401)
	_, reqs = o.take()
	is.True(!reqs[0].KeyRefused) // no key at all is not a refused key

	res = do(t, h, "GET", "/v1/nowhere", bearer(storetest.KeyA)...)
	is.Equal(res.status, 404)
	calls, reqs = o.take()
	is.Equal(reqs[0].Route, "") // no route: no unbounded label
	is.Equal(len(calls), 0)
}

// TestObserverSeesStoreFailures: a failing store call is done with its
// error, and the request reported with its 500.
func TestObserverSeesStoreFailures(t *testing.T) {
	is := is.New(t)
	o := &recordingObserver{}
	failing := fakeStore{forms: func(context.Context) (formsapi.Page[formsapi.Form], error) {
		return formsapi.Page[formsapi.Form]{}, errors.New("disk on fire")
	}}
	h := formsapi.NewHandler(failing, okKey, formsapi.WithObserver(o), formsapi.WithLogger(slog.New(slog.DiscardHandler)))
	res := do(t, h, "GET", "/v1/forms", bearer("k")...)
	is.Equal(res.status, 500)
	calls, reqs := o.take()
	is.Equal(calls[len(calls)-1], "list_forms:error")
	is.Equal(reqs[0].Status, 500)
}

// TestObserverSeesTheReadCache: over sqlitestore and pgstore, whose read
// caches are on by default, a page is reported missed the first time,
// hit the next, held in part when a longer page starts with it, and
// missed again after a write to its form; pgstore caches the forms list
// too, and a request whose reads of it the cache served in part is
// reported partial; memstore has no cache, and no other request is a
// page the cache could serve.
func TestObserverSeesTheReadCache(t *testing.T) {
	open := map[string]func(t *testing.T) writeStore{
		"sqlitestore": func(t *testing.T) writeStore {
			sq, err := sqlitestore.Open(filepath.Join(t.TempDir(), "f.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sq.Close() })
			return sq
		},
		"pgstore": func(t *testing.T) writeStore {
			return openPostgres(t, false)
		},
	}
	for name, open := range open {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			st := open(t)
			is.NoErr(storetest.Load(ctx, st, storetest.DefaultSeed()))
			o := &recordingObserver{}
			h := formsapi.NewHandler(st, st, formsapi.WithObserver(o))
			page := "/v1/forms/" + storetest.FormBusy + "/submissions?limit=2"
			cacheOf := func(path string, key ...string) observe.Cache {
				t.Helper()
				res := do(t, h, "GET", path, bearer(append(key, storetest.KeyA)[0])...)
				is.Equal(res.status, 200)
				_, reqs := o.take()
				return reqs[0].Cache
			}
			is.Equal(cacheOf(page), observe.CacheMiss)                                                      // first read
			is.Equal(cacheOf(page), observe.CacheHit)                                                       // again: from the cache
			is.Equal(cacheOf("/v1/forms/"+storetest.FormBusy+"/submissions?limit=5"), observe.CachePartial) // starts with the held page
			if name == "pgstore" {
				is.Equal(cacheOf("/v1/forms"), observe.CacheMiss)        // the forms list, first read
				is.Equal(cacheOf("/v1/forms"), observe.CacheHit)         // again: from the cache
				is.Equal(cacheOf("/v1/forms?limit=1"), observe.CacheHit) // a shorter page of the held list
				scoped, err := formsapi.NewKey()
				is.NoErr(err)
				is.NoErr(st.(formsapi.KeyManager).AddKeyWith(ctx, scoped, storetest.AccountA, formsapi.KeyOptions{Forms: []string{storetest.FormBusy, storetest.FormSmall}}))
				// A scoped key's page of one reads the list, the list cut
				// to the page (held) and the list after it (not held).
				is.Equal(cacheOf("/v1/forms?limit=1", scoped), observe.CachePartial)
				is.Equal(cacheOf("/v1/forms?limit=1", scoped), observe.CacheHit) // all of it held now
			} else {
				is.Equal(cacheOf("/v1/forms"), observe.CacheNone) // sqlitestore does not cache the forms list
			}
			is.Equal(cacheOf("/v1/forms/"+storetest.FormBusy+"/submissions?sync=start"), observe.CacheNone) // the feed is not cached
			is.NoErr(st.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`{"a":1}`), CreatedAt: time.Now()}, formsapi.Metadata{}))
			is.Equal(cacheOf(page), observe.CacheSpliced) // an addition: the held page takes in the new row
		})
	}
	t.Run("memstore", func(t *testing.T) {
		is := is.New(t)
		o := &recordingObserver{}
		m := seeded(t)
		h := formsapi.NewHandler(m, m, formsapi.WithObserver(o))
		res := do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions?limit=2", bearer(storetest.KeyA)...)
		is.Equal(res.status, 200)
		_, reqs := o.take()
		is.Equal(reqs[0].Cache, observe.CacheNone) // memstore has no cache
	})
}

// TestObserverSeesEveryStoreCallOfAnExport: an export's reads of the
// form's feed head and, for CSV, of its fields (FieldStore) are store
// calls like its pages, each reported and done with its outcome, in the
// order the handler makes them; so is a total's count.
func TestObserverSeesEveryStoreCallOfAnExport(t *testing.T) {
	is := is.New(t)
	o := &recordingObserver{}
	s := seeded(t)
	h := formsapi.NewHandler(s, s, formsapi.WithObserver(o))

	res := do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/export?format=csv", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200)
	calls, reqs := o.take()
	is.True(len(calls) >= 8)
	is.Equal(calls[:8], []string{"authorize", "authorize:ok", "feed_head", "feed_head:ok", "data_fields", "data_fields:ok", "sync_submissions", "sync_submissions:ok"})
	for _, c := range calls[8:] {
		is.True(c == "sync_submissions" || c == "sync_submissions:ok") // then pages only
	}
	is.Equal(reqs[0].FormID, storetest.FormBusy)

	// JSON Lines have no columns: no fields are read.
	res = do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/export", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200)
	calls, _ = o.take()
	is.Equal(calls[:4], []string{"authorize", "authorize:ok", "feed_head", "feed_head:ok"})
	for _, c := range calls {
		is.True(c != "data_fields")
	}

	// A form that is not there: the head's read is done with its error.
	res = do(t, h, "GET", "/v1/forms/no-such-form/export?format=csv", bearer(storetest.KeyA)...)
	is.Equal(res.status, 404)
	calls, _ = o.take()
	is.Equal(calls[len(calls)-1], "feed_head:error")

	res = do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions?total=exact", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200)
	calls, _ = o.take()
	is.Equal(calls[len(calls)-2:], []string{"count_submissions", "count_submissions:ok"})
}
