package main

// What an operator's tooling asks of the server besides the API: health
// checks for a load balancer or an orchestrator, and metrics for
// Prometheus on a listener of their own.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsotel"
)

// readyTimeout bounds a readiness check: a probe wants an answer, and a
// store that takes longer than this to answer a one-row query is not
// ready to serve.
const readyTimeout = time.Second

// readinessAccount is the account the readiness check lists the forms
// of: none has this ID, so the check reads an index and no data.
const readinessAccount = "formsapi-readiness-check"

// storeReady reports whether store answers: its tables exist (the
// migrations ran: sqlitestore.Open and pgstore.New apply them before the
// server listens) and the database answers a query within ctx.
func storeReady(store formsapi.Store) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := store.ListForms(ctx, readinessAccount, formsapi.Query{Limit: 1})
		return err
	}
}

// withHealth serves /healthz and /readyz in front of next, outside /v1,
// without a key, and says nothing but "live", "ready" or "not ready":
//
//   - /healthz: 200 while the process serves HTTP at all (liveness: a
//     failing one means restart it).
//   - /readyz: 200 when ready says the store answers within
//     readyTimeout, 503 otherwise (readiness: send no traffic to it
//     for now; restarting would not help a database that is down), and
//     503 "starting" while the store opens (ready says errStarting).
//
// Neither is logged per request (probes come every few seconds); a
// change of readiness is, once, without the error's text, which may name
// the database's address.
//
// Probes that arrive while a check is in flight share its answer, so that
// however many come at once (anyone who can reach the port may send
// them) they hold at most one of the store's connections.
func withHealth(next http.Handler, ready func(context.Context) error, logger *slog.Logger) http.Handler {
	var notReady atomic.Bool
	var mu sync.Mutex
	var inFlight *readyCheck
	check := func() error {
		mu.Lock()
		c := inFlight
		if c == nil {
			c = &readyCheck{done: make(chan struct{})}
			inFlight = c
			go func() {
				// Not a request's context: the answer serves other probes too.
				ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
				defer cancel()
				c.err = ready(ctx)
				mu.Lock()
				inFlight = nil
				mu.Unlock()
				close(c.done)
			}()
		}
		mu.Unlock()
		<-c.done
		return c.err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			writeHealth(w, r, http.StatusOK, "live")
		case "/readyz":
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				writeHealth(w, r, http.StatusMethodNotAllowed, "") // before any check
				return
			}
			err := check()
			if errors.Is(err, errStarting) {
				writeHealth(w, r, http.StatusServiceUnavailable, "starting")
				return
			}
			if err != nil {
				if !notReady.Swap(true) {
					logger.Warn("not ready: the store does not answer", slog.Bool("timeout", errors.Is(err, context.DeadlineExceeded)))
				}
				writeHealth(w, r, http.StatusServiceUnavailable, "not ready")
				return
			}
			if notReady.Swap(false) {
				logger.Info("ready again: the store answers")
			}
			writeHealth(w, r, http.StatusOK, "ready")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// readyCheck is one check of the store; err is set before done closes.
type readyCheck struct {
	done chan struct{}
	err  error
}

func writeHealth(w http.ResponseWriter, r *http.Request, status int, what string) {
	h := w.Header()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		status, what = http.StatusMethodNotAllowed, "method not allowed"
	}
	body := `{"status":"` + what + `"}` + "\n"
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write([]byte(body))
	}
}

// metrics is the Prometheus side of -metrics-addr: an observer for the
// handler, recording to a registry of its own, and the server of that
// registry's /metrics.
type metrics struct {
	observer *formsotel.Observer
	srv      *http.Server
	ln       net.Listener
	provider *sdkmetric.MeterProvider
}

// newMetrics listens on addr for Prometheus's scrapes and returns the
// observer to give the handler. dbSystem names the store for
// db.system.name. The registry holds formsotel's metrics (through the
// OpenTelemetry Prometheus exporter) and the Go runtime's and process's
// own.
func newMetrics(addr, dbSystem string, logger *slog.Logger) (*metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	obs, err := formsotel.New(formsotel.WithMeterProvider(provider), formsotel.WithDBSystemName(dbSystem))
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	return &metrics{observer: obs, srv: srv, ln: ln, provider: provider}, nil
}

// url is where the metrics are served.
func (m *metrics) url() string { return "http://" + m.ln.Addr().String() + "/metrics" }

// serve serves the metrics until shutdown; it returns what Serve does.
func (m *metrics) serve() error { return m.srv.Serve(m.ln) }

// shutdown stops serving the metrics after the scrapes in flight.
func (m *metrics) shutdown(ctx context.Context) error {
	return errors.Join(m.srv.Shutdown(ctx), m.provider.Shutdown(ctx))
}

// checked returns the option build makes from a flag's value, or its
// panic as an error naming the flag: the library's options panic on a
// malformed argument, which from a command line is a typo, not a bug.
func checked(flag string, build func() formsapi.Option) (o formsapi.Option, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%s: %v", flag, v)
		}
	}()
	return build(), nil
}

// splitList splits a comma-separated flag value, dropping spaces around
// items and empty ones.
func splitList(s string) []string {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}
