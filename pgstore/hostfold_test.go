package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// TestSearchHostFoldsOwnForm: a host's update of find_keys, and a host's
// insert whose seq is a multiple of 256, fold their own form's tail of
// the search index (migration 0043), not every form's, which the
// store's writes leave up to 255 rows each (migration 0038): before,
// each folded the whole tail, here 1,800 rows of 12 forms for one row.
// Searches find every row either way.
func TestSearchHostFoldsOwnForm(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t, pgstore.WithSearchIndex())
	pool := pgstore.Pool(s)
	tbl := quote(s.Schema()) + "."
	const forms, each = 12, 150
	for f := range forms {
		form := fmt.Sprintf("f%d", f)
		is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: form}))
		for i := range each {
			is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"i":%d,"a":"needle"}`, i))}, formsapi.Metadata{ID: fmt.Sprint(i)}))
		}
	}
	// The tail rows of the forms but those named.
	others := func(but ...string) (n int) {
		t.Helper()
		is.NoErr(pool.QueryRow(ctx, `SELECT count(*) FROM `+tbl+`formsapi_find_tail t JOIN `+tbl+`formsapi_forms f ON f.seq = t.form_seq WHERE f.id <> ALL ($1)`, append([]string{}, but...)).Scan(&n))
		return n
	}
	is.Equal(others(), forms*each) // none folded

	// The host's update of one row of f0.
	data := `{"i":7,"a":"needle changed"}`
	_, err := pool.Exec(ctx, `UPDATE `+tbl+`formsapi_submissions SET data = $1, find_keys = $2
WHERE host_id = '7' AND form_seq = (SELECT seq FROM `+tbl+`formsapi_forms WHERE id = 'f0')`, data, find.IndexKeys([]byte(data), nil))
	is.NoErr(err)
	is.Equal(others("f0"), (forms-1)*each) // the other forms' tails as they were

	// The host's insert into f1 of a row whose seq is a multiple of 256.
	_, err = pool.Exec(ctx, `WITH f AS (
    UPDATE `+tbl+`formsapi_forms SET feed_last = feed_last + 1 WHERE id = 'f1' RETURNING seq, feed_last
)
INSERT INTO `+tbl+`formsapi_submissions (seq, form_seq, feed_pos, created_at, data, attachments, json, json_version, host_id, find_keys)
OVERRIDING SYSTEM VALUE
SELECT 256 * 100000, f.seq, f.feed_last, s.created_at + 1, s.data, s.attachments, s.json, s.json_version, 'host', s.find_keys
FROM f, `+tbl+`formsapi_submissions s WHERE s.form_seq = f.seq AND s.host_id = '3'`)
	is.NoErr(err)
	is.Equal(others("f0", "f1"), (forms-2)*each) // the other forms' tails as they were
	is.Equal(others(), others("f0", "f1"))       // f0's and f1's folded
	checkBlocks(t, s)
	for f := range forms {
		want := each
		if f == 1 {
			want++
		}
		is.Equal(len(walkAll2(t, s, fmt.Sprintf("f%d", f), formsapi.Query{Search: "needle", Limit: 100})), want)
	}
}
