package pgstore_test

import (
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// TestSearchIndexBuildBesideDeletion: a deletion, a host's or a form's,
// while the search index is turned on (Open with WithSearchIndex over
// stored rows) waits for the search lock before it takes its form's row
// (migration 0041; DeleteForm takes it before it locks the form), as
// the store's writes do, so the build, which updates the versions of
// the forms it indexed at its end, does not wait for that row in turn:
// both go through. Before, the deletion took the form's row (the
// tombstone's feed position; DeleteForm's lock), then waited for the
// search lock the build held, and the build then waited for the row:
// PostgreSQL ended the deadlock by aborting the build, and Open failed,
// whenever the build's wait began more than deadlock_timeout after the
// deletion's (a build of more than a second; here deadlock_timeout is
// set so).
func TestSearchIndexBuildBesideDeletion(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		delete func(t *testing.T, dsn, schema string, s *pgstore.Store) (wait string, err chan error)
		left   int
	}{
		{"a host's deletion", func(t *testing.T, dsn, schema string, s *pgstore.Store) (string, chan error) {
			// Its own deadlock check comes late.
			hostPool, _ := hostPoolOn(t, withParam(dsn, "deadlock_timeout", "60s"), schema)
			remove := `DELETE FROM ` + quote(schema) + `.formsapi_submissions WHERE host_id = 'gone'`
			deleted := make(chan error, 1)
			go func() {
				_, err := hostPool.Exec(ctx, remove)
				deleted <- err
			}()
			return remove, deleted
		}, 2},
		{"a form's deletion", func(t *testing.T, dsn, schema string, s *pgstore.Store) (string, chan error) {
			deleted := make(chan error, 1)
			go func() { deleted <- s.DeleteForm(ctx, storetest.AccountA, "other") }()
			// Waiting in its deletion of the submissions, or since 0041
			// in its look at the setting before.
			return `%` + quote(schema) + `.%`, deleted
		}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			dsn, schema := pgtest.Schema(t)
			s := mustOpenIn(t, dsn, schema)
			for _, f := range []string{"build", "other"} {
				is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: f}))
				for _, id := range []string{"held", "kept", "gone"} {
					is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: f, Data: []byte(`{"id":"` + id + `","a":"needle"}`)}, formsapi.Metadata{ID: id}))
				}
			}
			// A transaction that holds a row the build's first batch
			// locks: the build waits there, under the search lock.
			held, err := pgstore.Pool(s).Begin(ctx)
			is.NoErr(err)
			defer held.Rollback(ctx)
			_, err = held.Exec(ctx, `SELECT 1 FROM `+quote(schema)+`.formsapi_submissions WHERE host_id = 'held' ORDER BY seq LIMIT 1 FOR UPDATE`)
			is.NoErr(err)
			built := make(chan error, 1)
			go func() {
				on, err := pgstore.Open(ctx, withParam(dsn, "deadlock_timeout", "10ms"), pgstore.WithSchema(schema), pgstore.WithSearchIndex())
				if err == nil {
					on.Close()
				}
				built <- err
			}()
			pgtest.WaitForLock(t, dsn, "query LIKE $1", "SELECT seq, form_seq, created_at, find_keys%")
			wait, deleted := c.delete(t, dsn, schema, s)
			pgtest.WaitForLock(t, dsn, "query LIKE $1", wait)
			is.NoErr(held.Rollback(ctx))
			is.NoErr(<-built) // the index turned on
			is.NoErr(<-deleted)
			on := mustOpenIn(t, dsn, schema, pgstore.WithSearchIndex())
			checkBlocks(t, on)
			is.Equal(len(walkAll2(t, on, "build", formsapi.Query{Search: "needle", Limit: 10})), c.left)
		})
	}
}
