package formsapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/memstore"
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
