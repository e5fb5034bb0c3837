package formsapi

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RateLimiter decides whether one more request of a partition may be
// served now. [WithRateLimiter] puts one in front of the store: the
// handler asks it once per authenticated request, after the key is
// resolved and before any store call, and answers 429 when it says no.
// [NewMemoryRateLimiter] keeps the state in the process; pgstore's
// RateLimiter shares it between every node on one PostgreSQL database.
//
// The contract:
//
//   - The key. key names the partition that one budget covers. The
//     handler passes "account:" followed by the account ID the API key
//     resolved to, so every key of an account shares one budget, or with
//     [RateLimitPerKey] "key:" followed by [KeyID] of the API key (a
//     SHA-256 in hex). It never passes the API key itself, so an
//     implementation may store the key and write it to logs. A key is at
//     most a few hundred bytes; an implementation may refuse longer ones
//     with an error.
//   - Allow consumes one unit of key's quota when, and only when, it
//     returns Allowed true. A refused request costs nothing, so a client
//     that retries after RetryAfter is served.
//   - The decision. Policy is the policy that applies to key (the same
//     for every call, or the RateLimit-Policy header would contradict
//     itself). Remaining is the number of further requests that would be
//     allowed right now, 0 when refused. Reset is how long until the
//     whole quota is available again if no request comes; RetryAfter is
//     zero when allowed and otherwise how long until a request would be
//     allowed. All three are never negative.
//   - Bounded. Over any stretch of time d, Allow returns Allowed true for
//     at most Policy.Quota + Policy.Quota*d/Policy.Window calls for one
//     key: a full burst, then the steady rate.
//   - Errors. An error means the limiter could not decide (its database
//     is down, ctx ended): the handler then serves the request or answers
//     503, as [WithRateLimitFailOpen] says, and logs the error either way.
//     Errors carry no API key, since none is passed in.
//   - Concurrency. Allow is safe for concurrent use, and calls for the
//     same key from many goroutines (or, for a shared implementation,
//     many processes) together stay within the bound.
type RateLimiter interface {
	Allow(ctx context.Context, key string) (RateLimitDecision, error)
}

// RateLimitRefunder is a RateLimiter that can give back one unit a
// request consumed, for a request that should not count after all (a 304
// Not Modified, which GitHub does not count either). The limiters of this
// module implement it.
type RateLimitRefunder interface {
	RateLimiter
	// Refund returns one unit of key's quota consumed by an earlier
	// Allow, never raising it above a full quota.
	Refund(ctx context.Context, key string) error
}

// RateLimitPolicy is a quota of Quota requests per Window for each key,
// with bursts of up to Quota requests: a limiter lets a full quota
// through at once, then one request every Window/Quota.
type RateLimitPolicy struct {
	// Name identifies the policy in the RateLimit and RateLimit-Policy
	// headers, for example "default". 1 to 64 characters from a-z A-Z 0-9
	// and - _ . (so it needs no escaping in a structured-field string).
	Name string
	// Quota is the number of requests per Window, at least 1.
	Quota int
	// Window is a whole number of seconds, at least one.
	Window time.Duration
}

// Validate returns an error if p cannot be enforced or advertised: a
// malformed name, a quota below 1, or a window that is not a whole number
// of seconds, at least 1 and at most a year.
func (p RateLimitPolicy) Validate() error {
	if len(p.Name) == 0 || len(p.Name) > 64 {
		return fmt.Errorf("formsapi: rate limit policy name %q: want 1 to 64 characters", p.Name)
	}
	for i := 0; i < len(p.Name); i++ {
		if c := p.Name[i]; !isUnreserved(c) || c == '~' {
			return fmt.Errorf("formsapi: rate limit policy name %q: only a-z A-Z 0-9 - _ . are allowed", p.Name)
		}
	}
	if p.Quota < 1 {
		return fmt.Errorf("formsapi: rate limit policy %q: quota %d, want at least 1", p.Name, p.Quota)
	}
	if p.Window < time.Second || p.Window > 366*24*time.Hour || p.Window%time.Second != 0 {
		return fmt.Errorf("formsapi: rate limit policy %q: window %s, want whole seconds from 1s to a year", p.Name, p.Window)
	}
	return nil
}

// Interval is the time one request's unit takes to come back: Window
// divided by Quota, rounded up to a microsecond (the precision
// PostgreSQL keeps), so that rounding never lets more through.
func (p RateLimitPolicy) Interval() time.Duration {
	t := (p.Window + time.Duration(p.Quota) - 1) / time.Duration(p.Quota)
	return (t + time.Microsecond - 1).Truncate(time.Microsecond)
}

// RateLimitDecision is a RateLimiter's answer for one request.
type RateLimitDecision struct {
	Allowed    bool
	Remaining  int           // further requests allowed now; 0 when refused
	Reset      time.Duration // until the full quota is back
	RetryAfter time.Duration // 0 when allowed; else until a request would be
	Policy     RateLimitPolicy
}

// GCRA computes the generic cell rate algorithm's decision for one
// request at now, given the key's theoretical arrival time tat (the zero
// time for a key never seen), and returns the decision and the tat to
// store: the same as tat when refused. Both limiters of this module use
// it, pgstore's after its database has computed the same tat in SQL.
func (p RateLimitPolicy) GCRA(tat, now time.Time) (RateLimitDecision, time.Time) {
	t := p.Interval()
	tau := t * time.Duration(p.Quota) // a full burst
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(t)
	if d := next.Sub(now); d > tau {
		// Refused: the request would fit at next - tau.
		return RateLimitDecision{Policy: p, Reset: tat.Sub(now), RetryAfter: d - tau}, tat
	}
	return p.decision(next, now), next
}

// decision describes the allowed request that moved the tat to next.
func (p RateLimitPolicy) decision(next, now time.Time) RateLimitDecision {
	t := p.Interval()
	used := max(next.Sub(now), 0)
	left := t*time.Duration(p.Quota) - used
	return RateLimitDecision{Allowed: true, Policy: p, Reset: used, Remaining: max(int(left/t), 0)}
}

// AllowedDecision is the decision for an allowed request after which the
// key's theoretical arrival time is next; shared implementations that
// compute the GCRA elsewhere (in SQL) use it to fill in the rest.
func (p RateLimitPolicy) AllowedDecision(next, now time.Time) RateLimitDecision {
	return p.decision(next, now)
}

// RefusedDecision is the decision for a request refused at now while
// the key's theoretical arrival time is tat. RetryAfter is at least a
// microsecond even if rounding elsewhere computed a tat that would allow
// the request here.
func (p RateLimitPolicy) RefusedDecision(tat, now time.Time) RateLimitDecision {
	d, _ := p.GCRA(tat, now)
	d.Allowed, d.Remaining = false, 0
	d.RetryAfter = max(d.RetryAfter, time.Microsecond)
	return d
}

// MemoryRateLimiter is a RateLimiter that keeps each key's state (one
// time) in this process, for a single-node host. Its memory is bounded
// by the keys active within the last Window: an entry whose quota is
// full again is the same as no entry and is dropped by a sweep that runs
// as the map grows, with no goroutine to stop. Since the handler asks it
// only for authenticated requests, the keys are the host's own accounts
// or API keys, never strings an attacker can invent.
type MemoryRateLimiter struct {
	policy RateLimitPolicy
	now    func() time.Time // time.Now, or a test's clock

	mu        sync.Mutex
	tats      map[string]time.Time
	nextSweep int // sweep when the map reaches this size
}

var _ RateLimitRefunder = (*MemoryRateLimiter)(nil)

// NewMemoryRateLimiter returns an in-process GCRA limiter enforcing p for
// every key. It panics if p is invalid (see [RateLimitPolicy.Validate]).
func NewMemoryRateLimiter(p RateLimitPolicy) *MemoryRateLimiter {
	if err := p.Validate(); err != nil {
		panic(err)
	}
	return &MemoryRateLimiter{policy: p, now: time.Now, tats: map[string]time.Time{}, nextSweep: minSweep}
}

// minSweep is the map size below which the limiter never sweeps.
const minSweep = 1024

// Allow implements RateLimiter. It never returns an error but for a
// done ctx.
func (l *MemoryRateLimiter) Allow(ctx context.Context, key string) (RateLimitDecision, error) {
	if err := ctx.Err(); err != nil {
		return RateLimitDecision{}, fmt.Errorf("formsapi: rate limit: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	d, tat := l.policy.GCRA(l.tats[key], now)
	if d.Allowed {
		l.tats[key] = tat
		if len(l.tats) >= l.nextSweep {
			l.sweep(now)
		}
	}
	return d, nil
}

// Refund implements RateLimitRefunder.
func (l *MemoryRateLimiter) Refund(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("formsapi: rate limit refund: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if tat, ok := l.tats[key]; ok {
		l.tats[key] = tat.Add(-l.policy.Interval())
	}
	return nil
}

// sweep drops every key whose quota is full again, and sets the next
// sweep at twice the size left, so sweeps cost O(1) per Allow.
func (l *MemoryRateLimiter) sweep(now time.Time) {
	for k, tat := range l.tats {
		if !tat.After(now) {
			delete(l.tats, k)
		}
	}
	l.nextSweep = max(2*len(l.tats), minSweep)
}

// Len returns the number of keys the limiter holds state for.
func (l *MemoryRateLimiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.tats)
}

// ceilSeconds is d in whole seconds, rounded up: the delay-seconds of
// Retry-After and the t parameter.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := (d + time.Second - 1) / time.Second
	return int64(min(s, math.MaxInt32))
}

// setRateLimitHeaders writes the fields of draft-ietf-httpapi-ratelimit-
// headers-11: RateLimit-Policy ("name";q=Quota;w=Window) and RateLimit
// ("name";r=Remaining;t=seconds). t is the time until the full quota is
// back, or on a refusal the Retry-After, which the draft says must not
// point earlier than the end of the effective window. The partition key
// (pk) is left out: it would name the account.
func setRateLimitHeaders(h http.Header, d RateLimitDecision) {
	p := d.Policy
	name := strconv.Quote(p.Name) // Validate allows only characters Quote keeps
	h.Set("RateLimit-Policy", name+";q="+strconv.Itoa(p.Quota)+";w="+strconv.FormatInt(int64(p.Window/time.Second), 10))
	t := ceilSeconds(d.Reset)
	if !d.Allowed {
		t = max(ceilSeconds(d.RetryAfter), 1)
		h.Set("Retry-After", strconv.FormatInt(t, 10))
	}
	h.Set("RateLimit", name+";r="+strconv.Itoa(max(d.Remaining, 0))+";t="+strconv.FormatInt(t, 10))
}
