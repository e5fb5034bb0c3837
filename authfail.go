package formsapi

// Refused keys are answered at a bounded rate. A 401 costs the server
// little, but a flood of them (keys that are well formed and unknown, or
// not even well formed) on a small machine takes the CPU from users whose
// keys work: measured on two cores, a real user's median latency grew 15
// to 38 times during a 512-connection flood of refused keys, most of it
// spent answering the 401s (BENCHMARKS.md). So past a burst of
// authFailureBurst refused keys, each further one waits for its turn on
// one schedule the whole handler shares, authFailureRate turns a second,
// before its 401. An attacker who waits for each answer before sending
// the next (every load tool, every naive script) is held to that rate
// however many connections it opens, and so are its key lookups, which
// keeps the key gate (authorize.go) free for keys that work; a user whose
// key works is never delayed; a client with a key that stopped working
// gets its 401 at once unless a flood is on.
//
// Waiting refusals are capped: at most authFailurePending turns are
// handed out ahead of time. A refusal that finds them all taken is
// answered at once, and its connection closed, so that it reserves
// nothing and costs its sender a new connection. The cap bounds both how
// many refusals wait (each holds its request's goroutine and a timer) and
// how long one waits (authFailurePending / authFailureRate); past it the
// bound is no longer the schedule's: a flood of more connections than
// the cap gets its surplus answered as fast as it reconnects. Why not
// hold those too: nothing then bounds how many requests wait, or for how
// long. Why not the earlier bound of 2 s per answer without a turn: it
// bounded each connection, not the server (4,000 connections got 1,790
// answers a second, issue 24).
//
// The bound is the handler's, not per client: the library does not know
// client addresses behind proxies, and a per-address limit belongs in
// front of it.

import (
	"context"
	"sync"
	"time"
)

const (
	authFailureRate    = 100  // refused keys answered per second past the burst, by the whole handler
	authFailureBurst   = 100  // refused keys answered at once
	authFailurePending = 4096 // the most turns handed out ahead: refusals waiting at once (about 41 s of turns)

	authFailureInterval = time.Second / authFailureRate
)

// authThrottle paces the answers to refused keys with GCRA: tat is the
// theoretical arrival time of the next refusal, one schedule for every
// connection.
type authThrottle struct {
	mu  sync.Mutex
	tat time.Time
	now func() time.Time // time.Now unless a test sets it: the rate is real time's
}

// delay reserves the next refusal's turn at now and returns how long its
// answer should wait. When authFailurePending turns are already handed
// out ahead of now it reserves nothing and reports full: the refusal is
// answered at once, outside the schedule.
func (t *authThrottle) delay(now time.Time) (d time.Duration, full bool) {
	const tolerance = authFailureInterval * authFailureBurst
	t.mu.Lock()
	defer t.mu.Unlock()
	next := t.tat
	if next.Before(now) {
		next = now
	}
	next = next.Add(authFailureInterval)
	d = next.Sub(now) - tolerance
	if d > authFailurePending*authFailureInterval {
		return 0, true
	}
	t.tat = next
	return max(d, 0), false
}

// waitRefused holds the answer to a refused key for its turn, or until
// the client goes away. It reports false when the schedule was full and
// the answer should go at once and close its connection.
func (a *api) waitRefused(ctx context.Context) bool {
	now := time.Now
	if a.authFail.now != nil {
		now = a.authFail.now
	}
	d, full := a.authFail.delay(now())
	if full {
		return false
	}
	if d <= 0 {
		return true
	}
	a.pause(ctx, d)
	return true
}

// pause waits d, or until ctx ends: through the sleep seam when a test
// set one, else on a timer. Refusal pacing and 429 pacing both wait here.
func (a *api) pause(ctx context.Context, d time.Duration) {
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
