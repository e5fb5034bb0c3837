package sqlitestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/sqlitestore"
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
		p, err := s.ListSubmissions(context.Background(), storetest.AccountA, form, q)
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

// TestSortIndexKeptByEveryWriter: a submission inserted by a host's SQL
// without sort keys is not listed sorted (as a filter does not find it)
// until its keys are set, and sorts among the others once the store opens the file
// again (rows stored before migration 0019 are indexed the same way),
// and a deleted submission leaves no entry behind.
func TestSortIndexKeptByEveryWriter(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := load(t, mustOpen(t, path, sqlitestore.WithSortIndex()), storetest.FindSeed())
	db := hostDB(t, path)
	_, err := db.Exec(`INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version)
SELECT seq, feed_last + 1, 1, '{"n":-1000}', '[]', CAST('{"formId":"find-a","data":{"n":-1000},"attachments":[],"createdAt":"1970-01-01T00:00:00Z"}' AS BLOB), 0 FROM formsapi_forms WHERE id = ?`, storetest.FormFind)
	is.NoErr(err)
	before := sortedNs(t, s, storetest.FormFind, "n", 7)
	is.True(!slices.Contains(before, -1000)) // not in the index yet, as a filter would not find it
	s2 := mustOpen(t, path)
	after := sortedNs(t, s2, storetest.FormFind, "n", 7)
	is.Equal(after[0], -1000) // indexed at Open
	is.Equal(len(after), len(before)+1)

	var entries int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_sort`).Scan(&entries))
	_, err = db.Exec(`DELETE FROM formsapi_submissions WHERE data = '{"n":-1000}'`)
	is.NoErr(err)
	var left int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_sort`).Scan(&left))
	is.Equal(entries-left, len(find.SortEntries([]byte(`{"n":-1000}`))))
	var orphans int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_sort e LEFT JOIN formsapi_submissions s ON s.seq = e.seq WHERE s.seq IS NULL`).Scan(&orphans))
	is.Equal(orphans, 0)
	// Every submission with a sortable member has its entry.
	var missing int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_submissions s WHERE json_type(s.data, '$.n') IN ('integer', 'real')
AND NOT EXISTS (SELECT 1 FROM formsapi_sort e WHERE e.seq = s.seq AND e.field = ?)`, find.SortField("n")).Scan(&missing))
	is.Equal(missing, 0)
}

// TestSortQueryPlans: a sorted page seeks the ordered index by its
// primary key and reads it in order, never a scan or a sort; the
// submissions without a key are one bounded range of the form's index.
func TestSortQueryPlans(t *testing.T) {
	s := load(t, mustOpen(t, dbPath(t), sqlitestore.WithSortIndex()), storetest.FindSeed())
	db := sqlitestore.ReadDB(s)
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	for name, query := range sqlitestore.SortSQL {
		var details []string
		if strings.HasPrefix(name, "sorted") {
			details = plan(t, db, query, int64(1), int64(42), []byte{0x10}, lo, lo)
			checkPlan(t, details, "PRIMARY KEY")
		} else {
			details = plan(t, db, query, int64(1), lo, lo, hi, hi)
			checkPlan(t, details, "formsapi_submissions_form")
		}
		t.Logf("%s: %q", name, details)
	}
}

// TestSortIndexOff: without WithSortIndex a file keeps no sort keys
// (writes store none) and a sorted list is find.ErrNoSortIndex; a store
// opened with it turns the setting on and indexes every row stored
// meanwhile, and from then on the store opened without it, which last
// saw the setting off, writes its submissions with their keys too (its
// statement refuses a write without them), and sorts.
func TestSortIndexOff(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	off := load(t, mustOpen(t, path), storetest.FindSeed())
	_, err := off.ListSubmissions(ctx, storetest.AccountA, storetest.FormFind, formsapi.Query{Limit: 5, Sort: "n"})
	is.True(errors.Is(err, find.ErrNoSortIndex))
	db := hostDB(t, path)
	count := func(q string) int {
		t.Helper()
		var n int
		is.NoErr(db.QueryRow(q).Scan(&n))
		return n
	}
	is.Equal(count(`SELECT count(*) FROM formsapi_sort`), 0)
	is.Equal(count(`SELECT count(*) FROM formsapi_submissions WHERE sort_keys IS NOT NULL`), 0)

	on := mustOpen(t, path, sqlitestore.WithSortIndex())
	is.Equal(count(`SELECT count(*) FROM formsapi_submissions WHERE sort_keys IS NULL`), 0)
	all := sortedNs(t, on, storetest.FormFind, "-n", 7)
	is.Equal(len(all), 40)
	is.True(slices.IsSortedFunc(all, func(a, b int) int { return b - a }))

	is.NoErr(off.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormFind, Data: []byte(`{"n":1000}`)}, formsapi.Metadata{}))
	is.NoErr(off.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		yield(formsapi.Submission{FormID: storetest.FormFind, Data: []byte(`{"n":1001}`)}, formsapi.Metadata{})
	}))
	is.Equal(count(`SELECT count(*) FROM formsapi_submissions WHERE sort_keys IS NULL`), 0)
	is.Equal(sortedNs(t, off, storetest.FormFind, "-n", 7)[:2], []int{1001, 1000})
}
