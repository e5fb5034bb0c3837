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

// TestSearchBigTail: a form's unfolded tail far past a fold's 256 rows
// (every fold in the meantime found the fold's lock held, as behind a
// long deletion, and left the tail to a later one), with late commits
// in it and blocks before: a search finds every match, each once, both
// ways a page at a time, and counts them exactly, and the write after
// the lock is free folds it all into the blocks as checkBlocks wants.
func TestSearchBigTail(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t, pgstore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "big"}))
	pool := pgstore.Pool(s)
	tbl := quote(s.Schema()) + "."
	base := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	var want []int
	n := 0
	add := func(at time.Time) {
		t.Helper()
		data := fmt.Sprintf(`{"n":%d,"a":"plain words"}`, n)
		if n%3 == 0 {
			data = fmt.Sprintf(`{"n":%d,"a":"a needle here"}`, n)
			want = append(want, n)
		}
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "big", Data: []byte(data), CreatedAt: at}, formsapi.Metadata{}))
		n++
	}
	for range 600 { // folded as they come
		add(base.Add(time.Duration(n) * time.Second))
	}
	tx, err := pool.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+quote(s.Schema())+`.formsapi_fold_lock())`)
	is.NoErr(err)
	for i := range 2400 { // none folded; one in four late
		at := base.Add(time.Duration(n) * time.Second)
		if i%4 == 0 {
			at = base.Add(time.Duration(n%700)*time.Second - time.Millisecond)
		}
		add(at)
	}
	var tail int
	is.NoErr(pool.QueryRow(ctx, `SELECT count(*) FROM `+tbl+`formsapi_find_tail`).Scan(&tail))
	is.True(tail >= 2400)
	checkSearchAll(t, s, "big", want)
	is.NoErr(tx.Rollback(ctx))
	for range 300 {
		add(base.Add(time.Duration(n) * time.Second))
	}
	is.NoErr(pool.QueryRow(ctx, `SELECT count(*) FROM `+tbl+`formsapi_find_tail`).Scan(&tail))
	is.True(tail < 300)
	checkBlocks(t, s)
	checkSearchAll(t, s, "big", want)
}
