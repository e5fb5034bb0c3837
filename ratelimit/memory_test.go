package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
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

func TestMemoryBurstThenRate(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	p := Policy{Name: "default", Quota: 5, Window: 10 * time.Second}
	l, c := newTestMemory()
	for i := 0; i < 5; i++ {
		d, err := l.Allow(ctx, "account:a", p)
		if err != nil || !d.Allowed || d.Remaining != 4-i || d.RetryAfter != 0 || d.Policy != p {
			t.Errorf("request %d of a burst: %+v, %v", i, d, err)
		}
		if want := time.Duration(i+1) * 2 * time.Second; d.Reset != want {
			t.Errorf("request %d: Reset %s, want %s", i, d.Reset, want)
		}
	}
	d, err := l.Allow(ctx, "account:a", p)
	is.NoErr(err)
	is.True(!d.Allowed)                        // the sixth request at once is refused
	is.Equal(d.Remaining, 0)                   // with nothing left
	is.Equal(d.RetryAfter, 2*time.Second)      // one interval to wait
	is.Equal(d.Reset, 10*time.Second)          // and a window until the quota is full
	c.advance(2*time.Second - time.Nanosecond) // a refusal costs nothing: just before RetryAfter...
	d, _ = l.Allow(ctx, "account:a", p)
	is.True(!d.Allowed) // ...still refused
	c.advance(time.Nanosecond)
	d, _ = l.Allow(ctx, "account:a", p)
	is.True(d.Allowed)       // at RetryAfter exactly one more fits
	is.Equal(d.Remaining, 0) // and no more
	d, _ = l.Allow(ctx, "account:a", p)
	is.True(!d.Allowed) // two requests are never allowed after one interval
	d, _ = l.Allow(ctx, "account:b", p)
	is.True(d.Allowed)       // another key
	is.Equal(d.Remaining, 4) // has its own budget
}

func TestMemoryStaysWithinBound(t *testing.T) {
	t.Parallel()
	for _, p := range []Policy{
		{Name: "a", Quota: 100, Window: time.Minute},
		{Name: "b", Quota: 7, Window: 3 * time.Second}, // an interval that does not divide evenly
		{Name: "c", Quota: 1, Window: time.Second},
	} {
		l, c := newTestMemory()
		start := c.t
		allowed := 0
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 20000; i++ {
			c.advance(time.Duration(r.IntN(int(p.Interval() / 2))))
			if d, _ := l.Allow(ctx, "k", p); d.Allowed {
				allowed++
			}
			elapsed := c.t.Sub(start)
			bound := p.Quota + int(int64(p.Quota)*int64(elapsed)/int64(p.Window))
			if allowed > bound {
				t.Errorf("%+v: %d allowed in %s, bound %d", p, allowed, elapsed, bound)
				break
			}
		}
		// Requests come four times as fast as the rate: the limiter must
		// not be much stingier than the rate either (a quota of 1 banks
		// nothing, so up to a gap per request is lost).
		if least := int(int64(p.Quota) * int64(c.t.Sub(start)) / int64(p.Window) * 3 / 4); allowed < least {
			t.Errorf("%+v: only %d allowed, the rate gives %d", p, allowed, least)
		}
	}
}

// TestMemoryPoliciesAreSeparate: one limiter serves buckets of several
// policies; the same key under two names is two budgets.
func TestMemoryPoliciesAreSeparate(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, _ := newTestMemory()
	a := Policy{Name: "a", Quota: 1, Window: time.Minute}
	b := Policy{Name: "b", Quota: 3, Window: time.Minute}
	d, _ := l.Allow(ctx, "k", a)
	is.True(d.Allowed) // a's first
	d, _ = l.Allow(ctx, "k", b)
	is.True(d.Allowed)       // b's first, although a used the key
	is.Equal(d.Remaining, 2) // from b's own quota
	is.Equal(d.Policy, b)    // under b
	d, _ = l.Allow(ctx, "k", a)
	is.True(!d.Allowed) // a's second is refused
	is.Equal(l.Len(), 2)
}

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

func TestMemoryErrors(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, _ := newTestMemory()
	p := Policy{Name: "default", Quota: 1, Window: time.Second}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := l.Allow(canceled, "k", p)
	is.True(err != nil) // a canceled context is an error
	is.True(strings.Contains(err.Error(), "context canceled"))
	_, err = l.Allow(ctx, "k", Policy{Name: "bad", Quota: 0, Window: time.Second})
	is.True(err != nil)  // so is an invalid policy
	is.Equal(l.Len(), 0) // and neither kept any state
	d, err := l.Allow(ctx, "k", p)
	is.NoErr(err)
	is.True(d.Allowed) // the key's quota is whole
}

// TestMemoryCharge: a charge takes its units whatever is left, so a
// bucket may owe units, and Allow refuses until they have come back at
// the policy's rate; the decision shows what is left after it.
func TestMemoryCharge(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	p := Policy{Name: "default", Quota: 5, Window: 10 * time.Second} // one every 2 s
	l, c := newTestMemory()
	d, err := l.Allow(ctx, "account:a", p)
	is.NoErr(err)
	is.Equal(d.Remaining, 4)
	d, err = l.Charge(ctx, "account:a", p, 3)
	is.NoErr(err)
	is.True(d.Allowed)               // a charge is never refused
	is.Equal(d.Remaining, 1)         // 1 + 3 of 5 taken
	is.Equal(d.Reset, 8*time.Second) // four intervals until the quota is whole
	is.Equal(d.Policy, p)            // under p
	d, err = l.Charge(ctx, "account:a", p, 4)
	is.NoErr(err)
	is.Equal(d.Remaining, 0)          // owing three units
	is.Equal(d.Reset, 16*time.Second) // eight intervals
	d, _ = l.Allow(ctx, "account:a", p)
	is.True(!d.Allowed)                   // refused while it owes
	is.Equal(d.RetryAfter, 8*time.Second) // until the debt and one unit have come back
	c.advance(8 * time.Second)
	d, _ = l.Allow(ctx, "account:a", p)
	is.True(d.Allowed) // then served
	d, err = l.Charge(ctx, "account:b", p, 2)
	is.NoErr(err)
	is.Equal(d.Remaining, 3) // a bucket never seen is charged from a whole quota
	for _, n := range []int{0, -1} {
		_, err := l.Charge(ctx, "account:a", p, n)
		is.True(err != nil) // at least one unit
	}
	_, err = l.Charge(ctx, "account:a", Policy{}, 1)
	is.True(err != nil) // an invalid policy
}
