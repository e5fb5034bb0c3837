// Package redislimit is a [ratelimit.Limiter] whose state lives in Redis,
// so that every API node of a fleet shares each bucket's budget without a
// database write per request. Each decision is one Lua script run: GCRA,
// the same algorithm and arithmetic as [ratelimit.Memory] and pgstore's
// limiter, on integer microseconds and the Redis server's clock.
//
// It needs Redis 5 or later (or a server that runs Redis's Lua scripts
// the same way, such as Valkey), standalone, with Sentinel or as a
// cluster: each decision touches one key. The host owns the client, made
// with go-redis (redis.NewClient, redis.NewUniversalClient, …): the
// limiter never closes it.
//
// This package and pgstore/redisround (shared rounds) are the only ones
// of the module, with the example server, that import go-redis: a
// program that imports neither links no Redis client.
package redislimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/formsapi/formsapi/internal/coalesce"
	"github.com/formsapi/formsapi/ratelimit"
)

// DefaultPrefix starts the name of every key the limiter writes unless
// [WithPrefix] sets another.
const DefaultPrefix = "formsapi:rl:"

// maxKey bounds the keys the limiter accepts: the handler's are far
// shorter, and a bucket's Redis key should stay small.
const maxKey = 512

// Limiter is a [ratelimit.Limiter] over Redis. Its state is one string
// key per bucket, named by the prefix, the policy's name, ":" and the
// bucket's key (for example "formsapi:rl:default:account:acme"), holding
// the bucket's theoretical arrival time in microseconds since the Unix
// epoch. Each key expires when its bucket's quota is full again, which
// changes no decision, so Redis holds only the buckets used within their
// last window and nothing needs pruning.
//
// Every decision is one run of one Lua script (EVALSHA, and EVAL when
// the server does not have it yet), which Redis runs alone: requests for
// one bucket from any number of nodes are decided one after another, on
// the Redis server's clock, so the nodes' clocks never matter. A refused
// request writes nothing. The decisions of concurrent requests share a
// round trip (a pipeline; see [Limiter.Allow]).
//
// What Redis loses, the limiter forgets: a bucket whose key is lost (a
// restart without persistence, a failover before the write reached the
// replica, eviction under maxmemory with a policy that evicts keys with a
// TTL) starts again with a full quota. Give the limiter a Redis whose
// maxmemory-policy is noeviction, or one whose evictions you accept as
// fresh quotas.
//
// The zero value is not usable; call [New]. A Limiter is safe for
// concurrent use.
type Limiter struct {
	client redis.UniversalClient
	prefix string
	calls  *coalesce.Batcher[call]
}

var _ ratelimit.Charger = (*Limiter)(nil)

// Option configures a [Limiter] made by [New].
type Option func(*Limiter)

// WithPrefix sets the string that starts every key the limiter writes,
// [DefaultPrefix] unless set, so that several hosts, or tests, can share
// one Redis without sharing buckets: limiters with the same prefix on the
// same Redis share every bucket, and limiters with different prefixes
// share none (as long as neither prefix, followed by a policy name and
// ":", starts the other's keys). It may be empty.
func WithPrefix(prefix string) Option {
	return func(l *Limiter) { l.prefix = prefix }
}

// New returns a limiter over client, which the host keeps and closes. It
// sends nothing until the first Allow. Every node of a fleet should use
// the same prefix and, for a given policy name, the same policy (see
// [ratelimit.Limiter]). It panics if client is nil.
func New(client redis.UniversalClient, opts ...Option) *Limiter {
	if client == nil {
		panic("redislimit: New(nil)")
	}
	l := &Limiter{client: client, prefix: DefaultPrefix}
	for _, o := range opts {
		o(l)
	}
	// Detached: go-redis does not end a round trip with its context, and
	// Allow must.
	l.calls = &coalesce.Batcher[call]{Run: l.runCalls, Max: maxBatch, Detach: true}
	return l
}

// gcra is the decision for one request: GCRA over integer microseconds,
// as pgstore's SQL computes it. KEYS[1] is the bucket's key, ARGV[1] the
// policy's interval and ARGV[2] its burst (interval times quota), both
// in microseconds, and ARGV[3] 0, or for a charge (Limiter.Charge) the
// units' time in microseconds, taken whatever is left. It returns {allowed (1 or 0), the bucket's theoretical
// arrival time after the decision, now}, both in microseconds since the
// Unix epoch, so that the caller computes the decision with the same
// helpers as the other limiters. Integers up to 2^53 are exact in Lua's
// numbers: now is about 2^51, the burst at most a year.
//
//go:embed gcra.lua
var gcraSource string

var gcra = redis.NewScript(gcraSource)

// Allow implements [ratelimit.Limiter]: one script run on Redis. It
// returns an error for a done ctx, an invalid p, a key longer than 512
// bytes, and when Redis does not answer or answers with an error. Its
// errors start with "redislimit: allow" and never contain the key.
//
// The decisions of concurrent calls are coalesced: while one round trip
// is in flight, the calls that arrive wait, and then go to Redis together
// in one pipeline (one script run each, in arrival order), which spares
// Redis and the node most of a round trip's cost per decision. Each
// decision is still made on Redis after its call began. A call waits for
// its round trip at most half of the time ctx has left, and then returns
// an error wrapping [ratelimit.ErrOverloaded] without going to Redis; a
// round trip lasts at most the longest such half of its calls, so that a
// Redis that hangs holds the calls queued behind it no longer. A round
// trip that finds no connection of the client's pool free within the
// client's PoolTimeout (redis.ErrPoolTimeout) is the node's queue too: its
// error wraps ErrOverloaded as well.
//
// Allow returns as soon as ctx is done, with an error wrapping ctx.Err(),
// whatever the client's options. go-redis alone would wait for its own
// ReadTimeout (3 s by default): it ignores a context's deadline unless the
// client's ContextTimeoutEnabled is set, and a cancellation always. The
// round trip Allow leaves behind goes on until the client's timeouts end
// it; set ContextTimeoutEnabled so that it ends at ctx's deadline too and
// a Redis that hangs holds no connection past the handler's limiter
// timeout. Once every decision of a round trip has given up, the
// decisions after them do not wait for it: they go on another
// connection. go-redis retries a command that failed on the network
// (MaxRetries, 3 by default): a script that ran but whose answer was lost
// may run again and spend a second unit, which errs towards fewer
// requests, never more.
func (l *Limiter) Allow(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	if err := checkArgs(ctx, key, p); err != nil {
		return ratelimit.Decision{}, fmt.Errorf("redislimit: allow: %w", err)
	}
	t := p.Interval().Microseconds()
	c := &call{key: l.prefix + p.Name + ":" + key, interval: t, burst: t * int64(p.Quota)}
	if err := l.run(ctx, c); err != nil {
		return ratelimit.Decision{}, fmt.Errorf("redislimit: allow: %w", err)
	}
	tat, now := time.UnixMicro(c.r[1]), time.UnixMicro(c.r[2])
	if c.r[0] == 1 {
		return p.AllowedDecision(tat, now), nil
	}
	return p.RefusedDecision(tat, now), nil
}

// Charge implements [ratelimit.Charger]: one script run on Redis, sent
// and coalesced as Allow's are. It returns an error for what Allow does,
// and for n below 1; its errors start with "redislimit: charge".
func (l *Limiter) Charge(ctx context.Context, key string, p ratelimit.Policy, n int) (ratelimit.Decision, error) {
	if err := checkArgs(ctx, key, p); err != nil {
		return ratelimit.Decision{}, fmt.Errorf("redislimit: charge: %w", err)
	}
	if n < 1 {
		return ratelimit.Decision{}, fmt.Errorf("redislimit: charge: %d units, want at least 1", n)
	}
	c := &call{key: l.prefix + p.Name + ":" + key, charge: p.Interval().Microseconds() * int64(n)}
	if err := l.run(ctx, c); err != nil {
		return ratelimit.Decision{}, fmt.Errorf("redislimit: charge: %w", err)
	}
	return p.AllowedDecision(time.UnixMicro(c.r[1]), time.UnixMicro(c.r[2])), nil
}

// checkArgs refuses a done ctx, an invalid p and a key longer than
// maxKey, before any round trip.
func checkArgs(ctx context.Context, key string, p ratelimit.Policy) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return err
	}
	if len(key) > maxKey {
		return fmt.Errorf("a key of %d bytes, want at most %d", len(key), maxKey)
	}
	return nil
}

// run sends c with the calls of its round trip and waits for its answer
// (see Allow), under ctx.
func (l *Limiter) run(ctx context.Context, c *call) error {
	// Half of the time left may go to waiting for the round trip in
	// flight, and the round trip that carries the decision gets at least
	// the other half (see ratelimit.Limiter).
	budget := ratelimit.QueueBudget(ctx)
	if err := l.calls.DoWithin(ctx, c, budget, budget); err != nil {
		if errors.Is(err, coalesce.ErrNotSent) {
			err = ratelimit.ErrOverloaded
		}
		return err
	}
	if c.err != nil {
		err := c.err
		if errors.Is(err, redis.ErrPoolTimeout) {
			// No connection of the client's pool came free: the node's
			// own queue, and nothing was sent.
			err = fmt.Errorf("%w: %w", ratelimit.ErrOverloaded, err)
		}
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return err
	}
	return nil
}

// maxBatch bounds the decisions of one pipeline; more wait for the next.
const maxBatch = 128

// call is one decision: the bucket's Redis key and the policy's interval
// and burst in microseconds, or for a charge the units' time in
// microseconds, and the script's answer.
type call struct {
	key             string
	interval, burst int64
	charge          int64 // > 0: a charge (Charge), not a decision
	r               []int64
	err             error
}

// args returns the arguments of gcra for c.
func (c *call) args() []any { return []any{c.interval, c.burst, c.charge} }

// runCalls makes the decisions of batch: one script run for one, a
// pipeline of them for more. A script Redis does not have yet (NOSCRIPT:
// it did not run) is sent again in full.
func (l *Limiter) runCalls(ctx context.Context, batch []*call) {
	if len(batch) == 1 {
		c := batch[0]
		c.r, c.err = answer(gcra.Run(ctx, l.client, []string{c.key}, c.args()...))
		return
	}
	cmds := make([]*redis.Cmd, len(batch))
	_, _ = l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range batch {
			cmds[i] = gcra.EvalSha(ctx, p, []string{c.key}, c.args()...)
		}
		return nil
	})
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		_, _ = l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range again {
				c := batch[i]
				cmds[i] = gcra.Eval(ctx, p, []string{c.key}, c.args()...)
			}
			return nil
		})
	}
	for i, c := range batch {
		c.r, c.err = answer(cmds[i])
	}
}

// answer checks the shape of the script's answer.
func answer(cmd *redis.Cmd) ([]int64, error) {
	r, err := cmd.Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(r) != 3 || r[0] != 0 && r[0] != 1 {
		return nil, errors.New("the script's answer is not a decision")
	}
	return r, nil
}
