// Command ingestbench measures bulk ingest: it writes -n submissions
// (benchdata's, over -forms forms) into a fresh SQLite file or
// PostgreSQL schema through formsapi.BatchWriter's AddSubmissions, -batch
// a transaction, and prints the rate, its own CPU per submission, and
// progress every -every submissions. bench/ingest.sh runs it under
// cpuwatch, which adds PostgreSQL's CPU. Not part of `go test` or CI.
//
//	ingestbench -store sqlite -n 1000000                      # a file in a temporary directory
//	ingestbench -store postgres -postgres "$DSN" -n 1000000   # a new schema, dropped after
//	ingestbench -store sqlite -n 100000 -search-index -single 2000
//
// -single N first writes N submissions one AddSubmission at a time into
// a form of their own, and prints that rate too, as the baseline of the
// same run. Once the batches are in, it checks what the indexes answer:
// every form's count (where the store counts it exactly) and feed end,
// and on the first form a filtered count and (with -search-index) a
// search, against what the generated
// data holds; it exits non-zero if one differs.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
)

// store is what the bench needs of a store.
type store interface {
	formsapi.Store
	formsapi.BatchWriter
	formsapi.FeedStore
	CountSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, exact bool) (formsapi.Total, error)
}

func main() {
	kind := flag.String("store", "sqlite", "sqlite or postgres")
	db := flag.String("db", "", "with -store sqlite: the file to create (default: one in a temporary directory, removed after)")
	dsn := flag.String("postgres", os.Getenv("FORMSAPI_TEST_POSTGRES"), "with -store postgres: the DSN")
	n := flag.Int("n", 1_000_000, "submissions to ingest")
	forms := flag.Int("forms", 10, "forms to spread them over")
	batch := flag.Int("batch", benchdata.BatchSize, "submissions per AddSubmissions call (one transaction)")
	single := flag.Int("single", 0, "first write this many one AddSubmission at a time, for the baseline")
	every := flag.Int("every", 100_000, "print progress every this many submissions")
	index := flag.Bool("search-index", false, "turn the search index on (WithSearchIndex)")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the ingest here")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ingestbench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "ingestbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*kind, *db, *dsn, *n, *forms, *batch, *single, *every, *index); err != nil {
		fmt.Fprintln(os.Stderr, "ingestbench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(kind, db, dsn string, n, forms, batch, single, every int, index bool) error {
	ctx := context.Background()
	var s store
	switch kind {
	case "sqlite":
		if db == "" {
			dir, err := os.MkdirTemp("", "formsapi-ingest-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			db = filepath.Join(dir, "ingest.db")
		}
		var opts []sqlitestore.Option
		if index {
			opts = append(opts, sqlitestore.WithSearchIndex())
		}
		lite, err := sqlitestore.Open(db, opts...)
		if err != nil {
			return err
		}
		defer lite.Close()
		s = lite
	case "postgres":
		if dsn == "" {
			return errors.New("-store postgres needs -postgres DSN (or FORMSAPI_TEST_POSTGRES)")
		}
		schema := "formsapi_ingest_" + strings.ToLower(rand.Text()[:10])
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
			return err
		}
		defer func() {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(context.WithoutCancel(ctx))
		}()
		opts := []pgstore.Option{pgstore.WithSchema(schema)}
		if index {
			opts = append(opts, pgstore.WithSearchIndex())
		}
		pg, err := pgstore.Open(ctx, withParam(dsn, "application_name", "formsapi-ingest"), opts...)
		if err != nil {
			return err
		}
		defer pg.Close()
		s = pg
	default:
		return fmt.Errorf("-store %q: sqlite or postgres", kind)
	}
	fmt.Printf("store %s, search index %v, %d submissions over %d forms, %d a batch; load average %s\n", kind, index, n, forms, batch, loadavg())
	if single > 0 {
		const form = "single"
		if err := s.AddForm(ctx, benchdata.Account, formsapi.Form{ID: form, Title: "One at a time"}); err != nil {
			return err
		}
		start, cpu0 := time.Now(), cpu()
		for i := range single {
			sub, m := benchdata.Submission(form, i)
			if err := s.AddSubmission(ctx, sub, m); err != nil {
				return err
			}
		}
		report("one at a time", single, time.Since(start), cpu()-cpu0)
	}
	perForm := make([]int, forms)
	for i := range n {
		perForm[i%forms]++
	}
	for f := range forms {
		if err := s.AddForm(ctx, benchdata.Account, formsapi.Form{ID: benchdata.FormID(f), Title: fmt.Sprintf("Ingest %d", f), CreatedAt: benchdata.Start}); err != nil {
			return err
		}
	}
	// Submission i goes to form i%forms, as the i/forms-th of that form:
	// each batch writes to every form, as an import of mixed forms would.
	item := func(i int) (formsapi.Submission, formsapi.Metadata) {
		return benchdata.Submission(benchdata.FormID(i%forms), i/forms)
	}
	start, cpu0 := time.Now(), cpu()
	last := 0
	err := benchdata.AddAll(ctx, s, n, batch, item, func(done int) {
		if done/every > last/every || done == n {
			last = done
			d := time.Since(start)
			fmt.Printf("  %9d  %6.1f s  %7.0f/s\n", done, d.Seconds(), float64(done)/d.Seconds())
		}
	})
	if err != nil {
		return err
	}
	report("in batches", n, time.Since(start), cpu()-cpu0)
	return verify(ctx, s, perForm, index)
}

// verify checks what the indexes answer after the ingest against what
// benchdata generated: every form's exact count and feed end, and on the
// first form the count of a filter (company, one of 97 values) and of a
// search for one submission's e-mail address.
func verify(ctx context.Context, s store, perForm []int, index bool) error {
	start := time.Now()
	for f, want := range perForm {
		id := benchdata.FormID(f)
		total, err := s.CountSubmissions(ctx, benchdata.Account, id, formsapi.Query{Limit: 1}, true)
		if err != nil {
			return err
		}
		if total.Kind == find.Exact && total.Value != int64(want) {
			return fmt.Errorf("form %s: %d submissions counted, want %d", id, total.Value, want)
		}
		p, err := s.SyncSubmissions(ctx, benchdata.Account, id, int64(want-1), 10)
		if err != nil {
			return err
		}
		if len(p.Items) != 1 || p.Positions[0] != int64(want) || p.More {
			return fmt.Errorf("form %s: the feed after position %d has %d items (%v), want the one at %d", id, want-1, len(p.Items), p.Positions, want)
		}
	}
	id, n := benchdata.FormID(0), perForm[0]
	wantCompany := 0
	for i := range n {
		if i%97 == 5 {
			wantCompany++
		}
	}
	q := formsapi.Query{Limit: 1, Filters: []formsapi.Filter{{Field: "company", Value: `"Example Holdings 5 Ltd"`}}}
	total, err := s.CountSubmissions(ctx, benchdata.Account, id, q, true)
	if err != nil {
		return err
	}
	if total.Kind == find.Exact && total.Value != int64(wantCompany) || total.Kind != find.Exact && total.Value <= 0 {
		return fmt.Errorf("form %s: a filter on company counts %+v, want %d", id, total, wantCompany)
	}
	checked := fmt.Sprintf("the %d forms' counts and feed ends, a filter's count (%d, %s)", len(perForm), total.Value, total.Kind)
	if index {
		i := n - 1
		term := fmt.Sprintf("person%d@example.com", i)
		p, err := s.ListSubmissions(ctx, benchdata.Account, id, formsapi.Query{Limit: 10, Search: find.Normalize(term)})
		if err != nil {
			return err
		}
		if len(p.Items) != 1 {
			return fmt.Errorf("form %s: a search for %s finds %d submissions, want 1", id, term, len(p.Items))
		}
		checked += ", a search's one match"
	}
	fmt.Printf("checked %s in %.1f s\n", checked, time.Since(start).Seconds())
	return nil
}

func report(what string, n int, wall, cpu time.Duration) {
	fmt.Printf("%s: %d submissions in %.1f s, %.0f a second, this process's CPU %.1f µs a submission\n",
		what, n, wall.Seconds(), float64(n)/wall.Seconds(), float64(cpu.Microseconds())/float64(n))
}

// cpu is the CPU time this process has spent, user and system.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// withParam adds a query parameter to a URL DSN.
func withParam(dsn, key, value string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + key + "=" + value
}
