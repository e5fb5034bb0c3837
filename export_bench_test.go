package formsapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/sqlitestore"
)

// benchExportStore is a store the export benchmark reads.
type benchExportStore interface {
	formsapi.Store
	formsapi.KeyResolver
	formsapi.Writer
}

// BenchmarkExport measures a whole export of a form of 2,000 wide
// submissions (benchdata.WideSubmission, the data of bench/export.sh),
// as JSON Lines and as CSV, over memstore and a real sqlitestore; one op
// is the whole export, and ns/row, B/row and allocs/row are one
// submission's share (the CSV's header row included):
//
//	go test -run '^$' -bench BenchmarkExport -benchmem -count 5 .
func BenchmarkExport(b *testing.B) {
	const n = 2000
	for _, st := range benchExportStores(b, func(ctx context.Context, s benchExportStore) error {
		for i := range n {
			sub, m := benchdata.WideSubmission("export", i)
			if err := s.AddSubmission(ctx, sub, m); err != nil {
				return err
			}
		}
		return nil
	}) {
		h := formsapi.NewHandler(st.s, st.s)
		for _, format := range []string{"jsonl", "csv"} {
			b.Run(st.name+"/"+format, func(b *testing.B) {
				r := httptest.NewRequest("GET", "/v1/forms/export/export?format="+format, nil)
				r.Header.Set("Authorization", "Bearer "+benchdata.Key)
				w := &bodyCounter{h: http.Header{}}
				h.ServeHTTP(w, r)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
				b.SetBytes(int64(w.n))
				b.ReportAllocs()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				b.ResetTimer()
				for range b.N {
					w.n = 0
					h.ServeHTTP(w, r)
				}
				b.StopTimer()
				runtime.ReadMemStats(&after)
				rows := float64(b.N) * n
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/rows, "ns/row")
				b.ReportMetric(float64(after.Mallocs-before.Mallocs)/rows, "allocs/row")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/rows, "B/row")
			})
		}
	}
}

// BenchmarkExportFiltered measures a filtered export against the
// unfiltered one of the same form, in the same run: a form of 100,000
// wide submissions (benchdata.WideSubmission) over memstore and a real
// sqlitestore, exported whole as JSON Lines, and with filters that keep
// 1% (an equality on company, 1 in 97), 2% (an operator, teamSize gte
// 51), 1% (q, a search of "holdings 5 ltd") and 50% (country in four of
// eight). One op is one whole export; cpu-ms/op is the process's user
// and system CPU over the ops (getrusage, the same counters as
// /proc/PID/stat), and rows/op the lines written:
//
//	go test -run '^$' -bench BenchmarkExportFiltered -benchtime 3x -count 3 .
func BenchmarkExportFiltered(b *testing.B) {
	const n = 100_000
	for _, st := range benchExportStores(b, func(ctx context.Context, s benchExportStore) error {
		return benchdata.AddAll(ctx, s, n, 0, func(i int) (formsapi.Submission, formsapi.Metadata) { return benchdata.WideSubmission("export", i) }, nil)
	}) {
		h := formsapi.NewHandler(st.s, st.s)
		for _, c := range []struct{ name, query string }{
			{"all", ""},
			{"eq1pct", "filter[company]=" + url.QueryEscape("Example Holdings 5 Ltd")},
			{"gte2pct", "filter[teamSize][gte]=51"},
			{"q1pct", "q=" + url.QueryEscape("holdings 5 ltd")},
			{"in50pct", "filter[country][in]=NL,DE,FR,GB"},
		} {
			b.Run(st.name+"/"+c.name, func(b *testing.B) {
				r := httptest.NewRequest("GET", "/v1/forms/export/export?"+c.query, nil)
				r.Header.Set("Authorization", "Bearer "+benchdata.Key)
				w := &lineCounter{h: http.Header{}}
				h.ServeHTTP(w, r)
				if w.status != http.StatusOK || w.lines == 0 {
					b.Fatalf("status %d, %d lines", w.status, w.lines)
				}
				rows := w.lines
				before := cpuTime(b)
				b.ResetTimer()
				for range b.N {
					h.ServeHTTP(w, r)
				}
				b.StopTimer()
				b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/1000/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64(rows), "rows/op")
			})
		}
	}
}

// benchExportStoreNamed is a store an export benchmark fills and serves, by name.
type benchExportStoreNamed struct {
	name string
	s    benchExportStore
}

// benchExportStores is a memstore and a real sqlitestore, each holding the
// form "export" of account benchdata.Account, with the submissions fill
// adds to it, and the key benchdata.Key.
func benchExportStores(b *testing.B, fill func(context.Context, benchExportStore) error) []benchExportStoreNamed {
	ctx := context.Background()
	lite, err := sqlitestore.Open(filepath.Join(b.TempDir(), "export.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lite.Close() })
	stores := []benchExportStoreNamed{{"memstore", memstore.New()}, {"sqlitestore", lite}}
	for _, st := range stores {
		if err := st.s.AddForm(ctx, benchdata.Account, formsapi.Form{ID: "export", Title: "Sign-ups"}); err != nil {
			b.Fatal(err)
		}
		if err := fill(ctx, st.s); err != nil {
			b.Fatal(err)
		}
		if err := st.s.AddKey(ctx, benchdata.Key, benchdata.Account); err != nil {
			b.Fatal(err)
		}
	}
	return stores
}

// lineCounter is a response writer that counts the lines of a body.
type lineCounter struct {
	h      http.Header
	status int
	lines  int
}

func (d *lineCounter) Header() http.Header  { return d.h }
func (d *lineCounter) WriteHeader(code int) { d.status = code; d.lines = 0 }
func (d *lineCounter) Write(p []byte) (int, error) {
	d.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
