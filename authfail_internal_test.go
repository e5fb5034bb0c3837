package formsapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestAuthThrottleDelays: a burst of refusals is answered at once, then
// each waits one interval more than the one before, until
// authFailurePending turns are handed out; the next is refused a turn
// (full) and reserves nothing; as time passes the turns free up.
func TestAuthThrottleDelays(t *testing.T) {
	is := is.New(t)
	var th authThrottle
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range authFailureBurst {
		d, full := th.delay(now)
		is.Equal(d, time.Duration(0)) // within the burst: at once
		is.True(!full)
	}
	for i := 1; i <= authFailurePending; i++ {
		d, full := th.delay(now)
		is.True(!full)
		is.Equal(d, time.Duration(i)*authFailureInterval) // each its turn, one interval after the one before
	}
	tat := th.tat
	d, full := th.delay(now)
	is.True(full) // every turn is handed out
	is.Equal(d, time.Duration(0))
	is.Equal(th.tat, tat) // and none reserved past the cap
	d, full = th.delay(now.Add(authFailureInterval))
	is.True(!full) // one interval on, one turn is free again
	is.Equal(d, authFailurePending*authFailureInterval)
	d, full = th.delay(now.Add(time.Hour))
	is.True(!full)
	is.Equal(d, time.Duration(0)) // an hour on, at once again
}

// refusingKeys refuses every key.
var refusingKeys = KeyResolverFunc(func(context.Context, string) (string, error) { return "", ErrInvalidKey })

// TestRefusalsPacedServerWide floods the handler from many connections
// with refused keys, each sending its next request as soon as it has its
// answer (as wrk does), on a virtual clock: the handler's sleep seam
// reports each wait, and the connection's next request comes that much
// later. However many connections, the handler answers the burst and
// then authFailureRate refusals a second, not so many per connection
// (the bound was per connection before issue 24: 2 s at most per answer
// without a turn, so 1,000 connections got about 500 answers a second).
func TestRefusalsPacedServerWide(t *testing.T) {
	is := is.New(t)
	const conns = 1000
	const horizon = 10 * time.Second
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	var slept time.Duration
	a := newAPI(stubStore{}, refusingKeys, func(c *config) {
		c.sleep = func(_ context.Context, d time.Duration) { slept = d }
	})
	a.authFail.now = func() time.Time { return now }
	h := a.handler()
	next := make([]time.Time, conns) // when each connection sends its next request
	for i := range next {
		next[i] = start
	}
	var answers []time.Duration // since start, in order
	closed := 0
	for {
		c := 0 // the connection whose request comes first
		for i := range next {
			if next[i].Before(next[c]) {
				c = i
			}
		}
		if next[c].Sub(start) > horizon {
			break
		}
		now, slept = next[c], 0
		r := httptest.NewRequest("GET", "/v1/forms", nil)
		r.Header.Set("Authorization", "Bearer fapi_unknown")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		is.Equal(w.Code, http.StatusUnauthorized)
		if w.Header().Get("Connection") == "close" {
			closed++
		}
		next[c] = now.Add(slept)
		if at := next[c].Sub(start); at <= horizon {
			answers = append(answers, at)
		}
	}
	is.Equal(closed, 0) // fewer connections than the cap: every refusal waited its turn
	perSecond := len(answers) - authFailureBurst
	is.True(perSecond >= int(horizon/authFailureInterval)-1) // the schedule answers at its rate
	if perSecond > int(horizon/authFailureInterval)+1 {
		t.Fatalf("%d connections got %d refusals answered in %s: %d past the burst, want at most %d",
			conns, len(answers), horizon, perSecond, horizon/authFailureInterval)
	}
	for s := time.Second; s < horizon; s += time.Second { // every second past the first: its rate's worth
		n := 0
		for _, at := range answers {
			if at > s && at <= s+time.Second {
				n++
			}
		}
		is.True(n <= authFailureRate+1)
	}
}

// TestRefusalsPendingCapped: with time frozen, every refusal past the
// burst takes a turn further ahead, until authFailurePending of them
// wait; the next ones are answered at once, outside the schedule, and
// close their connection. Before issue 24 nothing capped them: every one
// waited (2 s each without a turn).
func TestRefusalsPendingCapped(t *testing.T) {
	is := is.New(t)
	frozen := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var waits []time.Duration
	a := newAPI(stubStore{}, refusingKeys, func(c *config) {
		c.sleep = func(_ context.Context, d time.Duration) { waits = append(waits, d) }
	})
	a.authFail.now = func() time.Time { return frozen }
	h := a.handler()
	get := func() (int, string) {
		r := httptest.NewRequest("GET", "/v1/forms", nil)
		r.Header.Set("Authorization", "Bearer fapi_unknown")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Header().Get("Connection")
	}
	for range authFailureBurst + authFailurePending {
		code, conn := get()
		is.Equal(code, http.StatusUnauthorized)
		is.Equal(conn, "") // kept open
	}
	is.Equal(len(waits), authFailurePending)                              // all but the burst wait
	is.Equal(waits[len(waits)-1], authFailurePending*authFailureInterval) // the last, for the last turn handed out
	for range 50 {
		code, conn := get()
		is.Equal(code, http.StatusUnauthorized)
		is.Equal(conn, "close") // answered at once, connection closed
	}
	is.Equal(len(waits), authFailurePending) // and none of those waited
	frozen = frozen.Add(time.Second)         // a second on, a second's turns are free
	for range authFailureRate {
		_, conn := get()
		is.Equal(conn, "")
	}
	_, conn := get()
	is.Equal(conn, "close")
}

// TestRefusedKeysArePaced: past the burst, 401s for refused keys wait for
// their turn; a request whose key works never waits, even mid-flood, and
// one without credentials neither.
func TestRefusedKeysArePaced(t *testing.T) {
	is := is.New(t)
	var mu sync.Mutex
	var waits []time.Duration
	frozen := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	keys := blockingKeys{entered: make(chan string, 1000), release: make(chan struct{})}
	close(keys.release) // unknown keys are refused at once
	a := newAPI(stubStore{}, keys, func(c *config) {
		c.sleep = func(_ context.Context, d time.Duration) {
			mu.Lock()
			waits = append(waits, d)
			mu.Unlock()
		}
	})
	a.authFail.now = func() time.Time { return frozen }
	h := a.handler()
	get := func(key string) int {
		r := httptest.NewRequest("GET", "/v1/forms", nil)
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for range authFailureBurst {
		is.Equal(get("unknown-key"), http.StatusUnauthorized)
	}
	is.Equal(len(waits), 0) // the burst is answered at once
	is.Equal(get("unknown-key"), http.StatusUnauthorized)
	is.Equal(get("fapi_malformed"), http.StatusUnauthorized)
	is.Equal(waits, []time.Duration{time.Second / authFailureRate, 2 * time.Second / authFailureRate}) // each waits its turn, malformed keys too
	is.Equal(get("known-key"), http.StatusOK)
	is.Equal(get(""), http.StatusUnauthorized)
	is.Equal(len(waits), 2) // neither a working key nor no key waits
}
