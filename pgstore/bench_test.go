package pgstore_test

import (
	"crypto/rand"
	"flag"
	"github.com/formsapi/formsapi"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
)

const benchPerForm = 100_000

// BenchmarkHandler measures the handler over pgstore, over loopback: every
// request looks its key up in PostgreSQL, with the form (one statement),
// and the same page again and again comes from the store's read cache. It
// reports the CPU time of the store's PostgreSQL backends per request as
// pg-cpu-ns/op (when the server runs on this machine). The data is loaded
// with synchronous_commit=off, which changes nothing for reads.
//
//	FORMSAPI_TEST_POSTGRES=... go test -run '^$' -bench . -benchmem ./pgstore/
func BenchmarkHandler(b *testing.B) {
	dsn, schema := pgtest.Schema(b)
	app := "formsapi_bench_" + strings.ToLower(rand.Text()[:8])
	s, err := pgstore.Open(ctx, withAppName(withParam(dsn, "synchronous_commit", "off"), app), pgstore.WithSchema(schema))
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
	benchdata.RunHandlerCPU(b, s, s, benchPerForm, func() (time.Duration, bool) { return backendCPU(b, dsn, app) })
}

// benchSearchIndex opens BenchmarkAddSubmission's store with the search
// index on (bench/writecost.sh's "search index on" rows).
var benchSearchIndex = flag.Bool("bench.search-index", false, "BenchmarkAddSubmission: open the store with WithSearchIndex")

// benchForms spreads BenchmarkAddSubmission's writes over this many
// forms, in turn (bench/writecost.sh's FORMS): the writes of a
// collection service for many forms, whose index entries land in as
// many forms' blocks.
var benchForms = flag.Int("bench.forms", 1, "BenchmarkAddSubmission: write to this many forms in turn")

// benchIDs gives each of BenchmarkAddSubmission's writes a metadata ID
// (bench/writecost.sh's IDS), as a host that deletes submissions by its
// own IDs does: the write then checks the ID against the form's others.
var benchIDs = flag.Bool("bench.ids", false, "BenchmarkAddSubmission: give each write a metadata ID")

// benchFormCounts is benchdata.Load's counts for benchForms empty forms.
func benchFormCounts() []int { return make([]int, max(*benchForms, 1)) }

// benchSortIndex opens BenchmarkAddSubmission's store with the sort index
// on for the fields it names, comma-separated, or for every field when
// it is "*" (bench/writecost.sh's "sort index on" rows: one field of
// benchdata.Submission's data).
var benchSortIndex = flag.String("bench.sort-index", "", "BenchmarkAddSubmission: open the store with WithSortIndex for these fields, comma-separated (* for every field)")

func benchOptions() []pgstore.Option {
	var opts []pgstore.Option
	if *benchSearchIndex {
		opts = append(opts, pgstore.WithSearchIndex())
	}
	switch *benchSortIndex {
	case "":
	case "*":
		opts = append(opts, pgstore.WithSortIndex())
	default:
		opts = append(opts, pgstore.WithSortIndex(strings.Split(*benchSortIndex, ",")...))
	}
	return opts
}

// openWriteBench opens a store on a schema of its own, closed when b
// ends, whose connections carry an application name of their own, and
// returns it with backend, the CPU its PostgreSQL backends have used so
// far (backendCPU; false when the server is not on this machine).
func openWriteBench(b *testing.B, opts ...pgstore.Option) (s *pgstore.Store, backend func() (time.Duration, bool)) {
	b.Helper()
	dsn, schema := pgtest.Schema(b)
	app := "formsapi_bench_" + strings.ToLower(rand.Text()[:8])
	s, err := pgstore.Open(ctx, withAppName(dsn, app), append(opts, pgstore.WithSchema(schema))...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, func() (time.Duration, bool) { return backendCPU(b, dsn, app) }
}

// BenchmarkAddSubmission measures the write path with the server's
// default durability: one transaction per call, each waiting for its
// commit to be flushed, and the form's row locked until then. It reports
// the CPU time of the store's PostgreSQL backends per write as
// pg-cpu-ns/op (when the server runs on this machine): the statement, the
// triggers that keep the forms' versions (migration 0006), the commit.
func BenchmarkAddSubmission(b *testing.B) {
	s, backend := openWriteBench(b, benchOptions()...)
	if err := benchdata.Load(ctx, s, benchFormCounts(), "", nil); err != nil {
		b.Fatal(err)
	}
	forms := len(benchFormCounts())
	sub, m := benchdata.Submission(benchdata.FormID(0), 0)
	if err := s.AddSubmission(ctx, sub, m); err != nil { // opens the connection and prepares the statement
		b.Fatal(err)
	}
	cpu0, ok := backend()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sub, m := benchdata.Submission(benchdata.FormID((i+1)%forms), i+1)
		if *benchIDs {
			m.ID = "w" + strconv.Itoa(i)
		}
		if err := s.AddSubmission(ctx, sub, m); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if cpu1, ok1 := backend(); ok && ok1 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "pg-cpu-ns/op")
	}
}

// BenchmarkDeleteSubmission measures DeleteSubmission by metadata ID, one
// submission a time from a form of 2,000 plus b.N, with the search and
// sort indexes on, reporting the CPU of the store's PostgreSQL backends
// per deletion as pg-cpu-ns/op: the statement, the triggers that take the
// index entries, the tombstone and the version. Before it, the store's
// connections delete a whole other form (rolled back), whose firing fixes
// the plans PL/pgSQL keeps for the statement triggers on each connection
// (BENCHMARKS.md, "A deletion's plans").
//
//	FORMSAPI_TEST_POSTGRES=... go test -run '^$' -bench BenchmarkDeleteSubmission -benchtime 500x ./pgstore/
func BenchmarkDeleteSubmission(b *testing.B) {
	s, backend := openWriteBench(b, pgstore.WithSearchIndex(), pgstore.WithSortIndex())
	if err := benchdata.Load(ctx, s, []int{0, 2000}, "", nil); err != nil {
		b.Fatal(err)
	}
	err := s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		for i := range 2000 + b.N {
			sub, m := benchdata.Submission(benchdata.FormID(0), i)
			m.ID = "d" + strconv.Itoa(i)
			if !yield(sub, m) {
				return
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	// Every connection of the pool deletes the other form once (rolled
	// back), as a DeleteForm or an Erase would have.
	var conns []*pgxpool.Conn
	for range pgstore.Pool(s).Config().MaxConns {
		c, err := pgstore.Pool(s).Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		tx, err := c.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+pgx.Identifier{s.Schema(), "formsapi_submissions"}.Sanitize()+
			` WHERE form_seq = (SELECT seq FROM `+pgx.Identifier{s.Schema(), "formsapi_forms"}.Sanitize()+` WHERE id = $1)`, benchdata.FormID(1)); err != nil {
			b.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range conns {
		c.Release()
	}
	cpu0, ok := backend()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.DeleteSubmission(ctx, benchdata.Account, benchdata.FormID(0), "d"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if cpu1, ok1 := backend(); ok && ok1 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "pg-cpu-ns/op")
	}
}

// BenchmarkDeleteForm measures DeleteForm of a form of 20,000
// submissions, search and sort indexes on, reporting the CPU of the
// store's PostgreSQL backends per deletion as pg-cpu-ns/op: every
// submission's index entries, blocks and tombstone go, in one firing of
// the statement triggers.
//
//	FORMSAPI_TEST_POSTGRES=... go test -run '^$' -bench BenchmarkDeleteForm -benchtime 1x ./pgstore/
func BenchmarkDeleteForm(b *testing.B) {
	s, backend := openWriteBench(b, pgstore.WithSearchIndex(), pgstore.WithSortIndex())
	var cpu time.Duration
	ok := true
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := benchdata.Load(ctx, s, []int{20000}, "", nil); err != nil {
			b.Fatal(err)
		}
		cpu0, ok0 := backend()
		b.StartTimer()
		if err := s.DeleteForm(ctx, benchdata.Account, benchdata.FormID(0)); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu1, ok1 := backend()
		ok = ok && ok0 && ok1
		cpu += cpu1 - cpu0
	}
	if ok {
		b.ReportMetric(float64(cpu)/float64(b.N), "pg-cpu-ns/op")
	}
}

// BenchmarkSummary measures the summary of a form of 10,000 and of
// 100,000 submissions (benchdata.RunSummary), reporting the CPU of the
// stores' PostgreSQL backends per request as pg-cpu-ns/op: kept by the
// handler (Cached), and read afresh by every request (Uncached, a second
// store over the same schema without a read cache).
//
//	FORMSAPI_TEST_POSTGRES=... go test -run '^$' -bench BenchmarkSummary -benchmem ./pgstore/
func BenchmarkSummary(b *testing.B) {
	base, schema := pgtest.Schema(b)
	app := "formsapi_bench_" + strings.ToLower(rand.Text()[:8])
	dsn := withAppName(withParam(base, "synchronous_commit", "off"), app)
	s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchdata.LoadSummary(b, s)
	if _, err := pgstore.Pool(s).Exec(ctx, "ANALYZE "+quote(schema)+".formsapi_submissions"); err != nil {
		b.Fatal(err)
	}
	raw, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema), pgstore.WithCacheSize(0))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	benchdata.RunSummary(b, s, raw, s, func() (time.Duration, bool) { return backendCPU(b, base, app) })
}

// benchExportN is how many submissions BenchmarkExportFiltered's form
// holds: benchdata.ExportSubmissions, or issue 39's scale with
// -bench.export-n 1000000.
var benchExportN = flag.Int("bench.export-n", benchdata.ExportSubmissions, "BenchmarkExportFiltered: the form's submissions")

// BenchmarkExportFiltered is the root package's BenchmarkExportFiltered
// over pgstore (benchdata.RunExportFiltered): the whole export of a form
// of 100,000 wide submissions, unfiltered and filtered, reporting the
// CPU of the store's PostgreSQL backends per export as pg-cpu-ms/op
// beside the process's cpu-ms/op. The data is loaded with
// synchronous_commit=off, which changes nothing for reads.
//
//	FORMSAPI_TEST_POSTGRES=... go test -run '^$' -bench BenchmarkExportFiltered -benchtime 3x -count 3 ./pgstore/
func BenchmarkExportFiltered(b *testing.B) {
	base, schema := pgtest.Schema(b)
	app := "formsapi_bench_" + strings.ToLower(rand.Text()[:8])
	s, err := pgstore.Open(ctx, withAppName(withParam(base, "synchronous_commit", "off"), app), pgstore.WithSchema(schema))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchdata.LoadExport(b, s, *benchExportN)
	if _, err := pgstore.Pool(s).Exec(ctx, "ANALYZE "+quote(schema)+".formsapi_submissions"); err != nil {
		b.Fatal(err)
	}
	benchdata.RunExportFiltered(b, s, s, func() (time.Duration, bool) { return backendCPU(b, base, app) })
}
