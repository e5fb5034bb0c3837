package formsotel_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsotel"
	"github.com/formsapi/formsapi/internal/testenv"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// telemetry is an OpenTelemetry SDK that keeps what it is given in
// memory, and an observer recording to it.
type telemetry struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	obs    *formsotel.Observer
}

func newTelemetry(t *testing.T, opts ...formsotel.Option) *telemetry {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { tp.Shutdown(context.Background()); mp.Shutdown(context.Background()) })
	obs, err := formsotel.New(append([]formsotel.Option{formsotel.WithMeterProvider(mp), formsotel.WithTracerProvider(tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &telemetry{reader: reader, spans: spans, tp: tp, obs: obs}
}

// serve serves h over real HTTP inside a server span of tel's tracer, as
// otelhttp would start it: the handler's spans must nest under it.
func (tel *telemetry) serve(t *testing.T, h http.Handler) *httptest.Server {
	tracer := tel.tp.Tracer("host")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := tracer.Start(r.Context(), "request "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		h.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, path, key string) int {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// point is one data point of a metric: its attributes as a map, and its
// value (a histogram's count).
type point struct {
	attrs map[string]string
	value int64
	sum   float64
}

func (tel *telemetry) collect(t *testing.T) map[string][]point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string][]point{}
	attrs := func(s attribute.Set) map[string]string {
		m := map[string]string{}
		for _, kv := range s.ToSlice() {
			m[string(kv.Key)] = kv.Value.String()
		}
		return m
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != formsotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, formsotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] = append(got[m.Name], point{attrs: attrs(p.Attributes), value: p.Value})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name] = append(got[m.Name], point{attrs: attrs(p.Attributes), value: int64(p.Count), sum: p.Sum})
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] = append(got[m.Name], point{attrs: attrs(p.Attributes), value: int64(p.Count), sum: float64(p.Sum)})
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return got
}

// find returns the value of the point of name whose attributes are want
// exactly, or -1.
func find(points map[string][]point, name string, want map[string]string) int64 {
	for _, p := range points[name] {
		if len(p.attrs) != len(want) {
			continue
		}
		match := true
		for k, v := range want {
			if p.attrs[k] != v {
				match = false
			}
		}
		if match {
			return p.value
		}
	}
	return -1
}

func seededSQLite(t *testing.T) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "forms.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := storetest.Load(context.Background(), s, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	return s
}

const page = "/v1/forms/" + storetest.FormBusy + "/submissions?limit=2"

// TestMetrics: a real handler over sqlitestore (with its read cache) and
// a rate limit of three requests, over real HTTP; every metric the
// package documents is read back from the SDK's in-memory reader, by
// name, attributes and value, and no attribute carries a key, an account
// or a form.
func TestMetrics(t *testing.T) {
	is := is.New(t)
	tel := newTelemetry(t, formsotel.WithDBSystemName("sqlite"))
	s := seededSQLite(t)
	api := formsapi.NewHandler(s, s, formsapi.WithObserver(tel.obs),
		formsapi.WithRateLimit(ratelimit.Options{Limiter: ratelimit.NewMemory(), Policy: ratelimit.Policy{Name: "test", Quota: 4, Window: time.Hour}}))
	srv := tel.serve(t, api)

	is.Equal(get(t, srv, page, storetest.KeyA), 200)                                                              // a miss
	is.Equal(get(t, srv, page, storetest.KeyA), 200)                                                              // a hit
	is.Equal(get(t, srv, "/v1/forms/"+storetest.FormBusy+"/submissions?sync=start&limit=1", storetest.KeyA), 200) // a feed page, with more after it
	is.Equal(get(t, srv, "/v1/forms", storetest.KeyA), 200)                                                       // the last the limit allows
	is.Equal(get(t, srv, "/v1/forms", storetest.KeyA), 429)                                                       // refused
	is.Equal(get(t, srv, "/v1/forms", storetest.KeyNotAdded), 401)                                                // a refused key
	is.Equal(get(t, srv, "/v1/forms", ""), 401)                                                                   // no key: not a refused one
	is.Equal(get(t, srv, "/v1/nowhere", storetest.KeyA), 404)                                                     // no route
	is.Equal(get(t, srv, "/v1/openapi.json", ""), 200)                                                            // no page

	// The client can read the whole document before the handler's goroutine
	// records the request (its last write returns once the kernel has the
	// bytes): wait for that record, not for an amount of time.
	testenv.WaitFor(t, func() bool {
		return find(tel.collect(t), "http.server.request.duration", map[string]string{"http.request.method": "GET", "http.route": "/v1/openapi.json", "http.response.status_code": "200"}) == 1
	})
	m := tel.collect(t)
	const subs = "/v1/forms/{formId}/submissions"
	is.Equal(find(m, "http.server.request.duration", map[string]string{"http.request.method": "GET", "http.route": subs, "http.response.status_code": "200"}), int64(3))
	is.Equal(find(m, "http.server.request.duration", map[string]string{"http.request.method": "GET", "http.route": "/v1/forms", "http.response.status_code": "200"}), int64(1))
	is.Equal(find(m, "http.server.request.duration", map[string]string{"http.request.method": "GET", "http.route": "/v1/forms", "http.response.status_code": "429"}), int64(1))
	is.Equal(find(m, "http.server.request.duration", map[string]string{"http.request.method": "GET", "http.route": "/v1/forms", "http.response.status_code": "401"}), int64(2))
	is.Equal(find(m, "http.server.request.duration", map[string]string{"http.request.method": "GET", "http.response.status_code": "404"}), int64(1)) // no http.route for no route
	is.Equal(find(m, "http.server.request.duration", map[string]string{"http.request.method": "GET", "http.route": "/v1/openapi.json", "http.response.status_code": "200"}), int64(1))

	db := func(op string) int64 {
		return find(m, "db.client.operation.duration", map[string]string{"db.operation.name": op, "db.system.name": "sqlite"})
	}
	is.Equal(db("authorize"), int64(6))        // every request with a key on a route, the refused one too
	is.Equal(db("list_submissions"), int64(2)) // the two pages
	is.Equal(db("sync_submissions"), int64(1))
	is.Equal(db("list_forms"), int64(1))                                                                              // not the refused ones
	is.Equal(find(m, "formsapi.rate_limit.duration", map[string]string{"db.operation.name": "rate_limit"}), int64(5)) // not the store's system
	for _, p := range m["db.client.operation.duration"] {
		is.True(p.sum >= 0)
		_, failed := p.attrs["error.type"]
		is.True(!failed) // a refused key is no failure
	}

	is.Equal(find(m, "formsapi.cache.lookups", map[string]string{"formsapi.cache.result": "miss"}), int64(1))
	is.Equal(find(m, "formsapi.cache.lookups", map[string]string{"formsapi.cache.result": "hit"}), int64(1))
	is.Equal(len(m["formsapi.cache.lookups"]), 2) // the feed and the forms are not cache lookups
	is.Equal(find(m, "formsapi.rate_limit.decisions", map[string]string{"formsapi.rate_limit.decision": "allowed"}), int64(4))
	is.Equal(find(m, "formsapi.rate_limit.decisions", map[string]string{"formsapi.rate_limit.decision": "refused"}), int64(1))
	is.Equal(find(m, "formsapi.keys.refused", map[string]string{}), int64(1))
	is.Equal(find(m, "formsapi.feed.pages", map[string]string{"formsapi.feed.has_more": "true"}), int64(1)) // its client is behind
	subsBytes := find(m, "formsapi.page.bytes", map[string]string{"formsapi.page.kind": "submissions"})
	is.True(subsBytes > 2*100) // two pages of two submissions
	is.True(find(m, "formsapi.page.bytes", map[string]string{"formsapi.page.kind": "feed"}) > 0)
	is.True(find(m, "formsapi.page.bytes", map[string]string{"formsapi.page.kind": "forms"}) > 0)
	is.Equal(len(m["formsapi.page.bytes"]), 3) // not the OpenAPI document

	// Nothing names a key, an account or a form.
	for name, points := range m {
		for _, p := range points {
			for k, v := range p.attrs {
				for _, secret := range []string{storetest.KeyA, storetest.KeyNotAdded, storetest.AccountA, storetest.FormBusy} {
					if strings.Contains(v, secret) {
						t.Errorf("%s: attribute %s=%q names %q", name, k, v, secret)
					}
				}
			}
		}
	}
	for _, sp := range tel.spans.Ended() {
		for _, kv := range sp.Attributes() {
			for _, secret := range []string{storetest.KeyA, storetest.KeyNotAdded, storetest.AccountA, storetest.FormBusy} {
				if strings.Contains(kv.Value.String(), secret) {
					t.Errorf("span %s: attribute %s names %q", sp.Name(), kv.Key, secret)
				}
			}
		}
	}
}

// TestIDAttributesOptIn: with WithIDAttributes the account and form IDs
// are on the metrics and spans, where known; never the key.
func TestIDAttributesOptIn(t *testing.T) {
	is := is.New(t)
	tel := newTelemetry(t, formsotel.WithIDAttributes())
	s := memstore.New()
	is.NoErr(storetest.Load(context.Background(), s, storetest.DefaultSeed()))
	srv := tel.serve(t, formsapi.NewHandler(s, s, formsapi.WithObserver(tel.obs)))
	is.Equal(get(t, srv, page, storetest.KeyA), 200)

	m := tel.collect(t)
	is.Equal(find(m, "http.server.request.duration", map[string]string{
		"http.request.method": "GET", "http.route": "/v1/forms/{formId}/submissions", "http.response.status_code": "200",
		"formsapi.account.id": storetest.AccountA, "formsapi.form.id": storetest.FormBusy,
	}), int64(1))
	is.Equal(find(m, "db.client.operation.duration", map[string]string{
		"db.operation.name": "list_submissions", "formsapi.account.id": storetest.AccountA, "formsapi.form.id": storetest.FormBusy,
	}), int64(1))
	is.Equal(find(m, "db.client.operation.duration", map[string]string{"db.operation.name": "authorize"}), int64(1)) // no account before the key is looked up
	is.Equal(len(m["formsapi.cache.lookups"]), 0)                                                                    // memstore has no cache
	var found bool
	for _, sp := range tel.spans.Ended() {
		if sp.Name() == "list_submissions" {
			found = true
			is.True(hasAttr(sp.Attributes(), "formsapi.account.id", storetest.AccountA))
		}
		for _, kv := range sp.Attributes() {
			is.True(!strings.Contains(kv.Value.String(), storetest.KeyA)) // never the key
		}
	}
	is.True(found)
}

func hasAttr(kvs []attribute.KeyValue, key, value string) bool {
	for _, kv := range kvs {
		if string(kv.Key) == key && kv.Value.String() == value {
			return true
		}
	}
	return false
}

// TestSpansNestUnderTheRequest: every call's span is a client span, a
// child of the request's server span (in the same trace), and the parent
// of what the store starts with the context it is given; the request's
// span gets http.route.
func TestSpansNestUnderTheRequest(t *testing.T) {
	is := is.New(t)
	tel := newTelemetry(t, formsotel.WithDBSystemName("sqlite"))
	s := seededSQLite(t)
	inner := tel.tp.Tracer("driver")
	store := tracingStore{Store: s, tracer: inner}
	api := formsapi.NewHandler(store, s, formsapi.WithObserver(tel.obs),
		formsapi.WithRateLimit(ratelimit.Options{Limiter: ratelimit.NewMemory(), Policy: ratelimit.Policy{Name: "test", Quota: 10, Window: time.Hour}}))
	srv := tel.serve(t, api)
	is.Equal(get(t, srv, "/v1/forms", storetest.KeyA), 200)

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range tel.spans.Ended() {
		byName[sp.Name()] = sp
	}
	root := byName["request /v1/forms"]
	is.True(root != nil)
	is.True(hasAttr(root.Attributes(), "http.route", "/v1/forms")) // the request's span learns its route
	for _, op := range []string{"authorize", "rate_limit", "list_forms"} {
		sp := byName[op]
		is.True(sp != nil)                                                 // a span per call
		is.Equal(sp.SpanKind(), trace.SpanKindClient)                      // of a client
		is.Equal(sp.Parent().SpanID(), root.SpanContext().SpanID())        // under the request's
		is.Equal(sp.SpanContext().TraceID(), root.SpanContext().TraceID()) // in its trace
		is.True(hasAttr(sp.Attributes(), "db.operation.name", op))
		is.Equal(sp.Status().Code, codes.Unset) // no failure
	}
	driver := byName["driver query"]
	is.True(driver != nil)
	is.Equal(driver.Parent().SpanID(), byName["list_forms"].SpanContext().SpanID()) // the store's own span is under the call's
}

// tracingStore starts a span of its own on ListForms, as a traced
// database driver would, with the context the handler gives it.
type tracingStore struct {
	formsapi.Store
	tracer trace.Tracer
}

func (s tracingStore) ListForms(ctx context.Context, account string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	ctx, span := s.tracer.Start(ctx, "driver query")
	defer span.End()
	return s.Store.ListForms(ctx, account, q)
}

// failingStore fails every list of forms, or times out.
type failingStore struct {
	formsapi.Store
	err error
}

func (s failingStore) ListForms(context.Context, string, formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	return formsapi.Page[formsapi.Form]{}, s.err
}

// TestFailedCalls: a store call that fails is recorded with error.type,
// and its span has status Error with the type, never the error's text.
func TestFailedCalls(t *testing.T) {
	is := is.New(t)
	tel := newTelemetry(t)
	s := memstore.New()
	is.NoErr(storetest.Load(context.Background(), s, storetest.DefaultSeed()))
	quiet := formsapi.WithLogger(slog.New(slog.DiscardHandler))
	srv := tel.serve(t, formsapi.NewHandler(failingStore{s, errors.New("secret SQL text")}, s, formsapi.WithObserver(tel.obs), quiet))
	is.Equal(get(t, srv, "/v1/forms", storetest.KeyA), 500)
	srv = tel.serve(t, formsapi.NewHandler(failingStore{s, context.DeadlineExceeded}, s, formsapi.WithObserver(tel.obs), quiet))
	is.Equal(get(t, srv, "/v1/forms", storetest.KeyA), 503)

	m := tel.collect(t)
	is.Equal(find(m, "db.client.operation.duration", map[string]string{"db.operation.name": "list_forms", "error.type": "_OTHER"}), int64(1))
	is.Equal(find(m, "db.client.operation.duration", map[string]string{"db.operation.name": "list_forms", "error.type": "timeout"}), int64(1))
	is.Equal(find(m, "http.server.request.duration", map[string]string{"http.request.method": "GET", "http.route": "/v1/forms", "http.response.status_code": "500"}), int64(1))
	var failed int
	for _, sp := range tel.spans.Ended() {
		if sp.Name() != "list_forms" {
			continue
		}
		failed++
		is.Equal(sp.Status().Code, codes.Error)
		is.True(sp.Status().Description == "_OTHER" || sp.Status().Description == "timeout")
		is.Equal(len(sp.Events()), 0) // no error event with the text
	}
	is.Equal(failed, 2)
}

// TestUnknownMethod: a method HTTP does not define is recorded as _OTHER,
// so that a client cannot make series at will.
func TestUnknownMethod(t *testing.T) {
	is := is.New(t)
	tel := newTelemetry(t)
	s := memstore.New()
	srv := tel.serve(t, formsapi.NewHandler(s, s, formsapi.WithObserver(tel.obs)))
	req, _ := http.NewRequest("BREW", srv.URL+"/v1/forms", nil)
	res, err := srv.Client().Do(req)
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, 405)
	m := tel.collect(t)
	is.Equal(find(m, "http.server.request.duration", map[string]string{"http.request.method": "_OTHER", "http.route": "/v1/forms", "http.response.status_code": "405"}), int64(1))
}

// TestDeliveryMetrics: attempts by outcome, retry and event; the lag in
// seconds and positions of successes; endpoint changes by state and
// reason; and no account, form or endpoint ID unless the host opts in.
func TestDeliveryMetrics(t *testing.T) {
	t.Parallel()
	for _, ids := range []bool{false, true} {
		var opts []formsotel.Option
		if ids {
			opts = append(opts, formsotel.WithIDAttributes())
		}
		tel := newTelemetry(t, opts...)
		ctx := context.Background()
		a := observe.Attempt{Outcome: "server_error", EventType: "submission.created", Duration: time.Second, AccountID: "acct", FormID: "form", EndpointID: "ep_1"}
		tel.obs.Attempt(ctx, a)
		a.Outcome, a.Retry, a.Lag, a.LagPositions = "success", true, 90*time.Second, 7
		tel.obs.Attempt(ctx, a)
		tel.obs.EndpointChanged(ctx, observe.EndpointChange{State: "disabled", Reason: "gone", AccountID: "acct", EndpointID: "ep_1"})
		got := tel.collect(t)
		with := func(m map[string]string) map[string]string {
			if ids {
				m["formsapi.account.id"], m["formsapi.webhook.endpoint.id"] = "acct", "ep_1"
				if _, ok := m["formsapi.webhook.state"]; !ok {
					m["formsapi.form.id"] = "form"
				}
			}
			return m
		}
		ev := "submission.created"
		if n := find(got, "formsapi.webhook.attempts", with(map[string]string{"formsapi.webhook.outcome": "server_error", "formsapi.webhook.retry": "false", "formsapi.webhook.event": ev})); n != 1 {
			t.Errorf("ids %v: failed first attempts %d, want 1", ids, n)
		}
		if n := find(got, "formsapi.webhook.attempts", with(map[string]string{"formsapi.webhook.outcome": "success", "formsapi.webhook.retry": "true", "formsapi.webhook.event": ev})); n != 1 {
			t.Errorf("ids %v: successful retries %d, want 1", ids, n)
		}
		if n := find(got, "formsapi.webhook.lag", with(map[string]string{})); n != 1 || got["formsapi.webhook.lag"][0].sum != 90 {
			t.Errorf("ids %v: lag %d points %v, want one of 90 s", ids, n, got["formsapi.webhook.lag"])
		}
		if p := got["formsapi.webhook.lag.positions"]; len(p) != 1 || p[0].sum != 7 {
			t.Errorf("ids %v: lag in positions %v, want one of 7", ids, p)
		}
		if n := find(got, "formsapi.webhook.endpoints.changed", with(map[string]string{"formsapi.webhook.state": "disabled", "formsapi.webhook.reason": "gone"})); n != 1 {
			t.Errorf("ids %v: disabled endpoints %d, want 1", ids, n)
		}
	}
}
