package ratelimittest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi/ratelimit"
)

// clauses are Run's subtests, in the order Run documents them.
var clauses = []struct {
	name  string
	check func(t *testing.T, s *subject)
}{
	{"Burst", burst},
	{"RefusalsAreFree", refusalsAreFree},
	{"Keys", keys},
	{"Policies", policies},
	{"KeyQuota", keyQuota},
	{"Bounded", bounded},
	{"Concurrent", concurrent},
	{"InvalidPolicy", invalidPolicy},
	{"LongKeys", longKeys},
	{"Context", doneContext},
	{"CanceledInFlight", canceledInFlight},
	{"Isolated", isolated},
	{"Charge", charge},
}

// slack is how far below the expected duration a limiter on its server's
// clock may be: the real time a clause takes, which passes on that clock
// too. Every policy a clause moves time for has an interval of 20 minutes
// or more, so that the real time changes no decision.
const slack = time.Minute

// subject is one clause's limiter, with its clock.
type subject struct {
	l     ratelimit.Limiter
	clock *Clock
	open  Open
	cfg   *config
}

func newSubject(t *testing.T, open Open, cfg *config) *subject {
	clock := &Clock{now: start}
	return &subject{l: open(t, clock), clock: clock, open: open, cfg: cfg}
}

// decide asks the limiter and checks a decision against the contract's
// invariants; it may run on any goroutine.
func (s *subject) decide(t *testing.T, ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	t.Helper()
	d, err := s.l.Allow(ctx, key, p)
	if err == nil {
		if bad := invariants(d, p); bad != "" {
			t.Errorf("Allow(%s, %s): %s: %s", short(key), p.Name, show(d), bad)
		}
	}
	return d, err
}

// allow is decide for a call that must be decided.
func (s *subject) allow(t *testing.T, key string, p ratelimit.Policy) ratelimit.Decision {
	t.Helper()
	d, err := s.decide(t, t.Context(), key, p)
	if err != nil {
		t.Fatalf("Allow(%s, %s): %v", short(key), p.Name, err)
	}
	return d
}

// invariants returns what is wrong with d, a decision under p, whatever
// came before it, or "".
func invariants(d ratelimit.Decision, p ratelimit.Policy) string {
	var bad []string
	if d.Policy != p {
		bad = append(bad, fmt.Sprintf("Policy %+v, want the policy passed, %+v", d.Policy, p))
	}
	if d.Remaining < 0 || d.Reset < 0 || d.RetryAfter < 0 {
		bad = append(bad, "a negative Remaining, Reset or RetryAfter")
	}
	burst := p.Interval() * time.Duration(p.Quota)
	if d.Allowed {
		if d.RetryAfter != 0 {
			bad = append(bad, "allowed with a RetryAfter")
		}
		if d.Remaining > p.Quota-1 {
			bad = append(bad, fmt.Sprintf("allowed with a Remaining above the quota %d less the request's own unit", p.Quota))
		}
		if d.Reset <= 0 || d.Reset > burst {
			bad = append(bad, fmt.Sprintf("allowed with a Reset outside (0, %s]: a unit was spent, and a full burst comes back within a window", burst))
		}
	} else {
		if d.Remaining != 0 {
			bad = append(bad, "refused with a Remaining")
		}
		if d.RetryAfter <= 0 || d.RetryAfter > d.Reset {
			bad = append(bad, "refused with a RetryAfter outside (0, Reset]: one unit comes back before the whole quota")
		}
	}
	return strings.Join(bad, "; ")
}

// charge asks the limiter, a ratelimit.Charger, to charge n units, and
// checks the decision against the Charger contract's invariants.
func (s *subject) charge(t *testing.T, key string, p ratelimit.Policy, n int) ratelimit.Decision {
	t.Helper()
	d, err := s.l.(ratelimit.Charger).Charge(t.Context(), key, p, n)
	if err != nil {
		t.Fatalf("Charge(%s, %s, %d): %v", short(key), p.Name, n, err)
	}
	if d.Policy != p || !d.Allowed || d.RetryAfter != 0 || d.Remaining < 0 || d.Remaining > p.Quota-1 || d.Reset <= 0 {
		t.Errorf("Charge(%s, %s, %d): %s, Policy %+v: want allowed under the policy passed, with no RetryAfter, a Remaining below the quota %d and a Reset above zero", short(key), p.Name, n, show(d), d.Policy, p.Quota)
	}
	return d
}

// show prints a decision.
func show(d ratelimit.Decision) string {
	if d.Allowed {
		return fmt.Sprintf("allowed (Remaining %d, Reset %s)", d.Remaining, d.Reset)
	}
	return fmt.Sprintf("refused (Remaining %d, Reset %s, RetryAfter %s)", d.Remaining, d.Reset, d.RetryAfter)
}

// short prints a key, cut if long.
func short(key string) string {
	if len(key) > 40 {
		return fmt.Sprintf("%q… (%d bytes)", key[:40], len(key))
	}
	return fmt.Sprintf("%q", key)
}

// needsTime skips a clause that must move time on a limiter the clock
// cannot move.
func (s *subject) needsTime(t *testing.T) {
	t.Helper()
	if !s.clock.exact() && s.clock.mover() == nil {
		t.Skip("the limiter neither reads the suite's clock (Clock.Now) nor lets it move its buckets (Clock.OnAdvance): this clause needs time to pass, and would wait for it")
	}
}

// advance moves the limiter's time forward by d.
func (s *subject) advance(t *testing.T, d time.Duration) {
	t.Helper()
	s.needsTime(t)
	s.clock.move(d)
	if f := s.clock.mover(); f != nil {
		if err := f(t.Context(), d); err != nil {
			t.Fatalf("the function given to Clock.OnAdvance failed to move the limiter's state %s: %v", d, err)
		}
	}
}

// near reports whether got is want: exactly on the suite's clock, and
// on a server's, at most slack below it.
func (s *subject) near(got, want time.Duration) bool {
	if s.clock.exact() {
		return got == want
	}
	return want-slack < got && got <= want
}

// tick is the least time a clause can move that is sure not to have
// passed already: a nanosecond on the suite's clock, slack on a server's.
func (s *subject) tick() time.Duration {
	if s.clock.exact() {
		return time.Nanosecond
	}
	return slack
}

// retryAt moves time to just before a refusal's RetryAfter, when the
// bucket must still refuse, then to it, when it must allow one request
// and no more.
func (s *subject) retryAt(t *testing.T, key string, p ratelimit.Policy, retryAfter time.Duration, whose string) {
	t.Helper()
	s.advance(t, retryAfter-s.tick())
	if d := s.allow(t, key, p); d.Allowed {
		t.Errorf("%s before RetryAfter (%s): allowed", s.tick(), whose)
	}
	s.advance(t, s.tick())
	if d := s.allow(t, key, p); !d.Allowed || d.Remaining != 0 {
		t.Errorf("at RetryAfter (%s): %s, want allowed with Remaining 0", whose, show(d))
	}
}

// burst: a full quota at once, then refusals, each with the durations of
// the contract; after an idle window the burst again, and no more.
func burst(t *testing.T, s *subject) {
	p := ratelimit.Policy{Name: "default", Quota: 3, Window: time.Hour} // one every 20 minutes
	const key = "account:burst"
	in := p.Interval()
	for i := range p.Quota {
		d := s.allow(t, key, p)
		if want := time.Duration(i+1) * in; !d.Allowed || d.Remaining != p.Quota-1-i || !s.near(d.Reset, want) {
			t.Errorf("request %d of a burst of %d: %s, want allowed with Remaining %d and Reset %s", i+1, p.Quota, show(d), p.Quota-1-i, want)
		}
	}
	d := s.allow(t, key, p)
	if d.Allowed || !s.near(d.RetryAfter, in) || !s.near(d.Reset, p.Window) {
		t.Errorf("the request after a burst: %s, want refused with RetryAfter one interval, %s, and Reset the window, %s", show(d), in, p.Window)
	}
	s.advance(t, 2*p.Window)
	for i := range p.Quota {
		if d := s.allow(t, key, p); !d.Allowed || d.Remaining != p.Quota-1-i {
			t.Errorf("request %d after an idle stretch of two windows: %s, want the burst back, and no more: allowed with Remaining %d", i+1, show(d), p.Quota-1-i)
		}
	}
	if d := s.allow(t, key, p); d.Allowed {
		t.Errorf("request %d after an idle stretch: allowed, but the burst is %d", p.Quota+1, p.Quota)
	}
}

// refusalsAreFree: refusals consume nothing, so a client that retries
// after RetryAfter is served, and exactly then.
func refusalsAreFree(t *testing.T, s *subject) {
	p := ratelimit.Policy{Name: "default", Quota: 2, Window: 2 * time.Hour} // one an hour
	const key = "account:refusals"
	for range p.Quota {
		s.allow(t, key, p)
	}
	first := s.allow(t, key, p)
	for i := range 5 {
		if d := s.allow(t, key, p); d.Allowed || !s.near(d.RetryAfter, first.RetryAfter) {
			t.Errorf("refusal %d after the first: %s, want refused with the first's RetryAfter, %s: refusals consume nothing", i+1, show(d), first.RetryAfter)
		}
	}
	s.retryAt(t, key, p, first.RetryAfter, "the first refusal's, after 6 refusals")
	if d := s.allow(t, key, p); d.Allowed {
		t.Errorf("the second request one interval after the burst: allowed; one interval gives back one")
	}
}

// keys: each key is a budget of its own.
func keys(t *testing.T, s *subject) {
	p := ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour}
	keys := []string{"account:keys", "account:keys2", "account:keys:2", "key:keys", "keys", "account:" + strings.Repeat("k", 248)}
	for _, k := range keys {
		if d := s.allow(t, k, p); !d.Allowed {
			t.Errorf("the first request of %s: %s, want allowed: no other key spends its budget", short(k), show(d))
		}
	}
	for _, k := range keys {
		if d := s.allow(t, k, p); d.Allowed {
			t.Errorf("the second request of %s: allowed, but its quota is 1", short(k))
		}
	}
}

// policies: the policy travels with each call, and the same key under two
// names is two budgets, each with its own quota: the account's policy and
// its PerKey, as the handler passes them.
func policies(t *testing.T, s *subject) {
	account := ratelimit.Policy{Name: "default", Quota: 3, Window: time.Hour, KeyQuota: 1}
	perKey := account.PerKey()
	const key = "key:policies"
	steps := []struct {
		p         ratelimit.Policy
		allowed   bool
		remaining int
	}{
		{perKey, true, 0},
		{account, true, 2}, // from its own quota, although perKey spent the key's
		{perKey, false, 0},
		{account, true, 1},
		{account, true, 0},
		{account, false, 0},
	}
	for i, st := range steps {
		if d := s.allow(t, key, st.p); d.Allowed != st.allowed || d.Remaining != st.remaining {
			t.Errorf("step %d, under %s: %s, want allowed %v with Remaining %d", i+1, st.p.Name, show(d), st.allowed, st.remaining)
		}
	}
}

// keyQuota: the limiter enforces Quota; KeyQuota is the caller's.
func keyQuota(t *testing.T, s *subject) {
	p := ratelimit.Policy{Name: "default", Quota: 4, Window: time.Hour, KeyQuota: 1}
	const key = "account:keyquota"
	for i := range p.Quota {
		if d := s.allow(t, key, p); !d.Allowed || d.Remaining != p.Quota-1-i {
			t.Errorf("request %d under Quota %d and KeyQuota %d: %s, want allowed with Remaining %d", i+1, p.Quota, p.KeyQuota, show(d), p.Quota-1-i)
		}
	}
	if d := s.allow(t, key, p); d.Allowed {
		t.Errorf("request %d under Quota %d: allowed", p.Quota+1, p.Quota)
	}
}

// bounded: requests at random times, on average four times as fast as
// the rate, with an idle stretch of two windows now and then. Over every
// stretch between two requests no more are allowed than a burst and the
// steady rate, and over the busy stretches not much fewer than the rate.
func bounded(t *testing.T, s *subject) {
	for _, p := range []ratelimit.Policy{
		{Name: "a", Quota: 20, Window: 20 * time.Hour},
		{Name: "b", Quota: 7, Window: 7*time.Hour + time.Second}, // an interval of no whole number of microseconds
		{Name: "c", Quota: 1, Window: time.Hour},
	} {
		const calls = 100
		key := "account:bounded-" + p.Name
		r := rand.New(rand.NewPCG(1, 2))
		// The time moved before each call, and the real time since the
		// start when it began and when it returned, which passes on a
		// server's clock too.
		var moved, began, returned [calls]time.Duration
		var allowed [calls + 1]int // allowed[i]: among the first i calls
		var busy time.Duration
		wall := time.Now()
		for i := range calls {
			if i > 0 { // after a first call, which tells whether the limiter reads the suite's clock
				step := time.Duration(r.Int64N(int64(p.Interval() / 2)))
				if i%50 == 0 {
					step = 2 * p.Window
				} else {
					busy += step
				}
				s.advance(t, step)
				moved[i] = moved[i-1] + step
			}
			began[i] = time.Since(wall)
			d := s.allow(t, key, p)
			returned[i] = time.Since(wall)
			allowed[i+1] = allowed[i]
			if d.Allowed {
				allowed[i+1]++
			}
		}
		if s.clock.exact() {
			began, returned = [calls]time.Duration{}, [calls]time.Duration{}
		}
		for i := range calls {
			for j := i; j < calls; j++ {
				// The longest the limiter's clock can have moved from call
				// i to call j, and how many it allowed meanwhile.
				d := moved[j] + returned[j] - moved[i] - began[i]
				if n, bound := allowed[j+1]-allowed[i], p.Quota+int(int64(p.Quota)*int64(d)/int64(p.Window)); n > bound {
					t.Fatalf("%s (Quota %d, Window %s): %d allowed from request %d to %d, within %s; the bound is %d", p.Name, p.Quota, p.Window, n, i+1, j+1, d, bound)
				}
			}
		}
		// A quota of 1 banks nothing, so up to a step per request is lost.
		if least := int(int64(p.Quota) * int64(busy) / int64(p.Window) * 3 / 4); allowed[calls] < least {
			t.Errorf("%s: only %d allowed; the rate gives %d over the busy stretches alone", p.Name, allowed[calls], least)
		}
	}
}

// concurrent: calls for one bucket from eight goroutines at once allow
// exactly the burst, each allowed one with a Remaining of its own (they
// are decided one after another), then exactly what the time moved gives
// back.
func concurrent(t *testing.T, s *subject) {
	p := ratelimit.Policy{Name: "default", Quota: 50, Window: 50 * time.Hour} // one an hour
	const key = "account:concurrent"
	flood := func() (remaining []int, refused int) {
		var mu sync.Mutex
		eightAtOnce(25, func() bool {
			d, err := s.decide(t, t.Context(), key, p)
			if err != nil {
				t.Errorf("Allow from one of eight goroutines: %v", err)
				return false
			}
			mu.Lock()
			defer mu.Unlock()
			if d.Allowed {
				remaining = append(remaining, d.Remaining)
			} else {
				refused++
			}
			return true
		})
		slices.Sort(remaining)
		return remaining, refused
	}
	remaining, refused := flood()
	want := make([]int, p.Quota)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(remaining, want) || refused != 200-p.Quota {
		t.Errorf("200 calls at once: %d allowed with the Remaining %v, %d refused; want the burst, once: Remaining 49, 48, …, 0, and 150 refused", len(remaining), remaining, refused)
	}
	s.advance(t, 5*p.Interval())
	if remaining, refused = flood(); len(remaining) != 5 || refused != 195 {
		t.Errorf("200 calls at once five intervals later: %d allowed, %d refused; want 5 and 195", len(remaining), refused)
	}
}

// invalidPolicy: a policy Validate refuses is an error and consumes
// nothing, also when its name is a valid policy's.
func invalidPolicy(t *testing.T, s *subject) {
	p := ratelimit.Policy{Name: "default", Quota: 2, Window: time.Hour}
	const key = "account:invalid"
	for _, bad := range []ratelimit.Policy{
		{Name: "default", Quota: 0, Window: time.Hour},
		{Name: "default", Quota: -1, Window: time.Hour},
		{Name: "default", Quota: 2, Window: 0},
		{Name: "default", Quota: 2, Window: 1500 * time.Millisecond},
		{Name: "default", Quota: 2, Window: 400 * 24 * time.Hour},
		{Name: "default", Quota: 2, Window: time.Hour, KeyQuota: -1},
		{Name: "default", Quota: 2, Window: time.Hour, KeyQuota: 3},
		{Name: "", Quota: 2, Window: time.Hour},
		{Name: "bad name", Quota: 2, Window: time.Hour},
		{Name: strings.Repeat("n", 65), Quota: 2, Window: time.Hour},
	} {
		if d, err := s.l.Allow(t.Context(), key, bad); err == nil {
			t.Errorf("Allow under %+v, which Validate refuses: %s, want an error", bad, show(d))
		}
	}
	if d := s.allow(t, key, p); !d.Allowed || d.Remaining != p.Quota-1 {
		t.Errorf("the first request under the valid policy after the invalid ones: %s, want the whole quota: allowed with Remaining %d", show(d), p.Quota-1)
	}
}

// longKeys: a long key is an error or a bucket of its own, never cut
// short into a bucket it shares; under WithMaxKey, keys of the limit are
// decided and one byte more is an error that consumes nothing.
func longKeys(t *testing.T, s *subject) {
	p := ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour}
	if n := s.cfg.maxKey; n > 0 {
		// Keys of the limit that differ in their last byte, and a key
		// one byte over it: the longest with its last byte cut.
		at := []string{strings.Repeat("k", n-1) + "a", strings.Repeat("k", n-1) + "b"}
		over := at[0] + "x"
		if d, err := s.l.Allow(t.Context(), over, p); err == nil {
			t.Errorf("a key of %d bytes, over WithMaxKey(%d): %s, want an error", len(over), n, show(d))
		}
		for _, k := range at {
			if d := s.allow(t, k, p); !d.Allowed {
				t.Errorf("a key of %d bytes, at WithMaxKey: %s, want allowed: its own budget, untouched by the key over the limit", len(k), show(d))
			}
		}
		if d := s.allow(t, at[0], p); d.Allowed {
			t.Errorf("a key of %d bytes, at WithMaxKey, again: allowed, but its quota is 1", len(at[0]))
		}
		return
	}
	const n = 64 << 10
	for _, tail := range []string{"a", "b"} {
		k := "account:" + strings.Repeat("k", n) + tail
		d, err := s.decide(t, t.Context(), k, p)
		if err == nil && !d.Allowed {
			t.Errorf("a key of %d bytes that differs from another only in its last byte: %s, want an error or allowed as its own bucket", len(k), show(d))
		}
	}
}

// doneContext: a call whose context is done is an error that wraps
// ctx.Err(), says what failed, is not ErrOverloaded, and consumes nothing.
func doneContext(t *testing.T, s *subject) {
	p := ratelimit.Policy{Name: "default", Quota: 2, Window: time.Hour}
	const key = "account:context"
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	past, cancelPast := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancelPast()
	for _, ctx := range []context.Context{canceled, past} {
		d, err := s.l.Allow(ctx, key, p)
		switch {
		case err == nil:
			t.Errorf("Allow with a done context (%v): %s, want an error", ctx.Err(), show(d))
		case !errors.Is(err, ctx.Err()):
			t.Errorf("Allow with a done context (%v): %v, which does not wrap it", ctx.Err(), err)
		case errors.Is(err, ratelimit.ErrOverloaded):
			t.Errorf("Allow with a done context (%v): %v, which wraps ErrOverloaded: the node's queue held nothing", ctx.Err(), err)
		case err.Error() == ctx.Err().Error():
			t.Errorf("Allow with a done context: %q, the context's error alone: say what failed", err)
		}
	}
	if d := s.allow(t, key, p); !d.Allowed || d.Remaining != p.Quota-1 {
		t.Errorf("the first request after the calls with a done context: %s, want the whole quota: allowed with Remaining %d", show(d), p.Quota-1)
	}
}

// canceledInFlight: eight goroutines call Allow under one context until
// it gives an error, and the context is canceled after the 20th decision:
// each call under way then returns a decision or an error wrapping
// context.Canceled, and every call after the cancellation an error.
func canceledInFlight(t *testing.T, s *subject) {
	p := ratelimit.Policy{Name: "default", Quota: 100_000, Window: time.Hour}
	const key = "account:canceled"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var decided atomic.Int32
	endless := eightAtOnce(1000, func() bool {
		_, err := s.decide(t, ctx, key, p)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Allow under a context canceled meanwhile: %v, want an error wrapping context.Canceled", err)
			}
			return false
		}
		if decided.Add(1) == 20 {
			cancel()
		}
		return true
	})
	if endless > 0 {
		t.Errorf("%d of the eight goroutines had 1,000 calls decided, most of them after their context was canceled", endless)
	}
}

// eightAtOnce runs call from eight goroutines at once, each until call
// returns false or n times, and returns how many goroutines made all n
// calls.
func eightAtOnce(n int, call func() bool) (full int) {
	var (
		wg    sync.WaitGroup
		fulls atomic.Int32
	)
	for range 8 {
		wg.Go(func() {
			for range n {
				if !call() {
					return
				}
			}
			fulls.Add(1)
		})
	}
	wg.Wait()
	return int(fulls.Load())
}

// isolated: two limiters open makes share no bucket.
func isolated(t *testing.T, s *subject) {
	p := ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour}
	const key = "account:isolated"
	other := &subject{clock: &Clock{now: start}, cfg: s.cfg}
	other.l = s.open(t, other.clock)
	if d := s.allow(t, key, p); !d.Allowed {
		t.Fatalf("the first request of a fresh limiter: %s", show(d))
	}
	if d := other.allow(t, key, p); !d.Allowed {
		t.Errorf("the first request of the same bucket in another limiter open made: %s, want allowed: the limiters open makes must share nothing, since the clauses run in parallel and move their time", show(d))
	}
	if d := s.allow(t, key, p); d.Allowed {
		t.Errorf("the second request of the first limiter: allowed, but its quota is 1")
	}
}

// charge: a Charger takes n units whatever is left, so a bucket may owe
// units, and Allow refuses until they have come back at the policy's
// rate; each charge's decision says what is left after it. n below 1, an
// invalid policy and a done context are errors that charge nothing.
func charge(t *testing.T, s *subject) {
	if _, ok := s.l.(ratelimit.Charger); !ok {
		t.Skip("the limiter does not implement ratelimit.Charger: the handler charges it no more than Allow's unit")
	}
	p := ratelimit.Policy{Name: "default", Quota: 3, Window: time.Hour} // one every 20 minutes
	const key, fresh = "account:charge", "account:charge-fresh"
	in := p.Interval()
	s.allow(t, key, p)
	if d := s.charge(t, key, p, 1); d.Remaining != 1 || !s.near(d.Reset, 2*in) {
		t.Errorf("a charge of 1 after a request: %s, want Remaining 1 and Reset two intervals, %s", show(d), 2*in)
	}
	if d := s.charge(t, key, p, 3); d.Remaining != 0 || !s.near(d.Reset, 5*in) {
		t.Errorf("a charge of 3 with 1 left: %s, want Remaining 0 and Reset five intervals, %s: the bucket owes 2 units", show(d), 5*in)
	}
	d := s.allow(t, key, p)
	if d.Allowed || !s.near(d.RetryAfter, 3*in) {
		t.Errorf("a request while the bucket owes 2 units: %s, want refused with RetryAfter three intervals, %s: the debt and one unit", show(d), 3*in)
	}
	if d := s.charge(t, fresh, p, 2); d.Remaining != 1 || !s.near(d.Reset, 2*in) {
		t.Errorf("a charge of 2 on a bucket never asked about: %s, want Remaining 1 of the whole quota and Reset %s", show(d), 2*in)
	}
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	c := s.l.(ratelimit.Charger)
	for _, bad := range []struct {
		ctx context.Context
		p   ratelimit.Policy
		n   int
	}{
		{t.Context(), p, 0},
		{t.Context(), p, -1},
		{t.Context(), ratelimit.Policy{Name: "default", Quota: 0, Window: time.Hour}, 1},
		{canceled, p, 1},
	} {
		if d, err := c.Charge(bad.ctx, fresh, bad.p, bad.n); err == nil {
			t.Errorf("Charge of %d under %+v, context error %v: %s, want an error", bad.n, bad.p, bad.ctx.Err(), show(d))
		} else if bad.ctx.Err() != nil && !errors.Is(err, bad.ctx.Err()) {
			t.Errorf("Charge with a done context: %v, which does not wrap %v", err, bad.ctx.Err())
		}
	}
	if d := s.allow(t, fresh, p); !d.Allowed || d.Remaining != 0 {
		t.Errorf("the request after the refused charges: %s, want the unit the charge of 2 left: allowed with Remaining 0", show(d))
	}
	s.retryAt(t, key, p, d.RetryAfter, "the owing bucket's: the debt has come back")
}
