package sqlitestore_test

import (
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// testFold is the fold's size of the tests that walk folds: a store
// folds at sqlitestore.FoldAt rows (256), which under -race made these
// tests some of the package's longest; a fold of 64 takes every step a
// fold of 256 takes (a common trigram's entries still fill blocks of
// 56, late commits land among them), with a quarter of the writes.
const testFold = 64

// tailQuery selects the seq of each row of the unfolded tail (migrations
// 0017, 0031): its form's rows above the form's mark, and those of
// formsapi_find_tail.
const tailQuery = `SELECT s.seq FROM formsapi_submissions s
WHERE s.feed_pos > (SELECT find_folded FROM formsapi_forms WHERE seq = s.form_seq)
    OR s.seq IN (SELECT seq FROM formsapi_find_tail)`

// tailState reads the unfolded tail of the index (migrations 0017,
// 0031): the rows in it, the rows with trigram entries, and the rows in
// both, which must be none.
func tailState(t *testing.T, db *sql.DB) (tail, folded, both int) {
	t.Helper()
	is := is.New(t)
	is.NoErr(db.QueryRow(`SELECT count(*) FROM (` + tailQuery + `)`).Scan(&tail))
	es, err := sqlitestore.TrigramEntries(db)
	is.NoErr(err)
	seqs := map[int64]bool{}
	for _, e := range es {
		seqs[e.Seq] = true
	}
	folded = len(seqs)
	rows, err := db.Query(tailQuery)
	is.NoErr(err)
	defer rows.Close()
	for rows.Next() {
		var seq int64
		is.NoErr(rows.Scan(&seq))
		if seqs[seq] {
			both++
		}
	}
	is.NoErr(rows.Err())
	return tail, folded, both
}

// searchAll walks every page of a search of form, limit items a page, in
// order o, and returns the n of each item.
func searchAll(t *testing.T, s formsapi.Store, form, term string, limit int, o formsapi.Order) []int {
	t.Helper()
	return walkAll(t, s, form, formsapi.Query{Limit: limit, Order: o, Search: find.Normalize(term)})
}

// walkAll walks every page of q of form and returns the n of each item.
func walkAll(t *testing.T, s formsapi.Store, form string, q formsapi.Query) []int {
	t.Helper()
	var got []int
	for {
		p, err := s.ListSubmissions(ctx, storetest.AccountA, form, q)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ns(t, p.Items)...)
		if p.NextCursor == "" {
			return got
		}
		q.Cursor = p.NextCursor
	}
}

// TestSearchTailFolds: with the search index on, a write puts its
// submission in the unfolded tail, not its trigram entries, until the
// tail reaches its fold's size (testFold rows here), whose write folds them all into the index at
// once; a search finds every match at every step, each once, and in its
// exact total, whichever side a match is on, and so does a filter, whose
// entries every write inserts at once; a deleted row leaves its side; no
// row is ever in the tail and folded.
func TestSearchTailFolds(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, dbPath(t), sqlitestore.WithSearchIndex(), sqlitestore.WithFoldAt(testFold))
	db := sqlitestore.ReadDB(s)
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "tail"}))
	var want []int // the n of the matches, oldest first
	add := func(n int) {
		data := `{"n":` + strconv.Itoa(n) + `,"a":"plain"}`
		if n%3 == 0 {
			data = `{"n":` + strconv.Itoa(n) + `,"a":"Zoë Needle"}`
			want = append(want, n)
		}
		// Created out of order: a walk's order is not the tail's.
		at := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC).Add(-time.Duration(1+7*(n%11)) * time.Second)
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "tail", Data: []byte(data), CreatedAt: at}, formsapi.Metadata{ID: strconv.Itoa(n)}))
	}
	check := func(when string) {
		t.Helper()
		filter := []formsapi.Filter{{Field: "a", Value: `"Zoë Needle"`}}
		for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
			for _, limit := range []int{1, 2, 100} {
				for _, q := range []formsapi.Query{{Search: "zoe needle"}, {Filters: filter}} {
					q.Limit, q.Order = limit, o
					got := walkAll(t, s, "tail", q)
					sorted := slices.Clone(got)
					slices.Sort(sorted)
					if !slices.Equal(sorted, want) {
						t.Fatalf("%s, %+v: got n %v, want %v", when, q, got, want)
					}
				}
			}
		}
		for _, q := range []formsapi.Query{{Limit: 1, Search: "needle"}, {Limit: 1, Filters: filter}} {
			total, err := s.CountSubmissions(ctx, storetest.AccountA, "tail", q, true)
			is.NoErr(err)
			is.Equal(total, formsapi.Total{Value: int64(len(want)), Kind: find.Exact}) // the exact count sees both sides
		}
	}
	const fold = testFold
	for n := range fold - 1 {
		add(n)
	}
	tail, folded, both := tailState(t, db)
	is.Equal([]int{tail, folded, both}, []int{fold - 1, 0, 0}) // all but one in the tail
	check("a row short of a fold in the tail")

	add(fold - 1) // the last: folds
	tail, folded, both = tailState(t, db)
	is.Equal([]int{tail, folded, both}, []int{0, fold, 0}) // all folded
	check("rows folded")

	for n := fold; n < fold+10; n++ {
		add(n)
	}
	tail, folded, both = tailState(t, db)
	is.Equal([]int{tail, folded, both}, []int{10, fold, 0}) // both sides at once
	check("rows folded and 10 in the tail")

	// A match in the tail deleted, and one folded.
	for _, n := range []int{fold + 2, 3} {
		is.NoErr(s.DeleteSubmission(ctx, storetest.AccountA, "tail", fmt.Sprint(n)))
		want = slices.DeleteFunc(want, func(m int) bool { return m == n })
	}
	tail, folded, both = tailState(t, db)
	is.Equal([]int{tail, folded, both}, []int{9, fold - 1, 0}) // each left its side
	check("after deletions")
}

// TestSearchTailFoldsRowsWithoutKeys: a fold empties the tail though its
// rows' find_keys are NULL (a host's SQL set them so, to have them
// indexed again at the next Open): they have no entries to fold, and a
// tail left full would be folded again by every write.
func TestSearchTailFoldsRowsWithoutKeys(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := mustOpen(t, path, sqlitestore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "nokeys"}))
	for n := range 3 {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "nokeys", Data: []byte(`{"a":"needle"}`)}, formsapi.Metadata{ID: strconv.Itoa(n)}))
	}
	db := hostDB(t, path)
	_, err := db.Exec(`UPDATE formsapi_submissions SET find_keys = NULL`)
	is.NoErr(err)
	tail, folded, both := tailState(t, db)
	is.Equal([]int{tail, folded, both}, []int{3, 0, 0}) // the rows in the tail, without keys
	is.NoErr(sqlitestore.FoldTail(ctx, db))
	tail, folded, both = tailState(t, db)
	is.Equal([]int{tail, folded, both}, []int{0, 0, 0}) // the tail emptied, nothing folded
}

// TestSearchTailMigration: a file whose search index was on before
// migration 0017 keeps every row's trigram entries through it (its
// searches find them with an empty tail), and the writes after it go to
// the tail, found beside them.
func TestSearchTailMigration(t *testing.T) {
	is := is.New(t)
	db := hostDB(t, dbPath(t))
	is.NoErr(sqlitestore.MigrateBefore(ctx, db, "find_tail"))
	_, err := db.ExecContext(ctx, `UPDATE formsapi_settings SET value = 1 WHERE name = 'search_index'`)
	is.NoErr(err) // the search index on, as WithSearchIndex left it
	_, err = db.ExecContext(ctx, `INSERT INTO formsapi_forms (id, account_id, title, icon, notification_email, created_at) VALUES ('old', ?, '', '', '', 0)`, storetest.AccountA)
	is.NoErr(err) // add a form as the old version did
	for n := range 5 {
		data := fmt.Sprintf(`{"n":%d,"a":"Needle %d"}`, n, n)
		keys := find.IndexKeys([]byte(data), nil)
		list := make([]string, len(keys))
		for i, k := range keys {
			list[i] = strconv.FormatInt(k, 10)
		}
		_, err := db.ExecContext(ctx, `INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version, find_keys)
SELECT seq, feed_last + 1, ?, ?, '[]', CAST('{}' AS BLOB), 0, ? FROM formsapi_forms WHERE id = 'old'`, n, data, "["+strings.Join(list, ",")+"]")
		is.NoErr(err) // add a submission with its keys as the old version did
	}
	s := mustNew(t, db) // migrates
	tail, folded, both := tailState(t, db)
	is.Equal([]int{tail, folded, both}, []int{0, 5, 0}) // the entries kept, the tail empty
	is.Equal(searchAll(t, s, "old", "needle", 2, formsapi.Oldest), []int{0, 1, 2, 3, 4})
	for n := 5; n < 8; n++ {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "old", Data: []byte(fmt.Sprintf(`{"n":%d,"a":"needle"}`, n)), CreatedAt: time.Unix(0, int64(n))}, formsapi.Metadata{}))
	}
	tail, folded, both = tailState(t, db)
	is.Equal([]int{tail, folded, both}, []int{3, 5, 0})
	is.Equal(searchAll(t, s, "old", "needle", 2, formsapi.Oldest), []int{0, 1, 2, 3, 4, 5, 6, 7})
}

// TestSearchBlocksOutOfOrder: writes whose created_at goes back and
// forth (late commits) are folded into the blocks of their places
// (migration 0022): after three folds and deletions, every key's blocks
// hold exactly the entries of the rows left, each once, in keyset order
// across the key's blocks, and a search walks every match, in order,
// both ways, a page at a time.
func TestSearchBlocksOutOfOrder(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, dbPath(t), sqlitestore.WithSearchIndex(), sqlitestore.WithFoldAt(testFold))
	db := sqlitestore.ReadDB(s)
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "late"}))
	base := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	n := 3*testFold + 17 // a common trigram's entries in four blocks
	var want []int       // the n of the matches left, oldest first
	for i := range n {
		// A permutation of the times: each write's time is far from the
		// one before it, before or after.
		at := base.Add(time.Duration((i*7919)%n) * time.Second)
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "late", Data: []byte(fmt.Sprintf(`{"n":%d,"a":"Needle %d"}`, i, i%5)), CreatedAt: at},
			formsapi.Metadata{ID: strconv.Itoa(i)}))
	}
	for i := 0; i < n; i += 11 {
		is.NoErr(s.DeleteSubmission(ctx, storetest.AccountA, "late", strconv.Itoa(i)))
	}
	for t := range n { // in time order
		i := 0
		for (i*7919)%n != t {
			i++
		}
		if i%11 != 0 {
			want = append(want, i)
		}
	}
	// The blocks: every key's entries in order, each once, and exactly
	// those of the rows left that are not in the tail.
	es, err := sqlitestore.TrigramEntries(db)
	is.NoErr(err)
	got := map[[2]int64][][2]int64{}
	for _, e := range es {
		k := [2]int64{e.Form, e.Key}
		if l := got[k]; len(l) > 0 {
			last := l[len(l)-1]
			if last[0] > e.At || last[0] == e.At && last[1] >= e.Seq {
				t.Fatalf("key %d: entry (%d, %d) after (%d, %d)", e.Key, e.At, e.Seq, last[0], last[1])
			}
		}
		got[k] = append(got[k], [2]int64{e.At, e.Seq})
	}
	rows, err := db.Query(`SELECT s.form_seq, s.created_at, s.seq, j.value FROM formsapi_submissions s, json_each(s.find_keys) j
WHERE j.value < 0 AND s.seq NOT IN (` + tailQuery + `)`)
	is.NoErr(err)
	wantEntries := map[[2]int64]int{}
	for rows.Next() {
		var form, at, seq, key int64
		is.NoErr(rows.Scan(&form, &at, &seq, &key))
		wantEntries[[2]int64{form, key}]++
	}
	is.NoErr(rows.Err())
	is.NoErr(rows.Close())
	is.Equal(len(got), len(wantEntries)) // every key, no other
	for k, c := range wantEntries {
		if len(got[k]) != c {
			t.Errorf("key %d: %d entries, want %d", k[1], len(got[k]), c)
		}
	}
	for _, o := range []formsapi.Order{formsapi.Oldest, formsapi.Newest} {
		for _, limit := range []int{7, 100} {
			all := searchAll(t, s, "late", "needle", limit, o)
			w := slices.Clone(want)
			if o == formsapi.Newest {
				slices.Reverse(w)
			}
			is.Equal(all, w) // every match, in order
		}
	}
}

// TestSearchTailFoldsByForm: a write folds its own form's tail rows, not
// the other forms' (writes spread over many forms would otherwise fold an
// entry or two into each of many keys' blocks at every fold), once they
// are testFold; a batch folds each form it wrote to the same way; every
// search finds its form's matches whichever side they are on.
func TestSearchTailFoldsByForm(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, dbPath(t), sqlitestore.WithSearchIndex(), sqlitestore.WithFoldAt(testFold))
	db := sqlitestore.ReadDB(s)
	forms := []string{"a", "b", "c"}
	for _, f := range forms {
		is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: f}))
	}
	formTail := func(form string) (n int) {
		t.Helper()
		is.NoErr(db.QueryRow(`SELECT count(*) FROM (`+tailQuery+`) t JOIN formsapi_submissions s ON s.seq = t.seq
JOIN formsapi_forms f ON f.seq = s.form_seq WHERE f.id = ?`, form).Scan(&n))
		return n
	}
	want := map[string][]int{}
	n := 0
	sub := func(form string) formsapi.Submission {
		n++
		want[form] = append(want[form], n)
		return formsapi.Submission{FormID: form, Data: []byte(`{"n":` + strconv.Itoa(n) + `,"a":"needle ` + form + `"}`), CreatedAt: time.Unix(int64(n), 0)}
	}
	check := func(when string) {
		t.Helper()
		for _, f := range forms {
			if got := searchAll(t, s, f, "needle "+f, 7, formsapi.Oldest); !slices.Equal(got, want[f]) {
				t.Fatalf("%s: form %s: got %v, want %v", when, f, got, want[f])
			}
		}
	}
	// b and c a row short of a fold each, then a's rows to a fold.
	for range testFold - 1 {
		is.NoErr(s.AddSubmission(ctx, sub("b"), formsapi.Metadata{}))
		is.NoErr(s.AddSubmission(ctx, sub("c"), formsapi.Metadata{}))
	}
	is.Equal([]int{formTail("b"), formTail("c")}, []int{testFold - 1, testFold - 1})
	for range testFold {
		is.NoErr(s.AddSubmission(ctx, sub("a"), formsapi.Metadata{}))
	}
	is.Equal([]int{formTail("a"), formTail("b"), formTail("c")}, []int{0, testFold - 1, testFold - 1}) // a's folded alone
	check("a folded, b and c in the tail")
	// Writes spread over the three: each form's tail stays below a fold
	// and a count's spacing past it.
	for i := range 4 * testFold {
		is.NoErr(s.AddSubmission(ctx, sub(forms[i%3]), formsapi.Metadata{}))
		for _, f := range forms {
			if got := formTail(f); got >= testFold+sqlitestore.TailReadEvery {
				t.Fatalf("form %s: %d rows in the tail", f, got)
			}
		}
	}
	check("spread writes")
	// A batch to b and c: each folded once it holds a fold's rows, a
	// stays as it was.
	aTail := formTail("a")
	is.NoErr(s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		for i := range 3 * testFold {
			if !yield(sub(forms[1+i%2]), formsapi.Metadata{}) {
				return
			}
		}
	}))
	is.Equal(formTail("a"), aTail)
	is.True(formTail("b") < testFold && formTail("c") < testFold)
	check("a batch")
	_, _, both := tailState(t, db)
	is.Equal(both, 0)
}

// TestSearchBlocksLateChunkNamedAsBlock: a fold whose late entries (all
// before a key's first block) number exactly a block's 56, so that the
// merged list's second chunk starts with the block's first entry and
// takes its name while the first chunk renames the block (pgstore's
// migration 0037 fixed the same case there): every write succeeds, and
// the searches find every submission, each once.
func TestSearchBlocksLateChunkNamedAsBlock(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t, dbPath(t), sqlitestore.WithSearchIndex(), sqlitestore.WithFoldAt(56))
	db := sqlitestore.ReadDB(s)
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "late"}))
	base := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	var all []int
	add := func(at time.Time) {
		t.Helper()
		n := len(all)
		data := fmt.Sprintf(`{"n":%d,"a":"needle"}`, n) // every trigram in every row
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: "late", Data: []byte(data), CreatedAt: at}, formsapi.Metadata{}); err != nil {
			t.Fatalf("write %d: %v", n, err)
		}
		all = append(all, n)
	}
	for i := range 56 { // one full block a trigram, folded
		add(base.Add(time.Duration(i) * time.Second))
	}
	tail, _, _ := tailState(t, db)
	is.Equal(tail, 0)
	for i := range 56 { // 56 late entries before every block, folded
		add(base.Add(-time.Duration(i+1) * time.Second))
	}
	tail, folded, both := tailState(t, db)
	is.Equal([]int{tail, folded, both}, []int{0, 112, 0})
	checkBlocks(t, db)
	for _, o := range []formsapi.Order{formsapi.Oldest, formsapi.Newest} {
		got := searchAll(t, s, "late", "needle", 9, o)
		slices.Sort(got)
		is.Equal(got, all)
	}
}

// TestSearchIndexTurnedOnFoldsTails: turning the search index on folds
// every form's tail, so the first write to a form after it does not pay
// for the rows its form held before (migration 0032: they were queued
// twice, by their place above the mark and in formsapi_find_tail); a
// row's update of its keys queues it only at or below its form's mark.
func TestSearchIndexTurnedOnFoldsTails(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := mustOpen(t, path, sqlitestore.WithFoldAt(testFold))
	for _, f := range []string{"a", "b"} {
		is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: f}))
		for n := range testFold + 20 {
			is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: f, Data: []byte(fmt.Sprintf(`{"n":%d,"a":"needle"}`, n))}, formsapi.Metadata{}))
		}
	}
	db := sqlitestore.ReadDB(s)
	var tail int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM (` + tailQuery + `)`).Scan(&tail))
	is.True(tail > 0) // rows above the marks, the index off
	on := mustOpen(t, path, sqlitestore.WithSearchIndex(), sqlitestore.WithFoldAt(testFold))
	is.NoErr(db.QueryRow(`SELECT count(*) FROM (` + tailQuery + `)`).Scan(&tail))
	is.Equal(tail, 0) // every tail folded, trigrams and all
	checkBlocks(t, sqlitestore.ReadDB(on))
	// A write above the mark, then an update of its keys: the row stays
	// in the tail by its place alone.
	is.NoErr(on.AddSubmission(ctx, formsapi.Submission{FormID: "a", Data: []byte(`{"a":"needle"}`)}, formsapi.Metadata{}))
	_, err := hostDB(t, path).Exec(`UPDATE formsapi_submissions SET find_keys = find_keys WHERE seq = (SELECT max(seq) FROM formsapi_submissions)`)
	is.NoErr(err)
	var explicit, gone int
	is.NoErr(db.QueryRow(`SELECT (SELECT count(*) FROM formsapi_find_tail), (SELECT count(*) FROM formsapi_find_gone)`).Scan(&explicit, &gone))
	is.Equal([]int{explicit, gone}, []int{0, 0})
	is.Equal(len(searchAll(t, on, "a", "needle", 50, formsapi.Newest)), testFold+21)
}
