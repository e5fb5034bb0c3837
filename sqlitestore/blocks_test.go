package sqlitestore_test

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
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
	sqlite3 "modernc.org/sqlite/lib"
)

// checkBlocks checks search's posting blocks (migrations 0022 and 0024):
// no block is empty; a key's blocks partition its keyset range (a
// block's name is at or before its first entry, its entries are in
// order and before the next block's name); and the blocks hold exactly
// the trigram entries of the rows that are not in the tail, each once.
// It returns the number of blocks.
func checkBlocks(t *testing.T, db *sql.DB) int {
	t.Helper()
	type ent struct{ at, seq int64 }
	less := func(a, b ent) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }
	rows, err := db.Query(`SELECT form_seq, key, lo_at, lo_seq, list FROM formsapi_find_blocks ORDER BY form_seq, key, lo_at, lo_seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[[2]int64]int{}
	var lastKey [2]int64
	var last *ent // the last entry of the key's blocks so far
	n := 0
	for rows.Next() {
		var k [2]int64
		var lo ent
		var list []byte
		if err := rows.Scan(&k[0], &k[1], &lo.at, &lo.seq, &list); err != nil {
			t.Fatal(err)
		}
		n++
		if len(list) == 0 || len(list)%16 != 0 {
			t.Fatalf("key %d, block (%d, %d): a list of %d bytes", k[1], lo.at, lo.seq, len(list))
		}
		if k != lastKey {
			lastKey, last = k, nil
		}
		if last != nil && !less(*last, lo) {
			t.Fatalf("key %d: block (%d, %d) named at or before the entry (%d, %d) of the block before it", k[1], lo.at, lo.seq, last.at, last.seq)
		}
		for ; len(list) > 0; list = list[16:] {
			e := ent{int64(binary.BigEndian.Uint64(list)), int64(binary.BigEndian.Uint64(list[8:]))}
			if less(e, lo) || last != nil && !less(*last, e) {
				t.Fatalf("key %d, block (%d, %d): entry (%d, %d) out of order", k[1], lo.at, lo.seq, e.at, e.seq)
			}
			last = &e
			got[k]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[[2]int64]int{}
	krows, err := db.Query(`SELECT s.form_seq, j.value FROM formsapi_submissions s, json_each(s.find_keys) j
WHERE j.value < 0 AND s.seq NOT IN (SELECT seq FROM formsapi_find_tail)
    AND s.feed_pos <= (SELECT find_folded FROM formsapi_forms WHERE seq = s.form_seq)`)
	if err != nil {
		t.Fatal(err)
	}
	defer krows.Close()
	for krows.Next() {
		var k [2]int64
		if err := krows.Scan(&k[0], &k[1]); err != nil {
			t.Fatal(err)
		}
		want[k]++
	}
	if err := krows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("blocks of %d keys, want %d", len(got), len(want))
	}
	for k, c := range want {
		if got[k] != c {
			t.Fatalf("key %d: %d entries, want %d", k[1], got[k], c)
		}
	}
	checkRuns(t, db)
	return n
}

// checkRuns checks the runs of the filters' entries (migration 0031):
// each run's chunks named by their first entries, in order, its count
// of entries right, and once the deleted rows' entries are taken out
// (no row left in formsapi_find_gone), every entry one of a folded row's
// filter keys, each there once.
func checkRuns(t *testing.T, db *sql.DB) {
	t.Helper()
	type ent struct{ form, key, at, seq int64 }
	less := func(a, b ent) bool {
		return a.key < b.key || a.key == b.key && (a.at < b.at || a.at == b.at && a.seq < b.seq)
	}
	counts := map[[2]int64]int64{}
	lrows, err := db.Query(`SELECT form_seq, run, entries FROM formsapi_find_run_list`)
	if err != nil {
		t.Fatal(err)
	}
	for lrows.Next() {
		var k [2]int64
		var n int64
		if err := lrows.Scan(&k[0], &k[1], &n); err != nil {
			t.Fatal(err)
		}
		counts[k] = n
	}
	lrows.Close()
	rows, err := db.Query(`SELECT form_seq, run, key, lo_at, lo_seq, list FROM formsapi_find_runs ORDER BY form_seq, run, key, lo_at, lo_seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[ent]int{}
	seen := map[[2]int64]int64{}
	var lastRun [2]int64
	var last *ent
	for rows.Next() {
		var run [2]int64
		var lo ent
		var list []byte
		if err := rows.Scan(&run[0], &run[1], &lo.key, &lo.at, &lo.seq, &list); err != nil {
			t.Fatal(err)
		}
		lo.form = run[0]
		if len(list) == 0 || len(list)%24 != 0 {
			t.Fatalf("run %v, chunk %v: a list of %d bytes", run, lo, len(list))
		}
		if run != lastRun {
			lastRun, last = run, nil
		}
		if last != nil && !less(*last, lo) {
			t.Fatalf("run %v: chunk %v named at or before the entry %v of the chunk before it", run, lo, *last)
		}
		for ; len(list) > 0; list = list[24:] {
			e := ent{run[0], int64(binary.BigEndian.Uint64(list)), int64(binary.BigEndian.Uint64(list[8:])), int64(binary.BigEndian.Uint64(list[16:]))}
			if less(e, lo) || last != nil && !less(*last, e) {
				t.Fatalf("run %v, chunk %v: entry %v out of order", run, lo, e)
			}
			last = &e
			got[e]++
			seen[run]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for run, n := range seen {
		if counts[run] != n {
			t.Fatalf("run %v: %d entries, listed as %d", run, n, counts[run])
		}
	}
	var gone int
	if err := db.QueryRow(`SELECT count(*) FROM formsapi_find_gone`).Scan(&gone); err != nil {
		t.Fatal(err)
	}
	if gone > 0 {
		return
	}
	want := map[ent]int{}
	krows, err := db.Query(`SELECT s.form_seq, j.value, s.created_at, s.seq FROM formsapi_submissions s, json_each(s.find_keys) j
WHERE j.value >= 0 AND s.feed_pos <= (SELECT find_folded FROM formsapi_forms WHERE seq = s.form_seq)
    AND NOT EXISTS (SELECT 1 FROM formsapi_find_tail t WHERE t.seq = s.seq AND t.filters)`)
	if err != nil {
		t.Fatal(err)
	}
	defer krows.Close()
	for krows.Next() {
		var e ent
		if err := krows.Scan(&e.form, &e.key, &e.at, &e.seq); err != nil {
			t.Fatal(err)
		}
		want[e]++
	}
	if err := krows.Err(); err != nil {
		t.Fatal(err)
	}
	for e, c := range got {
		if c != 1 {
			t.Fatalf("entry %v in %d runs", e, c)
		}
		if want[e] == 0 {
			t.Fatalf("entry %v of no folded row", e)
		}
	}
	for e := range want {
		if got[e] == 0 {
			t.Fatalf("folded row's entry %v in no run", e)
		}
	}
}

// TestSearchBlocksEmptiedGo: rows deleted oldest first (a retention
// purge) leave no empty posting block (migration 0024): a block whose
// first entry goes before its others keeps its name as the lower bound
// of its entries, and goes with its last entry. Late commits folded
// among blocks so named go into the blocks of their places, an update
// of find_keys takes a row out of its block the same way, and every
// search stays exact, both ways, a page at a time, with its exact total.
func TestSearchBlocksEmptiedGo(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, dbPath(t), sqlitestore.WithSearchIndex())
	db := sqlitestore.ReadDB(s)
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "purge"}))
	base := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	at := map[int]time.Time{} // the rows left, by n
	add := func(n int, when time.Time) {
		text := "walrus"
		if n%4 == 3 {
			text = "plain"
		}
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "purge", Data: []byte(fmt.Sprintf(`{"n":%d,"a":"%s"}`, n, text)), CreatedAt: when},
			formsapi.Metadata{ID: strconv.Itoa(n)}))
		at[n] = when
	}
	check := func(when string) {
		t.Helper()
		checkBlocks(t, db)
		var want []int // the matches left, oldest first
		for n := range at {
			if n%4 != 3 {
				want = append(want, n)
			}
		}
		slices.SortFunc(want, func(a, b int) int { return at[a].Compare(at[b]) })
		for _, o := range []formsapi.Order{formsapi.Oldest, formsapi.Newest} {
			for _, limit := range []int{7, 100} {
				w := slices.Clone(want)
				if o == formsapi.Newest {
					slices.Reverse(w)
				}
				if got := searchAll(t, s, "purge", "walrus", limit, o); !slices.Equal(got, w) {
					t.Fatalf("%s, %v, limit %d: got %v, want %v", when, o, limit, got, w)
				}
			}
		}
		total, err := s.CountSubmissions(ctx, storetest.AccountA, "purge", formsapi.Query{Limit: 1, Search: find.Normalize("walrus")}, true)
		is.NoErr(err)
		is.Equal(total, formsapi.Total{Value: int64(len(want)), Kind: find.Exact}) // the exact total
	}
	oldest := func(k int) []int { // the k oldest rows left
		ns := slices.Collect(func(yield func(int) bool) {
			for n := range at {
				if !yield(n) {
					return
				}
			}
		})
		slices.SortFunc(ns, func(a, b int) int { return at[a].Compare(at[b]) })
		return ns[:min(k, len(ns))]
	}
	del := func(ns []int) {
		for _, n := range ns {
			is.NoErr(s.DeleteSubmission(ctx, storetest.AccountA, "purge", strconv.Itoa(n)))
			delete(at, n)
		}
	}

	// 160 rows a second apart, 120 of them matches: a walrus trigram's
	// entries in three blocks.
	for n := range 160 {
		add(n, base.Add(time.Duration(n)*time.Second))
	}
	is.NoErr(sqlitestore.FoldTail(ctx, sqlitestore.WriteDB(s)))
	var multi int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM (SELECT 1 FROM formsapi_find_blocks GROUP BY form_seq, key HAVING count(*) >= 3)`).Scan(&multi))
	is.True(multi > 0) // keys of three blocks or more
	check("folded")

	// The oldest 30 deleted: the first block's name is no longer an entry.
	del(oldest(30))
	check("30 oldest deleted")

	// Late commits: before every block, between the first block's name
	// and its first entry left, and among the second block's entries.
	n := 1000
	for _, d := range []time.Duration{-5 * time.Second, 2500 * time.Millisecond, 10500 * time.Millisecond, 29500 * time.Millisecond, 80500 * time.Millisecond, 81500 * time.Millisecond} {
		add(n, base.Add(d))
		n++
	}
	check("late commits in the tail")
	is.NoErr(sqlitestore.FoldTail(ctx, sqlitestore.WriteDB(s)))
	check("late commits folded")

	// An update of find_keys takes the oldest rows out of their blocks
	// (into the tail, then folded again).
	for _, m := range oldest(8) {
		_, err := sqlitestore.WriteDB(s).ExecContext(ctx, `UPDATE formsapi_submissions SET find_keys = find_keys
WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = 'purge') AND created_at = ?`, at[m].UnixNano())
		is.NoErr(err)
	}
	check("find_keys updated")
	is.NoErr(sqlitestore.FoldTail(ctx, sqlitestore.WriteDB(s)))
	check("updated rows folded")

	// The rest deleted oldest first: no block is ever left empty, and
	// none is left at the end.
	for len(at) > 0 {
		del(oldest(20))
		check(fmt.Sprintf("%d rows left", len(at)))
	}
	is.Equal(checkBlocks(t, db), 0) // no block left
}

// TestSearchBlocksEmptiedMigration: migration 0024 deletes the posting
// blocks 0022's triggers left empty, and keeps the others.
func TestSearchBlocksEmptiedMigration(t *testing.T) {
	is := is.New(t)
	db := hostDB(t, dbPath(t))
	is.NoErr(sqlitestore.MigrateBefore(ctx, db, "find_blocks_emptied"))
	_, err := db.ExecContext(ctx, `INSERT INTO formsapi_find_blocks (form_seq, key, lo_at, lo_seq, list) VALUES
(1, -5, 1, 1, x''), (1, -5, 2, 2, x'00000000000000030000000000000003'), (1, -6, 1, 1, x''), (2, -5, 7, 7, x'0000')`)
	is.NoErr(err)
	mustNew(t, db) // migrates
	rows, err := db.Query(`SELECT form_seq, key, lo_at, lo_seq FROM formsapi_find_blocks`)
	is.NoErr(err)
	defer rows.Close()
	var got [][4]int64
	for rows.Next() {
		var b [4]int64
		is.NoErr(rows.Scan(&b[0], &b[1], &b[2], &b[3]))
		got = append(got, b)
	}
	is.NoErr(rows.Err())
	is.Equal(got, [][4]int64{{1, -5, 2, 2}}) // the block with an entry, alone
}

// TestSearchBlocksTriggerPlans: the triggers that take a row's entries
// out of its posting blocks (migration 0024) reach each block through
// its whole primary key, found by one descent per trigram key: no
// statement reads every block of a key (0022's compared each block of
// each key with that descent).
func TestSearchBlocksTriggerPlans(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, dbPath(t), sqlitestore.WithSearchIndex())
	db := sqlitestore.ReadDB(s)
	old := strings.NewReplacer("OLD.form_seq", "?1", "OLD.created_at", "?2", "OLD.seq", "?3", "OLD.find_keys", "?4")
	n := 0
	for _, name := range []string{"formsapi_find_delete", "formsapi_find_update"} {
		var body string
		is.NoErr(db.QueryRow(`SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?`, name).Scan(&body))
		_, body, _ = strings.Cut(body, " BEGIN\n")
		for stmt := range strings.SplitSeq(body, ";\n") {
			stmt = strings.TrimSpace(stmt)
			if !strings.Contains(stmt, "formsapi_find_blocks") {
				continue
			}
			n++
			for _, d := range plan(t, db, old.Replace(stmt), 1, 2, 3, "[-1,-2,5]") {
				search := strings.HasPrefix(d, "SEARCH ")
				if strings.HasPrefix(d, "SCAN") && !strings.Contains(d, "VIRTUAL TABLE") ||
					search && strings.HasPrefix(d, "SEARCH c ") && !strings.Contains(d, "(lo_at,lo_seq)<(?,?)") ||
					search && !strings.HasPrefix(d, "SEARCH c ") && !strings.Contains(d, "lo_at=? AND lo_seq=?") {
					t.Errorf("%s: plan step %q of %s", name, d, stmt)
				}
			}
		}
	}
	is.Equal(n, 4) // a delete and an update of formsapi_find_blocks in each trigger
}

// TestFoldFailureLogged: a write whose fold of the tail fails stands,
// and the store logs it (WithLogger): one warning for a run of failed
// folds, whatever the number of writes that try, with SQLite's result
// code and neither the error's text nor the file's path; then one line
// when a fold succeeds again, with the number that failed, and the tail
// is folded.
func TestFoldFailureLogged(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	var log bytes.Buffer
	s := mustOpen(t, path, sqlitestore.WithSearchIndex(), sqlitestore.WithFoldAt(testFold), sqlitestore.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))))
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "folds"}))
	db := hostDB(t, path)
	// The fault: the fold's move of the form's mark refused.
	_, err := db.ExecContext(ctx, `CREATE TRIGGER test_no_fold BEFORE UPDATE OF find_folded ON formsapi_forms BEGIN SELECT RAISE(ABORT, 'walrus refuses the fold'); END`)
	is.NoErr(err)
	lines := func() []map[string]any {
		var out []map[string]any
		for l := range strings.Lines(log.String()) {
			var m map[string]any
			is.NoErr(json.Unmarshal([]byte(l), &m))
			if strings.Contains(m["msg"].(string), "tail") {
				out = append(out, m)
			}
		}
		return out
	}
	add := func(n int) {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "folds", Data: []byte(fmt.Sprintf(`{"n":%d,"a":"needle"}`, n))}, formsapi.Metadata{}))
	}
	n := 0
	for ; n < testFold+40; n++ {
		add(n) // every write past the fold's size folds, and fails
	}
	var tail int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM (` + tailQuery + `)`).Scan(&tail))
	is.Equal(tail, n) // nothing folded, every write stands
	got := lines()
	is.Equal(len(got), 1) // one line for the run of failures
	is.Equal(got[0]["level"], "WARN")
	is.Equal(got[0]["store"], "sqlitestore")
	is.Equal(got[0]["sqlite_code"], float64(sqlite3.SQLITE_CONSTRAINT_TRIGGER))                 // RAISE(ABORT)'s code
	is.True(!strings.Contains(log.String(), "walrus") && !strings.Contains(log.String(), path)) // no error text, no path

	_, err = db.ExecContext(ctx, `DROP TRIGGER test_no_fold`)
	is.NoErr(err)
	add(n)
	is.NoErr(db.QueryRow(`SELECT count(*) FROM (` + tailQuery + `)`).Scan(&tail))
	is.Equal(tail, 0) // folded
	got = lines()
	is.Equal(len(got), 2)
	is.Equal(got[1]["level"], "INFO")
	is.True(got[1]["failed_folds"].(float64) >= 1) // the failures counted
	add(n + 1)
	is.Equal(len(lines()), 2) // nothing more once folds succeed
}

// TestFindRunsMigration: migration 0031 turns the filters' entries a file
// holds (formsapi_find) into one run per form, chunk by chunk, moves
// every form's mark to its last feed position, and keeps the rows that
// wait in the tail for their trigrams there with their filter entries
// already in the run; every filtered page reads as before, and the
// rows written, deleted and folded after it keep the runs exact.
func TestFindRunsMigration(t *testing.T) {
	is := is.New(t)
	db := hostDB(t, dbPath(t))
	is.NoErr(sqlitestore.MigrateBefore(ctx, db, "find_runs"))
	_, err := db.ExecContext(ctx, `UPDATE formsapi_settings SET value = 1 WHERE name = 'search_index'`)
	is.NoErr(err) // the search index on, as WithSearchIndex left it
	for _, f := range []string{"old", "other"} {
		_, err = db.ExecContext(ctx, `INSERT INTO formsapi_forms (id, account_id, title, icon, notification_email, created_at) VALUES (?, ?, '', '', '', 0)`, f, storetest.AccountA)
		is.NoErr(err)
	}
	// 300 rows (more than two chunks of one key) by the old triggers.
	want := map[string][]int{}
	for n := range 300 {
		form := []string{"old", "other"}[n%2]
		tag := []string{"red", "blue", "green"}[n%3]
		data := fmt.Sprintf(`{"n":%d,"tag":"%s","a":"Needle %d"}`, n, tag, n)
		keys := find.IndexKeys([]byte(data), nil)
		list := make([]string, len(keys))
		for i, k := range keys {
			list[i] = strconv.FormatInt(k, 10)
		}
		_, err := db.ExecContext(ctx, `INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version, find_keys)
SELECT seq, feed_last + 1, ?, ?, '[]', CAST('{}' AS BLOB), 0, ? FROM formsapi_forms WHERE id = ?`, 1000-n, data, "["+strings.Join(list, ",")+"]", form)
		is.NoErr(err)
		if tag == "red" {
			want[form] = append(want[form], n)
		}
	}
	var old, tail int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_find`).Scan(&old))
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_find_tail`).Scan(&tail))
	is.True(old > 0 && tail > 0) // entries and a tail to migrate

	s := mustNew(t, db) // migrates
	fs, err := sqlitestore.FilterEntries(db)
	is.NoErr(err)
	is.Equal(len(fs), old) // every entry, in its form's run
	checkBlocks(t, db)     // and the runs exact
	red := []formsapi.Filter{{Field: "tag", Value: `"red"`}}
	check := func(when string) {
		t.Helper()
		for _, f := range []string{"old", "other"} {
			w := slices.Clone(want[f])
			slices.Reverse(w) // oldest first: created_at falls as n rises
			if got := walkAll(t, s, f, formsapi.Query{Limit: 7, Order: formsapi.Oldest, Filters: red}); !slices.Equal(got, w) {
				t.Fatalf("%s: form %s: got %v, want %v", when, f, got, w)
			}
		}
	}
	check("migrated")
	// Writes after it, a deletion of some of the migrated rows, folds.
	for n := 300; n < 420; n++ {
		form := []string{"old", "other"}[n%2]
		tag := []string{"red", "blue", "green"}[n%3]
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"n":%d,"tag":"%s"}`, n, tag)), CreatedAt: time.Unix(0, int64(1000-n))}, formsapi.Metadata{}))
		if tag == "red" {
			want[form] = append(want[form], n)
		}
	}
	_, err = db.ExecContext(ctx, `DELETE FROM formsapi_submissions WHERE data LIKE '%"n":1_,%'`)
	is.NoErr(err) // n 10 to 19, by a host's SQL
	for f, ns := range want {
		want[f] = slices.DeleteFunc(ns, func(n int) bool { return n >= 10 && n < 20 })
	}
	check("written and deleted")
	is.NoErr(sqlitestore.FoldTail(ctx, sqlitestore.WriteDB(s)))
	checkBlocks(t, db)
	check("folded")
}

// TestRunsMerge: runs of one level merge, eight at a time, into one of
// the next (migration 0031): after 70 folds of 8 rows a form holds runs
// of three levels, fewer than 8 of each, with exactly the folded rows'
// filter entries, each once; rows deleted by the store lose their
// entries before its call returns, rows deleted by a host's SQL at the
// next fold; every filtered page is exact, both ways, throughout.
func TestRunsMerge(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := mustOpen(t, path, sqlitestore.WithFoldAt(8))
	db := sqlitestore.ReadDB(s)
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "merge"}))
	want := map[int]bool{}
	red := []formsapi.Filter{{Field: "tag", Value: `"red"`}}
	check := func(when string) {
		t.Helper()
		var w []int
		for n := range want {
			w = append(w, n)
		}
		slices.Sort(w)
		var walks [2][]int
		for i, o := range []formsapi.Order{formsapi.Oldest, formsapi.Newest} {
			got := walkAll(t, s, "merge", formsapi.Query{Limit: 9, Order: o, Filters: red})
			walks[i] = slices.Clone(got)
			slices.Sort(got)
			if !slices.Equal(got, w) {
				t.Fatalf("%s, %v: got %v, want %v", when, o, got, w)
			}
		}
		slices.Reverse(walks[1])
		if !slices.Equal(walks[0], walks[1]) {
			t.Fatalf("%s: oldest first %v, newest first reversed %v", when, walks[0], walks[1])
		}
		total, err := s.CountSubmissions(ctx, storetest.AccountA, "merge", formsapi.Query{Limit: 1, Filters: red}, true)
		is.NoErr(err)
		is.Equal(total, formsapi.Total{Value: int64(len(w)), Kind: find.Exact})
	}
	for n := range 560 {
		tag := "blue"
		if n%5 == 0 {
			tag = "red"
			want[n] = true
		}
		// Times out of order: runs cross each other in keyset order.
		at := time.Unix(0, int64((n*7919)%560))
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "merge", Data: []byte(fmt.Sprintf(`{"n":%d,"tag":"%s"}`, n, tag)), CreatedAt: at},
			formsapi.Metadata{ID: strconv.Itoa(n)}))
		if n%97 == 0 {
			check(fmt.Sprintf("%d written", n+1))
		}
	}
	levels := map[int]int{}
	rows, err := db.Query(`SELECT level, count(*) FROM formsapi_find_run_list GROUP BY level`)
	is.NoErr(err)
	for rows.Next() {
		var l, c int
		is.NoErr(rows.Scan(&l, &c))
		levels[l] = c
	}
	is.NoErr(rows.Close())
	is.True(levels[2] > 0) // merged twice
	for l, c := range levels {
		if c >= 8 {
			t.Errorf("level %d: %d runs", l, c)
		}
	}
	checkBlocks(t, db)
	check("merged")

	// The store's deletion takes its row's entries before it returns.
	for n := 0; n < 100; n += 10 {
		is.NoErr(s.DeleteSubmission(ctx, storetest.AccountA, "merge", strconv.Itoa(n)))
		delete(want, n)
	}
	var gone int
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_find_gone`).Scan(&gone))
	is.Equal(gone, 0)
	checkBlocks(t, db)
	check("deleted by the store")
	// A host's deletion waits for the next fold; reads never see it.
	_, err = hostDB(t, path).ExecContext(ctx, `DELETE FROM formsapi_submissions WHERE data LIKE '%"n":2_,%'`)
	is.NoErr(err)
	for n := 20; n < 30; n++ {
		delete(want, n)
	}
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_find_gone`).Scan(&gone))
	is.Equal(gone, 9) // n 21 to 29: the store deleted 20
	check("deleted by a host")
	for n := 560; n < 570; n++ {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "merge", Data: []byte(fmt.Sprintf(`{"n":%d,"tag":"blue"}`, n))}, formsapi.Metadata{}))
	}
	is.NoErr(db.QueryRow(`SELECT count(*) FROM formsapi_find_gone`).Scan(&gone))
	is.Equal(gone, 0) // the fold took them out
	checkBlocks(t, db)
	check("folded")
}

// TestOpenFoldsLongTails: rows a host's SQL adds with their keys are in
// their form's unfolded tail, which every filtered page reads beside
// the runs; a store's write folds 16 folds' worth of them at most
// (4,096; 256 here, the fold at 16), and Open folds them all, logging
// the step, so no read walks them after.
func TestOpenFoldsLongTails(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := mustOpen(t, path, sqlitestore.WithFoldAt(16))
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "host"}))
	db := hostDB(t, path)
	const n = 400
	tx, err := db.BeginTx(ctx, nil)
	is.NoErr(err)
	for i := range n {
		data := fmt.Sprintf(`{"n":%d,"tag":"%s"}`, i, []string{"red", "blue"}[i%2])
		keys, err := json.Marshal(find.Keys([]byte(data)))
		is.NoErr(err)
		_, err = tx.ExecContext(ctx, `INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version, find_keys)
SELECT seq, 0, ?, ?, '[]', CAST('{}' AS BLOB), 0, ? FROM formsapi_forms WHERE id = 'host'`, i, data, string(keys))
		is.NoErr(err)
	}
	is.NoErr(tx.Commit())
	red := formsapi.Query{Limit: 1000, Order: formsapi.Oldest, Filters: []formsapi.Filter{{Field: "tag", Value: `"red"`}}}
	total, err := s.CountSubmissions(ctx, storetest.AccountA, "host", red, true)
	is.NoErr(err)
	is.Equal(total, formsapi.Total{Value: n / 2, Kind: find.Exact}) // read in the tail
	tail := func() (n int) {
		is.NoErr(db.QueryRow(`SELECT count(*) FROM (` + tailQuery + `)`).Scan(&n))
		return n
	}
	is.Equal(tail(), n)
	for range sqlitestore.TailReadEvery { // a store reads the count every 16 writes of a form's slot
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "host", Data: []byte(`{"tag":"red"}`)}, formsapi.Metadata{}))
	}
	is.Equal(tail(), n+sqlitestore.TailReadEvery-16*16) // a write's fold: one batch
	var log bytes.Buffer
	now, tick := jumpingClock(6 * time.Second)
	again := mustOpen(t, path, sqlitestore.WithFoldAt(16), sqlitestore.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))), sqlitestore.WithProgressClock(now, tick))
	is.Equal(tail(), 0)                                                                 // Open folded the rest
	is.True(strings.Contains(log.String(), `"step":"fold the index's unfolded tails"`)) // a step of the start's log
	checkBlocks(t, db)
	total, err = again.CountSubmissions(ctx, storetest.AccountA, "host", red, true)
	is.NoErr(err)
	is.Equal(total, formsapi.Total{Value: n/2 + sqlitestore.TailReadEvery, Kind: find.Exact})
}

// TestDeleteFormDropsBlocksFirst: DeleteForm deletes the form's
// posting blocks in one statement before its submissions, so no row's
// deletion edits its trigrams' blocks one at a time (a form of 5,000
// submissions took 20 s): the whole deletion changes a few rows per
// submission and one per block, where editing each row's blocks would
// change about one per trigram of each submission. The other form's
// blocks stay as they were.
func TestDeleteFormDropsBlocksFirst(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, dbPath(t), sqlitestore.WithSearchIndex(), sqlitestore.WithFoldAt(16))
	const n = 160
	for _, form := range []string{"gone", "kept"} {
		is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: form, Title: form}))
		for i := range n {
			is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: form,
				Data: fmt.Appendf(nil, `{"name":"Person %d","message":"Could someone call me back about plan %d this week?"}`, i, i%7)}, formsapi.Metadata{}))
		}
	}
	db := sqlitestore.WriteDB(s)
	count := func(form string) (n int64) {
		is.NoErr(db.QueryRowContext(ctx, `SELECT count(*) FROM formsapi_find_blocks b JOIN formsapi_forms f ON f.seq = b.form_seq WHERE f.id = ?`, form).Scan(&n))
		return n
	}
	blocks, kept := count("gone"), count("kept")
	is.True(blocks > n) // a block per trigram at least
	var before, after int64
	is.NoErr(db.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&before))
	is.NoErr(s.DeleteForm(ctx, "acct", "gone"))
	is.NoErr(db.QueryRowContext(ctx, `SELECT total_changes()`).Scan(&after))
	if changes := after - before; changes > blocks+10*n { // about 8 a submission: its tombstone, versions, clock; editing its blocks, 60 more
		t.Errorf("DeleteForm changed %d rows for %d submissions and %d blocks: its rows' deletions edited their blocks", changes, n, blocks)
	}
	is.Equal(count("gone"), int64(0))
	is.Equal(count("kept"), kept)
	checkBlocks(t, sqlitestore.ReadDB(s))
	checkRuns(t, sqlitestore.ReadDB(s))
}
