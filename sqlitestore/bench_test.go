package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/sqlitestore"
)

const benchPerForm = 100_000

// BenchmarkHandler measures a store from Open, whose read cache answers
// every repeat of a request until something is committed.
//
//	go test -run '^$' -bench . -benchmem ./sqlitestore/
func BenchmarkHandler(b *testing.B) {
	s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	runHandler(b, s)
}

func runHandler(b *testing.B, s *sqlitestore.Store) {
	if err := benchdata.Load(context.Background(), s, []int{benchPerForm, 1000, 1000}, benchdata.Key, nil); err != nil {
		b.Fatal(err)
	}
	benchdata.RunHandler(b, s, s, benchPerForm)
}

// BenchmarkHandlerUncached measures a store from New, which has no read
// cache: every request runs its queries, as after every commit.
func BenchmarkHandlerUncached(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	s, err := sqlitestore.New(db)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	runHandler(b, s)
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
