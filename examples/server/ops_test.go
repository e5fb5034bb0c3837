package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/formsapi/formsapi/internal/pgtest"
)

// health gets path from s without a key and returns the status, the
// body and the headers.
func health(t *testing.T, method, url string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// TestHealthEndpoints: /healthz and /readyz answer without a key, outside
// /v1, with a status word and nothing about the data, are not logged per
// request, and are no path of the API's (which still answers its own
// 404 around them).
func TestHealthEndpoints(t *testing.T) {
	is := is.New(t)
	s := start(t, filepath.Join(t.TempDir(), "forms.db"))
	code, body, h := health(t, "GET", s.base+"/healthz")
	is.Equal(code, 200)
	is.Equal(body, `{"status":"live"}`+"\n")
	is.Equal(h.Get("Cache-Control"), "no-store")
	code, body, _ = health(t, "GET", s.base+"/readyz")
	is.Equal(code, 200)
	is.Equal(body, `{"status":"ready"}`+"\n")
	code, body, _ = health(t, "HEAD", s.base+"/readyz")
	is.Equal(code, 200)
	is.Equal(body, "")
	code, _, h = health(t, "POST", s.base+"/healthz")
	is.Equal(code, 405)
	is.Equal(h.Get("Allow"), "GET, HEAD")
	code, _, _ = health(t, "GET", s.base+"/v1/healthz")
	is.Equal(code, 404) // not under /v1
	code, _, _ = health(t, "GET", s.base+"/healthz/")
	is.Equal(code, 404) // exactly those paths
	is.NoErr(s.stop())
	is.True(!strings.Contains(s.out.String(), `"path":"/healthz"`)) // probes are not logged
	is.True(!strings.Contains(s.out.String(), `"path":"/readyz"`))
	is.True(strings.Contains(s.out.String(), `"path":"/v1/healthz"`)) // what the API answered is
}

// pgProxy forwards TCP connections to PostgreSQL until down is called,
// which closes its listener and every connection, as a database that
// went away; up listens again on the same address.
type pgProxy struct {
	t      *testing.T
	target string
	mu     sync.Mutex
	ln     net.Listener
	addr   string
	conns  []net.Conn
}

func newPGProxy(t *testing.T, target string) *pgProxy {
	p := &pgProxy{t: t, target: target, addr: "127.0.0.1:0"}
	p.up()
	t.Cleanup(p.down)
	return p
}

func (p *pgProxy) up() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			p.mu.Unlock()
			go func() { io.Copy(d, c); d.Close() }()
			go func() { io.Copy(c, d); c.Close() }()
		}
	}()
}

func (p *pgProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestReadyzWhilePostgresIsDown: over PostgreSQL, /readyz answers 503
// while the database does not answer (the server's connections to it cut
// and new ones refused), and 200 again once it does; /healthz stays 200
// throughout: the process is alive, a restart would not help. The
// change is logged once each way, without the DSN.
func TestReadyzWhilePostgresIsDown(t *testing.T) {
	is := is.New(t)
	dsn, schema := pgtest.Name(t)
	u, err := url.Parse(dsn)
	is.NoErr(err)
	proxy := newPGProxy(t, u.Host)
	u.Host = proxy.addr
	s := startArgs(t, "-postgres", u.String(), "-schema", schema, "-demo-key-file", filepath.Join(t.TempDir(), "demo-key"), "-rate-limit", "0")
	code, _, _ := health(t, "GET", s.base+"/readyz")
	is.Equal(code, 200) // up

	proxy.down()
	for range 2 {
		code, body, _ := health(t, "GET", s.base+"/readyz")
		is.Equal(code, 503) // down
		is.Equal(body, `{"status":"not ready"}`+"\n")
	}
	code, _, _ = health(t, "GET", s.base+"/healthz")
	is.Equal(code, 200) // but alive

	proxy.up()
	code, _, _ = health(t, "GET", s.base+"/readyz")
	is.Equal(code, 200) // up again
	code, _ = s.get(t, "/v1/forms", s.key)
	is.Equal(code, 200)
	is.NoErr(s.stop())
	logs := s.out.String()
	is.Equal(strings.Count(logs, "not ready: the store does not answer"), 1) // once, not per probe
	is.Equal(strings.Count(logs, "ready again"), 1)
	is.True(!strings.Contains(logs, proxy.addr)) // no address
}

// metricsURL reads the metrics URL from the server's listening line.
func metricsURL(t *testing.T, s server) string {
	t.Helper()
	m := regexp.MustCompile(`"metrics":"([^"]+)"`).FindStringSubmatch(s.out.String())
	if m == nil {
		t.Fatalf("no metrics URL in the log:\n%s", s.out.String())
	}
	return m[1]
}

// scrape gets url and parses it as Prometheus's text format, failing on
// anything a Prometheus server would refuse.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, res.StatusCode)
	}
	b, _ := io.ReadAll(res.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v\n%s", err, b)
	}
	return families
}

// value returns the value of the sample of family whose labels include
// want (a counter's value, a histogram's count), or -1.
func value(families map[string]*dto.MetricFamily, family string, want map[string]string) float64 {
	f := families[family]
	if f == nil {
		return -1
	}
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// TestMetricsAddr: -metrics-addr serves Prometheus's text format on a
// listener of its own (not on the API's), with the request, store, cache
// and rate-limit metrics, no key, account or form among the labels.
func TestMetricsAddr(t *testing.T) {
	is := is.New(t)
	s := start(t, filepath.Join(t.TempDir(), "forms.db"), "-metrics-addr", "127.0.0.1:0", "-rate-limit", "3")
	defer s.stop()
	mu := metricsURL(t, s)
	is.True(!strings.HasPrefix(mu, s.base)) // a listener of its own
	page := "/v1/forms/contact/submissions?limit=2"
	for _, want := range []int{200, 200, 200, 429} {
		code, _ := s.get(t, page, s.key)
		is.Equal(code, want)
	}
	code, _ := s.get(t, "/v1/forms", "fapi_wrong")
	is.Equal(code, 401)
	code, _ = s.get(t, "/metrics", "")
	is.Equal(code, 404) // not on the API's port

	f := scrape(t, mu)
	route := "/v1/forms/{formId}/submissions"
	is.Equal(value(f, "http_server_request_duration_seconds", map[string]string{"http_route": route, "http_response_status_code": "200", "http_request_method": "GET"}), 3.0)
	is.Equal(value(f, "http_server_request_duration_seconds", map[string]string{"http_route": route, "http_response_status_code": "429"}), 1.0)
	is.Equal(value(f, "db_client_operation_duration_seconds", map[string]string{"db_operation_name": "list_submissions", "db_system_name": "sqlite"}), 3.0)
	is.Equal(value(f, "formsapi_cache_lookups_total", map[string]string{"formsapi_cache_result": "miss"}), 1.0)
	is.Equal(value(f, "formsapi_cache_lookups_total", map[string]string{"formsapi_cache_result": "hit"}), 2.0)
	is.Equal(value(f, "formsapi_rate_limit_decisions_total", map[string]string{"formsapi_rate_limit_decision": "refused"}), 1.0)
	is.Equal(value(f, "formsapi_keys_refused_total", nil), 1.0)
	is.True(value(f, "formsapi_page_bytes_total", map[string]string{"formsapi_page_kind": "submissions"}) > 0)
	is.True(f["go_goroutines"] != nil) // the runtime's too
	for name, family := range f {
		for _, m := range family.Metric {
			for _, l := range m.Label {
				for _, secret := range []string{s.key, "demo", "contact"} {
					if strings.Contains(l.GetValue(), secret) && l.GetName() != "otel_scope_name" {
						t.Errorf("%s: label %s=%q names %q", name, l.GetName(), l.GetValue(), secret)
					}
				}
			}
		}
	}
}

// TestBaseURLAndCORSFlags: -base-url makes the next-page link the
// public one; -cors-origins answers a browser's preflight over real HTTP
// and marks the answers to that origin; a malformed value of either
// stops the server before it seeds, naming the flag.
func TestBaseURLAndCORSFlags(t *testing.T) {
	is := is.New(t)
	s := start(t, filepath.Join(t.TempDir(), "forms.db"), "-base-url", "https://forms.example.com/api/", "-cors-origins", "https://app.example.com, http://localhost:5173")
	defer s.stop()
	res := s.do(t, "/v1/forms/contact/submissions?limit=2", s.key)
	res.Body.Close()
	is.True(strings.HasPrefix(res.Header.Get("Link"), "<https://forms.example.com/api/v1/forms/contact/submissions?cursor=")) // the public URL

	req, _ := http.NewRequest("OPTIONS", s.base+"/v1/forms", nil)
	req.Header.Set("Origin", "http://localhost:5173")
	req.Header.Set("Access-Control-Request-Method", "GET")
	req.Header.Set("Access-Control-Request-Headers", "authorization")
	pre, err := http.DefaultClient.Do(req)
	is.NoErr(err)
	pre.Body.Close()
	is.Equal(pre.StatusCode, 204)
	is.Equal(pre.Header.Get("Access-Control-Allow-Origin"), "http://localhost:5173")
	is.True(strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Authorization"))

	req, _ = http.NewRequest("GET", s.base+"/v1/forms/contact/submissions?limit=2", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Authorization", "Bearer "+s.key)
	got, err := http.DefaultClient.Do(req)
	is.NoErr(err)
	got.Body.Close()
	is.Equal(got.Header.Get("Access-Control-Allow-Origin"), "https://app.example.com")
	is.True(strings.Contains(got.Header.Get("Access-Control-Expose-Headers"), "Link"))

	for _, flags := range [][]string{{"-base-url", "forms.example.com"}, {"-base-url", "https://user:pw@forms.example.com"}, {"-cors-origins", "app.example.com"}, {"-cors-origins", ","}, {"-cors-origins", "https://app.example.com:"}} {
		db := filepath.Join(t.TempDir(), "forms.db")
		var term bytes.Buffer
		err := run(context.Background(), append([]string{"-db", db, "-addr", "127.0.0.1:0"}, flags...), io.Discard, &term)
		is.True(err != nil)
		is.True(strings.HasPrefix(err.Error(), flags[0]+":")) // names the flag
		is.True(!strings.Contains(err.Error(), "pw"))         // and echoes no password
		_, statErr := os.Stat(db + ".demo-key")
		is.True(statErr != nil) // nothing seeded
	}
}

// decodeSubmissions returns the submissions of a page body.
func decodeSubmissions(t *testing.T, b []byte) []json.RawMessage {
	t.Helper()
	var page struct{ Submissions []json.RawMessage }
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return page.Submissions
}

// TestReadyzShareOneCheck: probes never run more than one check of the
// store at a time, whatever their number, and a probe with another
// method runs none.
func TestReadyzShareOneCheck(t *testing.T) {
	is := is.New(t)
	var mu sync.Mutex
	var active, most, calls int
	ready := func(ctx context.Context) error {
		mu.Lock()
		active++
		calls++
		most = max(most, active)
		mu.Unlock()
		defer func() {
			mu.Lock()
			active--
			mu.Unlock()
		}()
		return nil
	}
	h := withHealth(http.NotFoundHandler(), ready, slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(h)
	defer srv.Close()

	code, _, _ := health(t, "POST", srv.URL+"/readyz")
	is.Equal(code, 405)
	is.Equal(calls, 0) // refused before any check

	var wg sync.WaitGroup
	codes := make(chan int, 40)
	for range 40 {
		wg.Go(func() {
			code, _, _ := health(t, "GET", srv.URL+"/readyz")
			codes <- code
		})
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		is.Equal(code, 200)
	}
	is.Equal(most, 1) // one check at a time
	is.True(calls >= 1 && calls <= 40)
}
