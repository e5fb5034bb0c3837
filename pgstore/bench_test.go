package pgstore_test

import (
	"testing"

	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
)

const benchPerForm = 100_000

// BenchmarkHandler measures the handler over pgstore, which has no cache:
// every request resolves its key and reads its page in PostgreSQL, over
// loopback. The data is loaded with synchronous_commit=off, which changes
// nothing for reads.
//
//	FORMSAPI_TEST_POSTGRES=... go test -run '^$' -bench . -benchmem ./pgstore/
func BenchmarkHandler(b *testing.B) {
	dsn, schema := pgtest.Schema(b)
	s, err := pgstore.Open(ctx, withParam(dsn, "synchronous_commit", "off"), pgstore.WithSchema(schema))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := benchdata.Load(ctx, s, []int{benchPerForm, 1000, 1000}, benchdata.Key, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := pgstore.Pool(s).Exec(ctx, "ANALYZE "+quote(schema)+".formsapi_submissions"); err != nil {
		b.Fatal(err)
	}
	benchdata.RunHandler(b, s, s, benchPerForm)
}

// BenchmarkAddSubmission measures the write path with the server's
// default durability: one transaction per call, each waiting for its
// commit to be flushed, and the form's row locked until then.
func BenchmarkAddSubmission(b *testing.B) {
	dsn, schema := pgtest.Schema(b)
	s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
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
