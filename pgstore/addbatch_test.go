package pgstore_test

import (
	"fmt"
	"net/url"
	"strings"
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

// TestBatchWithoutJIT: a batch's transaction runs with PostgreSQL's JIT
// compilation off, whatever the session's setting: a statement of many
// submissions is planned past jit_above_cost, and compiling it at every
// execution cost a bulk ingest 3.6 times its PostgreSQL CPU. A host's
// trigger records the setting each insert of the batch sees, on a
// session that asks for JIT at any cost.
func TestBatchWithoutJIT(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pooledSchema(t)
	s := load(t, mustOpenIn(t, withOptions(dsn, "-c jit=on -c jit_above_cost=0"), schema), storetest.DefaultSeed())
	pool := pgstore.Pool(s)
	q := quote(schema)
	for _, stmt := range []string{
		`CREATE TABLE ` + q + `.test_jit (seen text)`,
		`CREATE FUNCTION ` + q + `.test_jit_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO ` + q + `.test_jit VALUES (current_setting('jit')); RETURN NULL; END $$`,
		`CREATE TRIGGER test_jit AFTER INSERT ON ` + q + `.formsapi_submissions FOR EACH STATEMENT EXECUTE FUNCTION ` + q + `.test_jit_seen()`,
	} {
		_, err := pool.Exec(ctx, stmt)
		is.NoErr(err)
	}
	seen := func() map[string]int {
		rows, err := pool.Query(ctx, `SELECT seen, count(*) FROM `+q+`.test_jit GROUP BY seen`)
		is.NoErr(err)
		defer rows.Close()
		m := map[string]int{}
		for rows.Next() {
			var v string
			var n int
			is.NoErr(rows.Scan(&v, &n))
			m[v] = n
		}
		is.NoErr(rows.Err())
		_, err = pool.Exec(ctx, `DELETE FROM `+q+`.test_jit`)
		is.NoErr(err)
		return m
	}
	// A single write keeps the session's setting: the trigger sees it.
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(`{"a":1}`)}, formsapi.Metadata{}))
	is.Equal(seen(), map[string]int{"on": 1})
	for _, n := range []int{3, 1500} { // the pipelined statements, and the statements of many
		err := s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
			for i := range n {
				if !yield(formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(fmt.Sprintf(`{"i":%d}`, i))}, formsapi.Metadata{}) {
					return
				}
			}
		})
		is.NoErr(err)
		got := seen()
		is.True(len(got) == 1 && got["off"] > 0) // every statement of the batch without JIT
	}
}

// withOptions adds the session options of a connection (options, as
// libpq's) to a DSN, URL or key=value.
func withOptions(dsn, options string) string {
	switch {
	case !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://"):
		return dsn + " options='" + options + "'"
	case strings.Contains(dsn, "?"):
		return dsn + "&options=" + strings.ReplaceAll(url.QueryEscape(options), "+", "%20")
	}
	return dsn + "?options=" + strings.ReplaceAll(url.QueryEscape(options), "+", "%20")
}
