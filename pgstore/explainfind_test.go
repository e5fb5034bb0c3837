package pgstore_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/pgstore"
)

// TestExplainFind checks the plan of every filtered statement (pages in
// both orders, plain and encoded, and the totals' counts) on a form of
// 100,000 submissions among 120,000, analyzed, for a key on every row of
// the form, one on 1 in 100 and one on 1 in 50,000: each reads its
// entries by one bounded range of formsapi_find's primary key and each
// submission by its own primary key, with no sequential, bitmap or hash
// scan of anything, in the custom plans and the generic one. The search
// statements (the same keys as trigrams, in posting blocks of 56,
// migration 0035) read formsapi_find_blocks by its primary key only,
// and unnest at most their bound's entries and two blocks' more; the
// probe too, per key. The
// statements of a search while its index is off (the form's submissions,
// and the range's count) read one bounded range of the form's index of
// formsapi_submissions, no more rows than their bound. An EXPLAIN
// at this size found the plain join planned as a hash join over a
// sequential scan of every form's submissions for the 1% key
// (BENCHMARKS.md, "Filters' plans").
//
// The rows are written with the tables' triggers disabled and the index
// entries inserted directly: through the triggers, each row updates its
// form's row, and 100,000 of those in one statement took over ten
// minutes. The plans read the tables as they are, not how they were
// filled.
func TestExplainFind(t *testing.T) {
	t.Parallel()
	s := mustOpenFresh(t)
	pool := pgstore.Pool(s)
	schema := quote(s.Schema())
	const t0 = int64(1_700_000_000_000_000_000)
	const (
		every = 1 // on every submission of form-1
		some  = 2 // on 1 in 100
		rare  = 3 // on 1 in 50,000
		none  = 4 // on none
	)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s.formsapi_forms (id, account_id, title, icon, notification_email, created_at)
SELECT 'form-' || g, 'acct-' || (g %% 10), 't', 'i', 'e', %d FROM generate_series(1, 100) g`, schema, t0),
		fmt.Sprintf(`ALTER TABLE %s.formsapi_submissions DISABLE TRIGGER USER`, schema),
		// 100,000 submissions of form-1, 20,000 over the other forms.
		fmt.Sprintf(`INSERT INTO %[1]s.formsapi_submissions (form_seq, feed_pos, created_at, data, json)
SELECT CASE WHEN g <= 100000 THEN (SELECT seq FROM %[1]s.formsapi_forms WHERE id = 'form-1') ELSE 2 + g %% 99 END,
       g, %[2]d + (g / 3)::bigint * 1000000000, '{}', '\x7b7d'::bytea
FROM generate_series(1, 120000) g`, schema, t0),
		fmt.Sprintf(`ALTER TABLE %s.formsapi_submissions ENABLE TRIGGER USER`, schema),
		// Every submission has the key "every" (so the key alone does not
		// pick form-1's entries), form-1's every 100th "some", and every
		// 50,000th "rare". (With eight more keys on every submission, as
		// a form of nine fields has, the planner no longer chose the hash
		// join above for the plain join, so the test would not catch it.)
		fmt.Sprintf(`INSERT INTO %[1]s.formsapi_find (form_seq, key, created_at, seq)
SELECT form_seq, %[2]d, created_at, seq FROM %[1]s.formsapi_submissions
UNION ALL
SELECT form_seq, %[3]d, created_at, seq FROM %[1]s.formsapi_submissions WHERE feed_pos <= 100000 AND feed_pos %% 100 = 0
UNION ALL
SELECT form_seq, %[4]d, created_at, seq FROM %[1]s.formsapi_submissions WHERE feed_pos <= 100000 AND feed_pos %% 50000 = 0`,
			schema, every, some, rare),
		// The same keys as trigrams (negated), in posting blocks of 56
		// entries (migration 0035), for the search statements.
		fmt.Sprintf(`INSERT INTO %[1]s.formsapi_find_blocks (form_seq, key, lo_at, lo_seq, ats, seqs)
SELECT form_seq, key, ats[1], seqs[1], ats, seqs FROM (
    SELECT form_seq, key, b, array_agg(created_at ORDER BY created_at, seq) AS ats, array_agg(seq ORDER BY created_at, seq) AS seqs
    FROM (
        SELECT form_seq, key, created_at, seq, (row_number() OVER (PARTITION BY form_seq, key ORDER BY created_at, seq) - 1) / 56 AS b
        FROM %[1]s.formsapi_find
    ) e GROUP BY form_seq, key, b
) g`, schema),
		fmt.Sprintf(`UPDATE %[1]s.formsapi_find_blocks SET key = -key`, schema),
		// Other trigrams' blocks (short ones, ten keys on every row), as a
		// schema holds a hundred-odd keys' blocks: a key's blocks are a
		// few of the table's, as its entries are of formsapi_find's.
		fmt.Sprintf(`INSERT INTO %[1]s.formsapi_find_blocks (form_seq, key, lo_at, lo_seq, ats, seqs)
SELECT form_seq, -1000 - g, lo_at, lo_seq, ats[1:1], seqs[1:1] FROM %[1]s.formsapi_find_blocks, generate_series(1, 10) g WHERE key = -%[2]d`, schema, every),
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", firstLine(q), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(`ANALYZE %[1]s.formsapi_forms, %[1]s.formsapi_submissions, %[1]s.formsapi_find, %[1]s.formsapi_find_blocks`, schema)); err != nil {
		t.Fatal(err)
	}
	var form int64
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT seq FROM %s.formsapi_forms WHERE id = 'form-1'`, schema)).Scan(&form); err != nil {
		t.Fatal(err)
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	at := func(sec int64) int64 { return t0 + sec*1e9 }
	deep := keyset.Pos{At: at(99000 / 3), Seq: 99000}.String()
	windows := []struct {
		name string
		q    formsapi.Query
	}{
		{"FirstPage", formsapi.Query{Limit: 50}},
		{"DeepPage", formsapi.Query{Limit: 50, Cursor: deep}},
		{"Window", formsapi.Query{Limit: 50, Since: time.Unix(0, at(4000)), Until: time.Unix(0, at(30000))}},
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		literals := fmt.Sprintf("%d, '{%d,%d,%d,%d,%d,%d,%d,%d}'", form, every, some, rare, none, -every, -some, -rare, -none)
		checkProbePlan(t, "probe/"+mode, explain(t, conn.Conn(), pgstore.ProbeSQL(s), literals, mode, mode == "force_custom_plan"))
	}
	// keysetBounds are the literals of w's keyset bounds for the
	// statement name, in the order its name ends with.
	keysetBounds := func(name string, q formsapi.Query) string {
		if strings.HasSuffix(name, "/oldest") {
			q.Order = formsapi.Oldest
		}
		args, err := pgstore.ListArgs(q)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d, %d, %d, %d", toInt64(args[0]), toInt64(args[1]), toInt64(args[2]), toInt64(args[3]))
	}
	statements := pgstore.FindSQL(s)
	for _, name := range slices.Sorted(maps.Keys(statements)) {
		sql := statements[name]
		for _, key := range []int64{every, some, rare, none} {
			if strings.Contains(name, "search") {
				key = -key // a trigram's, in its posting blocks
			}
			for _, w := range windows {
				bounds := keysetBounds(name, w.q)
				var literals string
				var most int64 // entries the statement may read
				switch {
				case strings.HasPrefix(name, "count/entries"):
					literals, most = fmt.Sprintf("%d, %s, %d", form, bounds, key), find.MaxCount+1
				case strings.HasPrefix(name, "count/matches"):
					literals, most = fmt.Sprintf("%d, %d, %s, %d, %d", form, key, bounds, find.MaxExactCount+1, find.MaxExactCountBytes), find.MaxExactCount+1
				default:
					literals, most = fmt.Sprintf("%d, %d, %s, %d, %d", form, key, bounds, stored.Examined, find.MaxExaminedBytes), stored.Examined
				}
				for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
					label := fmt.Sprintf("%s/key%d/%s/%s", name, key, w.name, mode)
					plan := explain(t, conn.Conn(), sql, literals, mode, mode == "force_custom_plan")
					if key < 0 {
						checkBlocksPlan(t, label, plan, most)
					} else {
						checkFindPlan(t, label, plan, most)
					}
				}
			}
		}
	}
	// A search while the index is off walks the form's submissions (the
	// page statements, up to stored.Examined rows, in batches) and counts
	// the range's rows (up to find.MaxCount+1, as an unfiltered total
	// does): one bounded range of formsapi_submissions_form each.
	scans := pgstore.ScanSQL(s)
	for _, name := range slices.Sorted(maps.Keys(scans)) {
		for _, w := range windows {
			literals := fmt.Sprintf("%d, %s", form, keysetBounds(name, w.q))
			most := int64(find.MaxCount + 1)
			if name != "count/rows" {
				literals, most = fmt.Sprintf("%s, %d, %d", literals, stored.Examined, find.MaxExaminedBytes), stored.Examined
			}
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				label := fmt.Sprintf("%s/%s/%s", name, w.name, mode)
				plan := explain(t, conn.Conn(), scans[name], literals, mode, mode == "force_custom_plan")
				checkRangePlan(t, label, plan, "formsapi_submissions", "formsapi_submissions_form", most)
			}
		}
	}
}

// checkProbePlan checks a search's probe (the entries of each candidate
// key of a form, up to stored.Probed each): formsapi_find read only by
// its primary key, as a sub-plan run once per key, and a trigram's
// posting blocks (formsapi_find_blocks) only by theirs, with no
// sequential or hash scan and, with ANALYZE figures, at most
// stored.Probed entries per key of formsapi_find, and of the blocks as
// many as hold stored.Probed entries and one more per key.
func checkProbePlan(t *testing.T, name string, plan planNode) {
	t.Helper()
	var entries, blocks int
	for _, n := range nodes(plan) {
		switch n.NodeType {
		case "Seq Scan", "Hash", "Hash Join", "Merge Join", "Sort":
			if n.Relation != "" || n.NodeType != "Sort" {
				t.Errorf("%s: %s node (on %q)", name, n.NodeType, n.Relation)
			}
		}
		switch n.Relation {
		case "formsapi_find":
			entries++
			if n.Index != "formsapi_find_pkey" {
				t.Errorf("%s: formsapi_find read by %s of %q, want its primary key", name, n.NodeType, n.Index)
			}
			if n.ActualRows != nil && *n.ActualRows > stored.Probed {
				t.Errorf("%s: %d entries per key, at most %d allowed", name, *n.ActualRows, stored.Probed)
			}
		case "formsapi_find_blocks":
			blocks++
			if n.Index != "formsapi_find_blocks_pkey" {
				t.Errorf("%s: formsapi_find_blocks read by %s of %q, want its primary key", name, n.NodeType, n.Index)
			}
			if most := int64(stored.Probed/56 + 2); n.ActualRows != nil && *n.ActualRows > most {
				t.Errorf("%s: %d blocks per key, at most %d allowed", name, *n.ActualRows, most)
			}
		}
	}
	if entries != 1 || blocks != 1 {
		t.Errorf("%s: %d scans of formsapi_find and %d of formsapi_find_blocks, want 1 each (run per key)", name, entries, blocks)
	}
	if t.Failed() {
		b, _ := json.MarshalIndent(plan, "", "  ")
		t.Logf("%s plan:\n%s", name, b)
	}
}

// blockEntriesRead is the number of entries a plan's walks of posting
// blocks unnested (the function scans of the blocks' lists, aliased x),
// over every loop, filtered ones included.
func blockEntriesRead(plan planNode) int64 {
	var read int64
	for _, n := range nodes(plan) {
		if n.NodeType == "Function Scan" && n.Alias == "x" && n.ActualRows != nil {
			read += (*n.ActualRows + n.RowsFiltered) * max(n.ActualLoops, 1)
		}
	}
	return read
}

// checkBlocksPlan checks a search statement's plan over a trigram's
// posting blocks (migration 0035): formsapi_find_blocks read only by its
// primary key, for the form and the key, formsapi_submissions only by
// probes of its primary key, the form's unfolded tail by a bounded range
// of its primary key, no other table, no sequential or hash scan, and
// (with ANALYZE figures) at most most entries of the blocks unnested,
// and two blocks' more (the walk's first block, which may hold entries
// before the range, and its last, which may hold more than it needs).
func checkBlocksPlan(t *testing.T, name string, plan planNode, most int64) {
	t.Helper()
	failed := false
	errorf := func(format string, args ...any) {
		t.Helper()
		failed = true
		t.Errorf(format, args...)
	}
	var scans int
	for _, n := range nodes(plan) {
		switch n.NodeType {
		case "Seq Scan", "Hash", "Hash Join", "Merge Join", "Materialize", "Bitmap Index Scan":
			errorf("%s: %s node (on %q)", name, n.NodeType, n.Relation)
		}
		switch n.Relation {
		case "formsapi_find_blocks":
			scans++
			if n.Index != "formsapi_find_blocks_pkey" || !strings.Contains(n.IndexCond, "(form_seq = ") || !strings.Contains(n.IndexCond, "(key = ") {
				errorf("%s: formsapi_find_blocks read by %s of %q (%s), want its primary key for the form and key", name, n.NodeType, n.Index, n.IndexCond)
			}
		case "formsapi_submissions":
			if n.Index != "formsapi_submissions_pkey" {
				errorf("%s: formsapi_submissions read by %s of %q, want probes of its primary key", name, n.NodeType, n.Index)
			}
		case "formsapi_find_tail":
			if n.Index != "formsapi_find_tail_pkey" || !lowerBound.MatchString(n.IndexCond) || !upperBound.MatchString(n.IndexCond) {
				errorf("%s: formsapi_find_tail read by %s of %q (%s), want a range of its primary key bounded by the keyset", name, n.NodeType, n.Index, n.IndexCond)
			}
		case "":
		default:
			errorf("%s: reads %s", name, n.Relation)
		}
	}
	if scans == 0 {
		errorf("%s: no scan of formsapi_find_blocks", name)
	}
	if read := blockEntriesRead(plan); read > most+2*56 {
		errorf("%s: %d entries of posting blocks read, at most %d allowed", name, read, most+2*56)
	}
	if failed {
		b, _ := json.MarshalIndent(plan, "", "  ")
		t.Logf("%s plan:\n%s", name, b)
	}
}

// checkFindPlan checks that a filtered statement's plan reads formsapi_find
// by one range of its primary key (an index scan, or a bitmap of one),
// bounded at both ends by the keyset and (with ANALYZE figures) reading at
// most most entries, and formsapi_submissions only by probes of its
// primary key, with no sequential or hash scan and no materialized or
// merged input.
func checkFindPlan(t *testing.T, name string, plan planNode, most int64) {
	t.Helper()
	checkRangePlan(t, name, plan, "formsapi_find", "formsapi_find_pkey", most)
}

// checkRangePlan checks that plan reads table by one range of index (an
// index scan, or a bitmap of one), bounded at both ends by the keyset and
// (with ANALYZE figures) reading at most most rows, any other
// formsapi_submissions row only by a probe of its primary key, and no
// other table but, beside formsapi_find, the form's unfolded tail by a
// bounded range of its primary key, with no sequential or hash scan and
// no materialized or merged input.
func checkRangePlan(t *testing.T, name string, plan planNode, table, index string, most int64) {
	t.Helper()
	failed := false
	errorf := func(format string, args ...any) {
		t.Helper()
		failed = true
		t.Errorf(format, args...)
	}
	var ranges int
	bounded := func(n planNode) {
		if n.Index != index {
			errorf("%s: %s read by %s of %q, want %s", name, table, n.NodeType, n.Index, index)
		}
		if !lowerBound.MatchString(n.IndexCond) || !upperBound.MatchString(n.IndexCond) {
			errorf("%s: index condition %q is not bounded at both ends by the keyset", name, n.IndexCond)
		}
	}
	for _, n := range nodes(plan) {
		switch n.NodeType {
		case "Seq Scan", "Hash", "Hash Join", "Merge Join", "Materialize":
			errorf("%s: %s node (on %q)", name, n.NodeType, n.Relation)
		case "Bitmap Index Scan":
			bounded(n)
		}
		switch n.Relation {
		case table:
			ranges++
			if n.NodeType != "Bitmap Heap Scan" {
				bounded(n)
			}
			if n.ActualRows != nil {
				if read := *n.ActualRows + n.RowsFiltered + n.RowsRechecked; read > most {
					errorf("%s: read %d rows of %s, at most %d allowed", name, read, table, most)
				}
			}
		case "formsapi_submissions":
			if n.Index != "formsapi_submissions_pkey" {
				errorf("%s: formsapi_submissions read by %s of %q, want probes of its primary key", name, n.NodeType, n.Index)
			}
		case "formsapi_find_tail":
			// The form's unfolded tail beside a key's entries (migration
			// 0023): one range of its primary key, bounded as theirs.
			if table != "formsapi_find" || n.Index != "formsapi_find_tail_pkey" {
				errorf("%s: formsapi_find_tail read by %s of %q, want a range of its primary key beside formsapi_find's", name, n.NodeType, n.Index)
			}
			if !lowerBound.MatchString(n.IndexCond) || !upperBound.MatchString(n.IndexCond) {
				errorf("%s: the tail's index condition %q is not bounded at both ends by the keyset", name, n.IndexCond)
			}
		case "":
		default:
			errorf("%s: reads %s", name, n.Relation)
		}
	}
	if ranges != 1 {
		errorf("%s: %d scans of %s, want 1", name, ranges, table)
	}
	if failed {
		b, _ := json.MarshalIndent(plan, "", "  ")
		t.Logf("%s plan:\n%s", name, b)
	}
}
