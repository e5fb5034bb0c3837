package formsapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/formsapi/formsapi/ratelimit"
)

// accessConfig is the part of the handler's configuration about what a
// key may do and how often.
type accessConfig struct {
	limiter    ratelimit.Limiter
	policy     ratelimit.Policy // the account's budget
	keyPolicy  ratelimit.Policy // a scoped key's own: policy.PerKey()
	timeout    time.Duration    // of the limiter's calls for one request
	failClosed bool             // a limiter error answers 503 rather than serving
}

// defaultRateLimitTimeout bounds the limiter's calls for one request
// unless WithRateLimitTimeout sets another bound.
const defaultRateLimitTimeout = 250 * time.Millisecond

// WithRateLimit makes the handler ask l before serving each authenticated
// request, and answer 429 when l refuses it. Without it, the default,
// nothing is rate limited.
//
// Every key of an account spends the account's budget p (the bucket
// "account:" and the account ID), so issuing more keys never raises an
// account's rate. A scoped key (one whose grant lists forms: an
// integration) also has a bucket of its own, "key:" and [KeyID] of the
// key, under [ratelimit.Policy.PerKey]: at most p.KeyQuota requests per window, half of
// p.Quota unless set, so that one integration that floods cannot starve
// its account's other keys. The key's bucket is asked first and the
// account's second, so a request refused by the key's own ceiling never
// spends the account's budget; a request the account's bucket refuses
// has spent a unit of the key's, which costs only that key, and only
// while its account is out of budget. Unscoped keys have no bucket of
// their own: they are the account's own keys, and an account with a
// single key keeps its whole budget.
//
// The limiter runs right after the key is authenticated and before the
// form ID, the query or any store call, so a refused request costs no
// store work; requests without a valid key are never counted (they get
// 401 first). Every request the limiter lets through counts, whatever
// its answer, a 304 Not Modified included. Every response after the
// limiter decided carries the RateLimit-Policy and RateLimit header
// fields of draft-ietf-httpapi-ratelimit-headers-11, and a 429 also
// Retry-After. For an unscoped key they describe the account's bucket.
// For a scoped key they describe its own bucket only, so that it cannot
// learn how busy the account's other keys are; a 429 caused by the
// account's bucket shows the key's policy with r=0 and the account's
// Retry-After, which tell only what the 429 itself does.
//
// The limiter's calls get a deadline of their own ([WithRateLimitTimeout]),
// and a limiter error serves the request unless [WithRateLimitFailClosed].
// It panics if l is nil or p is invalid (see [ratelimit.Policy.Validate]).
func WithRateLimit(l ratelimit.Limiter, p ratelimit.Policy) Option {
	if l == nil {
		panic("formsapi: WithRateLimit(nil, …)")
	}
	if err := p.Validate(); err != nil {
		panic(fmt.Sprintf("formsapi: WithRateLimit: %v", err))
	}
	k := p.PerKey()
	return func(c *config) { c.access.limiter, c.access.policy, c.access.keyPolicy = l, p, k }
}

// WithRateLimitTimeout sets d, 250 ms unless set: the time the rate
// limiter's dependency (its database or Redis) has to answer one call
// once the call is sent. Each call (one for an unscoped key, two for a
// scoped one) gets a context of its own, context.WithTimeout(r.Context(),
// 2*d), independent of [WithStoreTimeout]: a limiter that keeps calls
// waiting in this node before it sends them (redislimit's shared round
// trips, pgstore's pool) gives that wait at most d and refuses with
// ratelimit.ErrOverloaded past it, which the handler answers 429, so
// that a flood's queue never looks like a failed limiter; the other d is
// the dependency's. A limiter that hangs costs a request at most 2*d
// before the request is served anyway, or answered 503 with
// [WithRateLimitFailClosed]. Choose d well above the limiter's usual
// latency (one database round trip for pgstore's) and well below the
// store timeout. It panics unless d > 0.
func WithRateLimitTimeout(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("formsapi: WithRateLimitTimeout(%s): need d > 0", d))
	}
	return func(c *config) { c.access.timeout = d }
}

// WithRateLimitFailClosed makes a limiter error answer 503 (with
// Retry-After: 1) instead of serving the request unlimited. Either way the
// error is logged at level Error, at most once a second (see [WithLogger]).
func WithRateLimitFailClosed() Option {
	return func(c *config) { c.access.failClosed = true }
}

// rateLimit asks the limiter about one authenticated request of token,
// whose grant is g, and sets the RateLimit header fields. It returns an
// error, for fail to answer, when the request must not be served:
// errRateLimited for a refusal, errBusy when the limiter's queue in this
// node was too long (ratelimit.ErrOverloaded), errLimiterRefused for a
// failed limiter when failing closed, and the limiter's error when the
// client went away. A failed limiter when failing open is logged here,
// and the request served.
func (a *api) rateLimit(w http.ResponseWriter, r *http.Request, token string, g Grant) error {
	ac := &a.cfg.access
	if ac.limiter == nil {
		return nil
	}
	d, err := a.decide(r.Context(), token, g)
	switch {
	case err != nil && r.Context().Err() != nil:
		// The client went away: not the limiter's fault (fail says so).
		return fmt.Errorf("rate limit: %w", err)
	case errors.Is(err, ratelimit.ErrOverloaded):
		// Not a failed limiter: more decisions than it takes. Refused,
		// failing open or closed, so that a flood is not served for
		// having made the queue long.
		a.logThrottled(logLimiterBusy, w, r, slog.LevelWarn, "formsapi: rate limiter's queue too long; request refused", slog.Any("err", err))
		return fmt.Errorf("%w: %w", errBusy, err)
	case err != nil && !ac.failClosed:
		a.logThrottled(logLimiterFailed, w, r, slog.LevelError, "formsapi: rate limiter failed; request served unlimited", slog.Any("err", err))
		return nil
	case err != nil:
		return fmt.Errorf("%w: %w", errLimiterRefused, err)
	}
	setRateLimitHeaders(w.Header(), d)
	if !d.Allowed {
		return errRateLimited
	}
	return nil
}

// decide asks the limiter about the buckets of a request, the key's own
// first for a scoped key and then the account's, and returns the decision
// the answer shows: the account's for an unscoped key, and for a scoped
// one its own bucket's, or, when the account's bucket refused, the key's
// policy with nothing left and the account's RetryAfter. Its Policy is
// always the handler's own, whatever the limiter returned.
func (a *api) decide(ctx context.Context, token string, g Grant) (ratelimit.Decision, error) {
	ac := &a.cfg.access
	if g.Forms == nil {
		d, err := a.allow(ctx, "account:"+g.AccountID, ac.policy)
		d.Policy = ac.policy
		return d, err
	}
	d, err := a.allow(ctx, "key:"+KeyID(token), ac.keyPolicy)
	d.Policy = ac.keyPolicy
	if err != nil || !d.Allowed {
		return d, err
	}
	acct, err := a.allow(ctx, "account:"+g.AccountID, ac.policy)
	if err != nil {
		return d, err
	}
	if !acct.Allowed {
		return ratelimit.Decision{Policy: ac.keyPolicy, RetryAfter: acct.RetryAfter}, nil
	}
	return d, nil
}

// allow is one call of the limiter, under a deadline of its own: twice
// the timeout, of which a limiter that queues calls in this node gives
// the queue at most half and its dependency the rest (see
// ratelimit.Limiter), so that the dependency has the whole timeout to
// answer however long the call waited to be sent.
func (a *api) allow(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*a.cfg.access.timeout)
	defer cancel()
	return a.cfg.access.limiter.Allow(ctx, key, p)
}
