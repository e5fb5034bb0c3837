package formsapi

// Observation: with WithObserver, the handler reports each request and
// each call to a dependency to an observe.Observer. It does so by
// wrapping, once in newAPI, the store, the key resolver, the page readers
// and the rate limiter in types that report their calls, and the whole
// handler in a middleware that reports the request: the request's path
// through the handler does not change, and without an observer nothing
// is wrapped and nothing costs anything.

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/ratelimit"
)

// WithObserver reports what the handler does to o: every request once it
// is answered, and every call to the key resolver, the rate limiter and
// the store, whose context o may extend (with a span, say). See package
// observe for what it is told, and package formsotel for an adapter to
// OpenTelemetry. It panics if o is nil.
func WithObserver(o observe.Observer) Option {
	if o == nil {
		panic("formsapi: WithObserver(nil)")
	}
	return func(c *config) { c.observer = o }
}

// observed is what the wrappers learn about one request, kept in its
// context for the middleware to report.
type observed struct {
	rateLimit         observe.RateLimit
	feed, feedHasMore bool
	accountID, formID string
	cache             observe.Cache
}

type observedKey struct{}

func observedIn(ctx context.Context) *observed {
	o, _ := ctx.Value(observedKey{}).(*observed)
	if o == nil {
		return &observed{} // a call outside a request: noted nowhere
	}
	return o
}

// observe wraps what a has been given so that its calls are reported to
// o; the readers must have been chosen first (the wrappers hide the fast
// path from capabilitiesOf).
func (a *api) observe(o observe.Observer) {
	a.store = observedStore{a.store, o}
	a.pages = observedReader{a.pages, o}
	if a.feed != nil {
		a.feed = observedReader{a.feed, o}
	}
	if a.fields != nil {
		a.fields = observedFields{a.fields, o}
	}
	if a.count != nil {
		a.count = observedCounter{a.count, o}
	}
	a.keys = observedKeys{a.keys, o}
	if a.authz != nil {
		a.authz = observedAuthorizer{a.authz, o}
	}
	if a.formAuthz != nil {
		a.formAuthz = observedFormAuthorizer{a.formAuthz, o}
	}
	if a.formsAuthz != nil {
		a.formsAuthz = observedFormsAuthorizer{a.formsAuthz, o}
	}
	if a.cfg.access.limiter != nil {
		a.cfg.access.limiter = observedLimiter{a.cfg.access.limiter, o}
	}
	if a.cfg.access.charger != nil {
		a.cfg.access.charger = observedCharger{a.cfg.access.charger, o}
	}
}

// observeRequests reports each request next answers to o. route names
// the pattern that will answer r.
func observeRequests(o observe.Observer, route func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		seen := &observed{}
		rec := &recorder{ResponseWriter: w}
		// A streamed answer that cannot finish breaks off with a panic
		// (http.ErrAbortHandler) past recoverPanics: it is recorded too,
		// as aborted, and the panic goes on to the server.
		defer func() {
			p := recover()
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			o.Request(r.Context(), observe.Request{
				Method:      r.Method,
				Route:       route(r),
				Status:      status,
				Duration:    time.Since(start),
				BodyBytes:   rec.bytes,
				Feed:        seen.feed,
				FeedHasMore: seen.feedHasMore,
				RateLimit:   seen.rateLimit,
				KeyRefused:  status == http.StatusUnauthorized && strings.Contains(rec.Header().Get("WWW-Authenticate"), "invalid_token"),
				AccountID:   seen.accountID,
				FormID:      seen.formID,
				Cache:       seen.cache,
				Aborted:     p != nil,
			})
			if p != nil {
				panic(p)
			}
		}()
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), observedKey{}, seen)))
	})
}

// recorder notes the status and body length a handler writes. It adds
// nothing else: the handler needs no Flusher or Hijacker.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// observeCall reports a call to the store that a route makes itself (a
// read of the module-private contract beyond the wrappers below: see
// docs/architecture.md, "Adding a store read") to the handler's
// observer, if it has one: the call takes the returned ctx, and done
// takes its error.
func (a *api) observeCall(ctx context.Context, op, accountID, formID string) (context.Context, func(error)) {
	if a.cfg.observer == nil {
		return ctx, func(error) {}
	}
	observedIn(ctx).formID = formID
	return call(a.cfg.observer, ctx, op, accountID, formID)
}

func call(o observe.Observer, ctx context.Context, op, account, form string) (context.Context, func(error)) {
	return o.Call(ctx, observe.Call{Op: op, AccountID: account, FormID: form})
}

type observedStore struct {
	Store
	o observe.Observer
}

func (s observedStore) ListForms(ctx context.Context, accountID string, q Query) (Page[Form], error) {
	ctx, done := call(s.o, ctx, observe.OpListForms, accountID, "")
	p, err := s.Store.ListForms(ctx, accountID, q)
	done(err)
	return p, err
}

func (s observedStore) ListSubmissions(ctx context.Context, accountID, formID string, q Query) (Page[Submission], error) {
	ctx, done := call(s.o, ctx, observe.OpListSubmissions, accountID, formID)
	p, err := s.Store.ListSubmissions(ctx, accountID, formID, q)
	done(err)
	return p, err
}

type observedReader struct {
	pageReader
	o observe.Observer
}

func (r observedReader) AppendSubmissions(ctx context.Context, accountID, formID string, q Query, p *wire.Page) error {
	seen := observedIn(ctx)
	seen.formID = formID
	ctx, done := call(r.o, ctx, observe.OpListSubmissions, accountID, formID)
	err := r.pageReader.AppendSubmissions(ctx, accountID, formID, q, p)
	done(err)
	seen.cache = p.Cache
	return err
}

func (r observedReader) AppendFeed(ctx context.Context, accountID, formID string, q wire.FeedQuery, p *wire.Page) (int64, bool, error) {
	seen := observedIn(ctx)
	seen.formID, seen.feed = formID, true
	ctx, done := call(r.o, ctx, observe.OpSyncSubmissions, accountID, formID)
	next, more, err := r.pageReader.AppendFeed(ctx, accountID, formID, q, p)
	done(err)
	seen.feedHasMore = more
	return next, more, err
}

// observedFields reports a CSV export's read of its columns.
type observedFields struct {
	FieldStore
	o observe.Observer
}

func (f observedFields) DataFields(ctx context.Context, accountID, formID string, upTo int64, limit int) ([]string, []int64, error) {
	ctx, done := call(f.o, ctx, observe.OpDataFields, accountID, formID)
	names, first, err := f.FieldStore.DataFields(ctx, accountID, formID, upTo, limit)
	done(err)
	return names, first, err
}

// observedCounter reports a total's count.
type observedCounter struct {
	Counter
	o observe.Observer
}

func (c observedCounter) CountSubmissions(ctx context.Context, accountID, formID string, q Query, exact bool) (Total, error) {
	ctx, done := call(c.o, ctx, observe.OpCount, accountID, formID)
	t, err := c.Counter.CountSubmissions(ctx, accountID, formID, q, exact)
	done(err)
	return t, err
}

type observedKeys struct {
	KeyResolver
	o observe.Observer
}

func (k observedKeys) ResolveKey(ctx context.Context, key string) (string, error) {
	cctx, done := call(k.o, ctx, observe.OpAuthorize, "", "")
	account, err := k.KeyResolver.ResolveKey(cctx, key)
	done(err)
	if err == nil {
		observedIn(ctx).accountID = account
	}
	return account, err
}

type observedAuthorizer struct {
	KeyAuthorizer
	o observe.Observer
}

func (k observedAuthorizer) Authorize(ctx context.Context, key string) (Grant, error) {
	cctx, done := call(k.o, ctx, observe.OpAuthorize, "", "")
	g, err := k.KeyAuthorizer.Authorize(cctx, key)
	done(err)
	if err == nil {
		observedIn(ctx).accountID = g.AccountID
	}
	return g, err
}

// observedFormAuthorizer reports the combined lookup of key and form as
// the key's lookup it is.
type observedFormAuthorizer struct {
	formAuthorizer
	o observe.Observer
}

func (k observedFormAuthorizer) AuthorizeForm(ctx context.Context, key, formID string) (Grant, wire.Form, error) {
	cctx, done := call(k.o, ctx, observe.OpAuthorize, "", "")
	g, f, err := k.formAuthorizer.AuthorizeForm(cctx, key, formID)
	done(err)
	if err == nil {
		observedIn(ctx).accountID = g.AccountID
	}
	return g, f, err
}

// observedFormsAuthorizer reports the combined lookup of key and forms
// list version as the key's lookup it is, and each page of forms read at
// that version as the ListForms call it is, with what the cache did: a
// hit when every page of the request was served from the cache, a miss
// when none was, and partial for a mix.
type observedFormsAuthorizer struct {
	formsAuthorizer
	o observe.Observer
}

func (k observedFormsAuthorizer) AuthorizeForms(ctx context.Context, key string) (Grant, wire.Forms, error) {
	cctx, done := call(k.o, ctx, observe.OpAuthorize, "", "")
	g, at, err := k.formsAuthorizer.AuthorizeForms(cctx, key)
	done(err)
	if err == nil {
		observedIn(ctx).accountID = g.AccountID
	}
	return g, at, err
}

func (k observedFormsAuthorizer) ListFormsAt(ctx context.Context, accountID string, q Query, at *wire.Forms) (Page[Form], error) {
	seen := observedIn(ctx)
	cctx, done := call(k.o, ctx, observe.OpListForms, accountID, "")
	p, err := k.formsAuthorizer.ListFormsAt(cctx, accountID, q, at)
	done(err)
	if err == nil {
		seen.cache = joinCache(seen.cache, at.Cache)
	}
	return p, err
}

// joinCache is what the cache did for a request whose pages so far had
// was, when the next has now.
func joinCache(was, now observe.Cache) observe.Cache {
	switch {
	case was == observe.CacheNone || was == now:
		return now
	case now == observe.CacheNone:
		return was
	}
	return observe.CachePartial
}

type observedLimiter struct {
	ratelimit.Limiter
	o observe.Observer
}

func (l observedLimiter) Allow(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	cctx, done := call(l.o, ctx, observe.OpRateLimit, observedIn(ctx).accountID, "")
	d, err := l.Limiter.Allow(cctx, key, p)
	done(err)
	seen := observedIn(ctx)
	switch {
	case err != nil && !errors.Is(err, context.Canceled):
		seen.rateLimit = observe.RateLimitFailed
	case err != nil:
	case d.Allowed:
		seen.rateLimit = observe.RateLimitAllowed
	default:
		seen.rateLimit = observe.RateLimitRefused
	}
	return d, err
}

type observedCharger struct {
	ratelimit.Charger
	o observe.Observer
}

func (l observedCharger) Charge(ctx context.Context, key string, p ratelimit.Policy, n int) (ratelimit.Decision, error) {
	cctx, done := call(l.o, ctx, observe.OpRateLimit, observedIn(ctx).accountID, "")
	d, err := l.Charger.Charge(cctx, key, p, n)
	done(err)
	return d, err
}
