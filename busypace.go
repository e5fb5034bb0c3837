package formsapi

// A key's 429s are answered at a bounded rate, as refused keys' 401s are
// (authfail.go), on a schedule of each key's own. A 429 costs the server
// little, but one key with thousands of connections that sends again as
// soon as it has its answer (every load tool) keeps them all busy: each
// answer wakes a goroutine, and a request of another account waits behind
// thousands of them for a core (issue 24: its median went from 1.7 ms to
// 304 ms). So past a burst of busyBurst, each further 429 of the same key
// (rate limited, or past its requests in flight) waits for that key's next
// turn, busyRate a second, before it is sent: a flood of one key gets
// that many answers a second however many connections it opens, and its
// connections wait, costing no CPU. A client that keeps within its limit,
// or is briefly over it, never waits; other keys never wait for this one.
//
// Waiting 429s are capped twice: at most busyPending turns of one key are
// handed out ahead (about 41 s), and at most busyWaiting 429s wait at once
// in all. A 429 past either cap is answered at once and its connection
// closed, as a refusal past its cap is. The schedules are kept by the key
// gate's keyed hash of the key (never the key), for at most
// maxPacedKeys keys: past that, those whose turns are all past go, and
// if none has, all of them.

import (
	"context"
	"sync"
	"time"
)

const (
	busyRate     = 100  // one key's 429s answered per second past its burst
	busyBurst    = 100  // one key's 429s answered at once
	busyPending  = 4096 // the most turns of one key handed out ahead (about 41 s)
	busyWaiting  = 4096 // the most 429s waiting at once, of every key
	maxPacedKeys = 1 << 16

	busyInterval = time.Second / busyRate
)

// busyThrottle paces each key's 429s with GCRA, a theoretical arrival
// time per key.
type busyThrottle struct {
	mu      sync.Mutex
	tat     map[uint64]time.Time
	waiting int              // 429s waiting now, of every key
	now     func() time.Time // time.Now unless a test sets it
}

// delay reserves the next turn of key h at now and returns how long its
// 429 should wait; a wait above zero is counted until the caller calls
// done. When busyPending turns of h are handed out ahead of now, or
// busyWaiting 429s wait already, it reserves nothing and reports full.
func (t *busyThrottle) delay(h uint64, now time.Time) (d time.Duration, full bool) {
	const tolerance = busyInterval * busyBurst
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tat == nil {
		t.tat = map[uint64]time.Time{}
	}
	next, ok := t.tat[h]
	if !ok && len(t.tat) >= maxPacedKeys {
		for k, tat := range t.tat {
			if !tat.After(now) {
				delete(t.tat, k)
			}
		}
		if len(t.tat) >= maxPacedKeys {
			clear(t.tat)
		}
	}
	if next.Before(now) {
		next = now
	}
	next = next.Add(busyInterval)
	d = next.Sub(now) - tolerance
	if d > busyPending*busyInterval || d > 0 && t.waiting >= busyWaiting {
		return 0, true
	}
	t.tat[h] = next
	if d <= 0 {
		return 0, false
	}
	t.waiting++
	return d, false
}

// done ends a wait that delay counted.
func (t *busyThrottle) done() {
	t.mu.Lock()
	t.waiting--
	t.mu.Unlock()
}

// waitBusy holds a 429 of the key whose gate hash is h for the key's
// turn, or until the client goes away. It reports false when a cap was
// reached and the answer should go at once and close its connection.
func (a *api) waitBusy(ctx context.Context, h uint64) bool {
	now := time.Now
	if a.busyPace.now != nil {
		now = a.busyPace.now
	}
	d, full := a.busyPace.delay(h, now())
	if full {
		return false
	}
	if d <= 0 {
		return true
	}
	defer a.busyPace.done()
	a.pause(ctx, d)
	return true
}
