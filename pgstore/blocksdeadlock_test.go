package pgstore_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// TestSearchBlocksTailDeleteWaitsForFold: a host's deletion, and a host's
// update of find_keys, of a submission still in the unfolded tail, made
// while a fold holds the fold's lock and before the fold reaches the
// tail: the statement waits for the lock before it touches the tail row
// (migration 0039), so the fold, which deletes that row, does not wait
// for it in turn. Before, the triggers deleted the tail row and then
// waited for the lock: a fold that came to the row then waited for the
// statement, and PostgreSQL ended the deadlock after deadlock_timeout by
// aborting one of them (40P01), a host's statement as an error, the
// store's write whose fold it was as a retry a second later.
func TestSearchBlocksTailDeleteWaitsForFold(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s := mustOpenIn(t, dsn, schema, pgstore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "tail"}))
	pool := pgstore.Pool(s)
	tbl := quote(schema) + "."
	for i := range 20 {
		data := fmt.Sprintf(`{"i":%d,"a":"needle"}`, i)
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "tail", Data: []byte(data)}, formsapi.Metadata{ID: strconv.Itoa(i)}))
	}
	keys := find.IndexKeys([]byte(`{"a":"thread"}`), nil)
	left := 20
	for _, st := range []struct {
		name, sql string
		args      []any
	}{
		{"delete", `DELETE FROM ` + tbl + `formsapi_submissions WHERE host_id = 'again-delete'`, nil},
		{"update", `UPDATE ` + tbl + `formsapi_submissions SET data = '{"a":"thread"}', find_keys = $1 WHERE host_id = 'again-update'`, []any{keys}},
	} {
		t.Run(st.name, func(t *testing.T) {
			is := is.New(t)
			// A row in the tail, the statement's, beside those the fold
			// will take.
			data := `{"again":"` + st.name + `","a":"needle"}`
			is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "tail", Data: []byte(data)}, formsapi.Metadata{ID: "again-" + st.name}))
			left++
			tx, err := pool.Begin(ctx)
			is.NoErr(err)
			defer tx.Rollback(ctx)
			_, err = tx.Exec(ctx, `SET LOCAL search_path TO `+quote(schema)+`; SELECT pg_advisory_xact_lock(formsapi_fold_lock())`)
			is.NoErr(err)
			done := make(chan error, 1)
			go func() {
				_, err := pool.Exec(ctx, st.sql, st.args...)
				done <- err
			}()
			pgtest.WaitForLock(t, dsn, "query LIKE $1", st.sql[:6]+"%"+schema+"%")
			_, err = tx.Exec(ctx, `SELECT formsapi_fold_tail()`)
			is.NoErr(err) // the fold
			is.NoErr(tx.Commit(ctx))
			is.NoErr(<-done) // the host's statement
			left--           // a match less either way
			checkBlocks(t, s)
			is.Equal(len(walkAll2(t, s, "tail", formsapi.Query{Search: "needle", Limit: 100})), left)
		})
	}
}

// TestSearchBlocksUpdateBesideDeletion: a host's update of find_keys and
// a deletion on the same form at once, the update holding the fold's
// lock when the deletion comes (its fold waits on a tail row a third
// transaction holds): the update takes its forms' rows before the
// fold's lock (migration 0040), as a deletion's tombstone takes its
// form's row before it, so the deletion waits for the update and both
// go through. Before, the update took the lock, then its version
// trigger the form's row, which the deletion held while it waited for
// the lock: a deadlock, which PostgreSQL ended after a second by
// aborting one (40P01), here the deletion.
func TestSearchBlocksUpdateBesideDeletion(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s := mustOpenIn(t, dsn, schema, pgstore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "both"}))
	pool := pgstore.Pool(s)
	tbl := quote(schema) + "."
	for _, id := range []string{"gone", "changed", "held"} {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "both", Data: []byte(`{"id":"` + id + `","a":"needle"}`)}, formsapi.Metadata{ID: id}))
	}
	// The third transaction: it holds "held"'s tail row, which the
	// update's fold will wait for.
	held, err := pool.Begin(ctx)
	is.NoErr(err)
	defer held.Rollback(ctx)
	_, err = held.Exec(ctx, `DELETE FROM `+tbl+`formsapi_find_tail WHERE seq = (SELECT seq FROM `+tbl+`formsapi_submissions WHERE host_id = 'held')`)
	is.NoErr(err)
	update := `UPDATE ` + tbl + `formsapi_submissions SET data = '{"id":"changed","a":"thread"}', find_keys = $1 WHERE host_id = 'changed'`
	updated := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, update, find.IndexKeys([]byte(`{"id":"changed","a":"thread"}`), nil))
		updated <- err
	}()
	pgtest.WaitForLock(t, dsn, "query LIKE $1", "UPDATE "+tbl+"%")
	remove := `DELETE FROM ` + tbl + `formsapi_submissions WHERE host_id = 'gone'`
	deleted := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, remove)
		deleted <- err
	}()
	pgtest.WaitForLock(t, dsn, "query = $1", remove)
	is.NoErr(held.Rollback(ctx))
	is.NoErr(<-updated)
	is.NoErr(<-deleted)
	checkBlocks(t, s)
	got := walkAll2(t, s, "both", formsapi.Query{Search: "needle", Limit: 10})
	is.Equal(got, []string{`{"id":"held","a":"needle"}`})
}
