package sqlitestore_test

import (
	"fmt"
	"iter"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// a53Fill adds n submissions to form (n 0..n-1), every third one red
// with an e-mail address, and returns the n of the red ones.
func a53Fill(t *testing.T, s *sqlitestore.Store, form string, from, n int) []int {
	t.Helper()
	var red []int
	for i := from; i < from+n; i++ {
		data := fmt.Sprintf(`{"n":%d,"tag":"blue"}`, i)
		if i%3 == 0 {
			data = fmt.Sprintf(`{"n":%d,"tag":"red","email":"p%d@example.com"}`, i, i)
			red = append(red, i)
		}
		at := time.Unix(1000+int64(i), 0)
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: form, Data: []byte(data), CreatedAt: at}, formsapi.Metadata{ID: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	return red
}

var a53Red = []formsapi.Filter{{Field: "tag", Value: `"red"`}}

// TestAttack53HostCreatedAtUpdate: a host's UPDATE of a folded row's
// created_at (which migration 0029's triggers treat as a legitimate
// change) leaves the row's run entries at the old position; the walk
// looks the entry's submission up by seq AND created_at, so the row is
// never found by a filter again, and Erase (which found it through
// formsapi_find joined by seq before 0031) no longer erases it.
func TestAttack53HostCreatedAtUpdate(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := mustOpen(t, path, sqlitestore.WithFoldAt(8))
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "moved"}))
	red := a53Fill(t, s, "moved", 0, 40)
	db := hostDB(t, path)
	var folded int64
	is.NoErr(db.QueryRow(`SELECT find_folded FROM formsapi_forms WHERE id = 'moved'`).Scan(&folded))
	is.True(folded >= 10) // n 3 (feed position 4) is folded
	// The host moves submission n=3 an hour later.
	res, err := db.Exec(`UPDATE formsapi_submissions SET created_at = created_at + 3600000000000 WHERE json_extract(data, '$.n') = 3`)
	is.NoErr(err)
	n, _ := res.RowsAffected()
	is.Equal(n, int64(1))

	// Unfiltered, n=3 is there; filtered, it should be too.
	all := walkAll(t, s, "moved", formsapi.Query{Limit: 100, Order: formsapi.Oldest})
	is.True(slices.Contains(all, 3))
	got := walkAll(t, s, "moved", formsapi.Query{Limit: 100, Order: formsapi.Oldest, Filters: a53Red})
	slices.Sort(got)
	if !slices.Equal(got, red) {
		t.Errorf("filtered walk after a host's created_at update: got %v, want %v", got, red)
	}
	// Erase by the e-mail must delete it.
	erased, err := s.Erase(ctx, storetest.AccountA, "email", "p3@example.com")
	is.NoErr(err)
	var left int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_submissions WHERE data LIKE '%p3@example.com%'`).Scan(&left))
	if erased != 1 || left != 0 {
		t.Errorf("Erase(p3@example.com) after a host's created_at update: erased %d, %d row(s) still hold the address", erased, left)
	}
}

// TestAttack53HostDeletePurgeStallsWrite: a host's retention purge in
// plain SQL (half of a form, of 20,000 in the attack; 3,000 here, its
// fold at 64 for the runs a bigger form has) lists every deleted row's keys
// in formsapi_find_gone, and the next write whose fold runs purges them
// from the form's runs with the write lock held. The first version
// looked a chunk up per (run, entry): some 40,000 entries times 11
// runs, about ten seconds. The purge looks each chunk up once, so its
// lookups are bounded by the runs' chunks, and the runs come out exact.
func TestAttack53HostDeletePurgeStallsWrite(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := mustOpen(t, path, sqlitestore.WithFoldAt(64))
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "big"}))
	const n = 3000
	batch := func(from, to int) iter.Seq2[formsapi.Submission, formsapi.Metadata] {
		return func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
			for i := from; i < to; i++ {
				d := fmt.Sprintf(`{"n":%d,"tag":"t%d","email":"u%d@example.com","city":"c%d"}`, i, i%7, i, i%100)
				if !yield(formsapi.Submission{FormID: "big", Data: []byte(d), CreatedAt: time.Unix(int64(i), 0)}, formsapi.Metadata{}) {
					return
				}
			}
		}
	}
	for i := 0; i < n; i += 1000 {
		is.NoErr(s.AddSubmissions(ctx, batch(i, i+1000)))
	}
	db := hostDB(t, path)
	var runs, chunks int64
	is.NoErr(db.QueryRow(`SELECT (SELECT count(*) FROM formsapi_find_run_list), (SELECT count(*) FROM formsapi_find_runs)`).Scan(&runs, &chunks))
	_, err := db.Exec(`DELETE FROM formsapi_submissions WHERE created_at < ?`, int64(n/2)*1e9)
	is.NoErr(err)
	before := sqlitestore.PurgeLookups()
	for range sqlitestore.TailReadEvery {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "big", Data: []byte(`{"tag":"x"}`)}, formsapi.Metadata{}))
	}
	var gone int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_find_gone`).Scan(&gone))
	is.Equal(gone, 0) // purged by the fold
	lookups := sqlitestore.PurgeLookups() - before
	t.Logf("%d runs of %d chunks; the purge of %d rows' entries: %d lookups", runs, chunks, n/2, lookups)
	if lookups > 2*(chunks+runs) {
		t.Errorf("the purge of %d rows' entries made %d lookups, more than twice the %d chunks of %d runs", n/2, lookups, chunks, runs)
	}
	checkRuns(t, db)
}

// TestAttack53HostDeleteEntriesOutliveOpen: a host's DELETE in plain SQL
// leaves the row's filter entries (a hash of its e-mail address among
// them) in formsapi_find_runs until the form's next fold; a form that
// gets no more writes never folds, and Open does not purge
// formsapi_find_gone either (foldLongTails looks at rows above the mark
// only). main's trigger took them out in the host's own transaction.
func TestAttack53HostDeleteEntriesOutliveOpen(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := mustOpen(t, path, sqlitestore.WithFoldAt(8))
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "closed"}))
	a53Fill(t, s, "closed", 0, 30)
	db := hostDB(t, path)
	_, err := db.Exec(`DELETE FROM formsapi_submissions WHERE data LIKE '%p3@example.com%'`)
	is.NoErr(err)
	s.Close()
	mustOpen(t, path) // the store starts again; the form gets no more writes
	var stale int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_find_gone`).Scan(&stale))
	es, err := sqlitestore.FilterEntries(db)
	is.NoErr(err)
	left := 0
	for _, e := range es {
		var c int
		is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_submissions WHERE seq = ? AND created_at = ?`, e.Seq, e.At).Scan(&c))
		if c == 0 {
			left++
		}
	}
	if left > 0 {
		t.Errorf("after a host's DELETE and a new Open: %d run entries of the deleted row left (%d rows in formsapi_find_gone)", left, stale)
	}
}
