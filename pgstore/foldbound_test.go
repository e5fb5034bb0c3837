package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// TestSearchTailFoldBounded: a form's tail that grew while every fold
// found the fold's lock held (a long deletion) is folded 1,024 rows at a
// time by the writes whose turn it is (migration 0042), not all at once
// by the first of them, which held the form's row meanwhile and, under a
// statement_timeout, failed every time; the tail drains, and the blocks
// and searches hold every row.
func TestSearchTailFoldBounded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t, pgstore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "grown"}))
	pool := pgstore.Pool(s)
	tbl := quote(s.Schema()) + "."
	base := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	var want []int
	add := func() {
		t.Helper()
		n := len(want)
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "grown", Data: []byte(fmt.Sprintf(`{"n":%d,"a":"needle"}`, n)), CreatedAt: base.Add(time.Duration(n) * time.Second)}, formsapi.Metadata{}))
		want = append(want, n)
	}
	tail := func() (n int) {
		t.Helper()
		is.NoErr(pool.QueryRow(ctx, `SELECT count(*) FROM `+tbl+`formsapi_find_tail`).Scan(&n))
		return n
	}
	held, err := pool.Begin(ctx)
	is.NoErr(err)
	defer held.Rollback(ctx)
	_, err = held.Exec(ctx, `SELECT pg_advisory_xact_lock(`+tbl+`formsapi_fold_lock())`)
	is.NoErr(err)
	for range 3000 {
		add()
	}
	is.Equal(tail(), 3000)
	is.NoErr(held.Rollback(ctx))
	for before, writes := tail(), 0; before >= 256; before = tail() {
		add()
		if now := tail(); now < before-1024+1 {
			t.Fatalf("a write folded %d rows", before+1-now)
		}
		if writes++; writes > 200 {
			t.Fatalf("the tail still holds %d rows after %d writes", before, writes)
		}
	}
	checkBlocks(t, s)
	checkSearchAll(t, s, "grown", want)
}
