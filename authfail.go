package formsapi

// Refused keys are answered at a bounded rate. A 401 costs the server
// little, but a flood of them (keys that are well formed and unknown, or
// not even well formed) on a small machine takes the CPU from users whose
// keys work: measured on two cores, a real user's median latency grew 15
// to 38 times during a 512-connection flood of refused keys, most of it
// spent answering the 401s (BENCHMARKS.md). So past a burst of
// authFailureBurst refused keys, each further one waits for its turn at
// authFailureRate a second before its 401, and never longer than
// authFailureMaxWait. An attacker who waits for each answer before
// sending the next (every load tool, every naive script) is slowed to
// that rate; a user whose key works is never delayed; a client with a
// key that stopped working gets its 401 at once unless a flood is on.
// The bound is the handler's, not per client: the library does not know
// client addresses behind proxies, and a per-address limit belongs in
// front of it.

import (
	"context"
	"sync"
	"time"
)

const (
	authFailureRate    = 100             // refused keys answered per second past the burst
	authFailureBurst   = 100             // refused keys answered at once
	authFailureMaxWait = 2 * time.Second // the longest one answer waits
)

// authThrottle paces the answers to refused keys with GCRA: tat is the
// theoretical arrival time of the next refusal.
type authThrottle struct {
	mu  sync.Mutex
	tat time.Time
	now func() time.Time // time.Now unless a test sets it: the rate is real time's
}

// delay reserves the next refusal's turn at now and returns how long its
// answer should wait; past authFailureMaxWait it reserves nothing and
// returns that longest wait, so a flood cannot push the turns of later
// refusals without end.
func (t *authThrottle) delay(now time.Time) time.Duration {
	const interval = time.Second / authFailureRate
	const tolerance = interval * authFailureBurst
	t.mu.Lock()
	defer t.mu.Unlock()
	next := t.tat
	if next.Before(now) {
		next = now
	}
	next = next.Add(interval)
	d := next.Sub(now) - tolerance
	if d > authFailureMaxWait {
		return authFailureMaxWait
	}
	t.tat = next
	return max(d, 0)
}

// waitRefused holds the answer to a refused key for its turn, or until
// the client goes away.
func (a *api) waitRefused(ctx context.Context) {
	now := time.Now
	if a.authFail.now != nil {
		now = a.authFail.now
	}
	d := a.authFail.delay(now())
	if d <= 0 {
		return
	}
	if a.cfg.sleep != nil {
		a.cfg.sleep(ctx, d)
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
