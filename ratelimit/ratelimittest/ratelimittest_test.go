package ratelimittest_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/ratelimit/ratelimittest"
)

// limiter is a GCRA limiter as ratelimit.Memory is, with one of the
// faults below when fault is set. Its time is now's.
type limiter struct {
	now   func() time.Time
	fault string
	mu    *sync.Mutex
	tats  map[bucket]time.Time
}

type bucket struct{ policy, key string }

var _ ratelimit.Charger = (*limiter)(nil)

// shared is the state of every limiter with the fault "shares its buckets
// with every limiter".
var shared = struct {
	mu   sync.Mutex
	tats map[bucket]time.Time
}{tats: map[bucket]time.Time{}}

func newLimiter(now func() time.Time, fault string) *limiter {
	if fault == sharesBuckets {
		return &limiter{now: now, fault: fault, mu: &shared.mu, tats: shared.tats}
	}
	return &limiter{now: now, fault: fault, mu: new(sync.Mutex), tats: map[bucket]time.Time{}}
}

// The faults, each of one clause of the contract, and the limiter with
// none, on the suite's clock and on a server's.
const (
	none         = "none"
	serversClock = "server's clock"
	sharedNodes  = "two nodes over one state"

	chargesRefusals    = "charges refusals"
	oneBucketPerName   = "one bucket for every key"
	oneBucketPerKey    = "one bucket for every policy"
	enforcesKeyQuota   = "enforces KeyQuota"
	dropsKeyQuota      = "answers with the policy without its KeyQuota"
	burstOneMore       = "a burst of one more"
	burstOneLess       = "a burst of one less"
	fasterRate         = "a rate a tenth faster"
	noRetryAfter       = "refuses with no RetryAfter"
	ignoresContext     = "ignores the context"
	spendsWhenDone     = "consumes on a done context"
	bareContextError   = "returns the context's error alone"
	contextOnlyIfNew   = "checks the context only for a new bucket"
	acceptsInvalid     = "accepts an invalid policy"
	spendsOnInvalid    = "consumes on an invalid policy"
	decidesOutsideMu   = "decides outside its lock"
	sharesBuckets      = "shares its buckets with every limiter"
	cutsKeys           = "cuts keys to 256 bytes"
	keepsWallTime      = "reads the suite's clock and keeps the wall clock's time"
	movesNothing       = "moves nothing when the suite moves the time"
	wallClockNoAdvance = "keeps the wall clock's time and lets nothing move it"
	unsharedNodes      = "two nodes that share nothing"
	chargesOne         = "charges one unit whatever it is asked"
	noDebt             = "charges only what is left"
)

// bucket is the bucket of key under p, as the fault keeps it.
func (l *limiter) bucket(key string, p ratelimit.Policy) bucket {
	switch l.fault {
	case oneBucketPerName:
		return bucket{p.Name, ""}
	case oneBucketPerKey:
		return bucket{"", key}
	case cutsKeys:
		return bucket{p.Name, key[:min(len(key), 256)]}
	}
	return bucket{p.Name, key}
}

func (l *limiter) Charge(ctx context.Context, key string, p ratelimit.Policy, n int) (ratelimit.Decision, error) {
	if err := ctx.Err(); err != nil {
		return ratelimit.Decision{}, fmt.Errorf("limiter: charge: %w", err)
	}
	if err := p.Validate(); err != nil {
		return ratelimit.Decision{}, fmt.Errorf("limiter: charge: %w", err)
	}
	if n < 1 {
		return ratelimit.Decision{}, fmt.Errorf("limiter: charge: %d units", n)
	}
	if l.fault == chargesOne {
		n = 1
	}
	b, now := l.bucket(key, p), l.time()
	l.mu.Lock()
	defer l.mu.Unlock()
	d, next := p.GCRACharge(l.tats[b], now, n)
	if burst := p.Interval() * time.Duration(p.Quota); l.fault == noDebt && next.Sub(now) > burst {
		next = now.Add(burst)
		d = p.AllowedDecision(next, now)
	}
	l.tats[b] = next
	return d, nil
}

func (l *limiter) Allow(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	b := l.bucket(key, p)
	if err := ctx.Err(); err != nil && l.fault != ignoresContext {
		switch l.fault {
		case spendsWhenDone:
			l.spend(b, time.Hour)
		case bareContextError:
			return ratelimit.Decision{}, err
		case contextOnlyIfNew:
			if l.has(b) {
				break
			}
			fallthrough
		default:
			return ratelimit.Decision{}, fmt.Errorf("limiter: allow: %w", err)
		}
	}
	if err := p.Validate(); err != nil {
		switch l.fault {
		case acceptsInvalid:
			return ratelimit.Decision{Allowed: true, Policy: p}, nil
		case spendsOnInvalid:
			l.spend(b, time.Hour)
		}
		return ratelimit.Decision{}, fmt.Errorf("limiter: allow: %w", err)
	}
	q := p // the policy the decision is made under
	switch l.fault {
	case enforcesKeyQuota:
		if p.KeyQuota > 0 {
			q.Quota = p.KeyQuota
		}
	case burstOneMore, burstOneLess:
		// The same interval, with a burst one longer or shorter (of
		// one at least).
		q.Quota = p.Quota + 1
		if l.fault == burstOneLess {
			q.Quota = max(p.Quota-1, 1)
		}
		q.Window = p.Interval() * time.Duration(q.Quota)
	case fasterRate:
		q.Window = p.Window * 9 / 10
	}
	now := l.time()
	l.mu.Lock()
	tat := l.tats[b]
	if l.fault == decidesOutsideMu {
		l.mu.Unlock()
		runtime.Gosched() // another call reads the same time meanwhile
		l.mu.Lock()
	}
	d, next := q.GCRA(tat, now)
	if d.Allowed {
		l.tats[b] = next
	} else if l.fault == chargesRefusals {
		l.tats[b] = tat.Add(p.Interval())
	}
	l.mu.Unlock()
	d.Policy = p
	d.Remaining = min(d.Remaining, p.Quota-1)
	switch {
	case l.fault == dropsKeyQuota:
		d.Policy.KeyQuota = 0
	case l.fault == noRetryAfter && !d.Allowed:
		d.RetryAfter = 0
	}
	return d, nil
}

// time is the limiter's now, read as its fault says.
func (l *limiter) time() time.Time {
	switch l.fault {
	case keepsWallTime:
		l.now()
		return time.Now()
	}
	return l.now()
}

// has reports whether b has state.
func (l *limiter) has(b bucket) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.tats[b]
	return ok
}

// spend takes d of b's budget.
func (l *limiter) spend(b bucket, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tat := l.tats[b]
	if now := l.now(); tat.Before(now) {
		tat = now
	}
	l.tats[b] = tat.Add(d)
}

// shift makes every bucket's time d older, as a limiter on a server's
// clock does in its Clock.OnAdvance.
func (l *limiter) shift(_ context.Context, d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for b, tat := range l.tats {
		l.tats[b] = tat.Add(-d)
	}
	return nil
}

// open makes limiters with fault: on the suite's clock, or for the faults
// of a limiter on a server's clock, on the wall clock.
func open(fault string) ratelimittest.Open {
	return func(t *testing.T, clock *ratelimittest.Clock) ratelimit.Limiter {
		switch fault {
		case serversClock, movesNothing:
			l := newLimiter(time.Now, fault)
			clock.OnAdvance(func(ctx context.Context, d time.Duration) error {
				if fault == movesNothing {
					return nil
				}
				return l.shift(ctx, d)
			})
			return l
		case wallClockNoAdvance:
			return newLimiter(time.Now, fault)
		case unsharedNodes:
			return ratelimittest.Nodes(newLimiter(clock.Now, none), newLimiter(clock.Now, none))
		case sharedNodes:
			a := newLimiter(clock.Now, none)
			b := *a // another node over the same state
			return ratelimittest.Nodes(a, &b)
		}
		return newLimiter(clock.Now, fault)
	}
}

// TestSuitePasses: the limiter without a fault passes every clause,
// skipping none: on the suite's clock, durations checked exactly; on the
// wall clock, as a limiter on a database's or Redis's clock keeps time,
// making its state older when the suite moves time, durations checked
// within a minute; and as two nodes over its state, through Nodes.
func TestSuitePasses(t *testing.T) {
	t.Parallel()
	out := children(t)
	for _, name := range []string{none, serversClock, sharedNodes} {
		if !ended(out, "PASS", name, "") || strings.Contains(out, "--- SKIP: "+subtest(name, "")+"/") {
			t.Errorf("the suite on the limiter %q: failed or skipped a clause:\n%s", name, out)
		}
	}
}

// TestSuiteWithMaxKey: a limiter that refuses keys over 300 bytes passes
// with WithMaxKey(300), and fails with WithMaxKey(301) in the clause that
// checks the limit, on the key within it that it refused.
func TestSuiteWithMaxKey(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	out := children(t)
	is.True(ended(out, "PASS", maxKeyAt, ""))                                                   // the limit said
	is.True(ended(out, "FAIL", maxKeyAbove, "LongKeys"))                                        // a limit above the limiter's
	is.True(strings.Contains(out, "(301 bytes), default): limiter: allow: a key of 301 bytes")) // on the key within it, refused
	is.True(ended(out, "PASS", maxKeyAbove, "Keys"))                                            // and nowhere else
}

// refusesLongKeys is a limiter that refuses keys over n bytes.
type refusesLongKeys struct {
	*limiter
	n int
}

func (l refusesLongKeys) Allow(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	if len(key) > l.n {
		return ratelimit.Decision{}, fmt.Errorf("limiter: allow: a key of %d bytes", len(key))
	}
	return l.limiter.Allow(ctx, key, p)
}

// brokenLimiters each break one clause of the contract. The suite must
// fail on each in the clause named beside it, and pass another.
var brokenLimiters = map[string]struct{ failsIn, passesIn string }{
	chargesRefusals:  {"RefusalsAreFree", "Keys"},
	oneBucketPerName: {"Keys", "Policies"},
	oneBucketPerKey:  {"Policies", "Keys"},
	enforcesKeyQuota: {"KeyQuota", "Burst"},
	dropsKeyQuota:    {"KeyQuota", "Burst"},
	burstOneMore:     {"Bounded", "CanceledInFlight"},
	burstOneLess:     {"Burst", "CanceledInFlight"},
	fasterRate:       {"Bounded", "Keys"},
	noRetryAfter:     {"Burst", "Context"},
	ignoresContext:   {"Context", "Burst"},
	spendsWhenDone:   {"Context", "Burst"},
	bareContextError: {"Context", "Burst"},
	contextOnlyIfNew: {"CanceledInFlight", "Context"},
	acceptsInvalid:   {"InvalidPolicy", "Burst"},
	spendsOnInvalid:  {"InvalidPolicy", "Burst"},
	decidesOutsideMu: {"Concurrent", "Burst"},
	sharesBuckets:    {"Isolated", "Burst"},
	cutsKeys:         {"LongKeys", "Keys"},
	keepsWallTime:    {"Burst", "Keys"},
	movesNothing:     {"Burst", "Keys"},
	unsharedNodes:    {"Concurrent", "Context"},
	chargesOne:       {"Charge", "Burst"},
	noDebt:           {"Charge", "Burst"},
}

func TestSuiteCatchesBrokenLimiters(t *testing.T) {
	t.Parallel()
	out := children(t)
	for fault, b := range brokenLimiters {
		if !ended(out, "FAIL", fault, b.failsIn) || !ended(out, "PASS", fault, b.passesIn) {
			t.Errorf("the suite on a limiter that %s: want a failure in %s and a pass in %s:\n%s", fault, b.failsIn, b.passesIn, out)
		}
	}
}

// TestSuiteWithoutAClock: a limiter that neither reads the suite's clock
// nor lets it move its buckets passes, the five clauses that move time
// skipped, saying why.
func TestSuiteWithoutAClock(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	out := children(t)
	is.True(ended(out, "PASS", wallClockNoAdvance, "")) // the suite passes
	for _, clause := range []string{"Burst", "RefusalsAreFree", "Bounded", "Concurrent", "Charge"} {
		is.True(ended(out, "SKIP", wallClockNoAdvance, clause)) // a clause that moves time skips
	}
	is.True(strings.Contains(out, "neither reads the suite's clock (Clock.Now) nor lets it move its buckets (Clock.OnAdvance)")) // saying why
	is.Equal(strings.Count(out, "--- SKIP: "+subtest(wallClockNoAdvance, "")+"/"), 5)                                            // and no other
}

// The runs on a limiter that refuses keys over 300 bytes.
const (
	maxKeyAt    = "refuses keys over 300 bytes, WithMaxKey(300)"
	maxKeyAbove = "refuses keys over 300 bytes, WithMaxKey(301)"
)

// TestHelperLimiters runs the suite on every limiter above, each a
// subtest named by its fault, when children asks for it in a child
// process.
func TestHelperLimiters(t *testing.T) {
	if os.Getenv("RATELIMITTEST_CHILD") == "" {
		return // only meaningful in the child process
	}
	runs := map[string]func(t *testing.T){
		maxKeyAt: func(t *testing.T) {
			ratelimittest.Run(t, func(t *testing.T, clock *ratelimittest.Clock) ratelimit.Limiter {
				return refusesLongKeys{newLimiter(clock.Now, none), 300}
			}, ratelimittest.WithMaxKey(300))
		},
		maxKeyAbove: func(t *testing.T) {
			ratelimittest.Run(t, func(t *testing.T, clock *ratelimittest.Clock) ratelimit.Limiter {
				return refusesLongKeys{newLimiter(clock.Now, none), 300}
			}, ratelimittest.WithMaxKey(301))
		},
	}
	for _, name := range append([]string{none, serversClock, sharedNodes, wallClockNoAdvance}, slices.Collect(maps.Keys(brokenLimiters))...) {
		runs[name] = func(t *testing.T) { ratelimittest.Run(t, open(name)) }
	}
	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t)
		})
	}
}

// children runs TestHelperLimiters in a child process, once for all the
// tests, and returns its output: one process for every limiter, since
// starting one under -race costs more than the suite.
var children = func() func(t *testing.T) string {
	out := sync.OnceValue(func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLimiters$", "-test.v")
		cmd.Env = append(os.Environ(), "RATELIMITTEST_CHILD=1")
		out, _ := cmd.CombinedOutput() // it fails: most of its limiters are broken
		return string(out)
	})
	return func(t *testing.T) string {
		t.Helper()
		o := out()
		if !strings.Contains(o, "=== RUN   TestHelperLimiters") {
			t.Fatalf("the child process ran no suite:\n%s", o)
		}
		return o
	}
}()

// subtest is the name go test prints for clause of the run on limiter
// name, or for the run itself when clause is "".
func subtest(name, clause string) string {
	s := "TestHelperLimiters/" + strings.ReplaceAll(name, " ", "_")
	if clause != "" {
		s += "/" + clause
	}
	return s
}

// ended reports whether out shows the run on limiter name (clause of it,
// unless "") ended with result: PASS, FAIL or SKIP.
func ended(out, result, name, clause string) bool {
	return strings.Contains(out, "--- "+result+": "+subtest(name, clause)+" ")
}
