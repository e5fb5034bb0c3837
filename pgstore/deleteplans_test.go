package pgstore_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/jackc/pgx/v5"
)

// TestDeleteAfterABigDeleteSeeks: a deletion's statement triggers
// (formsapi_find_delete, formsapi_sort_delete,
// formsapi_submissions_deleted and their update siblings) read their
// transition table with statements that have no parameters, whose plan
// PL/pgSQL makes once per connection, for the number of rows of the first
// firing. After a deletion of a whole form on a connection, every later
// deletion of one submission on it read every entry of the index tables
// (seq_scan > 0 in pg_stat_xact_user_tables), whatever the form. Each
// function now plans without sequential scans and hashes (migration 0044),
// so the one-row deletion after the big one seeks.
func TestDeleteAfterABigDeleteSeeks(t *testing.T) {
	t.Parallel()
	s := mustOpenFresh(t, pgstore.WithSearchIndex(), pgstore.WithSortIndex())
	pool := pgstore.Pool(s)
	schema := quote(s.Schema())
	// Forms enough that a scan of their table is not the cheap way to
	// one of them.
	for i := range 300 {
		id := fmt.Sprintf("form-%d", i)
		if i == 0 {
			id = "big"
		} else if i == 1 {
			id = "small"
		}
		if err := s.AddForm(ctx, "acct", formsapi.Form{ID: id, Title: id}); err != nil {
			t.Fatal(err)
		}
	}
	add := func(form string, n int) {
		t.Helper()
		err := s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
			for i := range n {
				sub, m := benchdata.Submission(form, i)
				if !yield(sub, m) {
					return
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	add("big", 3000)
	add("small", 10)
	if _, err := pool.Exec(ctx, fmt.Sprintf(`ANALYZE %[1]s.formsapi_submissions, %[1]s.formsapi_find, %[1]s.formsapi_sort, %[1]s.formsapi_forms`, schema)); err != nil {
		t.Fatal(err)
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	conn := c.Conn()
	// The first firing on this connection deletes a whole form, and is
	// rolled back.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(`DELETE FROM %[1]s.formsapi_submissions WHERE form_seq = (SELECT seq FROM %[1]s.formsapi_forms WHERE id = 'big')`, schema)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Then one submission of the other form, and what it read.
	var seq int64
	if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT max(seq) FROM %[1]s.formsapi_submissions WHERE form_seq = (SELECT seq FROM %[1]s.formsapi_forms WHERE id = 'small')`, schema)).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	tx, err = conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, fmt.Sprintf(`DELETE FROM %s.formsapi_submissions WHERE seq = $1`, schema), seq); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `SELECT relname, seq_scan FROM pg_stat_xact_user_tables WHERE schemaname = $1 AND seq_scan > 0 ORDER BY relname`, s.Schema())
	if err != nil {
		t.Fatal(err)
	}
	scanned, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Table string
		Scans int64
	}])
	if err != nil {
		t.Fatal(err)
	}
	if len(scanned) > 0 {
		t.Errorf("a deletion of one submission after a big one on the same connection scanned whole tables: %+v", scanned)
	}
	// The update functions keep the same settings (a CREATE OR REPLACE
	// in a later migration drops those it does not name).
	for _, fn := range []string{"formsapi_find_delete", "formsapi_sort_delete", "formsapi_submissions_deleted",
		"formsapi_find_update", "formsapi_sort_update", "formsapi_submissions_updated"} {
		var config []string
		if err := pool.QueryRow(ctx, `SELECT coalesce(p.proconfig, '{}') FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $1 AND p.proname = $2`, s.Schema(), fn).Scan(&config); err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		for _, want := range []string{"enable_seqscan=off", "enable_hashjoin=off", "enable_mergejoin=off"} {
			if !slices.Contains(config, want) {
				t.Errorf("%s plans without %s: its settings are %q", fn, want, config)
			}
		}
	}
}
