// Package ratelimit holds the rate limits of the forms API: [Options],
// what formsapi.WithRateLimit takes (requests at once per key and per
// account, and a limiter with its policy), the policy a host sets, the
// decision a limiter makes for one request, the [Limiter] contract, and
// [Memory], the in-process limiter. The handler of package formsapi uses
// them through formsapi.WithRateLimit; pgstore's
// Store.RateLimiter is the limiter shared by every node on one
// PostgreSQL database, and package ratelimit/redislimit's the one shared
// through Redis, with no database write per request.
//
// Every limit is GCRA (the generic cell rate algorithm, a token bucket
// kept as one timestamp per bucket): a burst of up to Quota requests, then
// one every Window/Quota. The handler keeps two kinds of bucket:
//
//   - one per account, "account:" and the account ID, with the Policy the
//     host set, shared by every key of the account, so that issuing more
//     keys never raises an account's rate;
//   - one per scoped API key (a key limited to some forms, typically an
//     integration), "key:" and the key's ID, with [Policy.PerKey], so that
//     one integration that floods spends at most KeyQuota of its
//     account's Quota and cannot starve the account's other keys.
//
// This package imports nothing from formsapi, so that formsapi can import
// it and a store can implement [Limiter] without importing the handler.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"
)

// Limiter decides whether one more request of a bucket may be served now.
// formsapi.WithRateLimit puts one in front of the store: the handler asks
// it after the key is resolved and before any store call, once for an
// unscoped key and twice for a scoped one (its own bucket first, then the
// account's), and answers 429 when it says no. [NewMemory] keeps the state
// in the process; pgstore's Store.RateLimiter shares it between every
// node on one PostgreSQL database, and redislimit.New between every node
// on one Redis.
//
// The contract:
//
//   - The key. key names the bucket that one budget covers. The handler
//     passes "account:" followed by the account ID the API key resolved
//     to, and for a scoped key also "key:" followed by formsapi.KeyID of
//     the API key (a SHA-256 in hex). It never passes the API key itself,
//     so an implementation may store the key and write it to logs. A key
//     is at most a few hundred bytes; an implementation may refuse longer
//     ones with an error.
//   - The policy. p travels with each call, so that one limiter serves
//     buckets of different policies (the account's and the per-key one).
//     The caller always passes the same policy for the same key; an
//     implementation may therefore keep its state by p.Name and key (so
//     the same key under two names is two budgets), and need not say what
//     happens when p changes for a key that has state. It enforces
//     p.Quota per p.Window and ignores p.KeyQuota, which is the caller's
//     business (see [Policy.PerKey]). A p that [Policy.Validate] refuses
//     is an error, and consumes nothing.
//   - Allow consumes one unit of the bucket's quota when, and only when,
//     it returns Allowed true. A refused request costs nothing, so a
//     client that retries after RetryAfter is served.
//   - The decision. Policy is p. Remaining is the number of further
//     requests that would be allowed right now, 0 when refused. Reset is
//     how long until the whole quota is available again if no request
//     comes; RetryAfter is zero when allowed and otherwise how long until
//     a request would be allowed. All three are never negative.
//   - Bounded. Over any stretch of time d, Allow returns Allowed true for
//     at most p.Quota + p.Quota*d/p.Window calls for one key and policy:
//     a full burst, then the steady rate.
//   - Errors. An error means the limiter could not decide (its database
//     is down, ctx ended, p is invalid, key is too long): the handler
//     then serves the request, or answers 503 if it fails closed, and logs
//     the error either way. An error that wraps [ErrOverloaded] is the
//     exception: the handler refuses that request with 429 whatever it
//     does on failure. Errors carry no API key, since none is passed in,
//     and should name the operation that failed.
//   - Time. Allow returns soon after ctx is done, with an error wrapping
//     ctx.Err(): the handler gives each call a short deadline of its own,
//     twice its rate limiter's timeout ([Options] Timeout),
//     so that a limiter that hangs costs a request that, not the store's
//     deadline.
//   - The node's own queue. A limiter that holds a call in the process
//     before it sends it to its database or server (a batch that waits
//     for the one in flight, a pool connection) holds it for at most half
//     of the time ctx had left when Allow was called; past that it
//     returns an error wrapping ErrOverloaded, without sending the call,
//     so that the dependency always has the other half to answer. A queue
//     that long means the node has more decisions than its dependency
//     takes: refusing them keeps a flood from turning the queue's wait
//     into limiter failures, and failing open into unlimited service. A
//     call that was sent and got no answer in time is an ordinary error
//     that wraps ctx.Err() (or another timeout): the handler refuses its
//     request with 429 too when the limiter answered other calls within
//     the second before (the dependency is up, and slow because this
//     node or it is loaded), and takes it for a failure only when it did
//     not (a dependency that hangs).
//   - Concurrency. Allow is safe for concurrent use, and calls for the
//     same key from many goroutines (or, for a shared implementation,
//     many processes) together stay within the bound.
//
// There is no way to give a unit back: every request that reached the
// limiter counts, a 304 Not Modified included, since it costs the server
// a full page read.
type Limiter interface {
	Allow(ctx context.Context, key string, p Policy) (Decision, error)
}

// ErrOverloaded is wrapped by the error of a [Limiter] that did not ask
// its dependency because the call waited in the node's own queue for half
// of its time (see the clause on the node's queue): too many decisions
// at once for the dependency, not a failed dependency. The handler
// refuses the request with 429 and Retry-After: 1, never serves it
// unlimited.
var ErrOverloaded = errors.New("ratelimit: too many decisions waiting in this node")

// QueueBudget is the longest a [Limiter] may hold a call in the node's own
// queue before it sends it, under ctx: half of the time ctx has left, or
// 0 when ctx has no deadline (no bound of its own). redislimit and
// pgstore's limiter use it; a limiter of a host's own that queues calls
// can too.
func QueueBudget(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(time.Until(d)/2, 1)
}

// Policy is a quota of Quota requests per Window for each account, with
// bursts of up to Quota requests: a limiter lets a full quota through at
// once, then one request every Window/Quota. KeyQuota bounds what one
// scoped key may take of it.
type Policy struct {
	// Name identifies the policy in the RateLimit and RateLimit-Policy
	// headers, for example "default", and names its buckets in a
	// limiter's state. 1 to 64 characters from a-z A-Z 0-9 and - _ . (so
	// it needs no escaping in a structured-field string).
	Name string
	// Quota is the number of requests per Window, at least 1.
	Quota int
	// Window is a whole number of seconds, at least one and at most a
	// year.
	Window time.Duration
	// KeyQuota is the most one scoped API key (a key whose grant lists
	// forms, that is an integration) may use of the account's Quota per
	// Window, so that one integration cannot starve its account's other
	// keys. 0 means half of Quota, rounded up (at least 1); otherwise it
	// is 1 to Quota. Keys for every form of the account (unscoped ones)
	// are bounded by the account's Quota alone: they are the account's own
	// keys, and an account with a single key keeps its whole budget.
	KeyQuota int
}

// maxName is the longest policy name: the headers' pattern allows 64.
const maxName = 64

// Validate returns an error if p cannot be enforced or advertised: a
// malformed name, a quota below 1, a window that is not a whole number of
// seconds from 1 s to a year, or a KeyQuota below 0 or above Quota.
func (p Policy) Validate() error {
	if len(p.Name) == 0 || len(p.Name) > maxName {
		return fmt.Errorf("ratelimit: policy name %q: want 1 to %d characters", p.Name, maxName)
	}
	for i := 0; i < len(p.Name); i++ {
		if !nameChar(p.Name[i]) {
			return fmt.Errorf("ratelimit: policy name %q: only a-z A-Z 0-9 - _ . are allowed", p.Name)
		}
	}
	if p.Quota < 1 {
		return fmt.Errorf("ratelimit: policy %q: quota %d, want at least 1", p.Name, p.Quota)
	}
	if p.Window < time.Second || p.Window > 366*24*time.Hour || p.Window%time.Second != 0 {
		return fmt.Errorf("ratelimit: policy %q: window %s, want whole seconds from 1s to a year", p.Name, p.Window)
	}
	if p.KeyQuota < 0 || p.KeyQuota > p.Quota {
		return fmt.Errorf("ratelimit: policy %q: key quota %d, want 0 (half the quota) to the quota %d", p.Name, p.KeyQuota, p.Quota)
	}
	return nil
}

// nameChar reports whether c may appear in a policy name.
func nameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
}

// keySuffix ends the name of every per-key policy.
const keySuffix = "-key"

// PerKey is the policy of one scoped key's own bucket under the account
// policy p: KeyQuota requests (half of Quota, rounded up, when KeyQuota
// is 0) per the same Window. Its Name is p.Name followed by "-key"; a name
// too long for that keeps its first 51 characters, then "-", 8 hex digits
// of a hash of the whole name and "-key", so that it stays valid and
// distinct. Its own KeyQuota is its Quota: a key's bucket has no smaller
// one inside. For a valid p, the result is valid.
func (p Policy) PerKey() Policy {
	q := p.KeyQuota
	if q == 0 {
		q = max((p.Quota+1)/2, 1)
	}
	name := p.Name + keySuffix
	if len(name) > maxName {
		h := fnv.New32a()
		h.Write([]byte(p.Name))
		name = fmt.Sprintf("%s-%08x%s", p.Name[:maxName-len(keySuffix)-9], h.Sum32(), keySuffix)
	}
	return Policy{Name: name, Quota: q, Window: p.Window, KeyQuota: q}
}

// Interval is the time one request's unit takes to come back: Window
// divided by Quota, rounded up to a microsecond (the precision
// PostgreSQL keeps), so that rounding never lets more through.
func (p Policy) Interval() time.Duration {
	t := (p.Window + time.Duration(p.Quota) - 1) / time.Duration(p.Quota)
	return (t + time.Microsecond - 1).Truncate(time.Microsecond)
}

// Decision is a Limiter's answer for one request of one bucket.
type Decision struct {
	// Allowed is true when the request may be served; it then consumed
	// one unit.
	Allowed bool
	// Remaining is the number of further requests allowed now; 0 when
	// refused.
	Remaining int
	// Reset is the time until the full quota is back if no request comes.
	Reset time.Duration
	// RetryAfter is 0 when allowed, and otherwise the time until a
	// request would be allowed.
	RetryAfter time.Duration
	// Policy is the policy the decision was made under: the one passed
	// to Allow.
	Policy Policy
}

// GCRA computes the generic cell rate algorithm's decision for one
// request at now, given the bucket's theoretical arrival time tat (the
// zero time for a bucket never seen), and returns the decision and the tat
// to store: the same as tat when refused. [Memory] uses it; a host's own
// limiter that keeps one time per bucket elsewhere can too.
func (p Policy) GCRA(tat, now time.Time) (Decision, time.Time) {
	t := p.Interval()
	tau := t * time.Duration(p.Quota) // a full burst
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(t)
	if d := next.Sub(now); d > tau {
		// Refused: the request would fit at next - tau.
		return Decision{Policy: p, Reset: tat.Sub(now), RetryAfter: d - tau}, tat
	}
	return p.AllowedDecision(next, now), next
}

// AllowedDecision is the decision for an allowed request after which the
// bucket's theoretical arrival time is next; shared implementations that
// compute the GCRA elsewhere (pgstore, in SQL) use it to fill in the rest.
func (p Policy) AllowedDecision(next, now time.Time) Decision {
	t := p.Interval()
	used := max(next.Sub(now), 0)
	left := t*time.Duration(p.Quota) - used
	return Decision{Allowed: true, Policy: p, Reset: used, Remaining: max(int(left/t), 0)}
}

// RefusedDecision is the decision for a request refused at now while the
// bucket's theoretical arrival time is tat. RetryAfter is at least a
// microsecond even if rounding elsewhere computed a tat that would allow
// the request here.
func (p Policy) RefusedDecision(tat, now time.Time) Decision {
	d, _ := p.GCRA(tat, now)
	d.Allowed, d.Remaining = false, 0
	d.RetryAfter = max(d.RetryAfter, time.Microsecond)
	return d
}
