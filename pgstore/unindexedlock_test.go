package pgstore_test

import (
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// TestIndexUnindexedBesideDeletion: Open indexing the rows a host stored
// without find_keys while the search index is on, and a deletion on one
// of their forms at once: Open locks those forms' rows before the fold's
// lock, as a deletion takes its form's row (the tombstone's) before it,
// so the deletion waits for Open and both go through. Before, Open took
// the fold's lock, then at its end the forms' rows to update their
// versions, which the deletion held while it waited for the lock:
// PostgreSQL aborted Open whenever its wait began more than
// deadlock_timeout after the deletion's (here deadlock_timeout is set
// so).
func TestIndexUnindexedBesideDeletion(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s := mustOpenIn(t, dsn, schema, pgstore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "host"}))
	for _, id := range []string{"orig", "gone"} {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "host", Data: []byte(`{"a":"needle"}`)}, formsapi.Metadata{ID: id}))
	}
	tbl := quote(schema) + "."
	pool := pgstore.Pool(s)
	// Two rows a host stores without find_keys.
	_, err := pool.Exec(ctx, `WITH f AS (
    UPDATE `+tbl+`formsapi_forms SET feed_last = feed_last + 2 WHERE id = 'host' RETURNING seq, feed_last - 2 AS before
)
INSERT INTO `+tbl+`formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version, host_id)
SELECT s.form_seq, f.before + g, s.created_at + g, s.data, s.attachments, s.json, s.json_version, 'bare-' || g
FROM f, `+tbl+`formsapi_submissions s, generate_series(1, 2) g
WHERE s.form_seq = f.seq AND s.host_id = 'orig'`)
	is.NoErr(err)
	held, err := pool.Begin(ctx)
	is.NoErr(err)
	defer held.Rollback(ctx)
	_, err = held.Exec(ctx, `SELECT 1 FROM `+tbl+`formsapi_submissions WHERE host_id = 'bare-1' FOR UPDATE`)
	is.NoErr(err)
	opened := make(chan error, 1)
	go func() {
		on, err := pgstore.Open(ctx, withParam(dsn, "deadlock_timeout", "10ms"), pgstore.WithSchema(schema), pgstore.WithSearchIndex())
		if err == nil {
			on.Close()
		}
		opened <- err
	}()
	pgtest.WaitForLock(t, dsn, "query LIKE $1", "SELECT seq, form_seq, created_at, find_keys%")
	hostPool, _ := hostPoolOn(t, withParam(dsn, "deadlock_timeout", "60s"), schema)
	remove := `DELETE FROM ` + tbl + `formsapi_submissions WHERE host_id = 'gone'`
	deleted := make(chan error, 1)
	go func() {
		_, err := hostPool.Exec(ctx, remove)
		deleted <- err
	}()
	pgtest.WaitForLock(t, dsn, "query = $1", remove)
	is.NoErr(held.Rollback(ctx))
	is.NoErr(<-opened)
	is.NoErr(<-deleted)
	checkBlocks(t, s)
	is.Equal(len(walkAll2(t, s, "host", formsapi.Query{Search: "needle", Limit: 10})), 3)
}
