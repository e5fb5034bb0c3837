package pgstore

import (
	"context"
	"errors"
	"flag"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// BenchmarkWriteParts attributes AddSubmission's PostgreSQL CPU to the
// parts of its statement (issue 37): each sub-benchmark writes b.N
// submissions to one form through AddSubmission with a part of
// sqlAddSubmission taken out, each on a schema of its own, and
// reports the CPU of its backend per write as pg-cpu-ns/op. With
// -bench.parts-rounds N the whole set runs N times, in one order then
// in the other, so the parts' runs interleave (-count would run each
// part N times in a row); compare within a round, as
// bench/writecost.sh does. Not part of CI
// (no -bench there); the variants are for measurement only: a write
// without a part leaves the store's indexes short of it.
//
//	go test -run '^$' -bench BenchmarkWriteParts -benchtime 3000x ./pgstore/ -bench.parts-rounds 5
//	go test -run '^$' -bench 'BenchmarkWriteParts/(full|no-trigrams|no-tail|ff675d3)' -benchtime 3000x ./pgstore/ -bench.parts-rounds 5 -bench.parts-search
//
// The parts: the filters' entries (formsapi_find, and find_keys in the
// row), the change log's row, the field table, the sort entries, the
// search index's tail row, all of them at once ("bare"), with
// -bench.parts-search the search index's trigram keys and its tail row
// ("no-trigrams", "no-tail"), and ff675d3's
// statement (main before the read features of issue 27, the base of
// issue 37's goals) with only the mark that keeps the host triggers
// from firing. Two yardsticks whatever the flag: the whole write with
// the search index on ("full-search"), and with it off beside
// pg_trgm's GIN index of the text values ("trgm"); and the sort index
// on for one field ("sort", issue 39's index) beside PostgreSQL's own
// index on that field's expression ("expr"):
//
//	go test -run '^$' -bench 'BenchmarkWriteParts/^(full|full-search|trgm|sort|expr|ff675d3)(#|$)' -benchtime 6000x ./pgstore/ -bench.parts-rounds 3
func BenchmarkWriteParts(b *testing.B) {
	noKeys := func(q string) string {
		return replaceOnce(q, "$13::bigint[], $15::bytea[] FROM f", "NULL::bigint[], $15::bytea[] FROM f")
	}
	drop := func(names ...string) func(string) string {
		return func(q string) string {
			for _, n := range names {
				q = dropPart(q, n)
			}
			return q
		}
	}
	variants := []struct {
		name string
		edit func(string) string
	}{
		{"full", func(q string) string { return q }},
		{"no-filters", func(q string) string { return noKeys(dropPart(q, "e")) }},
		{"no-changes", drop("ch")},
		{"no-fields", drop("fields")},
		{"no-sort", drop("o")},
		{"no-tail", drop("tl")},
		{"bare", func(q string) string { return noKeys(drop("e", "ch", "fields", "o", "tl")(q)) }},
		// With -bench.parts-search: the row without its trigram keys (so
		// its fold has none to fold), and the row without its tail row
		// (so the folds find nothing, the keys still in the row).
		{"no-trigrams", func(q string) string {
			return replaceOnce(q, "$13::bigint[], $15::bytea[] FROM f",
				"(SELECT array_agg(k ORDER BY o) FROM unnest($13::bigint[]) WITH ORDINALITY AS u(k, o) WHERE k >= 0), $15::bytea[] FROM f")
		}},
		{"ff675d3", func(string) string { return writePartsBase }},
		// Yardsticks whatever -bench.parts-search says: the whole write
		// with the search index on, and with it off and pg_trgm's GIN
		// index (fastupdate, the default) of the text values instead.
		{"full-search", func(q string) string { return q }},
		{"trgm", func(q string) string { return q }},
		// And the sort index (issue 39) on for one field, beside
		// PostgreSQL's own index on that field's expression.
		{"sort", func(q string) string { return q }},
		{"expr", func(q string) string { return q }},
	}
	over := map[string]partsOver{"full-search": {search: partsOn}, "trgm": {search: partsOff, trgm: true},
		"sort": {search: partsOff, sort: "company"}, "expr": {search: partsOff, expr: "company"}}
	for r := range *partsRounds {
		if r > 0 {
			slices.Reverse(variants) // each part as often early as late in the table's growth
		}
		for _, v := range variants {
			writePart(b, v.name, v.edit, over[v.name])
		}
	}
}

// partsSearch opens BenchmarkWriteParts's stores with the search index
// on (WithSearchIndex).
var partsSearch = flag.Bool("bench.parts-search", false, "BenchmarkWriteParts: the search index on")

// partsOver is what a part of BenchmarkWriteParts sets whatever its
// flags say: the search index on or off (partsFlag: as
// -bench.parts-search says), and pg_trgm's GIN index of the
// submissions' text values; the sort index on a field, or PostgreSQL's
// own index on its expression.
type partsOver struct {
	search     int
	trgm       bool
	sort, expr string // a field: WithSortIndex, or an index on its expression
}

const (
	partsFlag = iota
	partsOn
	partsOff
)

// partsOptions are the options of BenchmarkWriteParts's stores.
func partsOptions(schema string, over partsOver) []Option {
	opts := []Option{WithSchema(schema)}
	if over.search == partsOn || over.search == partsFlag && *partsSearch {
		opts = append(opts, WithSearchIndex())
	}
	if over.sort != "" {
		opts = append(opts, WithSortIndex(over.sort))
	}
	return opts
}

// partsTrgm gives schema pg_trgm (the extension lives in the schema, and
// goes with it) and a GIN index of each submission's top-level text
// values, PostgreSQL's own trigram index: the yardstick issue 37 set
// beside the search index. It does not serve search's guarantees
// (docs/decisions.md).
func partsTrgm(b *testing.B, dsn, schema string) {
	// An extension is the database's, named once: one installed
	// elsewhere (a host's, or a killed run's schema) is not this part's
	// to move or drop.
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	var where string
	err = conn.QueryRow(context.Background(), "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_trgm'").Scan(&where)
	conn.Close(context.Background())
	switch {
	case err == nil:
		b.Skipf("pg_trgm is installed in schema %s of this database: the part installs its own and drops it with its schema", where)
	case !errors.Is(err, pgx.ErrNoRows):
		b.Fatal(err)
	}
	sch := pgx.Identifier{schema}.Sanitize()
	partsExec(b, dsn, "CREATE EXTENSION pg_trgm SCHEMA "+sch,
		"CREATE FUNCTION "+sch+".parts_text(data text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS "+
			"$$ SELECT string_agg(value, ' ') FROM jsonb_each_text(data::jsonb) $$",
		"CREATE INDEX parts_trgm ON "+sch+".formsapi_submissions USING gin ("+sch+".parts_text(data) "+sch+".gin_trgm_ops)")
}

// partsExec runs statements on dsn, or b fails.
func partsExec(b *testing.B, dsn string, statements ...string) {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, q := range statements {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
}

// partsRounds is BenchmarkWriteParts's rounds: every part in turn, in
// one order then in the other.
var partsRounds = flag.Int("bench.parts-rounds", 1, "BenchmarkWriteParts: rounds of every part in turn, interleaved")

// writePart runs BenchmarkWriteParts's part name, sqlAddSubmission as
// edit leaves it, on a schema of its own: a part's rows never reach
// another's folds.
func writePart(b *testing.B, name string, edit func(string) string, over partsOver) {
	b.Run(name, func(b *testing.B) {
		dsn, schema := writePartsSchema(b, over)
		if over.trgm {
			partsTrgm(b, dsn, schema)
		}
		if over.expr != "" {
			sch := pgx.Identifier{schema}.Sanitize()
			partsExec(b, dsn, "CREATE INDEX parts_expr ON "+sch+".formsapi_submissions (form_seq, (data::jsonb ->> "+
				"'"+strings.ReplaceAll(over.expr, "'", "''")+"'), created_at, seq)")
		}
		app := "formsapi_parts_" + strings.ToLower(strconv.FormatInt(time.Now().UnixNano(), 36))
		s, err := Open(context.Background(), dsn+"&pool_max_conns=1&application_name="+app, partsOptions(schema, over)...)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		// The arguments the part took stay typed: a parameter that no
		// part names has no type PostgreSQL can determine.
		q := strings.ReplaceAll(edit(s.sql.addSubmission), "SCHEMA", pgx.Identifier{schema}.Sanitize())
		s.sql.addSubmission = replaceOnce(q, "WITH ", "WITH typed AS (SELECT $12::bytea[], $13::bigint[], $14::boolean, $15::bytea[], $16::boolean), ")
		ctx := context.Background()
		sub, m := benchdata.Submission(benchdata.FormID(0), 0)
		if err := s.AddSubmission(ctx, sub, m); err != nil { // the connection opened, the statement prepared
			b.Fatal(err)
		}
		cpu0 := partsCPU(b, dsn, app)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			sub, m := benchdata.Submission(benchdata.FormID(0), i+1)
			if err := s.AddSubmission(ctx, sub, m); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(partsCPU(b, dsn, app)-cpu0)/float64(b.N), "pg-cpu-ns/op")
		if over.trgm {
			var n int
			if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema}.Sanitize()+".formsapi_submissions WHERE "+
				pgx.Identifier{schema}.Sanitize()+".parts_text(data) LIKE '%Person%'").Scan(&n); err != nil || n != b.N+1 {
				b.Fatalf("pg_trgm's index: %d rows match (%v), want %d", n, err, b.N+1)
			}
		}
	})
}

// writePartsBase is ff675d3's AddSubmission statement, with the mark
// (formsapi.written) that the store's statement sets, so that the
// triggers for a host's SQL stay quiet as they do for the store.
const writePartsBase = `WITH v AS (SELECT set_config('formsapi.written', '1', true)), f AS (
    UPDATE SCHEMA.formsapi_forms SET feed_last = feed_last + 1 FROM v WHERE id = $1 RETURNING seq, feed_last
)
INSERT INTO SCHEMA.formsapi_submissions
    (form_seq, feed_pos, created_at, data, attachments, json, json_version, client_ip, user_agent, geo, trace_id, host_id)
SELECT f.seq, f.feed_last, $2::bigint, $3::text, $4::text, $5::bytea, $10::integer, $6::bytea, $7::bytea, $8::bytea, $9::bytea, $11::text FROM f`

// writePartsSchema is a schema of its own for one part's run of
// BenchmarkWriteParts (dropped when b ends), loaded with its form.
func writePartsSchema(b *testing.B, over partsOver) (dsn, schema string) {
	dsn, schema = pgtest.Schema(b)
	s, err := Open(context.Background(), dsn, partsOptions(schema, over)...)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := benchdata.Load(context.Background(), s, []int{0}, "", nil); err != nil {
		b.Fatal(err)
	}
	return dsn, schema
}

// dropPart takes the data-modifying part name out of q.
func dropPart(q, name string) string {
	i := strings.Index(q, "\n), "+name+" AS (")
	if i < 0 {
		panic("no part " + name)
	}
	j := strings.Index(q[i+len("\n), "):], "\n)")
	return q[:i] + q[i+len("\n), ")+j:]
}

func replaceOnce(q, old, new string) string {
	if !strings.Contains(q, old) {
		panic("no " + old)
	}
	return strings.Replace(q, old, new, 1)
}

// partsCPU is the CPU so far of the backends of application app
// (pgtest.BackendCPU), or the benchmark fails: the server must be a
// process of this machine.
func partsCPU(b *testing.B, dsn, app string) time.Duration {
	cpu, ok := pgtest.BackendCPU(b, dsn, app)
	if !ok {
		b.Fatal("the PostgreSQL server is not a process of this machine")
	}
	return cpu
}
