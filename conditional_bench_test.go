package formsapi_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/sqlitestore"
)

// bodyCounter keeps only the status and headers, and counts the body.
type bodyCounter struct {
	h      http.Header
	status int
	n      int
}

func (d *bodyCounter) Header() http.Header         { return d.h }
func (d *bodyCounter) WriteHeader(code int)        { d.status = code }
func (d *bodyCounter) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }

// BenchmarkConditional measures a 100-item first page over memstore as it
// is sent: plain, gzip-coded, and answered 304 to If-None-Match, with and
// without gzip asked for. Compare each to Plain from the same run:
//
//	go test -run '^$' -bench BenchmarkConditional -benchmem -count 5 .
func BenchmarkConditional(b *testing.B) {
	s := memstore.New()
	if err := benchdata.Load(context.Background(), s, []int{10_000}, benchdata.Key, nil); err != nil {
		b.Fatal(err)
	}
	h := formsapi.NewHandler(s, s)
	target := "/v1/forms/" + benchdata.FormID(0) + "/submissions?limit=100"
	probe := httptest.NewRequest("GET", target, nil)
	probe.Header.Set("Authorization", "Bearer "+benchdata.Key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, probe)
	tag := w.Header().Get("ETag")
	for _, c := range []struct {
		name       string
		hdrs       []string
		wantStatus int
	}{
		{"Plain", nil, 200},
		{"Gzip", []string{"Accept-Encoding", "gzip"}, 200},
		{"NotModified", []string{"If-None-Match", tag}, 304},
		{"NotModifiedGzip", []string{"If-None-Match", tag, "Accept-Encoding", "gzip"}, 304},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest("GET", target, nil)
			r.Header.Set("Authorization", "Bearer "+benchdata.Key)
			for i := 0; i+1 < len(c.hdrs); i += 2 {
				r.Header.Set(c.hdrs[i], c.hdrs[i+1])
			}
			w := &bodyCounter{h: http.Header{}}
			h.ServeHTTP(w, r)
			if w.status != c.wantStatus {
				b.Fatalf("status %d, want %d", w.status, c.wantStatus)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				w.n = 0
				clear(w.h)
				h.ServeHTTP(w, r)
			}
			b.ReportMetric(float64(w.n), "body-bytes/op")
		})
	}
}

// processCPU returns the CPU time (user and system) this process has
// used: on a machine other work shares, a truer measure of a request's
// cost than the wall time of ns/op.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSignedPage measures what WithAttachmentURLs costs a 100-item
// page of submissions with one attachment each, over memstore, signed by
// an HMAC-SHA256 presigner: Unsigned is the page without the option;
// Signed the same page signed, as every request in a window after the
// first finds it (the signed page kept for the window); SignedCold a
// page signed afresh on every request (each in a window of its own:
// every URL signed again). Compare each to Unsigned from the same run:
//
//	go test -run '^$' -bench BenchmarkSignedPage -benchmem -count 5 .
func BenchmarkSignedPage(b *testing.B) {
	mem := memstore.New()
	lite, err := sqlitestore.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lite.Close() })
	for _, s := range []interface {
		formsapi.Writer
	}{mem, lite} {
		if err := benchdata.Load(context.Background(), s, []int{2_000}, benchdata.Key, nil); err != nil {
			b.Fatal(err)
		}
	}
	key := []byte("a benchmark's signing key")
	sign := func(_ context.Context, account, form string, a formsapi.Attachment, at time.Time) (string, error) {
		exp := strconv.FormatInt(at.Add(10*time.Minute).Unix(), 10)
		m := hmac.New(sha256.New, key)
		m.Write([]byte(account + "\x00" + form + "\x00" + a.FileURL + "\x00" + exp))
		return a.FileURL + "?exp=" + exp + "&sig=" + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	target := "/v1/forms/" + benchdata.FormID(0) + "/submissions?limit=100"
	type store interface {
		formsapi.Store
		formsapi.KeyResolver
	}
	for _, c := range []struct {
		name string
		s    store
		opts []formsapi.Option
		step time.Duration // how far the clock moves between requests
	}{
		{"sqlitestore/Unsigned", lite, nil, 0},
		{"sqlitestore/Signed", lite, []formsapi.Option{formsapi.WithAttachmentURLs(sign, 10*time.Minute), formsapi.WithClock(clock)}, 0},
		{"sqlitestore/SignedCold", lite, []formsapi.Option{formsapi.WithAttachmentURLs(sign, 10*time.Minute), formsapi.WithClock(clock)}, 5 * time.Minute},
		{"memstore/Unsigned", mem, nil, 0},
		{"memstore/Signed", mem, []formsapi.Option{formsapi.WithAttachmentURLs(sign, 10*time.Minute), formsapi.WithClock(clock)}, 0},
		{"memstore/SignedCold", mem, []formsapi.Option{formsapi.WithAttachmentURLs(sign, 10*time.Minute), formsapi.WithClock(clock)}, 5 * time.Minute},
	} {
		h := formsapi.NewHandler(c.s, c.s, c.opts...)
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest("GET", target, nil)
			r.Header.Set("Authorization", "Bearer "+benchdata.Key)
			w := &bodyCounter{h: http.Header{}}
			h.ServeHTTP(w, r)
			if w.status != 200 {
				b.Fatalf("status %d", w.status)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			for i := 0; i < b.N; i++ {
				now = now.Add(c.step)
				w.n = 0
				clear(w.h)
				h.ServeHTTP(w, r)
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(w.n), "body-bytes/op")
		})
	}
}
