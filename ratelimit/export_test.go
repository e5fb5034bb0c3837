package ratelimit

import "time"

// NewMemoryAt returns a Memory whose time is now's, for the tests of the
// external package: ratelimittest's clauses move it by hand.
func NewMemoryAt(now func() time.Time) *Memory {
	l := NewMemory()
	l.now = now
	return l
}
