package sqlitestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

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

// sortedIDs lists the IDs (createdAt and data) of each submission of
// form sorted by sort, walking every page of limit.
func sortedIDs(t *testing.T, s formsapi.Store, form, sort string) []string {
	t.Helper()
	var out []string
	q := formsapi.Query{Limit: 7, Sort: sort}
	for {
		p, err := s.ListSubmissions(ctx, storetest.AccountA, form, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range p.Items {
			out = append(out, sub.CreatedAt.String()+" "+string(sub.Data))
		}
		if p.NextCursor == "" {
			return out
		}
		q.Cursor = p.NextCursor
	}
}

// TestSortIndexFields: WithSortIndex with names keeps the entries of
// those fields only (a write's entries are its listed fields'), serves
// a sort by them as the index of every field does, and refuses one by
// another field with a *find.NotSortedError naming it; opened with
// other names, a field added gets the entries of every stored
// submission (its progress logged) and lists as the index of every field
// lists it, a field removed loses them; a store opened without the
// option changes nothing, and WithSortIndex() goes back to every field.
func TestSortIndexFields(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := load(t, mustOpen(t, path, sqlitestore.WithSortIndex("n")), storetest.FindSeed())
	every := load(t, mustOpen(t, dbPath(t), sqlitestore.WithSortIndex()), storetest.FindSeed())
	db := hostDB(t, path)
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		is.NoErr(db.QueryRow(q, args...).Scan(&n))
		return n
	}
	fieldEntries := func(name string) int {
		return count(`SELECT count(*) FROM formsapi_sort WHERE field = ?`, find.SortField(name))
	}
	is.True(fieldEntries("n") > 0)
	is.Equal(count(`SELECT count(*) FROM formsapi_sort`), fieldEntries("n"))
	is.Equal(sortedIDs(t, s, storetest.FormFind, "-n"), sortedIDs(t, every, storetest.FormFind, "-n"))
	_, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormFind, formsapi.Query{Limit: 5, Sort: "-name"})
	var notSorted *find.NotSortedError
	is.True(errors.As(err, &notSorted))
	is.Equal(notSorted.Field, "name")

	// A write's entries: its listed fields' only, its keys all stored.
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormFind, Data: []byte(`{"n":1000,"name":"Zed","score":3}`)}, formsapi.Metadata{}))
	var seq int64
	is.NoErr(db.QueryRow(`SELECT seq FROM formsapi_submissions WHERE data = '{"n":1000,"name":"Zed","score":3}'`).Scan(&seq))
	is.Equal(count(`SELECT count(*) FROM formsapi_sort WHERE seq = ?`, seq), 1)
	is.Equal(count(`SELECT json_array_length(sort_keys) FROM formsapi_submissions WHERE seq = ?`, seq), 3)
	is.NoErr(every.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormFind, Data: []byte(`{"n":1000,"name":"Zed","score":3}`), CreatedAt: sortedAt(t, s, seq)}, formsapi.Metadata{}))

	// A store opened without the option changes nothing.
	mustOpen(t, path)
	is.Equal(count(`SELECT count(*) FROM formsapi_sort`), fieldEntries("n"))

	// Another list: name added from the rows, n dropped, progress logged.
	var log bytes.Buffer
	now, tick := jumpingClock(6 * time.Second)
	s2 := mustOpen(t, path, sqlitestore.WithSortIndex("name", "score"), sqlitestore.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))),
		sqlitestore.WithProgressClock(now, tick))
	is.Equal(fieldEntries("n"), 0)
	is.Equal(count(`SELECT count(*) FROM formsapi_sort`), fieldEntries("name")+fieldEntries("score"))
	is.Equal(count(`SELECT count(*) FROM formsapi_submissions s WHERE json_type(s.data, '$.name') = 'text'
AND NOT EXISTS (SELECT 1 FROM formsapi_sort e WHERE e.seq = s.seq AND e.field = ?)`, find.SortField("name")), 0)
	for _, sort := range []string{"name", "-name", "score"} {
		is.Equal(sortedIDs(t, s2, storetest.FormFind, sort), sortedIDs(t, every, storetest.FormFind, sort))
	}
	_, err = s2.ListSubmissions(ctx, storetest.AccountA, storetest.FormFind, formsapi.Query{Limit: 5, Sort: "n"})
	is.True(errors.As(err, &notSorted))
	// The first store reads the list afresh: n is no longer served.
	_, err = s.ListSubmissions(ctx, storetest.AccountA, storetest.FormFind, formsapi.Query{Limit: 5, Sort: "n"})
	is.True(errors.As(err, &notSorted))
	var added, dropped bool
	for _, l := range logLines(t, &log) {
		if l["msg"] == "start: step ended" && l["step"] == "index the sort index's added fields" {
			added = l["rows_done"] == float64(count(`SELECT count(*) FROM formsapi_submissions`))
		}
		dropped = dropped || l["msg"] == "start: step ended" && l["step"] == "drop the sort index's removed fields"
	}
	if !added {
		t.Log(log.String())
	}
	is.True(added)
	is.True(dropped)

	// Every field again: as the index that always kept every field.
	s3 := mustOpen(t, path, sqlitestore.WithSortIndex())
	var want int
	is.NoErr(sqlitestore.ReadDB(every).QueryRow(`SELECT count(*) FROM formsapi_sort`).Scan(&want))
	is.Equal(count(`SELECT count(*) FROM formsapi_sort`), want)
	for _, sort := range []string{"n", "-tag", "even", "html"} {
		is.Equal(sortedIDs(t, s3, storetest.FormFind, sort), sortedIDs(t, every, storetest.FormFind, sort))
	}
}

// sortedAt is the createdAt of the row seq of s's file.
func sortedAt(t *testing.T, s *sqlitestore.Store, seq int64) time.Time {
	t.Helper()
	var at int64
	if err := sqlitestore.ReadDB(s).QueryRow(`SELECT created_at FROM formsapi_submissions WHERE seq = ?`, seq).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, at).UTC()
}

// TestSortIndexFieldNames: Open refuses a field no sort can name, and one
// named twice.
func TestSortIndexFieldNames(t *testing.T) {
	for _, names := range [][]string{{""}, {"a", "a"}, {strings.Repeat("x", 65)}, {"\xff"}} {
		if s, err := sqlitestore.Open(dbPath(t), sqlitestore.WithSortIndex(names...)); err == nil {
			s.Close()
			t.Errorf("WithSortIndex(%q): opened", names)
		}
	}
}
