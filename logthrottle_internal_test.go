package formsapi

import (
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestThrottle: one line per interval, the others counted on the next
// line that goes, none lost from the count, under concurrent callers too.
func TestThrottle(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var th throttle
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n, ok := th.allow(t0)
	is.True(ok)           // the first line goes
	is.Equal(n, int64(0)) // with nothing held back
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		went int
	)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				if _, ok := th.allow(t0.Add(logInterval - time.Nanosecond)); ok {
					mu.Lock()
					went++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	is.Equal(went, 0) // within the interval, nothing goes
	n, ok = th.allow(t0.Add(logInterval))
	is.True(ok)             // at the interval, one line goes
	is.Equal(n, int64(800)) // counting all that were held back
	_, ok = th.allow(t0.Add(logInterval))
	is.True(!ok) // and the next waits again
	n, ok = th.allow(t0.Add(5 * logInterval))
	is.True(ok)
	is.Equal(n, int64(1)) // the count starts again after each line
}
