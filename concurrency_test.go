package formsapi_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/ratelimit"
)

// heldStore is a store whose every page read waits until the test
// releases it, after saying so on entered; it counts its reads.
type heldStore struct {
	reads   atomic.Int64
	entered chan struct{}
	release chan struct{}
}

func newHeldStore() *heldStore {
	return &heldStore{entered: make(chan struct{}, 1000), release: make(chan struct{})}
}

func (s *heldStore) store() fakeStore {
	return fakeStore{forms: func(ctx context.Context) (formsapi.Page[formsapi.Form], error) {
		s.reads.Add(1)
		s.entered <- struct{}{}
		select {
		case <-s.release:
			return formsapi.Page[formsapi.Form]{Items: []formsapi.Form{}}, nil
		case <-ctx.Done():
			return formsapi.Page[formsapi.Form]{}, ctx.Err()
		}
	}}
}

// countingKeys resolves each key to the account it names in accounts and
// counts its lookups.
type countingKeys struct {
	accounts map[string]string
	lookups  atomic.Int64
}

func (k *countingKeys) ResolveKey(_ context.Context, key string) (string, error) {
	k.lookups.Add(1)
	if a, ok := k.accounts[key]; ok {
		return a, nil
	}
	return "", formsapi.ErrInvalidKey
}

// busyAnswer checks an answer past an in-flight bound.
func busyAnswer(is *is.I, res response) {
	is.Helper()
	is.Equal(res.status, http.StatusTooManyRequests) // past the bound: 429
	is.Equal(string(res.body), `{"success":false,"message":"too many requests at once: retry after the number of seconds in Retry-After"}`)
	is.Equal(res.header.Get("Retry-After"), "1") // come back soon
	is.Equal(res.header.Get("RateLimit"), "")    // no limiter decided
}

// hold sends n requests of key to h, each held in the store, and returns
// a wait for their statuses, once the test has released the store.
func hold(t *testing.T, h http.Handler, s *heldStore, key string, n int) (wait func() []int) {
	t.Helper()
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = do(t, h, "GET", "/v1/forms", bearer(key)...).status
		}()
	}
	for range n {
		<-s.entered // each one is in the store
	}
	return func() []int { wg.Wait(); return statuses }
}

// TestInFlightPerKey: with its bound of requests in flight held in the
// store, a key's next request is answered 429 at once, with no store call
// at all: not even its key's lookup. Another key of the account is
// served; once the held requests end, so is the key again.
func TestInFlightPerKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := newHeldStore()
	keys := &countingKeys{accounts: map[string]string{"key-1": "acct", "key-2": "acct"}}
	h := formsapi.NewHandler(s.store(), keys, formsapi.WithRateLimit(ratelimit.Options{InFlightPerKey: 2, InFlightPerAccount: -1, BytesInFlight: -1}))

	wait := hold(t, h, s, "key-1", 2)
	lookups, reads := keys.lookups.Load(), s.reads.Load()
	for range 3 {
		busyAnswer(is, do(t, h, "GET", "/v1/forms", bearer("key-1")...))
	}
	is.Equal(keys.lookups.Load(), lookups) // no lookup
	is.Equal(s.reads.Load(), reads)        // no read

	other := hold(t, h, s, "key-2", 2) // the account's other key has its own bound
	busyAnswer(is, do(t, h, "GET", "/v1/forms", bearer("key-2")...))
	close(s.release)
	is.Equal(wait(), []int{200, 200})
	is.Equal(other(), []int{200, 200})
	is.Equal(do(t, h, "GET", "/v1/forms", bearer("key-1")...).status, 200) // the key's count went down
}

// TestInFlightPerAccount: with its bound in flight over two keys, an
// account's next request, of a third key, is answered 429 after its key's
// lookup (which names the account) and before any read; another account
// is served meanwhile.
func TestInFlightPerAccount(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := newHeldStore()
	keys := &countingKeys{accounts: map[string]string{"a-1": "a", "a-2": "a", "a-3": "a", "b-1": "b"}}
	h := formsapi.NewHandler(s.store(), keys, formsapi.WithRateLimit(ratelimit.Options{InFlightPerKey: -1, InFlightPerAccount: 2, BytesInFlight: -1}))

	w1 := hold(t, h, s, "a-1", 1)
	w2 := hold(t, h, s, "a-2", 1)
	lookups, reads := keys.lookups.Load(), s.reads.Load()
	busyAnswer(is, do(t, h, "GET", "/v1/forms", bearer("a-3")...))
	is.Equal(keys.lookups.Load(), lookups+1) // its key was looked up
	is.Equal(s.reads.Load(), reads)          // and nothing read

	wb := hold(t, h, s, "b-1", 2) // another account
	close(s.release)
	is.Equal(w1(), []int{200})
	is.Equal(w2(), []int{200})
	is.Equal(wb(), []int{200, 200})
	is.Equal(do(t, h, "GET", "/v1/forms", bearer("a-3")...).status, 200) // the account's count went down
}

// TestInFlightDefaults: without WithRateLimit the bounds are the
// defaults, 32 requests of a key; negative bounds lift them.
func TestInFlightDefaults(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	keys := &countingKeys{accounts: map[string]string{"k": "acct"}}

	// The pages' room is lifted: it would hold back the 8th page before
	// the key's bound is reached (TestBytesInFlight is about it).
	s := newHeldStore()
	h := formsapi.NewHandler(s.store(), keys, formsapi.WithRateLimit(ratelimit.Options{BytesInFlight: -1}))
	wait := hold(t, h, s, "k", ratelimit.DefaultInFlightPerKey)
	busyAnswer(is, do(t, h, "GET", "/v1/forms", bearer("k")...))
	close(s.release)
	wait()

	s = newHeldStore()
	h = formsapi.NewHandler(s.store(), keys, formsapi.WithRateLimit(ratelimit.Options{InFlightPerKey: -1, InFlightPerAccount: -1, BytesInFlight: -1}))
	wait = hold(t, h, s, "k", ratelimit.DefaultInFlightPerAccount+1) // past both defaults: no bound
	close(s.release)
	for _, st := range wait() {
		is.Equal(st, 200)
	}
}

// TestInFlightCountEndsWithEveryAnswer: a request counts until its answer,
// whatever it is (a refused key, a failed store, a 404, a refusal of the
// limiter), so a bound of one is never used up by answers already given.
func TestInFlightCountEndsWithEveryAnswer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	boom := errors.New("store down")
	fail := true
	var mu sync.Mutex
	store := fakeStore{
		forms: func(context.Context) (formsapi.Page[formsapi.Form], error) {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				return formsapi.Page[formsapi.Form]{}, boom
			}
			return formsapi.Page[formsapi.Form]{Items: []formsapi.Form{}}, nil
		},
		subs: func(context.Context) (formsapi.Page[formsapi.Submission], error) {
			return formsapi.Page[formsapi.Submission]{}, formsapi.ErrFormNotFound
		},
	}
	keys := &countingKeys{accounts: map[string]string{"k": "acct"}}
	h := formsapi.NewHandler(store, keys, formsapi.WithLogger(slog.New(slog.DiscardHandler)), formsapi.WithRateLimit(ratelimit.Options{
		InFlightPerKey: 1, InFlightPerAccount: 1,
		Limiter: ratelimit.NewMemory(), Policy: ratelimit.Policy{Name: "p", Quota: 3, Window: time.Hour},
	}))
	is.Equal(do(t, h, "GET", "/v1/forms", bearer("k")...).status, 500)                         // a failed store
	is.Equal(do(t, h, "GET", "/v1/forms/f/submissions", bearer("k")...).status, 404)           // a missing form
	is.Equal(do(t, h, "GET", "/v1/forms?limit=0", bearer("k")...).status, 400)                 // a bad query, the last unit
	is.Equal(do(t, h, "GET", "/v1/forms", bearer("k")...).status, http.StatusTooManyRequests)  // the limiter's refusal
	is.Equal(do(t, h, "GET", "/v1/forms", bearer("unknown")...).status, 401)                   // a refused key
	is.Equal(do(t, h, "GET", "/v1/forms", bearer("k")...).header.Get("RateLimit") != "", true) // still the limiter's, not the bound's
}
