// Package ratelimittest holds any [ratelimit.Limiter] to the contract the
// handler relies on: [Run] checks one clause of ratelimit.Limiter's doc
// per subtest, in parallel, each on a fresh limiter, with time moved by
// hand rather than waited for. This module's three limiters
// (ratelimit.Memory, pgstore's RateLimiter and redislimit's) pass it.
//
// A host that writes a limiter of its own (over another database, a
// cache of its own) runs it from a test, with a factory that gives each
// clause a limiter sharing no state with any other and hands it the
// clause's [Clock]:
//
//	func TestLimiter(t *testing.T) {
//		ratelimittest.Run(t, func(t *testing.T, clock *ratelimittest.Clock) ratelimit.Limiter {
//			l := mylimiter.New(mylimiter.WithClock(clock.Now))
//			t.Cleanup(l.Close)
//			return l
//		})
//	}
//
// A limiter that keeps time by its server's clock registers, with
// [Clock.OnAdvance], how to make its stored state older instead. A
// limiter shared by a fleet is run again on [Nodes] of two of its nodes,
// which must keep the contract together. [Benchmark] measures a limiter's Allow the way BENCHMARKS.md measures
// this module's.
package ratelimittest

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi/ratelimit"
)

// Open makes a fresh limiter for one clause of [Run], with no state, and
// hands it clock (see [Clock]). Run calls it once per clause, and twice in
// the clause that checks that two limiters it makes share nothing:
// clauses run in parallel, and the time one moves must move no other's
// buckets. Cleanup belongs in t.Cleanup.
type Open func(t *testing.T, clock *Clock) ratelimit.Limiter

// Option changes how [Run] checks a limiter.
type Option func(*config)

type config struct {
	maxKey int // see WithMaxKey; 0: not said
}

// WithMaxKey says that the limiter refuses, with an error, keys longer
// than n bytes, as the contract allows for keys longer than a few hundred
// bytes: Run then checks that keys of n bytes are decided, each its own
// bucket, and that a key of n+1 bytes is an error that consumes nothing.
// Without it, Run checks only that long keys are never cut short into
// another key's bucket (each is an error or a bucket of its own).
func WithMaxKey(n int) Option {
	return func(c *config) { c.maxKey = n }
}

// Clock is the time of the limiter of one clause, which the clause moves
// by hand so that no clause waits for time to pass. Open hands it on in
// one of two ways:
//
//   - A limiter that takes a clock reads Now for every decision (as
//     ratelimit.Memory does in its own tests). The clauses then check
//     every duration exactly.
//   - A limiter that keeps time by its server (PostgreSQL's clock,
//     Redis's) registers with OnAdvance how to make each bucket's stored
//     state older. Real time passes too, then: the clauses use policies
//     whose interval is 20 minutes or more and check each duration within
//     a minute below what they expect.
//
// For a limiter that does neither, the clauses that need time to pass
// skip, saying why. It is safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	reads   int
	advance func(ctx context.Context, d time.Duration) error
}

// start is where every clause's Clock starts: a fixed time, so that a
// failure shows the same times on every run.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Now returns the clause's time, which stands still until the clause
// moves it.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.now
}

// OnAdvance registers f, which makes the state the limiter keeps for
// every one of its buckets d older, as if d had passed: for a bucket kept
// as GCRA's theoretical arrival time, that time less d. The clause calls
// it each time it moves the clock, and fails if it returns an error. A
// bucket with no state has none to move.
func (c *Clock) OnAdvance(f func(ctx context.Context, d time.Duration) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance = f
}

// exact reports whether the limiter reads the clock, which then is its
// only time.
func (c *Clock) exact() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads > 0
}

// mover returns the function registered with OnAdvance, or nil.
func (c *Clock) mover() func(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.advance
}

// move moves the clock's own time forward by d.
func (c *Clock) move(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Run checks the limiter that open makes against the contract of
// ratelimit.Limiter, each clause a subtest on a fresh limiter, run in
// parallel:
//
//   - Burst: a full quota at once, then refusals, with the Remaining,
//     Reset and RetryAfter the contract defines, and the whole burst,
//     and no more, back after an idle window.
//   - RefusalsAreFree: a refused request consumes nothing: just before
//     RetryAfter still refused, at RetryAfter one more, however many
//     refusals came between, and one interval gives back one request.
//   - Keys: each key its own budget, keys that share a prefix or a ":"
//     too, up to a key of 256 bytes.
//   - Policies: the policy travels with each call; the same key under
//     two names (an account's policy and its PerKey) is two budgets.
//   - KeyQuota: p.KeyQuota is the caller's business: the limiter enforces
//     p.Quota.
//   - Bounded: requests at random times, with idle stretches: over every
//     stretch of time d, at most Quota + Quota*d/Window allowed, and not
//     much fewer than the rate gives.
//   - Concurrent: calls for one bucket from many goroutines allow exactly
//     the burst, each with a Remaining of its own, then exactly what the
//     time moved gives back.
//   - InvalidPolicy: a policy that Validate refuses is an error and
//     consumes nothing, under the name of a valid one too.
//   - LongKeys: long keys are never cut short into a shared bucket; with
//     [WithMaxKey], the limit is exact.
//   - Context: a done context (canceled, or past its deadline) is an
//     error wrapping its ctx.Err(), not ErrOverloaded, with context in
//     its text, and consumes nothing.
//   - CanceledInFlight: calls under way when their context is canceled
//     return a decision or an error wrapping context.Canceled, and every
//     later one an error.
//   - Isolated: two limiters open makes share no bucket (which the
//     clauses running in parallel need).
//   - Charge, on a ratelimit.Charger (skipped otherwise): a charge takes
//     its units whatever is left, the bucket owes the rest and Allow
//     refuses until it has come back; each decision says what is left;
//     n below 1, an invalid policy and a done context are errors that
//     charge nothing.
//
// Every decision a clause gets is checked against the contract's
// invariants: Policy is p; Remaining, Reset and RetryAfter are never
// negative; an allowed decision has a RetryAfter of zero, a Remaining
// below Quota and a Reset above zero and at most a full burst; a refused
// one has a Remaining of 0 and a RetryAfter above zero and at most Reset.
//
// The node's own queue (ErrOverloaded) and a dependency that hangs are
// left to each limiter's own tests: only a limiter that has them can
// make them happen.
func Run(t *testing.T, open Open, opts ...Option) {
	c := &config{}
	for _, o := range opts {
		o(c)
	}
	for _, cl := range clauses {
		t.Run(cl.name, func(t *testing.T) {
			t.Parallel()
			cl.check(t, newSubject(t, open, c))
		})
	}
}

// Nodes returns a limiter that passes each call to the next of nodes in
// turn, as a load balancer spreads one client's requests over a fleet.
// Given limiters of several nodes over the same state (clients of one
// Redis with one prefix, pools on one schema), [Run] on it checks that
// the fleet together keeps the contract: one burst and one rate for
// every bucket, however the calls are spread. It panics without nodes.
// When every node is a ratelimit.Charger, so is the limiter it returns,
// and charges are spread the same way.
func Nodes(nodes ...ratelimit.Limiter) ratelimit.Limiter {
	if len(nodes) == 0 {
		panic("ratelimittest: Nodes()")
	}
	f := &fleet{nodes: nodes}
	for _, n := range nodes {
		if _, ok := n.(ratelimit.Charger); !ok {
			return f
		}
	}
	return chargingFleet{f}
}

type fleet struct {
	nodes []ratelimit.Limiter
	next  atomic.Uint64
}

// node returns the next node in turn.
func (f *fleet) node() ratelimit.Limiter {
	return f.nodes[(f.next.Add(1)-1)%uint64(len(f.nodes))]
}

func (f *fleet) Allow(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	return f.node().Allow(ctx, key, p)
}

// chargingFleet is a fleet of ratelimit.Chargers.
type chargingFleet struct{ *fleet }

func (f chargingFleet) Charge(ctx context.Context, key string, p ratelimit.Policy, n int) (ratelimit.Decision, error) {
	return f.node().(ratelimit.Charger).Charge(ctx, key, p, n)
}

// Benchmark measures l.Allow under ctx over keys keys from parallel
// goroutines (b.RunParallel), with a policy that never refuses, and
// reports allocations: what one decision costs the node, apart from any
// refusal. It resets the timer before the first call and stops it after
// the last, so that the caller may report its dependency's cost
// (b.ReportMetric) from readings taken around it. An error fails b.
func Benchmark(b *testing.B, ctx context.Context, l ratelimit.Limiter, keys int) {
	b.Helper()
	p := ratelimit.Policy{Name: "default", Quota: 1 << 30, Window: time.Second}
	names := make([]string, keys)
	for i := range names {
		names[i] = "account:" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if _, err := l.Allow(ctx, names[i%len(names)], p); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
}
