package sqlitestore_test

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// findNs lists the n of each submission a filter finds in form, walking
// every page.
func findNs(t *testing.T, s formsapi.Store, form string, filters ...formsapi.Filter) []int {
	t.Helper()
	var ns []int
	q := formsapi.Query{Limit: 1000, Filters: filters}
	for {
		p, err := s.ListSubmissions(context.Background(), storetest.AccountA, form, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range p.Items {
			var d struct{ N int }
			if err := jsonUnmarshal(sub.Data, &d); err != nil {
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

// TestFindIndexKeptByEveryWriter: a submission inserted by a host's SQL
// without index keys is found once the store opens the file again (rows
// stored before migration 0013 are indexed the same way), and a deleted
// submission leaves no entry behind, whoever deletes it.
func TestFindIndexKeptByEveryWriter(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := load(t, mustOpen(t, path), storetest.FindSeed())
	tag := formsapi.Filter{Field: "tag", Value: `"rare"`}
	is.Equal(len(findNs(t, s, storetest.FormFind, tag)), 0)

	db := hostDB(t, path)
	_, err := db.Exec(`INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version)
SELECT seq, feed_last + 1, 1, '{"n":1000,"tag":"rare"}', '[]', CAST('{}' AS BLOB), 0 FROM formsapi_forms WHERE id = ?`, storetest.FormFind)
	is.NoErr(err)
	is.Equal(len(findNs(t, s, storetest.FormFind, tag)), 0) // not indexed yet
	s2 := mustOpen(t, path)
	is.Equal(findNs(t, s2, storetest.FormFind, tag), []int{1000}) // indexed at Open

	var entries int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_find`).Scan(&entries))
	_, err = db.Exec(`DELETE FROM formsapi_submissions WHERE data LIKE '%"rare"%'`)
	is.NoErr(err)
	var after int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_find`).Scan(&after))
	is.Equal(entries-after, len(find.IndexKeys([]byte(`{"n":1000,"tag":"rare"}`), nil))) // its entries (n, tag, and the trigrams of 1000 and rare) went with it
	is.Equal(len(findNs(t, s2, storetest.FormFind, tag)), 0)

	// Erase goes through the index, and still finds a row a host's SQL
	// inserted without keys (not indexed until the next Open), and the
	// first of a name given twice.
	_, err = db.Exec(`INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version)
SELECT seq, feed_last + 1, 2, '{"n":1001,"email":"erase@example.com"}', '[]', CAST('{}' AS BLOB), 0 FROM formsapi_forms WHERE id = ?`, storetest.FormFind)
	is.NoErr(err)
	is.NoErr(s2.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormFindOther, Data: []byte(`{"email":"erase@example.com","email":"other@example.com"}`)}, formsapi.Metadata{}))
	is.NoErr(s2.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormFindOther, Data: []byte(`{"email":"erase@example.com"}`)}, formsapi.Metadata{}))
	n, err := s2.Erase(ctx, storetest.AccountA, "email", "erase@example.com")
	is.NoErr(err)
	is.Equal(n, 3)

	// Every entry names a submission with the value it is keyed by.
	var orphans int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_find i LEFT JOIN formsapi_submissions s ON s.seq = i.seq WHERE s.seq IS NULL`).Scan(&orphans))
	is.Equal(orphans, 0)
}

// TestFindPageExaminesABoundedNumber: a filter whose first clause matches
// every submission and whose second matches one, in a form of 2,500, is
// walked in pages that examine at most 1,000 entries each: the first
// pages are empty, with cursors, and the walk finds the one.
func TestFindPageExaminesABoundedNumber(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, dbPath(t))
	seed := storetest.DefaultSeed()
	is.NoErr(storetest.Load(ctx, s, seed))
	for i := range 2500 {
		data := `{"kind":"bulk","n":` + itoa(i) + `}`
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormEmpty, Data: []byte(data)}, formsapi.Metadata{}))
	}
	q := formsapi.Query{Limit: 10, Order: formsapi.Oldest, Filters: []formsapi.Filter{{Field: "kind", Value: `"bulk"`}, {Field: "n", Value: "2400"}}}
	var pages, found int
	for {
		p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, q)
		is.NoErr(err)
		pages++
		found += len(p.Items)
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
	}
	is.Equal(found, 1)
	is.Equal(pages, 3) // 1,000 + 1,000 + 500 entries
}

// TestSearchPageExaminesABoundedNumber: a search whose every trigram is
// in each of 2,500 submissions, and whose term is in one, is walked in
// pages that examine at most 1,000 entries each, as a filter's; a rare
// term walks its rarest trigram, one page.
func TestSearchPageExaminesABoundedNumber(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, dbPath(t))
	is.NoErr(storetest.Load(ctx, s, storetest.DefaultSeed()))
	for i := range 2500 {
		data := `{"a":"foo b","b":"o bar","n":` + itoa(i) + `}`
		if i == 2400 {
			data = `{"a":"Foo Bär","c":"zyxw","n":2400}`
		}
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormEmpty, Data: []byte(data)}, formsapi.Metadata{}))
	}
	for _, c := range []struct {
		term  string
		pages int
	}{{"foo bar", 3}, {"zyxw", 1}, {"foo bar zyxw", 1}} {
		q := formsapi.Query{Limit: 10, Order: formsapi.Oldest, Search: find.Normalize(c.term)}
		var pages, found int
		for {
			p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, q)
			is.NoErr(err)
			pages++
			found += len(p.Items)
			if p.NextCursor == "" {
				break
			}
			q.Cursor = p.NextCursor
		}
		want := 1
		if c.term == "foo bar zyxw" {
			want = 0 // two values: never across them
		}
		is.Equal(found, want)    // c.term
		is.Equal(pages, c.pages) // c.term: 1,000 + 1,000 + 500 entries, or the rare trigram's
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestFindQueryPlans: filtered pages, their counts and Erase by a value
// walk the index of submitted values by its primary key, joining each
// entry to its submission by rowid, and never scan a table or sort.
func TestFindQueryPlans(t *testing.T) {
	s := load(t, mustOpen(t, dbPath(t)), storetest.FindSeed())
	db := sqlitestore.ReadDB(s)
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	for name, query := range sqlitestore.FindSQL {
		details := plan(t, db, query, int64(1), int64(42), lo, lo, hi, hi)
		// A count reads its bounded subquery's rows: that is no table.
		details = slices.DeleteFunc(details, func(d string) bool { return strings.HasPrefix(d, "SCAN (subquery") })
		t.Logf("%s: %q", name, details)
		checkPlan(t, details, "PRIMARY KEY")
		if !slices.ContainsFunc(details, func(d string) bool {
			return strings.Contains(d, "SEARCH i USING") || strings.Contains(d, "SEARCH formsapi_find USING")
		}) {
			t.Errorf("%s: plan %q does not search the index of submitted values", name, details)
		}
	}
	details := plan(t, db, sqlitestore.EraseCandidatesSQL, storetest.AccountA, int64(42))
	t.Logf("erase: %q", details)
	for _, d := range details {
		if strings.HasPrefix(d, "SCAN s") && !strings.Contains(d, "formsapi_submissions_unindexed") || strings.HasPrefix(d, "SCAN formsapi_submissions") || strings.HasPrefix(d, "SCAN i") || strings.Contains(d, "formsapi_submissions_feed") {
			t.Errorf("erase plan step %q scans submissions or the index", d)
		}
	}
	if !slices.ContainsFunc(details, func(d string) bool { return strings.Contains(d, "SEARCH i USING PRIMARY KEY") }) {
		t.Errorf("erase plan %q does not search the index of submitted values", details)
	}
}
