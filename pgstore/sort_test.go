package pgstore_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// sortedNs lists the n of each submission of form sorted by sort,
// walking every page of limit.
func sortedNs(t *testing.T, s formsapi.Store, form, sort string, limit int) []int {
	t.Helper()
	var ns []int
	q := formsapi.Query{Limit: limit, Sort: sort}
	for {
		p, err := s.ListSubmissions(ctx, storetest.AccountA, form, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range p.Items {
			var d struct{ N int }
			if err := json.Unmarshal(sub.Data, &d); err != nil {
				t.Fatal(err)
			}
			ns = append(ns, d.N)
		}
		if p.NextCursor == "" {
			return ns
		}
		q.Cursor = p.NextCursor
	}
}

// TestSortIndexOff: without WithSortIndex a schema keeps no sort keys
// (writes store none) and a sorted list is find.ErrNoSortIndex; a store
// opened with it turns the setting on and indexes every row stored
// meanwhile, and a row a host's SQL inserted without keys at its next
// migration; from then on the store opened without it, which last saw
// the setting off, writes its submissions with their keys too (its
// statement refuses a write without them), one at a time and in batches,
// and sorts; a deletion takes the entries with it.
func TestSortIndexOff(t *testing.T) {
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	off := load(t, mustOpenIn(t, dsn, schema), storetest.FindSeed())
	_, err := off.ListSubmissions(ctx, storetest.AccountA, storetest.FormFind, formsapi.Query{Limit: 5, Sort: "n"})
	is.True(errors.Is(err, find.ErrNoSortIndex))
	pool := pgstore.Pool(off)
	count := func(q string) int {
		t.Helper()
		var n int
		is.NoErr(pool.QueryRow(ctx, q).Scan(&n))
		return n
	}
	is.Equal(count(`SELECT count(*) FROM `+quote(schema)+`.formsapi_sort`), 0)
	is.Equal(count(`SELECT count(*) FROM `+quote(schema)+`.formsapi_submissions WHERE sort_keys IS NOT NULL`), 0)

	on := mustOpenIn(t, dsn, schema, pgstore.WithSortIndex())
	is.Equal(count(`SELECT count(*) FROM `+quote(schema)+`.formsapi_submissions WHERE sort_keys IS NULL`), 0)
	all := sortedNs(t, on, storetest.FormFind, "-n", 7)
	is.Equal(len(all), 40)
	is.True(slices.IsSortedFunc(all, func(a, b int) int { return b - a }))

	is.NoErr(off.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormFind, Data: []byte(`{"n":1000}`)}, formsapi.Metadata{ID: "x1000"}))
	is.NoErr(off.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		yield(formsapi.Submission{FormID: storetest.FormFind, Data: []byte(`{"n":1001}`)}, formsapi.Metadata{})
	}))
	is.Equal(count(`SELECT count(*) FROM `+quote(schema)+`.formsapi_submissions WHERE sort_keys IS NULL`), 0)
	is.Equal(sortedNs(t, off, storetest.FormFind, "-n", 7)[:2], []int{1001, 1000})

	// A host's row without keys is indexed when a store migrates.
	_, err = pool.Exec(ctx, `INSERT INTO `+quote(schema)+`.formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version)
SELECT seq, feed_last + 1, 1, '{"n":-1000}', '[]', '{"formId":"find-a","data":{"n":-1000},"attachments":[],"createdAt":"1970-01-01T00:00:00Z"}'::bytea, 0 FROM `+quote(schema)+`.formsapi_forms WHERE id = $1`, storetest.FormFind)
	is.NoErr(err)
	again := mustOpenIn(t, dsn, schema)
	is.Equal(sortedNs(t, again, storetest.FormFind, "n", 9)[0], -1000)

	entries := count(`SELECT count(*) FROM ` + quote(schema) + `.formsapi_sort`)
	is.NoErr(off.DeleteSubmission(ctx, storetest.AccountA, storetest.FormFind, "x1000"))
	is.Equal(count(`SELECT count(*) FROM `+quote(schema)+`.formsapi_sort`), entries-1)
	is.Equal(count(`SELECT count(*) FROM `+quote(schema)+`.formsapi_sort e LEFT JOIN `+quote(schema)+`.formsapi_submissions s ON s.seq = e.seq WHERE s.seq IS NULL`), 0)
}
