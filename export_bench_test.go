package formsapi_test

import (
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"testing"

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

// benchExportN is how many submissions BenchmarkExportFiltered's form
// holds: benchdata.ExportSubmissions, or issue 39's scale with
// -bench.export-n 1000000.
var benchExportN = flag.Int("bench.export-n", benchdata.ExportSubmissions, "BenchmarkExportFiltered: the form's submissions")

// BenchmarkExportFiltered measures a filtered export against the
// unfiltered one of the same form, in the same run
// (benchdata.RunExportFiltered): a form of 100,000 wide submissions
// over memstore and a real sqlitestore, exported whole as JSON Lines,
// and with filters that keep 1%, 2% and 50% of it. One op is one whole
// export; cpu-ms/op is the process's user and system CPU over the ops
// (getrusage, the same counters as /proc/PID/stat), and rows/op the
// lines written. pgstore's BenchmarkExportFiltered measures PostgreSQL:
//
//	go test -run '^$' -bench BenchmarkExportFiltered -benchtime 3x -count 3 . ./pgstore/
func BenchmarkExportFiltered(b *testing.B) {
	// One store at a time, the other's data gone: memstore's 100,000
	// submissions on the heap would make every collection during the
	// SQLite exports mark them.
	for _, name := range []string{"memstore", "sqlitestore"} {
		var s benchExportStore = memstore.New()
		if name == "sqlitestore" {
			lite, err := sqlitestore.Open(filepath.Join(b.TempDir(), "export.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer lite.Close()
			s = lite
		}
		benchdata.LoadExport(b, s, *benchExportN)
		b.Run(name, func(b *testing.B) { benchdata.RunExportFiltered(b, s, s, nil) })
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
