package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/formsapi/formsapi"
)

// RateLimiter is a formsapi.RateLimiter whose state is one row per key in
// the store's table formsapi_rate_limits, so every API node on the same
// database shares each key's budget. Each decision is one INSERT … ON
// CONFLICT DO UPDATE that computes GCRA's theoretical arrival time in SQL
// under the row's lock, on the database's clock: concurrent requests on
// any number of nodes are decided one after another, and the nodes'
// clocks never matter. Make one with [Store.RateLimiter].
//
// A request costs one round trip and, for a key seen before, one row
// update. Rows of keys idle for a whole window carry nothing; [RateLimiter.Prune]
// deletes them. Since the handler asks only about authenticated
// requests, the table holds at most one row per account (or per API key)
// that made requests.
type RateLimiter struct {
	s      *Store
	policy formsapi.RateLimitPolicy
	t, tau int64 // interval and burst tolerance, microseconds
}

var _ formsapi.RateLimitRefunder = (*RateLimiter)(nil)

// maxRateKey bounds the keys the limiter stores: the handler's are far
// shorter.
const maxRateKey = 512

// RateLimiter returns a limiter enforcing p with its state in the store's
// schema. Limiters with the same policy name share budgets, on every node;
// give different policies different names. It returns an error if p is
// invalid (see formsapi.RateLimitPolicy.Validate).
func (s *Store) RateLimiter(p formsapi.RateLimitPolicy) (*RateLimiter, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: rate limiter: %w", err)
	}
	t := p.Interval().Microseconds()
	return &RateLimiter{s: s, policy: p, t: t, tau: t * int64(p.Quota)}, nil
}

// Allow implements formsapi.RateLimiter. Its errors name the store and
// the operation, never the key.
func (l *RateLimiter) Allow(ctx context.Context, key string) (formsapi.RateLimitDecision, error) {
	if err := l.check(ctx, key); err != nil {
		return formsapi.RateLimitDecision{}, fmt.Errorf("pgstore: rate limit: %w", err)
	}
	var (
		tat, at int64
		allowed bool
	)
	err := l.s.pool.QueryRow(ctx, l.s.sql.rateLimit, l.policy.Name, key, l.t, l.tau).Scan(&tat, &allowed, &at)
	if err != nil {
		return formsapi.RateLimitDecision{}, fmt.Errorf("pgstore: rate limit: %w", withCtx(ctx, err))
	}
	now, next := time.UnixMicro(at), time.UnixMicro(tat)
	if allowed {
		return l.policy.AllowedDecision(next, now), nil
	}
	return l.policy.RefusedDecision(next, now), nil
}

// Refund implements formsapi.RateLimitRefunder: it gives back one unit of
// key's quota, on every node.
func (l *RateLimiter) Refund(ctx context.Context, key string) error {
	if err := l.check(ctx, key); err != nil {
		return fmt.Errorf("pgstore: rate limit refund: %w", err)
	}
	if _, err := l.s.pool.Exec(ctx, l.s.sql.rateRefund, l.policy.Name, key, l.t); err != nil {
		return fmt.Errorf("pgstore: rate limit refund: %w", withCtx(ctx, err))
	}
	return nil
}

// Prune deletes the rows of keys whose quota is full again, of every
// policy, and returns how many it deleted. Deleting such a row changes no
// decision; a host may run it now and then to keep the table small.
func (l *RateLimiter) Prune(ctx context.Context) (int64, error) {
	tag, err := l.s.pool.Exec(ctx, l.s.sql.ratePrune)
	if err != nil {
		return 0, fmt.Errorf("pgstore: rate limit prune: %w", withCtx(ctx, err))
	}
	return tag.RowsAffected(), nil
}

func (l *RateLimiter) check(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(key) > maxRateKey || !storableText(key) {
		return fmt.Errorf("%w: a rate limit key must be at most %d bytes of UTF-8 without NUL", formsapi.ErrInvalidInput, maxRateKey)
	}
	return nil
}
