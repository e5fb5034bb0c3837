package formsapi

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// clock is a test's time, moved by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestLimiter(p RateLimitPolicy) (*MemoryRateLimiter, *clock) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewMemoryRateLimiter(p)
	l.now = c.now
	return l, c
}

func TestMemoryRateLimiterBurstThenRate(t *testing.T) {
	t.Parallel()
	p := RateLimitPolicy{Name: "default", Quota: 5, Window: 10 * time.Second}
	l, c := newTestLimiter(p)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		d, err := l.Allow(ctx, "account:a")
		if err != nil || !d.Allowed || d.Remaining != 4-i || d.RetryAfter != 0 {
			t.Fatalf("request %d of a burst: %+v, %v", i, d, err)
		}
		if want := time.Duration(i+1) * 2 * time.Second; d.Reset != want {
			t.Errorf("request %d: Reset %s, want %s", i, d.Reset, want)
		}
	}
	d, _ := l.Allow(ctx, "account:a")
	if d.Allowed || d.Remaining != 0 || d.RetryAfter != 2*time.Second || d.Reset != 10*time.Second {
		t.Fatalf("the sixth request at once: %+v, want refused, retry after 2s", d)
	}
	// A refusal costs nothing: after RetryAfter exactly one more fits.
	c.advance(2*time.Second - time.Nanosecond)
	if d, _ := l.Allow(ctx, "account:a"); d.Allowed {
		t.Fatalf("allowed before RetryAfter: %+v", d)
	}
	c.advance(time.Nanosecond)
	if d, _ := l.Allow(ctx, "account:a"); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("refused at RetryAfter: %+v", d)
	}
	if d, _ := l.Allow(ctx, "account:a"); d.Allowed {
		t.Fatalf("two requests allowed after one interval: %+v", d)
	}
	// Another key has its own budget.
	if d, _ := l.Allow(ctx, "account:b"); !d.Allowed || d.Remaining != 4 {
		t.Fatalf("another key: %+v", d)
	}
}

func TestMemoryRateLimiterStaysWithinBound(t *testing.T) {
	t.Parallel()
	for _, p := range []RateLimitPolicy{
		{Name: "a", Quota: 100, Window: time.Minute},
		{Name: "b", Quota: 7, Window: 3 * time.Second}, // an interval that does not divide evenly
		{Name: "c", Quota: 1, Window: time.Second},
	} {
		l, c := newTestLimiter(p)
		start := c.t
		allowed := 0
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 20000; i++ {
			c.advance(time.Duration(r.IntN(int(p.Interval() / 2))))
			if d, _ := l.Allow(context.Background(), "k"); d.Allowed {
				allowed++
			}
			elapsed := c.t.Sub(start)
			bound := p.Quota + int(int64(p.Quota)*int64(elapsed)/int64(p.Window))
			if allowed > bound {
				t.Fatalf("%+v: %d allowed in %s, bound %d", p, allowed, elapsed, bound)
			}
		}
		// Requests come four times as fast as the rate: the limiter must
		// not be much stingier than the rate either (a quota of 1 banks
		// nothing, so up to a gap per request is lost).
		if min := int(int64(p.Quota) * int64(c.t.Sub(start)) / int64(p.Window) * 3 / 4); allowed < min {
			t.Errorf("%+v: only %d allowed, the rate gives %d", p, allowed, min)
		}
	}
}

func TestMemoryRateLimiterForgetsIdleKeys(t *testing.T) {
	t.Parallel()
	l, c := newTestLimiter(RateLimitPolicy{Name: "default", Quota: 10, Window: time.Minute})
	ctx := context.Background()
	for i := 0; i < 5000; i++ {
		l.Allow(ctx, fmt.Sprint("old-", i))
	}
	if n := l.Len(); n != 5000 {
		t.Fatalf("Len %d, want 5000 while every key is active", n)
	}
	c.advance(6 * time.Second) // one interval: each old key's quota is full again
	for i := 0; i < 5000; i++ {
		l.Allow(ctx, fmt.Sprint("new-", i))
	}
	if n := l.Len(); n > 5000 {
		t.Fatalf("Len %d after the old keys went idle, want at most 5000", n)
	}
}

func TestMemoryRateLimiterRefund(t *testing.T) {
	t.Parallel()
	l, _ := newTestLimiter(RateLimitPolicy{Name: "default", Quota: 2, Window: time.Second})
	ctx := context.Background()
	l.Allow(ctx, "k")
	l.Allow(ctx, "k")
	if d, _ := l.Allow(ctx, "k"); d.Allowed {
		t.Fatal("a third request within the burst of two was allowed")
	}
	if err := l.Refund(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.Allow(ctx, "k"); !d.Allowed {
		t.Fatal("a refunded unit was not given back")
	}
	for i := 0; i < 5; i++ {
		l.Refund(ctx, "k")
	}
	allowed := 0
	for i := 0; i < 5; i++ {
		if d, _ := l.Allow(ctx, "k"); d.Allowed {
			allowed++
		}
	}
	if allowed != 2 {
		t.Errorf("after many refunds %d requests were allowed at once, want the quota of 2", allowed)
	}
}

func TestMemoryRateLimiterCanceledContext(t *testing.T) {
	t.Parallel()
	l, _ := newTestLimiter(RateLimitPolicy{Name: "default", Quota: 2, Window: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Allow(ctx, "k"); err == nil {
		t.Fatal("Allow with a canceled context returned no error")
	}
}

func TestRateLimitPolicyValidate(t *testing.T) {
	t.Parallel()
	good := RateLimitPolicy{Name: "default", Quota: 100, Window: time.Minute}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []RateLimitPolicy{
		{Name: "", Quota: 1, Window: time.Second},
		{Name: `a"b`, Quota: 1, Window: time.Second},
		{Name: "a b", Quota: 1, Window: time.Second},
		{Name: "a~b", Quota: 1, Window: time.Second},
		{Name: "ok", Quota: 0, Window: time.Second},
		{Name: "ok", Quota: 1, Window: 1500 * time.Millisecond},
		{Name: "ok", Quota: 1, Window: 0},
		{Name: "ok", Quota: 1, Window: 400 * 24 * time.Hour},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
}

func TestRateLimitHeaders(t *testing.T) {
	t.Parallel()
	p := RateLimitPolicy{Name: "default", Quota: 100, Window: time.Minute}
	for _, c := range []struct {
		d          RateLimitDecision
		rl, retry  string
		wantPolicy string
	}{
		{RateLimitDecision{Allowed: true, Remaining: 99, Reset: 600 * time.Millisecond, Policy: p}, `"default";r=99;t=1`, "", `"default";q=100;w=60`},
		{RateLimitDecision{Allowed: true, Remaining: 0, Reset: time.Minute, Policy: p}, `"default";r=0;t=60`, "", `"default";q=100;w=60`},
		{RateLimitDecision{Remaining: 0, Reset: time.Minute, RetryAfter: 1200 * time.Millisecond, Policy: p}, `"default";r=0;t=2`, "2", `"default";q=100;w=60`},
		{RateLimitDecision{RetryAfter: time.Microsecond, Policy: p}, `"default";r=0;t=1`, "1", `"default";q=100;w=60`},
	} {
		h := http.Header{}
		setRateLimitHeaders(h, c.d)
		if got := h.Values("RateLimit"); len(got) != 1 || got[0] != c.rl {
			t.Errorf("%+v: RateLimit %q, want %q", c.d, got, c.rl)
		}
		if got := h.Values("RateLimit-Policy"); len(got) != 1 || got[0] != c.wantPolicy {
			t.Errorf("%+v: RateLimit-Policy %q, want %q", c.d, got, c.wantPolicy)
		}
		if got := h.Get("Retry-After"); got != c.retry {
			t.Errorf("%+v: Retry-After %q, want %q", c.d, got, c.retry)
		}
	}
}
