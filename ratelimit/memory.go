package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Memory is a [Limiter] that keeps each bucket's state (one time) in this
// process, for a single-node host. Its state is kept by policy name and
// key. Its memory is bounded by the buckets active within the last
// Window: an entry whose quota is full again is the same as no entry and
// is dropped by a sweep that runs as the map grows, with no goroutine to
// stop. Since the handler asks it only about authenticated requests, the
// keys are the host's own accounts or API keys, never strings an attacker
// can invent. The zero value is not usable; call [NewMemory].
type Memory struct {
	now func() time.Time // time.Now, or a test's clock

	mu        sync.Mutex
	tats      map[bucket]time.Time
	nextSweep int // sweep when the map reaches this size
}

// bucket is what Memory keeps one time for.
type bucket struct{ policy, key string }

var _ Charger = (*Memory)(nil)

// NewMemory returns an empty in-process GCRA limiter.
func NewMemory() *Memory {
	return &Memory{now: time.Now, tats: map[bucket]time.Time{}, nextSweep: minSweep}
}

// minSweep is the map size below which the limiter never sweeps.
const minSweep = 1024

// Allow implements [Limiter]. It returns an error only for a done ctx or
// an invalid p.
func (l *Memory) Allow(ctx context.Context, key string, p Policy) (Decision, error) {
	if err := checkCall(ctx, p); err != nil {
		return Decision{}, fmt.Errorf("ratelimit: allow: %w", err)
	}
	b := bucket{p.Name, key}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	d, tat := p.GCRA(l.tats[b], now)
	if d.Allowed {
		l.tats[b] = tat
		if len(l.tats) >= l.nextSweep {
			l.sweep(now)
		}
	}
	return d, nil
}

// Charge implements [Charger]. It returns an error only for a done ctx,
// an invalid p or n below 1.
func (l *Memory) Charge(ctx context.Context, key string, p Policy, n int) (Decision, error) {
	if err := checkCall(ctx, p); err != nil {
		return Decision{}, fmt.Errorf("ratelimit: charge: %w", err)
	}
	if n < 1 {
		return Decision{}, fmt.Errorf("ratelimit: charge: %d units, want at least 1", n)
	}
	b := bucket{p.Name, key}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	d, tat := p.GCRACharge(l.tats[b], now, n)
	l.tats[b] = tat
	if len(l.tats) >= l.nextSweep {
		l.sweep(now)
	}
	return d, nil
}

// checkCall refuses a done ctx and an invalid p.
func checkCall(ctx context.Context, p Policy) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return p.Validate()
}

// sweep drops every bucket whose quota is full again, and sets the next
// sweep at twice the size left, so sweeps cost O(1) per Allow.
func (l *Memory) sweep(now time.Time) {
	for b, tat := range l.tats {
		if !tat.After(now) {
			delete(l.tats, b)
		}
	}
	l.nextSweep = max(2*len(l.tats), minSweep)
}

// Len returns the number of buckets the limiter holds state for: at most
// those that were allowed a request within their last Window, plus those
// not yet swept.
func (l *Memory) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.tats)
}
