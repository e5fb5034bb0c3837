package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// TestHostSQLInsertIndexed: rows a host's SQL inserts with their keys
// (copied from a stored row, as a restore or a copy between forms does),
// many in one statement across a fold's seq, get the filter entries,
// the search tail (and its fold), the sort entries and a fresh form
// version from the row trigger of migration 0030: a filtered, a searched
// and a sorted list find every one, and a page cached before them is not
// served again, by this node or a following one (WithFollow).
func TestHostSQLInsertIndexed(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s := load(t, mustOpenIn(t, dsn, schema, pgstore.WithSearchIndex(), pgstore.WithSortIndex()), storetest.DefaultSeed())
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`{"tag":"zebra","n":1,"msg":"quixotic walrus"}`)}, formsapi.Metadata{ID: "orig"}))
	// A following node (its copy of the feeds and pages kept by the
	// change log) must see the host's rows too.
	follower := mustOpenIn(t, dsn, schema, pgstore.WithFollow(0))
	countOn := func(st *pgstore.Store, q formsapi.Query) int {
		t.Helper()
		n := 0
		q.Limit = 50
		for {
			p, err := st.ListSubmissions(ctx, storetest.AccountA, storetest.FormBusy, q)
			is.NoErr(err)
			n += len(p.Items)
			if p.NextCursor == "" {
				return n
			}
			q.Cursor = p.NextCursor
		}
	}
	count := func(q formsapi.Query) int { t.Helper(); return countOn(s, q) }
	filt := formsapi.Query{Filters: []formsapi.Filter{{Field: "tag", Value: `"zebra"`}}}
	srch := formsapi.Query{Search: "walrus"}
	sorted := formsapi.Query{Sort: "-n"}
	is.Equal(count(filt), 1)
	is.Equal(count(srch), 1)
	sortedBase := count(sorted)
	all := countOn(follower, formsapi.Query{})
	is.Equal(countOn(follower, filt), 1)
	pool := pgstore.Pool(s)
	const copies = 150
	sch := quote(schema)
	tag, err := pool.Exec(ctx, fmt.Sprintf(`WITH f AS (
    UPDATE %[1]s.formsapi_forms SET feed_last = feed_last + %[2]d WHERE id = $1 RETURNING seq, feed_last - %[2]d AS before
)
INSERT INTO %[1]s.formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version, host_id, find_keys, sort_keys)
SELECT s.form_seq, f.before + g, s.created_at + g, s.data, s.attachments, s.json, s.json_version, 'copy-' || g, s.find_keys, s.sort_keys
FROM f, %[1]s.formsapi_submissions s, generate_series(1, %[2]d) g
WHERE s.form_seq = f.seq AND s.host_id = 'orig'`, sch, copies), storetest.FormBusy)
	is.NoErr(err)
	is.Equal(tag.RowsAffected(), int64(copies))
	is.Equal(count(filt), copies+1)
	is.Equal(count(srch), copies+1)
	is.Equal(count(sorted), sortedBase+copies)
	is.Equal(countOn(follower, formsapi.Query{}), all+copies)
	is.Equal(countOn(follower, filt), copies+1)
	var tail int
	is.NoErr(pool.QueryRow(ctx, `SELECT count(*) FROM `+sch+`.formsapi_find_tail`).Scan(&tail))
	t.Logf("tail rows after the host's insert: %d", tail)
	// And after a store's write folds the tail.
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`{"tag":"zebra","n":2,"msg":"walrus"}`)}, formsapi.Metadata{ID: "after"}))
	is.Equal(count(srch), copies+2)
	is.Equal(count(filt), copies+2)
}
