package formsapi_test

import (
	"context"
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
	ctx := context.Background()
	lite, err := sqlitestore.Open(filepath.Join(b.TempDir(), "export.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lite.Close() })
	for _, st := range []struct {
		name string
		s    benchExportStore
	}{{"memstore", memstore.New()}, {"sqlitestore", lite}} {
		if err := st.s.AddForm(ctx, benchdata.Account, formsapi.Form{ID: "export", Title: "Sign-ups"}); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			sub, m := benchdata.WideSubmission("export", i)
			if err := st.s.AddSubmission(ctx, sub, m); err != nil {
				b.Fatal(err)
			}
		}
		if err := st.s.AddKey(ctx, benchdata.Key, benchdata.Account); err != nil {
			b.Fatal(err)
		}
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
