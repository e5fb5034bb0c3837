package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestBatchIsOneAddition: a batch over several forms, interleaved and
// longer than one statement, goes in through statements of many
// submissions (not AddSubmissions's fallback of one a submission), and
// leaves each form as additions at the end of its feed leave it: feed
// positions one after the other in batch order, a new version, and the
// same base (migration 0016: a node's incremental page of the form
// stays valid).
func TestBatchIsOneAddition(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pooledSchema(t)
	s := load(t, mustOpenIn(t, dsn, schema), storetest.DefaultSeed())
	forms := []string{storetest.FormBusy, storetest.FormSmall, storetest.FormEmpty}
	type state struct{ version, base, feedLast int64 }
	read := func(form string) state {
		var st state
		is.NoErr(pgstore.Pool(s).QueryRow(ctx, fmt.Sprintf(`SELECT version, base, feed_last FROM %s.formsapi_forms WHERE id = $1`, quote(schema)), form).Scan(&st.version, &st.base, &st.feedLast))
		return st
	}
	before := map[string]state{}
	for _, f := range forms {
		before[f] = read(f)
	}
	const n = 2500 // three statements
	var subs []formsapi.Submission
	var metas []formsapi.Metadata
	for i := range n {
		subs = append(subs, formsapi.Submission{FormID: forms[i%3], Data: []byte(fmt.Sprintf(`{"i":%d,"f%d":1}`, i, i%7)), CreatedAt: time.Unix(int64(i/2), 0)})
		metas = append(metas, formsapi.Metadata{ID: fmt.Sprintf("bulk-%d", i)})
	}
	err := pgstore.AddBulk(ctx, s, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		for i := range subs {
			if !yield(subs[i], metas[i]) {
				return
			}
		}
	})
	is.NoErr(err) // the batch went in through statements of many submissions
	for i, f := range forms {
		b, a := before[f], read(f)
		added := int64(n/3 + min(1, max(0, n%3-i)))
		is.Equal(a.feedLast, b.feedLast+added) // the feed moved by the form's submissions
		is.Equal(a.base, b.base)               // additions keep base
		is.True(a.version != b.version)        // and give a new version
		// The form's submissions of the batch, in feed order, are in batch order.
		var bad int64
		is.NoErr(pgstore.Pool(s).QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM (
    SELECT feed_pos, lag(feed_pos) OVER (ORDER BY seq) AS prev FROM %[1]s.formsapi_submissions
    WHERE form_seq = (SELECT seq FROM %[1]s.formsapi_forms WHERE id = $1) AND host_id LIKE 'bulk-%%'
) x WHERE prev IS NOT NULL AND feed_pos <> prev + 1`, quote(schema)), f).Scan(&bad))
		is.Equal(bad, int64(0)) // positions one after the other in seq order
	}
}
