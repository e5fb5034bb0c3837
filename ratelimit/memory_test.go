package ratelimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
)

// clock is a test's time, moved by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestMemory() (*Memory, *clock) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewMemory()
	l.now = c.now
	return l, c
}

var ctx = context.Background()

func TestMemoryForgetsIdleKeys(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	p := Policy{Name: "default", Quota: 10, Window: time.Minute}
	l, c := newTestMemory()
	for i := 0; i < 5000; i++ {
		l.Allow(ctx, fmt.Sprint("old-", i), p)
	}
	is.Equal(l.Len(), 5000)    // every key is active
	c.advance(6 * time.Second) // one interval: each old key's quota is full again
	for i := 0; i < 5000; i++ {
		l.Allow(ctx, fmt.Sprint("new-", i), p)
	}
	is.True(l.Len() <= 5000) // the idle keys were swept
}

// TestMemoryKeepsOnlyAllowedBuckets: Memory keeps an entry for each policy
// name and key that was allowed a request, and none for a refusal or an
// error, so that its memory is bounded by the buckets in use (the
// contract itself is TestMemoryContract's).
func TestMemoryKeepsOnlyAllowedBuckets(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, _ := newTestMemory()
	a := Policy{Name: "a", Quota: 1, Window: time.Minute}
	b := Policy{Name: "b", Quota: 3, Window: time.Minute}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := l.Allow(canceled, "k", a)
	is.True(err != nil) // a canceled context
	_, err = l.Allow(ctx, "k", Policy{Name: "a", Quota: 0, Window: time.Minute})
	is.True(err != nil)  // an invalid policy
	is.Equal(l.Len(), 0) // kept nothing
	l.Allow(ctx, "k", a)
	l.Allow(ctx, "k", b)
	d, _ := l.Allow(ctx, "k", a)
	is.True(!d.Allowed)  // refused
	is.Equal(l.Len(), 2) // one entry per policy name and key
}
