package pgstore_test

import (
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/pgstore"
)

// TestExplainSort checks the plan of every sorted page's statements on a
// form of 100,000 submissions among 120,000, analyzed, each with an
// entry for the sorted field and one for another: the ordered index's
// walk reads one range of formsapi_sort's primary key, from the page's
// place, at most stored.Examined entries, at the first page and at 99%
// depth, each submission by its own primary key, with no sequential,
// bitmap or hash scan and no sort, in the custom plans and the generic
// one; the walk of the submissions without a key is one bounded range of
// the form's index. The rows are written with the triggers disabled and
// the entries inserted directly (see TestExplainFind).
func TestExplainSort(t *testing.T) {
	t.Parallel()
	s := mustOpenFresh(t)
	pool := pgstore.Pool(s)
	schema := quote(s.Schema())
	const t0 = int64(1_700_000_000_000_000_000)
	prefix, other := pgstore.SortPrefix("n"), pgstore.SortPrefix("m")
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s.formsapi_forms (id, account_id, title, icon, notification_email, created_at)
SELECT 'form-' || g, 'acct-' || (g %% 10), 't', 'i', 'e', %d FROM generate_series(1, 100) g`, schema, t0),
		fmt.Sprintf(`ALTER TABLE %s.formsapi_submissions DISABLE TRIGGER USER`, schema),
		fmt.Sprintf(`INSERT INTO %[1]s.formsapi_submissions (form_seq, feed_pos, created_at, data, json, sort_keys)
SELECT CASE WHEN g <= 100000 THEN (SELECT seq FROM %[1]s.formsapi_forms WHERE id = 'form-1') ELSE 2 + g %% 99 END,
       g, %[2]d + (g / 3)::bigint * 1000000000, '{}', '\x7b7d'::bytea, '{}'
FROM generate_series(1, 120000) g`, schema, t0),
		fmt.Sprintf(`ALTER TABLE %s.formsapi_submissions ENABLE TRIGGER USER`, schema),
		// The value of n runs against the submissions' order: (g * 7919)
		// mod 100,003, so the walk's order is not the table's.
		fmt.Sprintf(`INSERT INTO %[1]s.formsapi_sort (form_seq, entry, created_at, seq)
SELECT form_seq, '\x%[2]s'::bytea || '\x10'::bytea || int8send((seq * 7919) %% 100003), created_at, seq FROM %[1]s.formsapi_submissions
UNION ALL
SELECT form_seq, '\x%[3]s'::bytea || '\x10'::bytea || int8send(seq), created_at, seq FROM %[1]s.formsapi_submissions`,
			schema, hex.EncodeToString(prefix), hex.EncodeToString(other)),
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", firstLine(q), err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Statistics from every row, not from ANALYZE's sample of 30,000
	// (300 times the target): with a sample, a deep page's plan changed
	// from one run to the next (a bitmap scan, now and then).
	if _, err := pool.Exec(ctx, fmt.Sprintf(`SET default_statistics_target = 1000; ANALYZE %[1]s.formsapi_forms, %[1]s.formsapi_submissions, %[1]s.formsapi_sort; RESET default_statistics_target`, schema)); err != nil {
		t.Fatal(err)
	}
	var form int64
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT seq FROM %s.formsapi_forms WHERE id = 'form-1'`, schema)).Scan(&form); err != nil {
		t.Fatal(err)
	}
	// The place 99% into the walk, ascending and descending.
	var deepAsc, deepDesc string
	for _, q := range []struct {
		dir string
		out *string
	}{{"ASC", &deepAsc}, {"DESC", &deepDesc}} {
		var entry []byte
		var at, seq int64
		if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT entry, created_at, seq FROM %s.formsapi_sort WHERE form_seq = $1 AND substring(entry FROM 1 FOR 8) = $2
ORDER BY entry %s, created_at %[2]s, seq %[2]s OFFSET 99000 LIMIT 1`, schema, q.dir), form, prefix).Scan(&entry, &at, &seq); err != nil {
			t.Fatal(err)
		}
		*q.out = fmt.Sprintf(`'\x%s', %d, %d`, hex.EncodeToString(entry), at, seq)
	}
	hexOf := func(b []byte) string { return `'\x` + hex.EncodeToString(b) + `'` }
	after := hexOf(append(slices.Clip(prefix), 0xFF))
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	statements := pgstore.SortSQL(s)
	for _, name := range slices.Sorted(maps.Keys(statements)) {
		desc := strings.HasSuffix(name, "/desc")
		var places map[string]string
		switch {
		case strings.HasPrefix(name, "unsorted"):
			places = map[string]string{"all": fmt.Sprintf("%d, %d, %d, %d, %d, %d", form, int64(math.MinInt64), int64(math.MinInt64), int64(math.MaxInt64), int64(math.MaxInt64), stored.Examined)}
		case desc:
			places = map[string]string{
				"first": fmt.Sprintf("%d, %s, %d, %d, %s, %d", form, after, int64(math.MaxInt64), int64(math.MaxInt64), hexOf(prefix), stored.Examined),
				"deep":  fmt.Sprintf("%d, %s, %s, %d", form, deepDesc, hexOf(prefix), stored.Examined),
			}
		default:
			places = map[string]string{
				"first": fmt.Sprintf("%d, %s, %d, %d, %s, %d", form, hexOf(prefix), int64(math.MinInt64), int64(math.MinInt64), after, stored.Examined),
				"deep":  fmt.Sprintf("%d, %s, %s, %d", form, deepAsc, after, stored.Examined),
			}
		}
		for _, place := range slices.Sorted(maps.Keys(places)) {
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				label := fmt.Sprintf("%s/%s/%s", name, place, mode)
				plan := explain(t, conn.Conn(), statements[name], places[place], mode, mode == "force_custom_plan")
				if strings.HasPrefix(name, "unsorted") {
					checkRangePlan(t, label, plan, "formsapi_submissions", "formsapi_submissions_form", stored.Examined)
					continue
				}
				checkSortPlan(t, label, plan)
			}
		}
	}
}

// checkSortPlan checks that a sorted page reads formsapi_sort by one
// range of its primary key (no sort, scan or hash anywhere), at most
// stored.Examined entries with ANALYZE figures, and each submission by
// its primary key.
func checkSortPlan(t *testing.T, name string, plan planNode) {
	t.Helper()
	ranges := 0
	for _, n := range nodes(plan) {
		switch n.NodeType {
		case "Seq Scan", "Hash", "Hash Join", "Merge Join", "Materialize", "Sort", "Incremental Sort", "Bitmap Heap Scan", "Bitmap Index Scan":
			t.Errorf("%s: %s node (on %q)", name, n.NodeType, n.Relation)
		}
		switch n.Relation {
		case "formsapi_sort":
			ranges++
			if n.Index != "formsapi_sort_pkey" || !strings.Contains(n.IndexCond, "ROW(entry, created_at, seq)") {
				t.Errorf("%s: formsapi_sort read by %s of %q where %q, want a range of its primary key from the page's place", name, n.NodeType, n.Index, n.IndexCond)
			}
			if n.ActualRows != nil && *n.ActualRows+n.RowsFiltered > stored.Examined {
				t.Errorf("%s: read %d entries, at most %d allowed", name, *n.ActualRows+n.RowsFiltered, stored.Examined)
			}
		case "formsapi_submissions":
			if n.Index != "formsapi_submissions_pkey" {
				t.Errorf("%s: formsapi_submissions read by %s of %q, want probes of its primary key", name, n.NodeType, n.Index)
			}
		case "":
		default:
			t.Errorf("%s: reads %s", name, n.Relation)
		}
	}
	if ranges != 1 {
		t.Errorf("%s: %d scans of formsapi_sort, want 1", name, ranges)
	}
}
