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
	"github.com/formsapi/formsapi/internal/wire"
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
// submission leaves no entry behind, whoever deletes it: with the search
// index off (filter keys only) and on (trigrams too).
func TestFindIndexKeptByEveryWriter(t *testing.T) {
	t.Run("SearchIndexOff", func(t *testing.T) { testFindIndexKept(t, false) })
	t.Run("SearchIndexOn", func(t *testing.T) { testFindIndexKept(t, true) })
}

func testFindIndexKept(t *testing.T, searchIndex bool) {
	is := is.New(t)
	path := dbPath(t)
	var opts []sqlitestore.Option
	if searchIndex {
		opts = append(opts, sqlitestore.WithSearchIndex())
	}
	s := load(t, mustOpen(t, path, opts...), storetest.FindSeed())
	tag := formsapi.Filter{Field: "tag", Value: `"rare"`}
	is.Equal(len(findNs(t, s, storetest.FormFind, tag)), 0)

	db := hostDB(t, path)
	_, err := db.Exec(`INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version)
SELECT seq, feed_last + 1, 1, '{"n":1000,"tag":"rare"}', '[]', CAST('{}' AS BLOB), 0 FROM formsapi_forms WHERE id = ?`, storetest.FormFind)
	is.NoErr(err)
	is.Equal(len(findNs(t, s, storetest.FormFind, tag)), 0)       // not indexed yet
	s2 := mustOpen(t, path)                                       // the search index stays as s left it
	is.Equal(findNs(t, s2, storetest.FormFind, tag), []int{1000}) // indexed at Open

	// The filters' entries (migration 0031's runs) and search's
	// (migration 0022's blocks), every tail folded and the deleted rows'
	// entries taken out first.
	count := func() int {
		is.NoErr(sqlitestore.FoldTail(ctx, db))
		fs, err := sqlitestore.FilterEntries(db)
		is.NoErr(err)
		es, err := sqlitestore.TrigramEntries(db)
		is.NoErr(err)
		return len(fs) + len(es)
	}
	entries := count()
	_, err = db.Exec(`DELETE FROM formsapi_submissions WHERE data LIKE '%"rare"%'`)
	is.NoErr(err)
	after := count()
	keys := find.Keys([]byte(`{"n":1000,"tag":"rare"}`))
	if searchIndex {
		keys = find.IndexKeys([]byte(`{"n":1000,"tag":"rare"}`), nil)
	}
	is.Equal(entries-after, len(keys)) // its entries (n, tag, and with the search index the trigrams of 1000 and rare) went with it
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

	// Erase took its rows' entries out before it committed: every entry
	// names a submission.
	fs, err := sqlitestore.FilterEntries(db)
	is.NoErr(err)
	for _, e := range fs {
		var n int
		is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_submissions WHERE seq = ? AND created_at = ?`, e.Seq, e.At).Scan(&n))
		if n != 1 {
			t.Errorf("entry %+v names no submission", e)
		}
	}
	var gone int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_find_gone`).Scan(&gone))
	is.Equal(gone, 0)
}

// TestFoldTakesFilterKeys: a fold (migration 0031) enters exactly the
// keys of find_keys that are not negative into its run: none, some or
// all of them, with or without trigram keys before them, spaces between
// them, one key alone, a key of 0, the largest and smallest keys.
func TestFoldTakesFilterKeys(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	mustOpen(t, path)
	db := hostDB(t, path)
	_, err := db.Exec(`INSERT INTO formsapi_forms (id, account_id, title, icon, notification_email, created_at) VALUES ('keys', ?, '', '', '', 0)`, storetest.AccountA)
	is.NoErr(err)
	for i, keys := range []string{
		`[]`, `[5]`, `[0]`, `[-5]`, `[-9223372036854775808]`,
		`[-3,-1]`, `[-3,-1,5,7]`, `[-3,-1,0,12,9223372036854775807]`, `[-30,4]`, `[4,17,300]`,
		`[ -3 , -1 , 5 , 7 ]`, "[-3,\n-1,\n5,\n7\n]", `[-9223372036854775808,-12,0]`,
	} {
		seq := int64(0)
		is.NoErr(db.QueryRow(`INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version, find_keys)
SELECT seq, feed_last + 1, ?, '{}', '[]', CAST('{}' AS BLOB), 0, ? FROM formsapi_forms WHERE id = 'keys' RETURNING seq`, i, keys).Scan(&seq))
		var want []int64
		rows, err := db.Query(`SELECT value FROM json_each(?) WHERE value >= 0 ORDER BY value`, keys)
		is.NoErr(err)
		for rows.Next() {
			var k int64
			is.NoErr(rows.Scan(&k))
			want = append(want, k)
		}
		is.NoErr(rows.Err())
		is.NoErr(sqlitestore.FoldTail(ctx, db))
		es, err := sqlitestore.FilterEntries(db)
		is.NoErr(err)
		var got []int64
		for _, e := range es {
			if e.Seq == seq {
				got = append(got, e.Key)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("find_keys %s: entries %v, want %v", keys, got, want)
		}
	}
}

// TestFindPageExaminesABoundedNumber: a filtered page walks the index
// entries of its rarest clause, whichever field's name sorts first, and
// examines at most 1,000 of them: a rare clause beside a common one is
// one page; a rare combination of common clauses (each with more entries
// than the 1,001 a probe counts) walks the one whose first 1,001 entries
// reach furthest into the form (b, on the newer half: its 1,251 entries
// in two pages), not the first (a, on every submission: three pages, the
// first two empty).
func TestFindPageExaminesABoundedNumber(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, dbPath(t))
	seed := storetest.DefaultSeed()
	is.NoErr(storetest.Load(ctx, s, seed))
	var datas []string
	for i := range 2500 {
		data := `{"a":"bulk","n":` + itoa(i)
		if i >= 1249 {
			data += `,"b":"late"` // 1,251 entries
		}
		if i <= 1249 {
			data += `,"c":"early"` // 1,250 entries
		}
		datas = append(datas, data+"}")
	}
	addAll(t, s, storetest.FormEmpty, datas)
	for _, c := range []struct {
		name    string
		filters []formsapi.Filter
		n       int // the one match's
		pages   int
	}{
		{"RareBesideCommon", []formsapi.Filter{{Field: "a", Value: `"bulk"`}, {Field: "n", Value: "2400"}}, 2400, 1},
		{"CommonCombination", []formsapi.Filter{{Field: "a", Value: `"bulk"`}, {Field: "b", Value: `"late"`}, {Field: "c", Value: `"early"`}}, 1249, 2},
	} {
		q := formsapi.Query{Limit: 10, Order: formsapi.Oldest, Filters: c.filters}
		var pages int
		var found []formsapi.Submission
		for {
			p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, q)
			is.NoErr(err)
			pages++
			found = append(found, p.Items...)
			if p.NextCursor == "" {
				break
			}
			q.Cursor = p.NextCursor
		}
		is.Equal(len(found), 1) // c.name
		var d struct{ N int }
		is.NoErr(json.Unmarshal(found[0].Data, &d))
		is.Equal(d.N, c.n)       // c.name
		is.Equal(pages, c.pages) // c.name
	}
}

// searchMany is a store (with opts) whose FormEmpty holds 2,500
// submissions, n 0 to 2,499 oldest first, each with every trigram of "foo
// bar" in two values, but n 2,400, which has the term and "zyxw".
func searchMany(t *testing.T, opts ...sqlitestore.Option) *sqlitestore.Store {
	is := is.New(t)
	s := mustOpen(t, dbPath(t), opts...)
	is.NoErr(storetest.Load(ctx, s, storetest.DefaultSeed()))
	var datas []string
	for i := range 2500 {
		data := `{"a":"foo b","b":"o bar","n":` + itoa(i) + `}`
		if i == 2400 {
			data = `{"a":"Foo Bär","c":"zyxw","n":2400}`
		}
		datas = append(datas, data)
	}
	addAll(t, s, storetest.FormEmpty, datas)
	return s
}

// addAll adds a submission of each of datas to form, in order, in one
// batch (AddSubmissions): 2,500 one AddSubmission at a time cost these
// tests about 10 s of CPU each under -race. The single writes have
// clauses of their own (storetest's Writes and Batch).
func addAll(t *testing.T, s *sqlitestore.Store, form string, datas []string) {
	t.Helper()
	err := s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		for _, d := range datas {
			if !yield(formsapi.Submission{FormID: form, Data: []byte(d)}, formsapi.Metadata{}) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSearchPageExaminesABoundedNumber: with the search index on, a
// search whose every trigram is in each of 2,500 submissions, and whose
// term is in one, is walked in pages that examine at most 1,000 entries
// each, as a filter's; a rare term walks its rarest trigram, one page.
func TestSearchPageExaminesABoundedNumber(t *testing.T) {
	is := is.New(t)
	s := searchMany(t, sqlitestore.WithSearchIndex())
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

// TestSearchWithoutIndexExaminesABoundedNumber: with the search index off
// (the default), a search walks the form's submissions, and each page
// examines exactly 1,000 of them (find.MaxExamined) before it ends short
// with a cursor after the last one examined, whatever the term: the rare
// term, in n 2,400 of 2,500, takes two empty pages and a third with it,
// on both read paths.
func TestSearchWithoutIndexExaminesABoundedNumber(t *testing.T) {
	is := is.New(t)
	s := searchMany(t)
	var trigrams int
	is.NoErr(sqlitestore.ReadDB(s).QueryRow(`SELECT (SELECT count(*) FROM formsapi_find_blocks)
    + (SELECT count(*) FROM formsapi_submissions s, json_each(s.find_keys) j WHERE j.value < 0)`).Scan(&trigrams))
	is.Equal(trigrams, 0) // no trigram indexed
	read := map[string]func(q formsapi.Query) (int, []int, string){
		"ListSubmissions": func(q formsapi.Query) (int, []int, string) {
			p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, q)
			is.NoErr(err)
			return len(p.Items), ns(t, p.Items), p.NextCursor
		},
		"AppendSubmissions": func(q formsapi.Query) (int, []int, string) {
			var p wire.Page
			is.NoErr(s.AppendSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, q, &p))
			var items []struct{ Data struct{ N int } }
			is.NoErr(json.Unmarshal(append(append([]byte("["), p.Body...), ']'), &items))
			var got []int
			for _, it := range items {
				got = append(got, it.Data.N)
			}
			return len(items), got, p.NextCursor
		},
	}
	for name, list := range read {
		for _, term := range []string{"zyxw", "foo bar"} {
			q := formsapi.Query{Limit: 10, Order: formsapi.Oldest, Search: find.Normalize(term)}
			for page, next := range []int{1000, 2000} {
				n, _, cursor := list(q)
				is.Equal(n, 0) // no match in the first 2,000
				is.True(cursor != "")
				// The cursor is after the 1,000th submission examined.
				after, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, formsapi.Query{Limit: 1, Order: formsapi.Oldest, Cursor: cursor})
				is.NoErr(err)
				if got := ns(t, after.Items); !slices.Equal(got, []int{next}) {
					t.Fatalf("%s, q %q, page %d: the next submission after its cursor is n %v, want %d", name, term, page+1, got, next)
				}
				q.Cursor = cursor
			}
			n, got, cursor := list(q)
			is.Equal(n, 1)             // the match
			is.Equal(cursor, "")       // the walk's end
			is.Equal(got, []int{2400}) // the match
		}
	}
	// The totals: estimate is the range's rows, exact the matches.
	est, err := s.CountSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, formsapi.Query{Search: "zyxw"}, false)
	is.NoErr(err)
	is.Equal(est, formsapi.Total{Value: 2500, Kind: find.Estimate})
	exact, err := s.CountSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, formsapi.Query{Search: "zyxw"}, true)
	is.NoErr(err)
	is.Equal(exact, formsapi.Total{Value: 1, Kind: find.Exact})
}

// ns lists the n of each submission.
func ns(t *testing.T, subs []formsapi.Submission) []int {
	t.Helper()
	out := []int{}
	for _, sub := range subs {
		var d struct{ N int }
		if err := jsonUnmarshal(sub.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.N)
	}
	return out
}

// TestSearchIndexTurnedOn: opening a file that has rows with
// WithSearchIndex indexes their trigrams (as many entries as a file
// indexed from its first write), a store opened before, without the
// option, then indexes its writes' trigrams too, and opening without the
// option never turns the index off. While the index is off, the writers
// compute no trigram keys at all (RELIABILITY case 104: before, every
// write computed them for its find_keys, a megabyte of U+FDFA taking 1.5
// s of CPU with the index off): turning it on computes them from the
// rows' data.
func TestSearchIndexTurnedOn(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	// The trigram entries the index holds, with those of the rows in its
	// unfolded tail (migration 0017): what it holds once they are folded.
	trigrams := func(s *sqlitestore.Store) int {
		var n, tail int
		db := sqlitestore.ReadDB(s)
		es, err := sqlitestore.TrigramEntries(db)
		is.NoErr(err)
		n = len(es)
		is.NoErr(db.QueryRow(`SELECT count(*) FROM (` + tailQuery + `) t JOIN formsapi_submissions s ON s.seq = t.seq, json_each(s.find_keys) j
WHERE j.value < 0`).Scan(&tail))
		return n + tail
	}
	// Both files are copies of templates loaded with SearchSeed without
	// FormSearchMany's submissions (their 1,200 rows, which a search
	// page's bound needs, add nothing here but a minute of -race), one
	// by a store with the index on and one with it off (seededPath).
	seed := storetest.SearchSeed()
	seed.Submissions = slices.DeleteFunc(seed.Submissions, func(s storetest.SeedSubmission) bool {
		return s.Submission.FormID == storetest.FormSearchMany
	})
	indexedPath, loaded := seededPath(t, seed, sqlitestore.WithSearchIndex())
	indexed := loaded(mustOpen(t, indexedPath, sqlitestore.WithSearchIndex()))
	want := trigrams(indexed)
	is.True(want > 0)

	path, loaded := seededPath(t, seed)
	before := loaded(mustOpen(t, path))
	is.Equal(trigrams(before), 0) // off by default
	var computed int
	is.NoErr(sqlitestore.ReadDB(before).QueryRow(`SELECT count(*) FROM formsapi_submissions s, json_each(s.find_keys) j WHERE j.value < 0`).Scan(&computed))
	is.Equal(computed, 0) // no trigram key computed while off
	// A store opened before the index is turned on, for a batch below.
	stale := mustOpen(t, path)
	on := mustOpen(t, path, sqlitestore.WithSearchIndex())
	is.Equal(trigrams(on), want) // every row's trigrams, once

	add := func(s *sqlitestore.Store, data string) {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSearch, Data: []byte(data)}, formsapi.Metadata{}))
	}
	add(indexed, `{"qqqq":"wxyz"}`)
	add(before, `{"qqqq":"wxyz"}`)
	is.Equal(trigrams(before), trigrams(indexed)) // the store opened before reads the file's setting
	batch := func(s *sqlitestore.Store) {
		is.NoErr(s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
			_ = yield(formsapi.Submission{FormID: storetest.FormSearch, Data: []byte(`{"b":"uvwx"}`)}, formsapi.Metadata{}) &&
				yield(formsapi.Submission{FormID: storetest.FormSearch, Data: []byte(`{"b":"tuvw"}`)}, formsapi.Metadata{})
		}))
	}
	batch(stale)
	batch(indexed)
	is.Equal(trigrams(stale), trigrams(indexed)) // a batch of a store that has not written since reads the setting too

	again := mustOpen(t, path)
	add(again, `{"n":"vwxy"}`)
	add(indexed, `{"n":"vwxy"}`)
	is.Equal(trigrams(again), trigrams(indexed)) // still on
	for _, s := range []*sqlitestore.Store{before, again, stale} {
		p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormSearch, formsapi.Query{Limit: 10, Search: "vwxy"})
		is.NoErr(err)
		is.Equal(len(p.Items), 1) // found through the index
	}
	// Turning the index on folded the trigrams of rows whose filter
	// entries were in the runs already: each is there once.
	is.NoErr(sqlitestore.FoldTail(ctx, sqlitestore.WriteDB(again)))
	checkRuns(t, sqlitestore.ReadDB(again))
}

func itoa(i int) string { return strconv.Itoa(i) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestFindQueryPlans: filtered pages, their counts and Erase by a value
// read the runs of the index of submitted values by their primary key,
// and a form's tail by the index of feed positions and the tail's
// primary key, never scanning a table or sorting; each entry's
// submission is found by rowid; a search without its index reads one
// bounded range of the form's submissions.
func TestFindQueryPlans(t *testing.T) {
	s := load(t, mustOpen(t, dbPath(t)), storetest.FindSeed())
	db := sqlitestore.ReadDB(s)
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	skip := func(d string) bool {
		return strings.HasPrefix(d, "SCAN (subquery") || d == "SCAN CONSTANT ROW" || strings.HasPrefix(d, "COMPOUND") ||
			strings.HasPrefix(d, "LEFT-MOST") || strings.HasPrefix(d, "UNION ALL") || strings.HasPrefix(d, "CO-ROUTINE") ||
			strings.HasPrefix(d, "SCALAR SUBQUERY") || strings.HasPrefix(d, "MERGE") ||
			strings.HasPrefix(d, "SCAN j VIRTUAL TABLE") || strings.HasPrefix(d, "CORRELATED SCALAR SUBQUERY")
	}
	for name, query := range sqlitestore.RunSQL {
		details := slices.DeleteFunc(plan(t, db, query, int64(1), int64(1), int64(42), lo, lo), skip)
		t.Logf("%s: %q", name, details)
		checkPlan(t, details, "PRIMARY KEY")
	}
	// A form's tail: its rows above the mark by the index of feed
	// positions, and the explicit tail's rows by its primary key, each
	// row then by rowid. Without statistics (a store runs no ANALYZE)
	// SQLite once drove the explicit tail's join from the form's
	// submissions instead, reading every row of the form in the range
	// (or at or below the mark, for a fold) on every walk and fold.
	tails := map[string][]string{"tail": plan(t, db, sqlitestore.TailRangeSQL, int64(1), lo, lo, hi, hi)}
	for name, query := range sqlitestore.TailSQL {
		tails[name] = plan(t, db, query, int64(1), int64(sqlitestore.FoldAt*16))
	}
	for name, details := range tails {
		details = slices.DeleteFunc(details, skip)
		t.Logf("%s: %q", name, details)
		checkPlan(t, details, "formsapi_submissions_feed")
		for _, want := range []string{"formsapi_submissions_feed (form_seq=? AND feed_pos>?)", "SEARCH t USING PRIMARY KEY (form_seq=?"} {
			if !slices.ContainsFunc(details, func(d string) bool { return strings.Contains(d, want) }) {
				t.Errorf("%s plan %q does not seek %s", name, details, want)
			}
		}
		// The walk's tail reads the explicit tail's rows in its range
		// only: a host's SQL can requeue a whole form.
		if name == "tail" && !slices.ContainsFunc(details, func(d string) bool {
			return strings.HasPrefix(d, "SEARCH t USING PRIMARY KEY (form_seq=? AND ") && strings.Contains(d, "created_at")
		}) {
			t.Errorf("tail plan %q does not bound the explicit tail's range", details)
		}
		for _, d := range details {
			if strings.HasPrefix(d, "SEARCH s ") && !strings.Contains(d, "(form_seq=? AND feed_pos>?)") && !strings.Contains(d, "(rowid=?)") {
				t.Errorf("%s plan step %q reads the form's submissions beyond its tail", name, d)
			}
		}
	}
	// Search's posting blocks are read and folded by their primary key.
	for name, query := range sqlitestore.BlockSQL {
		details := plan(t, db, query, int64(1), int64(-42), lo, lo, []byte{})
		details = slices.DeleteFunc(details, func(d string) bool {
			return strings.HasPrefix(d, "SCAN (subquery") || d == "SCAN CONSTANT ROW" || strings.HasPrefix(d, "COMPOUND") ||
				strings.HasPrefix(d, "LEFT-MOST") || strings.HasPrefix(d, "UNION ALL") || strings.HasPrefix(d, "CO-ROUTINE") ||
				strings.HasPrefix(d, "SCALAR SUBQUERY") || strings.HasPrefix(d, "MERGE") ||
				strings.HasPrefix(d, "SCAN j VIRTUAL TABLE") || strings.HasPrefix(d, "CORRELATED SCALAR SUBQUERY")
		})
		t.Logf("%s: %q", name, details)
		checkPlan(t, details, "PRIMARY KEY")
	}
	// A search while the index is off reads one range of the form's
	// submissions by their index, bounded on both sides.
	for name, query := range sqlitestore.ScanSQL {
		details := plan(t, db, query, int64(1), lo, lo, hi, hi)
		details = slices.DeleteFunc(details, func(d string) bool { return strings.HasPrefix(d, "SCAN (subquery") })
		t.Logf("%s: %q", name, details)
		checkPlan(t, details, "formsapi_submissions_form")
		for _, d := range details {
			if strings.HasPrefix(d, "SEARCH") && !strings.Contains(d, "created_at>? AND created_at<?") {
				t.Errorf("%s: plan %q does not bound the index range on both sides", name, d)
			}
		}
	}
	details := slices.DeleteFunc(plan(t, db, sqlitestore.EraseSQL["chunk"], "[[1,2]]", int64(1)), skip)
	t.Logf("erase chunk: %q", details)
	checkPlan(t, details, "INTEGER PRIMARY KEY")
	details = plan(t, db, sqlitestore.EraseSQL["unindexed"], int64(1))
	t.Logf("erase unindexed: %q", details)
	for _, d := range details {
		if !strings.Contains(d, "formsapi_submissions_unindexed") {
			t.Errorf("erase plan step %q does not read the index of rows without keys", d)
		}
	}
}

// TestEraseFindsTheExtremePositions: Erase walks every entry of its
// value's key, those of rows at the extreme keyset positions too
// (created_at and seq at math.MaxInt64 or math.MinInt64, which a host's
// SQL can write), in the runs and in the tail, where a walk's exclusive
// bounds would leave them out.
func TestEraseFindsTheExtremePositions(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := mustOpen(t, path, sqlitestore.WithFoldAt(4))
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "edge"}))
	db := hostDB(t, path)
	insert := func(seq, at int64) {
		t.Helper()
		data := `{"email":"edge@example.com"}`
		keys, err := json.Marshal(find.Keys([]byte(data)))
		is.NoErr(err)
		_, err = db.Exec(`INSERT INTO formsapi_submissions (seq, form_seq, feed_pos, created_at, data, attachments, json, json_version, find_keys)
SELECT ?, seq, 0, ?, ?, '[]', CAST('{}' AS BLOB), 0, ? FROM formsapi_forms WHERE id = 'edge'`, seq, at, data, string(keys))
		is.NoErr(err)
	}
	insert(math.MinInt64, math.MinInt64)
	insert(math.MaxInt64, math.MaxInt64)
	for range 8 { // folds: the two rows in a run
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "edge", Data: []byte(`{"email":"other@example.com"}`)}, formsapi.Metadata{}))
	}
	is.NoErr(sqlitestore.FoldTail(ctx, db))
	n, err := s.Erase(ctx, storetest.AccountA, "email", "edge@example.com")
	is.NoErr(err)
	is.Equal(n, 2)
	// And from the tail, before any fold.
	insert(math.MaxInt64, math.MaxInt64)
	n, err = s.Erase(ctx, storetest.AccountA, "email", "edge@example.com")
	is.NoErr(err)
	is.Equal(n, 1)
}
