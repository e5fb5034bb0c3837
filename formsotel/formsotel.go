// Package formsotel reports what the forms API's handler does to
// OpenTelemetry: request, store, cache and rate-limit metrics under the
// semantic conventions' names, and a span over every call the handler
// makes to the key resolver, the rate limiter and the store, nested under
// the span of the request (an otelhttp handler's, say) through the
// request's context. Give the handler an Observer:
//
//	obs, err := formsotel.New()
//	…
//	api := formsapi.NewHandler(store, store, formsapi.WithObserver(obs))
//	http.ListenAndServe(addr, otelhttp.NewHandler(api, "forms API"))
//
// # Metrics
//
//   - http.server.request.duration (histogram, s): every request the
//     handler answers, with http.request.method, http.route (the pattern
//     that answered, "/v1/forms/{formId}/submissions"; none for a path the
//     API does not serve) and http.response.status_code.
//   - db.client.operation.duration (histogram, s): every call to the key
//     resolver or the store, with db.operation.name (one of the
//     observe.Op constants but rate_limit), db.system.name when given
//     with WithDBSystemName, and error.type when the call failed:
//     "timeout", "canceled" or "_OTHER". A refused key and a form not
//     found are answers, not failures.
//   - formsapi.rate_limit.duration (histogram, s): every call to the rate
//     limiter, with db.operation.name "rate_limit" and error.type
//     likewise; no db.system.name, since the limiter may not be the
//     store (it may keep its counts in memory or in Redis).
//   - formsapi.cache.lookups (counter): pages of submissions (and
//     pgstore's pages of forms) for which the store's read cache was
//     asked, by formsapi.cache.result: "hit" (the whole page from
//     memory), "partial" (its start, or some of a forms page's reads),
//     "miss", "spliced" (pgstore: the page held at an older version of
//     its form, and only the submissions added since read).
//   - formsapi.rate_limit.decisions (counter): by
//     formsapi.rate_limit.decision: "allowed", "refused" (a 429) or
//     "failed" (the limiter did not answer in time, or failed).
//   - formsapi.keys.refused (counter): requests whose key was refused
//     (malformed, unknown, revoked or expired); requests without a key
//     are not counted.
//   - formsapi.feed.pages (counter): pages of the sync feed served (200),
//     by formsapi.feed.has_more: true when the page ended before the
//     feed's end, so its client is behind (a share of true that grows
//     says the feed's readers are falling behind its writers).
//   - formsapi.page.bytes (counter, By): the bytes of the pages served
//     (200), as sent (compressed, when they were), by formsapi.page.kind:
//     "forms", "submissions" or "feed".
//
// It is also an observe.DeliveryObserver: give it to a webhook
// dispatcher (webhook.WithObserver) for these:
//
//   - formsapi.webhook.attempts (counter): every attempt to deliver an
//     event, by formsapi.webhook.outcome ("success", "redirect",
//     "client_error", "gone", "throttled", "server_error", "timeout",
//     "network"), formsapi.webhook.retry (false for an event's first
//     attempt) and formsapi.webhook.event ("submission.created",
//     "submission.deleted").
//   - formsapi.webhook.attempt.duration (histogram, s): each attempt's
//     time, by formsapi.webhook.outcome.
//   - formsapi.webhook.lag (histogram, s): for each delivered
//     submission.created, from its createdAt to the 2xx.
//   - formsapi.webhook.lag.positions (histogram, {position}): for each
//     delivered event, the feed positions between it and the last entry
//     the dispatcher had read of its form.
//   - formsapi.webhook.endpoints.changed (counter): endpoints the
//     dispatcher disabled, or stopped a form of for a resync, or started
//     a form of over (it was deleted and created again), by
//     formsapi.webhook.state ("disabled", "resync", "restart") and
//     formsapi.webhook.reason ("gone", "failing", "filter",
//     "retention", "recreated").
//
// No endpoint URL or secret is ever recorded; the endpoint ID
// (formsapi.webhook.endpoint.id), like the account and form IDs, only
// with WithIDAttributes.
//
// No metric attribute, and no span attribute, carries an API key, a
// cursor or submission data, ever; nor an account ID or a form ID unless
// the host opts in with WithIDAttributes. Every account and form would
// make series of their own on every metric (a metrics backend's cost
// grows with the number of series, and one tenant's burst of new forms
// would grow it), and an account ID may be personal data that a
// telemetry pipeline, kept longer and seen by more people than the
// database, should not hold by default.
//
// # Spans
//
// Every call gets a client span named by its operation ("authorize",
// "rate_limit", "list_forms", "list_submissions", "sync_submissions"),
// with db.operation.name and db.system.name (not for rate_limit), child of the span in the
// request's context and parent of whatever the dependency starts itself
// (pgx's tracer, go-redis's). A failed call's span has status Error and
// error.type, never the error's text, which may quote SQL or a server's
// address. When the request's own span records, it gets http.route.
package formsotel

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/observe"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/formsapi/formsapi/formsotel"

// The attributes of this package's own: the semantic conventions have no
// names for them.
const (
	CacheResultKey       = attribute.Key("formsapi.cache.result")
	RateLimitDecisionKey = attribute.Key("formsapi.rate_limit.decision")
	PageKindKey          = attribute.Key("formsapi.page.kind")
	FeedHasMoreKey       = attribute.Key("formsapi.feed.has_more")
	AccountIDKey         = attribute.Key("formsapi.account.id") // only with WithIDAttributes
	FormIDKey            = attribute.Key("formsapi.form.id")    // only with WithIDAttributes
	OutcomeKey           = attribute.Key("formsapi.webhook.outcome")
	RetryKey             = attribute.Key("formsapi.webhook.retry")
	EventKey             = attribute.Key("formsapi.webhook.event")
	StateKey             = attribute.Key("formsapi.webhook.state")
	ReasonKey            = attribute.Key("formsapi.webhook.reason")
	EndpointIDKey        = attribute.Key("formsapi.webhook.endpoint.id") // only with WithIDAttributes
)

// Option configures an Observer.
type Option func(*config)

type config struct {
	meters   metric.MeterProvider
	tracers  trace.TracerProvider
	dbSystem string
	ids      bool
}

// WithMeterProvider records metrics with mp instead of the global
// provider (otel.GetMeterProvider() when New is called).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meters = mp }
}

// WithTracerProvider starts spans with tp instead of the global provider
// (otel.GetTracerProvider() when New is called).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracers = tp }
}

// WithDBSystemName sets db.system.name on the store's spans and
// db.client.operation.duration, in the conventions' words:
// "postgresql", "sqlite", or the store the host wrote over. The observer
// cannot tell which store the handler has.
func WithDBSystemName(name string) Option {
	return func(c *config) { c.dbSystem = name }
}

// WithIDAttributes adds the account ID (formsapi.account.id) and the form
// ID (formsapi.form.id), where known, to every metric and span. Without
// it neither is recorded anywhere. Turn it on only with few accounts and
// forms, and when the telemetry backend may hold account IDs: each
// account and form makes series of its own on every metric.
func WithIDAttributes() Option {
	return func(c *config) { c.ids = true }
}

// Observer records what a formsapi handler does as OpenTelemetry metrics
// and spans. Give it to formsapi.WithObserver. It is safe for concurrent
// use.
type Observer struct {
	tracer trace.Tracer
	ids    bool
	system []attribute.KeyValue // db.system.name, or none

	requestDuration metric.Float64Histogram
	dbDuration      metric.Float64Histogram
	limitDuration   metric.Float64Histogram
	cacheLookups    metric.Int64Counter
	limitDecisions  metric.Int64Counter
	refusedKeys     metric.Int64Counter
	feedPages       metric.Int64Counter
	pageBytes       metric.Int64Counter

	attempts        metric.Int64Counter
	attemptDuration metric.Float64Histogram
	lag             metric.Float64Histogram
	lagPositions    metric.Int64Histogram
	endpointChanges metric.Int64Counter
}

var (
	_ observe.Observer         = (*Observer)(nil)
	_ observe.DeliveryObserver = (*Observer)(nil)
)

// The histograms' bucket boundaries, in seconds: those the semantic
// conventions advise for HTTP server and database client durations.
var (
	httpBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	dbBuckets   = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}
	// lagBuckets reach past the retry schedule's hours.
	lagBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 36000, 86400}
)

// New returns an Observer recording to the global meter and tracer
// providers, or those the options name. It fails only if an instrument
// cannot be made.
func New(opts ...Option) (*Observer, error) {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.meters == nil {
		c.meters = otel.GetMeterProvider()
	}
	if c.tracers == nil {
		c.tracers = otel.GetTracerProvider()
	}
	meter := c.meters.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	o := &Observer{tracer: c.tracers.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)), ids: c.ids}
	if c.dbSystem != "" {
		o.system = []attribute.KeyValue{semconv.DBSystemNameKey.String(c.dbSystem)}
	}
	var errs []error
	histogram := func(name, desc string, buckets []float64) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		n, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return n
	}
	o.requestDuration = histogram("http.server.request.duration", "Duration of HTTP server requests.", httpBuckets)
	o.dbDuration = histogram("db.client.operation.duration", "Duration of database client operations.", dbBuckets)
	o.limitDuration = histogram("formsapi.rate_limit.duration", "Duration of the rate limiter's calls.", dbBuckets)
	o.cacheLookups = counter("formsapi.cache.lookups", "{lookup}", "Pages of submissions or forms the read cache was asked for, by result.")
	o.limitDecisions = counter("formsapi.rate_limit.decisions", "{decision}", "Rate-limit decisions, by decision.")
	o.refusedKeys = counter("formsapi.keys.refused", "{request}", "Requests whose API key was refused.")
	o.feedPages = counter("formsapi.feed.pages", "{page}", "Pages of the sync feed served.")
	o.pageBytes = counter("formsapi.page.bytes", "By", "Bytes of the pages served, as sent.")
	o.attempts = counter("formsapi.webhook.attempts", "{attempt}", "Attempts to deliver webhook events, by outcome.")
	o.attemptDuration = histogram("formsapi.webhook.attempt.duration", "Duration of webhook delivery attempts.", httpBuckets)
	o.lag = histogram("formsapi.webhook.lag", "Time from a submission's createdAt to its event's 2xx.", lagBuckets)
	lagPositions, err := meter.Int64Histogram("formsapi.webhook.lag.positions", metric.WithUnit("{position}"),
		metric.WithDescription("Feed positions between a delivered event and the last entry read of its form."),
		metric.WithExplicitBucketBoundaries(0, 1, 10, 100, 1000, 10000, 100000))
	errs = append(errs, err)
	o.lagPositions = lagPositions
	o.endpointChanges = counter("formsapi.webhook.endpoints.changed", "{endpoint}", "Endpoints the dispatcher disabled, or stopped or started over a form of, by state and reason.")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

// Call starts a span over a call to a dependency and returns its context,
// and a func that ends the span and records the call's duration.
func (o *Observer) Call(ctx context.Context, c observe.Call) (context.Context, func(error)) {
	start := time.Now()
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, semconv.DBOperationNameKey.String(c.Op))
	hist := o.dbDuration
	if c.Op == observe.OpRateLimit {
		hist = o.limitDuration // the limiter is not the store: in memory, Redis or the database
	} else {
		attrs = append(attrs, o.system...)
	}
	attrs = o.appendIDs(attrs, c.AccountID, c.FormID)
	ctx, span := o.tracer.Start(ctx, c.Op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...), trace.WithTimestamp(start))
	return ctx, func(err error) {
		elapsed := time.Since(start)
		if t := errorType(err); t != "" {
			attrs = append(attrs, semconv.ErrorTypeKey.String(t))
			span.SetAttributes(semconv.ErrorTypeKey.String(t))
			span.SetStatus(codes.Error, t)
		}
		span.End()
		hist.Record(context.WithoutCancel(ctx), elapsed.Seconds(), metric.WithAttributes(attrs...))
	}
}

// errorType classifies a failed call for error.type, "" for success and
// for the answers that are no failure: a refused key, a form not found.
func errorType(err error) string {
	switch {
	case err == nil, errors.Is(err, formsapi.ErrInvalidKey), errors.Is(err, formsapi.ErrFormNotFound):
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "_OTHER"
}

// Request records a request the handler answered.
func (o *Observer) Request(ctx context.Context, r observe.Request) {
	ctx = context.WithoutCancel(ctx) // a client gone still counts
	route := routePath(r.Route)
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(method(r.Method)), semconv.HTTPResponseStatusCodeKey.Int(r.Status))
	if route != "" {
		attrs = append(attrs, semconv.HTTPRouteKey.String(route))
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.SetAttributes(semconv.HTTPRouteKey.String(route))
		}
	}
	attrs = o.appendIDs(attrs, r.AccountID, r.FormID)
	o.requestDuration.Record(ctx, r.Duration.Seconds(), metric.WithAttributes(attrs...))

	ids := o.appendIDs(nil, r.AccountID, r.FormID)
	if r.Cache != observe.CacheNone {
		o.cacheLookups.Add(ctx, 1, metric.WithAttributes(append(ids, CacheResultKey.String(r.Cache.String()))...))
	}
	if r.RateLimit != observe.RateLimitNone {
		o.limitDecisions.Add(ctx, 1, metric.WithAttributes(append(ids, RateLimitDecisionKey.String(r.RateLimit.String()))...))
	}
	if r.KeyRefused {
		o.refusedKeys.Add(ctx, 1) // no account: the key was not one
	}
	if r.Status != http.StatusOK {
		return
	}
	kind := ""
	switch {
	case r.Feed:
		kind = "feed"
		o.feedPages.Add(ctx, 1, metric.WithAttributes(append(ids, FeedHasMoreKey.Bool(r.FeedHasMore))...))
	case route == "/v1/forms":
		kind = "forms"
	case route == "/v1/forms/{formId}/submissions":
		kind = "submissions"
	default:
		return // the OpenAPI document is no page
	}
	o.pageBytes.Add(ctx, r.BodyBytes, metric.WithAttributes(append(ids, PageKindKey.String(kind))...))
}

// appendIDs appends the account and form IDs that are known, if the host
// opted in.
func (o *Observer) appendIDs(attrs []attribute.KeyValue, account, form string) []attribute.KeyValue {
	if !o.ids {
		return attrs
	}
	if account != "" {
		attrs = append(attrs, AccountIDKey.String(account))
	}
	if form != "" {
		attrs = append(attrs, FormIDKey.String(form))
	}
	return attrs
}

// routePath returns the path of a route pattern, "GET /v1/forms" as
// "/v1/forms": http.route is the path template, the method has its own
// attribute.
func routePath(route string) string {
	if _, path, ok := strings.Cut(route, " "); ok {
		return path
	}
	return route
}

// method returns m if it is one of the methods HTTP defines, and "_OTHER"
// otherwise, as the conventions ask: a client can send any token as a
// method, and each would make series of its own.
func method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

// Attempt records one webhook delivery attempt (observe.DeliveryObserver).
func (o *Observer) Attempt(ctx context.Context, a observe.Attempt) {
	attrs := []attribute.KeyValue{OutcomeKey.String(a.Outcome), RetryKey.Bool(a.Retry), EventKey.String(a.EventType)}
	attrs = o.appendEndpoint(o.appendIDs(attrs, a.AccountID, a.FormID), a.EndpointID)
	set := metric.WithAttributes(attrs...)
	o.attempts.Add(ctx, 1, set)
	o.attemptDuration.Record(ctx, a.Duration.Seconds(), set)
	if a.Outcome == "success" {
		ids := metric.WithAttributes(o.appendEndpoint(o.appendIDs(nil, a.AccountID, a.FormID), a.EndpointID)...)
		if a.Lag > 0 {
			o.lag.Record(ctx, a.Lag.Seconds(), ids)
		}
		o.lagPositions.Record(ctx, a.LagPositions, ids)
	}
}

// EndpointChanged records an endpoint the dispatcher disabled, or a form
// of it the dispatcher stopped or started over (observe.DeliveryObserver).
func (o *Observer) EndpointChanged(ctx context.Context, c observe.EndpointChange) {
	attrs := []attribute.KeyValue{StateKey.String(c.State), ReasonKey.String(c.Reason)}
	attrs = o.appendEndpoint(o.appendIDs(attrs, c.AccountID, c.FormID), c.EndpointID)
	o.endpointChanges.Add(ctx, 1, metric.WithAttributes(attrs...))
}

func (o *Observer) appendEndpoint(attrs []attribute.KeyValue, id string) []attribute.KeyValue {
	if o.ids && id != "" {
		attrs = append(attrs, EndpointIDKey.String(id))
	}
	return attrs
}
