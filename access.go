package formsapi

import (
	"context"
	"log/slog"
	"net/http"
)

// accessConfig is the part of the handler's configuration about what a
// key may do and how often.
type accessConfig struct {
	limiter    RateLimiter
	perKey     bool // partition by API key rather than by account
	failClosed bool // a limiter error answers 503 rather than serving
}

// WithRateLimiter makes the handler ask l before serving each
// authenticated request, and answer 429 when l refuses it. Without it,
// the default, nothing is rate limited.
//
// The limiter runs right after the key is authenticated and before the
// form ID, the query or any store call, so a refused request costs no
// store work; requests without a valid key are never counted (they get
// 401 first). Every response after the limiter decided carries the
// RateLimit-Policy and RateLimit header fields of
// draft-ietf-httpapi-ratelimit-headers-11, and a 429 also Retry-After.
// The budget is per account unless
// [WithRateLimitPerKey]; a limiter error serves the request unless
// [WithRateLimitFailClosed]. It panics if l is nil.
func WithRateLimiter(l RateLimiter) Option {
	if l == nil {
		panic("formsapi: WithRateLimiter(nil)")
	}
	return func(c *config) { c.access.limiter = l }
}

// WithRateLimitPerKey gives every API key its own budget. By default all
// keys of an account share one, so that issuing more keys does not raise
// an account's rate.
func WithRateLimitPerKey() Option {
	return func(c *config) { c.access.perKey = true }
}

// WithRateLimitFailClosed makes a limiter error answer 503 (with
// Retry-After: 1) instead of serving the request unlimited. Either way the
// error is logged at level Error.
func WithRateLimitFailClosed() Option {
	return func(c *config) { c.access.failClosed = true }
}

// Messages of the access answers.
const (
	msgRateLimited       = "rate limit exceeded: retry after the number of seconds in Retry-After"
	msgLimiterNotWorking = "service unavailable: the rate limiter is not answering, try again"
)

// rateLimitKey is the partition a request is counted in: never the key
// itself, so a limiter may store and log it.
func (a *api) rateLimitKey(token string, g Grant) string {
	if a.cfg.access.perKey {
		return "key:" + KeyID(token)
	}
	return "account:" + g.AccountID
}

// rateLimit is what the limiter decided about one request.
type rateLimit struct {
	key      string // the partition; "" when no limiter decided
	decision RateLimitDecision
}

// rateLimit asks the limiter about one authenticated request and sets the
// RateLimit header fields. It answers 429 (or 503 for a failed limiter
// when failing closed) and returns false when the request must not be
// served.
func (a *api) rateLimit(ctx context.Context, w http.ResponseWriter, r *http.Request, key string) (rateLimit, bool) {
	l := a.cfg.access.limiter
	if l == nil {
		return rateLimit{}, true
	}
	d, err := l.Allow(ctx, key)
	if err == nil {
		err = d.Policy.Validate()
	}
	if err != nil {
		if !a.cfg.access.failClosed {
			a.log(w, r, slog.LevelError, "formsapi: rate limiter failed; request served unlimited", slog.Any("err", err))
			return rateLimit{}, true
		}
		a.log(w, r, slog.LevelError, "formsapi: rate limiter failed; request refused", slog.Any("err", err))
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, msgLimiterNotWorking)
		return rateLimit{}, false
	}
	setRateLimitHeaders(w.Header(), d)
	if !d.Allowed {
		writeError(w, http.StatusTooManyRequests, msgRateLimited)
		return rateLimit{}, false
	}
	return rateLimit{key: key, decision: d}, true
}

// refund gives back the unit of quota a request consumed when it ends in
// 304 Not Modified: a revalidation that found nothing new does not count,
// as GitHub does not count it. The RateLimit field then shows the unit
// back. A limiter that cannot refund, or a refund that fails (logged),
// leaves the request counted.
func (a *api) refund(w http.ResponseWriter, r *http.Request, req request) {
	if req.rate.key == "" {
		return
	}
	rf, ok := a.cfg.access.limiter.(RateLimitRefunder)
	if !ok {
		return
	}
	if err := rf.Refund(req.ctx, req.rate.key); err != nil {
		a.log(w, r, slog.LevelWarn, "formsapi: rate limit refund of a 304 failed; the request counts", slog.Any("err", err))
		return
	}
	d := req.rate.decision
	d.Remaining = min(d.Remaining+1, d.Policy.Quota)
	d.Reset = max(d.Reset-d.Policy.Interval(), 0) // one interval less to wait for a full quota
	setRateLimitHeaders(w.Header(), d)
}
