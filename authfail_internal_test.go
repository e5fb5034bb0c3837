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
// each waits one interval more than the one before, never more than the
// longest wait, which reserves no turn; as time passes the turns free up.
func TestAuthThrottleDelays(t *testing.T) {
	is := is.New(t)
	var th authThrottle
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range authFailureBurst {
		is.Equal(th.delay(now), time.Duration(0)) // within the burst: at once
		_ = i
	}
	interval := time.Second / authFailureRate
	is.Equal(th.delay(now), interval)   // the first past the burst waits one interval
	is.Equal(th.delay(now), 2*interval) // the next, two
	for th.delay(now) < authFailureMaxWait {
	}
	tat := th.tat
	is.Equal(th.delay(now), authFailureMaxWait) // capped
	is.Equal(th.tat, tat)                       // and no turn reserved past the cap
	later := now.Add(time.Hour)
	is.Equal(th.delay(later), time.Duration(0)) // an hour on, at once again
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
