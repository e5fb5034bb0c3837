package formsapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/formsapi/formsapi/ratelimit"
)

// accessConfig is the part of the handler's configuration about what a
// key may do, how often and how much at once.
type accessConfig struct {
	limiter    ratelimit.Limiter
	policy     ratelimit.Policy // the account's budget
	keyPolicy  ratelimit.Policy // a scoped key's own: policy.PerKey()
	timeout    time.Duration    // of the limiter's dependency, once a call is sent
	failClosed bool             // a limiter error answers 503 rather than serving
	perKey     int              // requests of one key in flight at once; 0: no bound
	perAccount int              // of one account's keys together; 0: no bound
	bytes      int              // page bytes the handler holds at once (room.go); 0: no bound
	stall      time.Duration    // a client's time to take each piece of a body; 0: none

	charger ratelimit.Charger // the limiter, when it can be charged (charge.go)
}

// defaultAccess is the access configuration without WithRateLimit.
func defaultAccess() accessConfig {
	return accessConfig{timeout: ratelimit.DefaultTimeout, perKey: ratelimit.DefaultInFlightPerKey, perAccount: ratelimit.DefaultInFlightPerAccount,
		bytes: ratelimit.DefaultBytesInFlight(), stall: ratelimit.DefaultStallTimeout}
}

// WithRateLimit sets how much one key and one account may ask of the
// handler: how many requests at once (o.InFlightPerKey and
// o.InFlightPerAccount, bounded by default even without this option), and
// with a limiter, o.Limiter, how many per window (without one, the
// default, nothing is rate limited). The fields are described at
// [ratelimit.Options].
//
// Requests in flight are counted right after authentication, before the
// limiter and any read of a page. A key this handler has seen
// authenticate recently is counted even before its lookup, so that a
// flood of one key past its bound costs no store call at all; an account
// is known only once the key is looked up. A request past either bound is
// answered at once with 429 Too Many Requests, Retry-After: 1 and the
// message "too many requests at once: …", without RateLimit fields (the
// limiter was not asked), and is not counted by the limiter.
//
// With a limiter, the handler asks it about each request within the
// bounds, and answers 429 when it refuses. Every key of an account spends
// the account's budget o.Policy (the bucket "account:" and the account
// ID), so issuing more keys never raises an account's rate. A scoped key
// (one whose grant lists forms: an integration) also has a bucket of its
// own, "key:" and [KeyID] of the key, under [ratelimit.Policy.PerKey]: at
// most KeyQuota requests per window, half of Quota unless set, so that one
// integration that floods cannot starve its account's other keys. The
// key's bucket is asked first and the account's second, so a request
// refused by the key's own ceiling never spends the account's budget; a
// request the account's bucket refuses has spent a unit of the key's,
// which costs only that key, and only while its account is out of budget.
// Unscoped keys have no bucket of their own: they are the account's own
// keys, and an account with a single key keeps its whole budget.
//
// The limiter runs before the form ID, the query or any store call other
// than the key's lookup, so a refused request costs no store work;
// requests without a valid key are never counted (they get 401 first).
// Every request the limiter lets through counts, whatever its answer, a
// 304 Not Modified included. Every response after the limiter decided
// carries the RateLimit-Policy and RateLimit header fields of
// draft-ietf-httpapi-ratelimit-headers-11, and a 429 also Retry-After. For
// an unscoped key they describe the account's bucket. For a scoped key
// they describe its own bucket only, so that it cannot learn how busy the
// account's other keys are; a 429 caused by the account's bucket shows the
// key's policy with r=0 and the account's Retry-After, which tell only
// what the 429 itself does.
//
// Past a burst of 100, each further 429 of one key, whatever its cause,
// waits for the key's turn, 100 a second, before it is sent, holding no
// place in flight; at most 4,096 turns of a key are handed out ahead and
// 4,096 429s wait at once in all, past which the 429 is sent at once with
// Connection: close. So one key with thousands of connections is
// answered 100 times a second, not as fast as it asks, and its waiting
// connections leave the cores to other accounts.
//
// The limiter's calls get a deadline of their own (o.Timeout), and a
// limiter error serves the request unless o.FailClosed; a call that waited
// too long in this node's own queue (ratelimit.ErrOverloaded), or that
// timed out while the limiter answered others, is refused with 429 either
// way. It panics if o is invalid (see
// [ratelimit.Options.Validate]).
func WithRateLimit(o ratelimit.Options) Option {
	if err := o.Validate(); err != nil {
		panic(fmt.Sprintf("formsapi: WithRateLimit: %v", err))
	}
	ac := defaultAccess()
	if o.Limiter != nil {
		ac.limiter, ac.policy, ac.keyPolicy, ac.failClosed = o.Limiter, o.Policy, o.Policy.PerKey(), o.FailClosed
		ac.charger, _ = o.Limiter.(ratelimit.Charger)
		if o.Timeout > 0 {
			ac.timeout = o.Timeout
		}
	}
	ac.perKey = inFlightBound(o.InFlightPerKey, ratelimit.DefaultInFlightPerKey)
	ac.perAccount = inFlightBound(o.InFlightPerAccount, ratelimit.DefaultInFlightPerAccount)
	ac.bytes = inFlightBound(o.BytesInFlight, ratelimit.DefaultBytesInFlight())
	switch {
	case o.StallTimeout < 0:
		ac.stall = 0
	case o.StallTimeout > 0:
		ac.stall = o.StallTimeout
	}
	return func(c *config) { c.access = ac }
}

// inFlightBound is an Options bound as the handler keeps it: 0 for none.
func inFlightBound(n, def int) int {
	switch {
	case n < 0:
		return 0
	case n == 0:
		return def
	}
	return n
}

// rateLimit asks the limiter about one authenticated request of token,
// whose grant is g, and sets the RateLimit header fields. It returns an
// error, for fail to answer, when the request must not be served:
// errRateLimited for a refusal, errBusy when the limiter's queue in this
// node was too long (ratelimit.ErrOverloaded) or its answer late while it
// answered others (errLimiterLate), errLimiterRefused for a
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
	case errors.Is(err, errLimiterLate):
		// Slow, not down (RELIABILITY 107): refused the same way.
		a.logThrottled(logLimiterBusy, w, r, slog.LevelWarn, "formsapi: rate limiter answered past its deadline while it answered others; request refused", slog.Any("err", err))
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
//
// A call that ends in a timeout (its error wraps context.DeadlineExceeded
// or os.ErrDeadlineExceeded, or is a net.Error that says Timeout) while
// the limiter returned a decision to another call within limiterUpWindow
// (or one such deadline, if longer) before this one began, or since,
// returns an error wrapping errLimiterLate: the dependency is up and
// answering, and this call was late because this node (its CPU, its
// pools, its connections) or the dependency is loaded; failing open
// would serve a flood for having made the node slow (RELIABILITY 94,
// 107). A timeout with no decision for that long (a dependency that
// hangs, or a network that drops its packets) and every other error (a
// refused or reset connection, an error answer) is a dependency down, and
// returned as it is.
func (a *api) allow(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	deadline := 2 * a.cfg.access.timeout
	lctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	began := a.now().UnixNano()
	d, err := a.cfg.access.limiter.Allow(lctx, key, p)
	if err == nil {
		if t := a.now().UnixNano(); t > a.limiterAnswered.Load() {
			a.limiterAnswered.Store(t) // a racing store of an older time only shortens the window
		}
		return d, nil
	}
	if ctx.Err() == nil && isTimeout(err) && a.limiterAnswered.Load() >= began-int64(max(deadline, limiterUpWindow)) {
		return d, fmt.Errorf("%w: %w", errLimiterLate, err)
	}
	return d, err
}

// limiterUpWindow is how long after its last decision a limiter whose
// call timed out is taken for up (slow) rather than down: a second, so
// that a dependency that starts to hang gets its requests refused with
// 429 (Retry-After: 1) for about a second, then failing open serves them.
const limiterUpWindow = time.Second

// errLimiterLate is wrapped by allow's error for a call that timed out
// while the limiter answered others: a 429, never served unlimited.
var errLimiterLate = errors.New("late, while the rate limiter answered others")

// isTimeout reports whether err says that time ran out: a context's or a
// connection's deadline, or a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.As(err, &ne) && ne.Timeout()
}
