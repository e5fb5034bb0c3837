package storetest

import (
	"sync"
	"time"
)

// Clock is a clock that a test moves by hand, so that whatever depends on
// the time (key expiry, a key's CreatedAt, RevokedAt and LastUsedAt, the
// CreatedAt of a form or submission added without one) is checked
// exactly and no test waits for time to pass. It is safe for concurrent
// use.
//
// The grant and write clauses of Run give each clause a fresh Clock in
// Seed.Clock. A factory whose store can take a clock passes it on:
//
//	s := memstore.New(memstore.WithClock(seed.Clock.Now))
//
// A store given the clock must use it for all of the times above. The
// clauses that judge time check them exactly when the store has read the
// clock, and otherwise either skip, saying why (key expiry, which would
// take an hour of waiting), or check against a window around the wall
// clock. A nil *Clock reads the wall clock, so a factory may pass
// seed.Clock.Now whatever the suite.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	reads int
}

// NewClock returns a clock that stands at start until moved.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start}
}

// newClock is the clock a clause starts with: the wall clock's time to
// the second, so that a key given an ExpiresAt after it passes
// formsapi.Limits.PrepareKeyOptions, which compares with the wall clock.
func newClock() *Clock {
	return NewClock(time.Now().UTC().Truncate(time.Second))
}

// Now returns the clock's time; on a nil Clock, time.Now().
func (c *Clock) Now() time.Time {
	if c == nil {
		return time.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// peek returns the clock's time without counting a read.
func (c *Clock) peek() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// read reports whether anyone has read the clock: a store that never did
// keeps time by another.
func (c *Clock) read() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads > 0
}
