package ratelimit

import (
	"context"
	"time"
)

// Charger is a [Limiter] that can charge a request more than the one
// unit Allow took for it, once the request is served and its cost
// known: formsapi.WithRateLimit charges a filtered or searched page, and
// an exact count, one unit more per started 4 MiB of the work they did
// (RELIABILITY case 103; see docs/rate-limits.md), so that a request
// that checks megabytes of submissions costs what it does. [Memory],
// redislimit's and pgstore's limiters implement it; the handler charges
// a limiter without it nothing more than Allow's unit.
//
// The contract, besides the Limiter's (the key, the policy, errors, time
// and concurrency are as for Allow):
//
//   - Charge takes n more units (n ≥ 1) of the bucket, whether or not
//     they are left: the work is done. A bucket charged past its quota
//     owes the rest, and Allow refuses its requests until the owed
//     units have come back at the policy's rate (in GCRA, the bucket's
//     theoretical arrival time moves n intervals later, from now if it
//     was earlier).
//   - The decision. Allowed is true, and Policy is p; Remaining is the
//     requests Allow would allow right after it, 0 while the bucket owes
//     units; Reset is the time until the whole quota is back if no
//     request comes. RetryAfter is 0.
//   - Errors. An error means the units were not charged (or, after a
//     lost answer, maybe were); the handler logs it and serves the
//     request it charged for anyway.
type Charger interface {
	Limiter
	Charge(ctx context.Context, key string, p Policy, n int) (Decision, error)
}

// GCRACharge computes a [Charger]'s charge of n units at now, given the
// bucket's theoretical arrival time tat (the zero time for a bucket never
// seen), and returns the decision and the tat to store. [Memory] uses
// it; redislimit and pgstore compute the same in Lua and SQL.
func (p Policy) GCRACharge(tat, now time.Time, n int) (Decision, time.Time) {
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(time.Duration(n) * p.Interval())
	return p.AllowedDecision(next, now), next
}
