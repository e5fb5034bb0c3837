package sqlitestore_test

import (
	"context"
	"database/sql"
	"flag"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"

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

// benchFoldAt, when not 0, opens BenchmarkAddSubmission's store with
// its tail folded at that many rows instead of the store's 256
// (WithFoldAt): what a larger fold would save a write (BENCHMARKS.md, "A
// form's tail read from the tail first"; BenchmarkFullTail for what it
// costs a read).
var benchFoldAt = flag.Int("bench.fold-at", 0, "BenchmarkAddSubmission: fold the tail at this many rows (0: the store's)")

// benchFTS5, with the search index off, has BenchmarkAddSubmission's
// file keep SQLite's own FTS5 trigram index of each submission's text
// values, fed by a trigger in the write's transaction: the database's
// feature that issue 37 set beside ours, on the same writes in the same
// run (bench/writecpu.sh's FTS5=1), for what a trigram index costs a
// write where SQLite keeps it. It does not serve search's guarantees
// (docs/decisions.md); it is a yardstick only.
var benchFTS5 = flag.Bool("bench.fts5", false, "BenchmarkAddSubmission: keep an FTS5 trigram index of each write's text values (a yardstick)")

// benchExprIndex, with the sort index off, has BenchmarkAddSubmission's
// file keep SQLite's own index on the expression of a submitted field
// (data ->> field), in the form's keyset order: what a host would
// create for a sorted walk of that field without the store's sort
// index, the yardstick of its write cost (bench/writecpu.sh's EXPR=1).
var benchExprIndex = flag.String("bench.expr-index", "", "BenchmarkAddSubmission: keep an SQLite index on this submitted field's value (a yardstick)")

// addFTS5 gives the file at path benchFTS5's table and trigger, and
// benchExprIndex's index.
func addFTS5(b *testing.B, path string) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if *benchFTS5 {
		if _, err := db.Exec(`CREATE VIRTUAL TABLE bench_fts USING fts5(body, tokenize = 'trigram');
CREATE TRIGGER bench_fts_add AFTER INSERT ON formsapi_submissions BEGIN
  INSERT INTO bench_fts (rowid, body)
  SELECT new.seq, group_concat(value, ' ') FROM json_tree(new.data) WHERE type = 'text';
END`); err != nil {
			b.Fatal(err)
		}
	}
	if f := *benchExprIndex; f != "" {
		if strings.ContainsAny(f, `'",`) {
			b.Fatalf("-bench.expr-index %q: one field's name, without quotes", f)
		}
		if _, err := db.Exec(`CREATE INDEX bench_expr ON formsapi_submissions (form_seq, data ->> '$."` + f + `"', created_at, seq)`); err != nil {
			b.Fatal(err)
		}
	}
}

// countFTS5 fails b unless the FTS5 table of addFTS5 holds want rows,
// each matched by a trigram of its own text.
func countFTS5(b *testing.B, path string, want int) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM bench_fts WHERE bench_fts MATCH '"Person"'`).Scan(&n); err != nil || n != want {
		b.Fatalf("the FTS5 table matches %d rows (%v), want %d", n, err, want)
	}
}

func benchOptions() []sqlitestore.Option {
	var opts []sqlitestore.Option
	if *benchSearchIndex {
		opts = append(opts, sqlitestore.WithSearchIndex())
	}
	if *benchFoldAt > 0 {
		opts = append(opts, sqlitestore.WithFoldAt(*benchFoldAt))
	}
	switch *benchSortIndex {
	case "":
	case "*":
		opts = append(opts, sqlitestore.WithSortIndex())
	default:
		opts = append(opts, sqlitestore.WithSortIndex(strings.Split(*benchSortIndex, ",")...))
	}
	return opts
}

// BenchmarkAddSubmission measures the write path a host calls for every
// submission it collects: one transaction per call, WAL, synchronous=NORMAL.
func BenchmarkAddSubmission(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.db")
	s, err := sqlitestore.Open(path, benchOptions()...)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := benchdata.Load(ctx, s, benchFormCounts(), "", nil); err != nil {
		b.Fatal(err)
	}
	if *benchFTS5 || *benchExprIndex != "" {
		addFTS5(b, path)
	}
	forms := len(benchFormCounts())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sub, m := benchdata.Submission(benchdata.FormID(i%forms), i)
		if *benchIDs {
			m.ID = "w" + strconv.Itoa(i)
		}
		if err := s.AddSubmission(ctx, sub, m); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if *benchFTS5 {
		countFTS5(b, path, b.N)
	}
}

// BenchmarkMixed is the multi-tenant workload of bench/mixed.sh without
// the network: 20 accounts × 10 forms × 500 submissions, each request a
// random key, one of its forms, a random limit and order, 1 in 20 a forms
// list (benchdata.MixedRequest), with the default read cache, with it
// while another store on the same file adds a submission to a random form
// every 2 ms, with a cache big enough for every list (the hit path), and
// with the cache off. Eight goroutines per CPU ask at
// once, like the load run's connections.
//
//	go test -run '^$' -bench Mixed -cpu 1,2,4 -mutexprofile mutex.out ./sqlitestore/
func BenchmarkMixed(b *testing.B) {
	path := filepath.Join(b.TempDir(), "mixed.db")
	s, err := sqlitestore.Open(path, sqlitestore.WithCacheSize(0))
	if err != nil {
		b.Fatal(err)
	}
	ts, err := benchdata.LoadTenants(context.Background(), s, 20, 10, 500, nil)
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	var forms []string
	for _, t := range ts {
		forms = append(forms, t.Forms...)
	}
	for _, c := range []struct {
		name   string
		cache  int
		writer bool
	}{
		{"Cached", sqlitestore.DefaultCacheSize, false},
		{"Cached64MiB", 64 << 20, false}, // every list fits: the hit path
		{"CachedWriter", sqlitestore.DefaultCacheSize, true},
		{"Uncached", 0, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := sqlitestore.Open(path, sqlitestore.WithCacheSize(c.cache))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			h := formsapi.NewHandler(s, s, formsapi.WithLogger(slog.New(slog.DiscardHandler)))
			if c.writer {
				stop := writeEvery(b, path, forms, 2*time.Millisecond)
				defer stop()
			}
			r := rand.New(rand.NewPCG(1, 2))
			for range 2000 { // warm the cache
				serveMixed(b, h, r, ts)
			}
			var seed atomic.Uint64
			b.SetParallelism(8)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(seed.Add(1), 3))
				for pb.Next() {
					serveMixed(b, h, r, ts)
				}
			})
		})
	}
}

type nullWriter struct {
	h      http.Header
	status int
}

func (w *nullWriter) Header() http.Header         { return w.h }
func (w *nullWriter) WriteHeader(code int)        { w.status = code }
func (w *nullWriter) Write(p []byte) (int, error) { return len(p), nil }

func serveMixed(b *testing.B, h http.Handler, r *rand.Rand, ts []benchdata.Tenant) {
	target, key := benchdata.MixedRequest(r, ts)
	req := httptest.NewRequest("GET", target, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	w := &nullWriter{h: http.Header{}, status: 200}
	h.ServeHTTP(w, req)
	if w.status != 200 {
		b.Errorf("GET %s: status %d", target, w.status)
	}
}

// writeEvery adds a submission to a random form of the file at path on
// every tick, through a store of its own, until stop is called.
func writeEvery(b *testing.B, path string, forms []string, every time.Duration) (stop func()) {
	w, err := sqlitestore.Open(path, sqlitestore.WithCacheSize(0))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		r := rand.New(rand.NewPCG(5, 6))
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			sub, m := benchdata.Submission(forms[r.IntN(len(forms))], 1_000_000+i)
			sub.CreatedAt = time.Time{}
			if err := w.AddSubmission(context.Background(), sub, m); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		w.Close()
	}
}

// BenchmarkCachedPage is BenchmarkHandler over a small form (1,000
// submissions), which loads in seconds: every request after the first is
// a hit of the read cache, so it measures the handler's cached path (the
// key's lookup, the tag, the copy of the held page, the headers).
//
//	go test -run '^$' -bench 'CachedPage/FirstPage$' -benchmem ./sqlitestore/
func BenchmarkCachedPage(b *testing.B) {
	s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := benchdata.Load(context.Background(), s, []int{1000}, benchdata.Key, nil); err != nil {
		b.Fatal(err)
	}
	benchdata.RunHandler(b, s, s, 1000)
}

// BenchmarkSummary measures the summary of a form of 10,000 and of
// 100,000 submissions (benchdata.RunSummary): kept by the handler
// (Cached, a store from Open), and read afresh by every request (Uncached,
// a store from New over the same file, without a read cache).
//
//	go test -run '^$' -bench BenchmarkSummary -benchmem ./sqlitestore/
func BenchmarkSummary(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.db")
	s, err := sqlitestore.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchdata.LoadSummary(b, s)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	raw, err := sqlitestore.New(db)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	benchdata.RunSummary(b, s, raw, s, nil)
}

// BenchmarkKeyCopyBesideWriter measures cached first pages of 100 items
// read by parallel clients while the store itself writes a submission to
// another form every writeEvery (the copy's rounds wait for each write
// on the write connection), with the key copy (on) and without it
// (off): ns/op is the clients' wall time per request, cpu-ns/op the
// process's CPU per request (the writer's included, the same in both),
// waited/op the rounds that waited for a write, per request.
//
//	go test -run '^$' -bench KeyCopyBesideWriter -benchmem ./sqlitestore/
func BenchmarkKeyCopyBesideWriter(b *testing.B) {
	const writeEvery = 2 * time.Millisecond
	for _, on := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off"}[on]
		b.Run(name, func(b *testing.B) {
			s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "bench.db"), sqlitestore.WithKeyCopy(on))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			if err := benchdata.Load(ctx, s, []int{1000, 1}, benchdata.Key, nil); err != nil {
				b.Fatal(err)
			}
			h := formsapi.NewHandler(s, s)
			target := "/v1/forms/" + benchdata.FormID(0) + "/submissions?limit=100"
			done, finished := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(finished)
				t := time.NewTicker(writeEvery)
				defer t.Stop()
				for i := 0; ; i++ {
					select {
					case <-done:
						return
					case <-t.C:
					}
					sub, m := benchdata.Submission(benchdata.FormID(1), 1+i)
					if err := s.AddSubmission(ctx, sub, m); err != nil {
						b.Error(err)
						return
					}
				}
			}()
			st0, _ := s.KeyCopyStats()
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := httptest.NewRequest("GET", target, nil)
					r.Header.Set("Authorization", "Bearer "+benchdata.Key)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != 200 {
						b.Errorf("GET %s: %d", target, w.Code)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			close(done)
			<-finished
			if st, ok := s.KeyCopyStats(); ok {
				b.ReportMetric(float64(st.Waited-st0.Waited)/float64(b.N), "waited/op")
				b.ReportMetric(float64(st.Rounds-st0.Rounds)/float64(b.N), "rounds/op")
			}
		})
	}
}
