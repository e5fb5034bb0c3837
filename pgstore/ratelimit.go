package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/ratelimit"
)

// RateLimiter is a ratelimit.Limiter whose state is one row per policy
// name and key in the store's table formsapi_rate_limits, so every API
// node on the same database shares each bucket's budget. Each decision is
// one statement that computes GCRA's theoretical arrival time in SQL, on
// the database's clock, with the interval and burst of the policy passed
// to that call: an allowed request's INSERT … ON CONFLICT DO UPDATE runs
// under the row's lock, so concurrent requests on any number of nodes are
// decided one after another, and the nodes' clocks never matter. Make one
// with [Store.RateLimiter].
//
// A request costs one round trip per bucket and, when allowed, one row
// written. A refusal writes nothing: the statement reads the row first
// and stops there when it shows the request refused. A request that the
// read allows but that finds the last unit taken under the lock (a race
// with another request) locks the row, changes nothing, and costs one
// more round trip, a read of the row for its RetryAfter. Rows of buckets
// idle for a whole window carry
// nothing; [RateLimiter.Prune] deletes them. Since the handler asks only
// about authenticated requests, the table holds at most one row per
// account and one per scoped API key that made requests.
type RateLimiter struct {
	s *Store
}

var _ ratelimit.Charger = (*RateLimiter)(nil)

// maxRateKey bounds the keys the limiter stores: the handler's are far
// shorter.
const maxRateKey = 512

// RateLimiter returns a limiter with its state in the store's schema.
// Every limiter of stores on the same schema shares the buckets, on every
// node: give every node the same policy (see ratelimit.Limiter), and
// different policies different names.
func (s *Store) RateLimiter() *RateLimiter {
	return &RateLimiter{s: s}
}

// Allow implements ratelimit.Limiter. It waits for a connection of the
// store's pool at most half of the time ctx has left, and then returns an
// error wrapping ratelimit.ErrOverloaded without a statement (see the
// Limiter contract): a pool that busy is the node's own queue. A
// connection the pool could not open in that time is an ordinary error.
// Its errors name the store and the operation, never the key.
func (l *RateLimiter) Allow(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	if err := checkRateArgs(ctx, key, p); err != nil {
		return ratelimit.Decision{}, fmt.Errorf("pgstore: rate limit: %w", err)
	}
	conn, err := l.acquire(ctx)
	if err != nil {
		return ratelimit.Decision{}, fmt.Errorf("pgstore: rate limit: %w", err)
	}
	defer conn.Release()
	t := p.Interval().Microseconds()
	tau := t * int64(p.Quota) // a full burst
	var (
		tat, at int64
		allowed bool
	)
	err = writeRow(ctx, conn, l.s.sql.rateLimit, []any{p.Name, key, t, tau}, &tat, &allowed, &at)
	if err != nil {
		return ratelimit.Decision{}, fmt.Errorf("pgstore: rate limit: %w", withCtx(ctx, err))
	}
	now, next := time.UnixMicro(at), time.UnixMicro(tat)
	if allowed {
		return p.AllowedDecision(next, now), nil
	}
	if d, _ := p.GCRA(next, now); d.Allowed {
		// Refused under the row's lock after the unlocked read allowed
		// it: another request took the last unit meanwhile, and the tat
		// read is older than that one's.
		if err := conn.QueryRow(ctx, l.s.sql.rateTat, p.Name, key).Scan(&tat, &at); err != nil {
			return ratelimit.Decision{}, fmt.Errorf("pgstore: rate limit: %w", withCtx(ctx, err))
		}
		now, next = time.UnixMicro(at), time.UnixMicro(tat)
	}
	return p.RefusedDecision(next, now), nil
}

// Charge implements ratelimit.Charger: one statement, which writes the
// bucket's row whatever is left in it. It waits for a connection as
// Allow does, and returns an error for what Allow does and for n below
// 1.
func (l *RateLimiter) Charge(ctx context.Context, key string, p ratelimit.Policy, n int) (ratelimit.Decision, error) {
	if err := checkRateArgs(ctx, key, p); err != nil {
		return ratelimit.Decision{}, fmt.Errorf("pgstore: rate limit charge: %w", err)
	}
	if n < 1 {
		return ratelimit.Decision{}, fmt.Errorf("pgstore: rate limit charge: %w: %d units, want at least 1", formsapi.ErrInvalidInput, n)
	}
	conn, err := l.acquire(ctx)
	if err != nil {
		return ratelimit.Decision{}, fmt.Errorf("pgstore: rate limit charge: %w", err)
	}
	defer conn.Release()
	var tat, at int64
	err = writeRow(ctx, conn, l.s.sql.rateCharge, []any{p.Name, key, p.Interval().Microseconds() * int64(n)}, &tat, &at)
	if err != nil {
		return ratelimit.Decision{}, fmt.Errorf("pgstore: rate limit charge: %w", withCtx(ctx, err))
	}
	return p.AllowedDecision(time.UnixMicro(tat), time.UnixMicro(at)), nil
}

// acquire takes a connection of the pool for one decision, waiting at
// most ratelimit.QueueBudget(ctx). Past that, with every connection of
// the pool in use, it returns an error wrapping ratelimit.ErrOverloaded.
func (l *RateLimiter) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	qctx := ctx
	if budget := ratelimit.QueueBudget(ctx); budget > 0 {
		var cancel context.CancelFunc
		qctx, cancel = context.WithTimeout(ctx, budget)
		defer cancel()
	}
	conn, err := l.s.pool.Acquire(qctx)
	if err == nil {
		return conn, nil
	}
	// Not when the client went away; a deadline that ended the wait,
	// the queue's or the whole call's, is the queue's doing.
	if qctx.Err() != nil && !errors.Is(ctx.Err(), context.Canceled) {
		if st := l.s.pool.Stat(); st.AcquiredConns() >= st.MaxConns() {
			return nil, fmt.Errorf("%w: every connection of the pool is in use", ratelimit.ErrOverloaded)
		}
	}
	return nil, withCtx(ctx, err)
}

// Prune deletes the rows of buckets whose quota is full again, of every
// policy, and returns how many it deleted. Deleting such a row changes no
// decision; a host may run it now and then to keep the table small.
func (l *RateLimiter) Prune(ctx context.Context) (int64, error) {
	tag, err := l.s.pool.Exec(ctx, l.s.sql.ratePrune)
	if err != nil {
		return 0, fmt.Errorf("pgstore: rate limit prune: %w", withCtx(ctx, err))
	}
	return tag.RowsAffected(), nil
}

// checkRateArgs refuses a done ctx, a key the table cannot hold and an
// invalid policy, before any round trip.
func checkRateArgs(ctx context.Context, key string, p ratelimit.Policy) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(key) > maxRateKey || !storableText(key) {
		return fmt.Errorf("%w: a rate limit key must be at most %d bytes of UTF-8 without NUL", formsapi.ErrInvalidInput, maxRateKey)
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: %w", formsapi.ErrInvalidInput, err)
	}
	return nil
}
