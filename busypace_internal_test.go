package formsapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/formsapi/formsapi/ratelimit"
	"github.com/matryer/is"
)

// TestBusyThrottleDelays: each key's 429s get a burst at once, then a
// turn each, one interval apart, on a schedule of the key's own; past
// busyPending turns of a key it is full and reserves nothing, and past
// busyWaiting waits of every key together, any key that would wait is
// full, while a key within its burst is still answered at once.
func TestBusyThrottleDelays(t *testing.T) {
	is := is.New(t)
	var th busyThrottle
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range busyBurst {
		d, full := th.delay(1, now)
		is.Equal(d, time.Duration(0))
		is.True(!full)
	}
	for i := 1; i <= busyPending; i++ {
		d, full := th.delay(1, now)
		is.True(!full)
		is.Equal(d, time.Duration(i)*busyInterval)
		if i <= 3 {
			th.done() // the first three are over; the rest still wait
		}
		if i == 2 {
			d, full = th.delay(2, now) // another key: its own schedule
			is.True(!full)
			is.Equal(d, time.Duration(0))
		}
	}
	is.Equal(th.waiting, busyPending-3)
	tat := th.tat[1]
	_, full := th.delay(1, now)
	is.True(full) // key 1's turns are all handed out
	is.Equal(th.tat[1], tat)
	for k := uint64(3); th.waiting < busyWaiting; k++ { // other keys wait until busyWaiting do
		for range busyBurst + 1 {
			_, full = th.delay(k, now)
			is.True(!full)
		}
	}
	_, full = th.delay(2, now) // key 2 is within its burst: at once, uncounted
	is.True(!full)
	for range busyBurst - 2 {
		th.delay(2, now)
	}
	_, full = th.delay(2, now) // its next would wait, and busyWaiting do
	is.True(full)
	th.done()
	d, full := th.delay(2, now) // one wait ended: key 2 waits its turn
	is.True(!full)
	is.Equal(d, busyInterval)
	d, full = th.delay(1, now.Add(time.Hour)) // an hour on, at once again
	is.True(!full)
	is.Equal(d, time.Duration(0))
}

// TestBusyThrottleForgets: the schedules kept are bounded; past
// maxPacedKeys, those whose turns are all past go first.
func TestBusyThrottleForgets(t *testing.T) {
	is := is.New(t)
	var th busyThrottle
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for k := range uint64(maxPacedKeys) {
		th.delay(k, now)
	}
	is.Equal(len(th.tat), maxPacedKeys)
	th.delay(maxPacedKeys, now.Add(time.Second)) // every other turn is past
	is.Equal(len(th.tat), 1)
	for k := range uint64(maxPacedKeys - 1) {
		th.delay(k, now.Add(time.Second))
	}
	th.delay(maxPacedKeys+1, now.Add(time.Second)) // none is past: all go
	is.Equal(len(th.tat), 1)
}

// refusingLimiter refuses every request of the account "flood" and
// allows every other.
type refusingLimiter struct{}

func (refusingLimiter) Allow(_ context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	if key == "account:flood" {
		return ratelimit.Decision{RetryAfter: time.Second, Policy: p}, nil
	}
	return ratelimit.Decision{Allowed: true, Remaining: 1, Policy: p}, nil
}

// TestRateLimitedFloodPaced floods the handler with one key over its rate
// limit from many connections, each sending its next request as soon as
// it has its answer, on a virtual clock (the handler's sleep seam reports
// each wait; the connection's next request comes that much later), while
// another account's key asks once a (virtual) second. The flooding key
// gets its burst and then busyRate 429s a second, not a 429 per request
// as fast as it asks (the answers that woke thousands of goroutines a
// second and took the cores from other accounts, issue 24); the other
// key is served at once every time.
func TestRateLimitedFloodPaced(t *testing.T) {
	is := is.New(t)
	const conns = 1000
	const horizon = 10 * time.Second
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	var slept time.Duration
	keys := KeyResolverFunc(func(_ context.Context, key string) (string, error) {
		return map[string]string{"flood-key": "flood", "other-key": "other"}[key], nil
	})
	var a *api
	a = newAPI(stubStore{}, keys, WithRateLimit(ratelimit.Options{Limiter: refusingLimiter{}, Policy: ratelimit.Policy{Name: "p", Quota: 60, Window: time.Minute}}),
		func(c *config) {
			c.sleep = func(_ context.Context, d time.Duration) {
				slept = d
				a.keysInFlight.mu.Lock()
				defer a.keysInFlight.mu.Unlock()
				is.Equal(len(a.keysInFlight.n), 0) // a waiting 429 is out of flight
			}
		})
	a.busyPace.now = func() time.Time { return now }
	h := a.handler()
	get := func(key string) (int, string) {
		r := httptest.NewRequest("GET", "/v1/forms", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Header().Get("Connection")
	}
	next := make([]time.Time, conns)
	for i := range next {
		next[i] = start
	}
	answers := 0
	other := start
	for {
		c := 0
		for i := range next {
			if next[i].Before(next[c]) {
				c = i
			}
		}
		if !other.After(next[c]) && other.Sub(start) <= horizon {
			now, slept = other, 0
			code, _ := get("other-key")
			is.Equal(code, http.StatusOK)
			is.Equal(slept, time.Duration(0)) // never waits for the flood
			other = other.Add(time.Second)
			continue
		}
		if next[c].Sub(start) > horizon {
			break
		}
		now, slept = next[c], 0
		code, conn := get("flood-key")
		is.Equal(code, http.StatusTooManyRequests)
		is.Equal(conn, "") // fewer connections than the cap: every 429 waits its turn
		next[c] = now.Add(slept)
		if next[c].Sub(start) <= horizon {
			answers++
		}
	}
	is.Equal(other.Sub(start), horizon+time.Second) // the other key asked every second
	past := answers - busyBurst
	is.True(past >= int(horizon/busyInterval)-1)
	if past > int(horizon/busyInterval)+1 {
		t.Fatalf("%d connections of one key got %d 429s in %s: %d past the burst, want at most %d", conns, answers, horizon, past, horizon/busyInterval)
	}
}

// TestBusyPacedOutOfFlight: a 429 of a key past its requests in flight
// waits its turn too, and a waiting 429 holds none of the key's places in
// flight: with the key's bound of 1 held by a request the store holds,
// the key's next requests are refused (and wait), and once the held
// request is done the key is served again at once.
func TestBusyPacedOutOfFlight(t *testing.T) {
	is := is.New(t)
	frozen := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var waits []time.Duration
	keys := KeyResolverFunc(func(context.Context, string) (string, error) { return "acct", nil })
	a := newAPI(stubStore{}, keys, WithRateLimit(ratelimit.Options{InFlightPerKey: 1}),
		func(c *config) { c.sleep = func(_ context.Context, d time.Duration) { waits = append(waits, d) } })
	a.busyPace.now = func() time.Time { return frozen }
	h := a.handler()
	get := func() int {
		r := httptest.NewRequest("GET", "/v1/forms", nil)
		r.Header.Set("Authorization", "Bearer k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	is.Equal(get(), http.StatusOK)                  // the gate knows the key now
	is.True(a.keysInFlight.enter(a.gate.hash("k"))) // a request of the key in flight
	for range busyBurst + 2 {
		is.Equal(get(), http.StatusTooManyRequests)
	}
	is.Equal(waits, []time.Duration{busyInterval, 2 * busyInterval})
	a.keysInFlight.leave(a.gate.hash("k"))
	is.Equal(get(), http.StatusOK)
	is.Equal(len(a.keysInFlight.n), 0) // the refused ones left nothing counted
}
