package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/sqlitestore"
)

// go test -run '^$' -bench . -benchmem ./sqlitestore/
func BenchmarkHandler(b *testing.B) {
	const perForm = 100_000
	s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := benchdata.Load(context.Background(), s, []int{perForm, 1000, 1000}, benchdata.Key, nil); err != nil {
		b.Fatal(err)
	}
	benchdata.RunHandler(b, s, s, perForm)
}

// BenchmarkAddSubmission measures the write path a host calls for every
// submission it collects: one transaction per call, WAL, synchronous=NORMAL.
func BenchmarkAddSubmission(b *testing.B) {
	s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := benchdata.Load(ctx, s, []int{0}, "", nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sub, m := benchdata.Submission(benchdata.FormID(0), i)
		if err := s.AddSubmission(ctx, sub, m); err != nil {
			b.Fatal(err)
		}
	}
}
