package sqlitestore_test

// An outside attack (helper attack54) on the tail statements' join order
// (CROSS JOIN, b5b07f1) and DeleteForm's blocks deleted first (06dd174):
// rows a host's SQL puts in formsapi_find_tail read exactly by every
// filtered and searched page, DeleteForm that finds nothing or fails
// changing nothing, a form made again not seeing the old one's entries,
// and the one bug it found (a tail row left by a deleted submission
// naming another form's row that took its seq).

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
	"modernc.org/sqlite"
)

// a54Hook, when set, runs in SQL's a54_hook(), which a test's trigger
// calls: a way to act between two statements of a store's transaction.
var a54Hook atomic.Pointer[func()]

func init() {
	sqlite.MustRegisterScalarFunction("a54_hook", 0, func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) {
		if f := a54Hook.Load(); f != nil {
			(*f)()
		}
		return int64(0), nil
	})
}

// a54Data is submission n of form: every third red, every fourth with
// "zebra" in its note, every fifth of form b with "quokka" too.
func a54Data(form string, n int) string {
	tag := "blue"
	if n%3 == 0 {
		tag = "red"
	}
	note := "plain words"
	if n%4 == 0 {
		note = "zebra crossing"
	}
	if form == "b" && n%5 == 0 {
		note += " quokka"
	}
	return fmt.Sprintf(`{"n":%d,"tag":"%s","email":"p%d@%s.example","note":"%s"}`, n, tag, n, form, note)
}

func a54Add(t *testing.T, s *sqlitestore.Store, form string, n int) {
	t.Helper()
	err := s.AddSubmission(ctx, formsapi.Submission{FormID: form, Data: []byte(a54Data(form, n)),
		CreatedAt: time.Unix(1000+int64(n), 0)}, formsapi.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
}

type a54Row struct {
	n    int
	vals []string
	tag  string
}

// a54Rows reads form's rows in keyset order, oldest first, straight
// from the table: the oracle.
func a54Rows(t *testing.T, db *sql.DB, form string) []a54Row {
	t.Helper()
	rows, err := db.Query(`SELECT s.data FROM formsapi_submissions s JOIN formsapi_forms f ON f.seq = s.form_seq
WHERE f.id = ? ORDER BY s.created_at, s.seq`, form)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []a54Row
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		r := a54Row{n: int(m["n"].(float64)), tag: fmt.Sprint(m["tag"])}
		for _, v := range m {
			r.vals = append(r.vals, strings.ToLower(fmt.Sprint(v)))
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var a54Red = []formsapi.Filter{{Field: "tag", Value: `"red"`}}

// a54Queries are the reads each check compares with the oracle.
var a54Queries = []struct {
	name string
	q    formsapi.Query
	want func(a54Row) bool
}{
	{"all", formsapi.Query{}, func(a54Row) bool { return true }},
	{"red", formsapi.Query{Filters: a54Red}, func(r a54Row) bool { return r.tag == "red" }},
	{"zebra", formsapi.Query{Search: find.Normalize("zebra")}, func(r a54Row) bool { return a54Holds(r, "zebra") }},
	{"quokka", formsapi.Query{Search: find.Normalize("quokka")}, func(r a54Row) bool { return a54Holds(r, "quokka") }},
	{"zebra red", formsapi.Query{Search: find.Normalize("zebra"), Filters: a54Red}, func(r a54Row) bool { return r.tag == "red" && a54Holds(r, "zebra") }},
}

func a54Holds(r a54Row, term string) bool {
	return slices.ContainsFunc(r.vals, func(v string) bool { return strings.Contains(v, term) })
}

// a54Walk walks every page of q of accountID's form.
func a54Walk(t *testing.T, s *sqlitestore.Store, accountID, form string, q formsapi.Query) []int {
	t.Helper()
	var got []int
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatal("the walk does not end")
		}
		p, err := s.ListSubmissions(ctx, accountID, form, q)
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

// a54Check compares every read of a54Queries of form, both orders and
// two page sizes, and its exact total, with the oracle.
func a54Check(t *testing.T, s *sqlitestore.Store, db *sql.DB, accountID, form, stage string) {
	t.Helper()
	rows := a54Rows(t, db, form)
	for _, c := range a54Queries {
		var want []int
		for _, r := range rows {
			if c.want(r) {
				want = append(want, r.n)
			}
		}
		for _, o := range []formsapi.Order{formsapi.Oldest, formsapi.Newest} {
			w := slices.Clone(want)
			if o == formsapi.Newest {
				slices.Reverse(w)
			}
			for _, limit := range []int{3, 100} {
				q := c.q
				q.Order, q.Limit = o, limit
				got := a54Walk(t, s, accountID, form, q)
				if !slices.Equal(got, w) && !(len(got) == 0 && len(w) == 0) {
					t.Errorf("%s: form %s, %s, order %v, limit %d: got %v, want %v", stage, form, c.name, o, limit, got, w)
				}
			}
		}
		total, err := s.CountSubmissions(ctx, accountID, form, c.q, true)
		if err != nil {
			t.Fatal(err)
		}
		if total.Value != int64(len(want)) {
			t.Errorf("%s: form %s, %s: total %+v, want %d", stage, form, c.name, total, len(want))
		}
	}
}

// a54Digest hashes what the index holds, table by table, but for the
// rows of the forms whose seq is in skip.
func a54Digest(t *testing.T, db *sql.DB, skip ...int64) map[string]string {
	t.Helper()
	out := map[string]string{}
	for table, q := range map[string]string{
		"blocks":    `SELECT form_seq, key, lo_at, lo_seq, hex(list) FROM formsapi_find_blocks ORDER BY form_seq, key, lo_at, lo_seq`,
		"runs":      `SELECT form_seq, run, key, lo_at, lo_seq, hex(list) FROM formsapi_find_runs ORDER BY form_seq, run, key, lo_at, lo_seq`,
		"run list":  `SELECT form_seq, run, level, entries FROM formsapi_find_run_list ORDER BY form_seq, run`,
		"tail":      `SELECT form_seq, created_at, seq, filters FROM formsapi_find_tail ORDER BY form_seq, created_at, seq`,
		"gone":      `SELECT form_seq, created_at, seq, keys FROM formsapi_find_gone ORDER BY form_seq, created_at, seq, keys`,
		"rows":      `SELECT form_seq, seq, created_at, feed_pos, data, find_keys FROM formsapi_submissions ORDER BY form_seq, seq`,
		"forms":     `SELECT seq, id, account_id, feed_last, find_folded FROM formsapi_forms ORDER BY seq`,
		"tombstone": `SELECT count(*) FROM formsapi_tombstones`,
	} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		h := sha256.New()
		n := 0
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			if len(cols) > 1 && slices.Contains(skip, vals[0].(int64)) {
				continue
			}
			fmt.Fprintf(h, "%v\n", vals)
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		out[table] = fmt.Sprintf("%d rows %s", n, hex.EncodeToString(h.Sum(nil))[:16])
	}
	return out
}

func a54FormSeq(t *testing.T, db *sql.DB, form string) (seq int64) {
	t.Helper()
	if err := db.QueryRow(`SELECT seq FROM formsapi_forms WHERE id = ?`, form).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	return seq
}

func a54Count(t *testing.T, db *sql.DB, q string, args ...any) (n int) {
	t.Helper()
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// a54Orphans counts rows of formsapi_find_tail that name no submission
// at their place.
const a54Orphans = `SELECT count(*) FROM formsapi_find_tail t WHERE NOT EXISTS (SELECT 1 FROM formsapi_submissions s
    WHERE s.seq = t.seq AND s.form_seq = t.form_seq AND s.created_at = t.created_at)`

// TestAttack54TailRowsExact: rows of formsapi_find_tail, put there by a
// host's SQL (a folded row's created_at moved, its find_keys rewritten,
// a row inserted at a feed position below the mark, a row moved in from
// another form), are read once each, beside the form's blocks and runs,
// by every filtered and searched page, both ways, with exact totals, and
// Erase finds them; the other form's tail rows never show; the folds
// that follow leave blocks and runs exact.
func TestAttack54TailRowsExact(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("search index %v", on), func(t *testing.T) { a54TailRowsExact(t, on) })
	}
}

func a54TailRowsExact(t *testing.T, on bool) {
	is := is.New(t)
	path := dbPath(t)
	opts := []sqlitestore.Option{sqlitestore.WithFoldAt(8)}
	if on {
		opts = append(opts, sqlitestore.WithSearchIndex())
	}
	s := mustOpen(t, path, opts...)
	for _, f := range []string{"a", "b"} {
		is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: f}))
	}
	for i := range 60 {
		a54Add(t, s, "a", i)
		a54Add(t, s, "b", i)
	}
	db := hostDB(t, path)
	for _, f := range []string{"a", "b"} {
		a54Check(t, s, db, storetest.AccountA, f, "before")
	}
	a, b := a54FormSeq(t, db, "a"), a54FormSeq(t, db, "b")
	var folded int64
	is.NoErr(db.QueryRow(`SELECT find_folded FROM formsapi_forms WHERE seq = ?`, a).Scan(&folded))
	is.True(folded >= 40)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	seqOf := func(form int64, n int) (seq, pos int64) {
		t.Helper()
		is.NoErr(db.QueryRow(`SELECT seq, feed_pos FROM formsapi_submissions WHERE form_seq = ? AND json_extract(data, '$.n') = ?`, form, n).Scan(&seq, &pos))
		return seq, pos
	}
	keysOf := func(data string) string {
		keys := find.Keys([]byte(data))
		if on {
			keys = find.IndexKeys([]byte(data), nil)
		}
		k, err := json.Marshal(keys)
		is.NoErr(err)
		return string(k)
	}
	// Moved within their place and far from it.
	s3, _ := seqOf(a, 3)
	exec(`UPDATE formsapi_submissions SET created_at = created_at + 500000000 WHERE seq = ?`, s3)
	s8, _ := seqOf(a, 8)
	exec(`UPDATE formsapi_submissions SET created_at = ? WHERE seq = ?`, int64(1030)*1e9+5e8, s8)
	// The same keys written again: its trigrams requeued alone.
	s12, _ := seqOf(a, 12)
	exec(`UPDATE formsapi_submissions SET find_keys = find_keys WHERE seq = ?`, s12)
	// B's twin of a moved row, moved the same: the same created_at in
	// both forms' tails.
	sb3, _ := seqOf(b, 3)
	exec(`UPDATE formsapi_submissions SET created_at = created_at + 500000000 WHERE seq = ?`, sb3)
	// A row inserted at a deleted row's feed position, below the mark.
	s13, p13 := seqOf(a, 13)
	exec(`DELETE FROM formsapi_submissions WHERE seq = ?`, s13)
	d := a54Data("a", 1008) // red, zebra
	exec(`INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version, find_keys)
VALUES (?, ?, ?, ?, '[]', CAST('{}' AS BLOB), 0, ?)`, a, p13, int64(1013)*1e9+2e8, d, keysOf(d))
	// A row of b moved into a at another deleted row's position.
	s19, p19 := seqOf(a, 19)
	exec(`DELETE FROM formsapi_submissions WHERE seq = ?`, s19)
	sb15, _ := seqOf(b, 15)
	d = `{"n":1015,"tag":"red","email":"p1015@b.example","note":"plain words quokka"}`
	exec(`UPDATE formsapi_submissions SET form_seq = ?, feed_pos = ?, data = ?, find_keys = ? WHERE seq = ?`, a, p19, d, keysOf(d), sb15)
	// A requeued row then deleted: its tail row goes with it.
	s21, _ := seqOf(a, 21)
	exec(`UPDATE formsapi_submissions SET created_at = created_at + 1 WHERE seq = ?`, s21)
	exec(`DELETE FROM formsapi_submissions WHERE seq = ?`, s21)

	is.True(a54Count(t, db, `SELECT count(*) FROM formsapi_find_tail WHERE form_seq = ?`, a) >= 5)
	is.Equal(a54Count(t, db, a54Orphans), 0)
	for _, f := range []string{"a", "b"} {
		a54Check(t, s, db, storetest.AccountA, f, "host's tail")
	}
	// Erase finds the rows of the tail: the inserted one, the moved-in
	// one, a requeued one.
	for _, email := range []string{"p1008@a.example", "p1015@b.example", "p8@a.example", "p12@a.example"} {
		n, err := s.Erase(ctx, storetest.AccountA, "email", email)
		is.NoErr(err)
		if n != 1 {
			t.Errorf("Erase(%s) = %d, want 1", email, n)
		}
		if left := a54Count(t, db, `SELECT count(*) FROM formsapi_submissions WHERE data LIKE ?`, "%"+email+"%"); left != 0 {
			t.Errorf("Erase(%s) left %d rows", email, left)
		}
	}
	is.Equal(a54Count(t, db, a54Orphans), 0)
	for _, f := range []string{"a", "b"} {
		a54Check(t, s, db, storetest.AccountA, f, "erased")
	}
	// The folds that follow.
	for i := 60; i < 80; i++ {
		a54Add(t, s, "a", i)
		a54Add(t, s, "b", i)
	}
	checkBlocks(t, db)
	for _, f := range []string{"a", "b"} {
		a54Check(t, s, db, storetest.AccountA, f, "folded")
	}
	// And Open's fold of everything.
	s.Close()
	s = mustOpen(t, path, opts...)
	checkBlocks(t, db)
	for _, f := range []string{"a", "b"} {
		a54Check(t, s, db, storetest.AccountA, f, "reopened")
	}
}

// a54Open opens a new file with the search index on and a fold of 8,
// gives it forms (a54Forms, n submissions each), and returns the store,
// a host's handle on the file and its path.
func a54Open(t *testing.T, n int, forms ...[2]string) (*sqlitestore.Store, *sql.DB, string) {
	t.Helper()
	path := dbPath(t)
	s := mustOpen(t, path, sqlitestore.WithSearchIndex(), sqlitestore.WithFoldAt(8))
	a54Forms(t, s, n, forms...)
	return s, hostDB(t, path), path
}

// a54Forms makes forms (accountID, id) with n submissions each, written
// in turn.
func a54Forms(t *testing.T, s *sqlitestore.Store, n int, forms ...[2]string) {
	t.Helper()
	for _, f := range forms {
		if err := s.AddForm(ctx, f[0], formsapi.Form{ID: f[1]}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		for _, f := range forms {
			a54Add(t, s, f[1], i)
		}
	}
}

// TestAttack54DeleteFormNotFoundChangesNothing: DeleteForm of a form of
// another account, or of no form, fails with ErrFormNotFound and
// leaves every table as it was; then DeleteForm of one form leaves the
// others' blocks, runs and tails as they were, and their reads exact.
func TestAttack54DeleteFormNotFoundChangesNothing(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("search index %v", on), func(t *testing.T) {
			is := is.New(t)
			path := dbPath(t)
			opts := []sqlitestore.Option{sqlitestore.WithFoldAt(8)}
			if on {
				opts = append(opts, sqlitestore.WithSearchIndex())
			}
			s := mustOpen(t, path, opts...)
			a54Forms(t, s, 45, [2]string{storetest.AccountA, "a"}, [2]string{storetest.AccountB, "b"}, [2]string{storetest.AccountA, "gone"})
			db := hostDB(t, path)
			if on {
				is.True(a54Count(t, db, `SELECT count(*) FROM formsapi_find_blocks`) > 0)
			}
			before := a54Digest(t, db)
			for _, c := range [][2]string{{storetest.AccountB, "a"}, {storetest.AccountB, "gone"}, {storetest.AccountA, "b"}, {storetest.AccountA, "nope"}, {"nobody", "gone"}} {
				err := s.DeleteForm(ctx, c[0], c[1])
				if !errors.Is(err, formsapi.ErrFormNotFound) {
					t.Errorf("DeleteForm(%s, %s) = %v, want ErrFormNotFound", c[0], c[1], err)
				}
			}
			is.Equal(a54Digest(t, db), before)
			gone := a54FormSeq(t, db, "gone")
			others := a54Digest(t, db, gone)
			is.NoErr(s.DeleteForm(ctx, storetest.AccountA, "gone"))
			after := a54Digest(t, db, gone)
			for _, table := range []string{"blocks", "runs", "run list", "tail", "gone", "rows"} {
				if after[table] != others[table] {
					t.Errorf("%s of the other forms: %s, was %s", table, after[table], others[table])
				}
			}
			is.Equal(a54Count(t, db, `SELECT count(*) FROM formsapi_find_blocks WHERE form_seq = ?`, gone), 0)
			is.Equal(a54Count(t, db, `SELECT count(*) FROM formsapi_find_tail WHERE form_seq = ?`, gone), 0)
			is.Equal(a54Count(t, db, `SELECT count(*) FROM formsapi_find_runs WHERE form_seq = ?`, gone), 0)
			is.Equal(a54Count(t, db, `SELECT count(*) FROM formsapi_find_gone WHERE form_seq = ?`, gone), 0)
			checkBlocks(t, db)
			a54Check(t, s, db, storetest.AccountA, "a", "after")
			a54Check(t, s, db, storetest.AccountB, "b", "after")
		})
	}
}

// TestAttack54DeleteFormOthersDigest: the other forms' blocks, runs and
// tail rows are byte for byte what they were before DeleteForm.
func TestAttack54DeleteFormOthersDigest(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s, db, _ := a54Open(t, 45, [2]string{storetest.AccountA, "a"}, [2]string{storetest.AccountA, "gone"}, [2]string{storetest.AccountB, "b"})
	gone := a54FormSeq(t, db, "gone")
	// Some host tail rows in every form.
	_, err := db.Exec(`UPDATE formsapi_submissions SET created_at = created_at + 1 WHERE json_extract(data, '$.n') IN (2, 5)`)
	is.NoErr(err)
	before := a54Digest(t, db, gone)
	is.NoErr(s.DeleteForm(ctx, storetest.AccountA, "gone"))
	after := a54Digest(t, db, gone)
	for k, v := range before {
		if k == "tombstone" || k == "forms" {
			continue
		}
		if after[k] != v {
			t.Errorf("%s of the other forms: %s, was %s", k, after[k], v)
		}
	}
	checkBlocks(t, db)
	a54Check(t, s, db, storetest.AccountA, "a", "after")
	a54Check(t, s, db, storetest.AccountB, "b", "after")
}

// TestAttack54DeleteFormRollsBack: a DeleteForm whose transaction fails
// after the blocks' deletion (a host's trigger that refuses the form's
// deletion; a context canceled while its submissions go) leaves every
// table as it was, its blocks too, and the form's searches exact.
func TestAttack54DeleteFormRollsBack(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s, db, _ := a54Open(t, 45, [2]string{storetest.AccountA, "a"}, [2]string{storetest.AccountA, "gone"})
	is.True(a54Count(t, db, `SELECT count(*) FROM formsapi_find_blocks WHERE form_seq = ?`, a54FormSeq(t, db, "gone")) > 0)
	before := a54Digest(t, db)

	// A host's trigger refuses the form's deletion: the last statement.
	_, err := db.Exec(`CREATE TRIGGER a54_refuse BEFORE DELETE ON formsapi_forms WHEN OLD.id = 'gone' BEGIN SELECT RAISE(ABORT, 'a54 refuses'); END`)
	is.NoErr(err)
	err = s.DeleteForm(ctx, storetest.AccountA, "gone")
	if err == nil || !strings.Contains(err.Error(), "a54 refuses") {
		t.Fatalf("DeleteForm with the host's trigger: %v", err)
	}
	is.Equal(a54Digest(t, db), before)
	a54Check(t, s, db, storetest.AccountA, "gone", "refused")
	_, err = db.Exec(`DROP TRIGGER a54_refuse`)
	is.NoErr(err)

	// A context canceled once the blocks are gone, as the first
	// submission goes.
	_, err = db.Exec(`CREATE TRIGGER a54_cancel BEFORE DELETE ON formsapi_submissions WHEN a54_hook() BEGIN SELECT 1; END`)
	is.NoErr(err)
	cctx, cancel := context.WithCancel(ctx)
	hook := func() { cancel() }
	a54Hook.Store(&hook)
	err = s.DeleteForm(cctx, storetest.AccountA, "gone")
	a54Hook.Store(nil)
	if err == nil {
		t.Fatal("DeleteForm with its context canceled midway: no error")
	}
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "rollback") {
		t.Errorf("canceled DeleteForm: %v, want the context's error alone", err)
	}
	is.Equal(a54Digest(t, db), before)
	a54Check(t, s, db, storetest.AccountA, "gone", "canceled")
	_, err = db.Exec(`DROP TRIGGER a54_cancel`)
	is.NoErr(err)

	// Then it goes.
	is.NoErr(s.DeleteForm(ctx, storetest.AccountA, "gone"))
	checkBlocks(t, db)
	a54Check(t, s, db, storetest.AccountA, "a", "deleted")
}

// TestAttack54DeleteFormRecreated: a form deleted and made again with
// the same ID (and, SQLite's rowid being max + 1, the same seq: it was
// the last form made) finds nothing of the old form by search, filter
// or total, before and after its own folds, and its own rows exactly.
func TestAttack54DeleteFormRecreated(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("search index %v", on), func(t *testing.T) {
			is := is.New(t)
			path := dbPath(t)
			opts := []sqlitestore.Option{sqlitestore.WithFoldAt(8)}
			if on {
				opts = append(opts, sqlitestore.WithSearchIndex())
			}
			s := mustOpen(t, path, opts...)
			a54Forms(t, s, 45, [2]string{storetest.AccountA, "a"}, [2]string{storetest.AccountA, "b"})
			db := hostDB(t, path)
			old := a54FormSeq(t, db, "b")
			// Host tail rows in b when it goes.
			_, err := db.Exec(`UPDATE formsapi_submissions SET created_at = created_at + 1 WHERE form_seq = ? AND json_extract(data, '$.n') IN (5, 10)`, old)
			is.NoErr(err)
			is.NoErr(s.DeleteForm(ctx, storetest.AccountA, "b"))
			is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "b"}))
			t.Logf("seq of b: %d, then %d", old, a54FormSeq(t, db, "b"))
			for _, q := range []formsapi.Query{{Search: find.Normalize("quokka")}, {Search: find.Normalize("zebra")}, {Filters: a54Red}} {
				total, err := s.CountSubmissions(ctx, storetest.AccountA, "b", q, true)
				is.NoErr(err)
				is.Equal(total.Value, int64(0))
				q.Limit = 10
				is.Equal(len(a54Walk(t, s, storetest.AccountA, "b", q)), 0)
			}
			// New rows of b without "quokka", across several folds.
			for i := range 30 {
				is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "b",
					Data: fmt.Appendf(nil, `{"n":%d,"tag":"red","note":"zebra again"}`, 500+i), CreatedAt: time.Unix(1000+int64(i), 0)}, formsapi.Metadata{}))
				if i%7 == 0 {
					a54Check(t, s, db, storetest.AccountA, "b", "recreated "+strconv.Itoa(i))
				}
			}
			checkBlocks(t, db)
			a54Check(t, s, db, storetest.AccountA, "b", "recreated")
			a54Check(t, s, db, storetest.AccountA, "a", "recreated")
		})
	}
}

// TestAttack54OrphanTailRowFoldsAnotherFormsRow: a row of
// formsapi_find_tail whose submission went without the delete trigger
// (find_keys set NULL by a host's SQL after the row was requeued, then
// the row deleted) stays behind; once another form's row takes its seq
// (SQLite's rowid is max + 1) and is folded, Open's global fold
// (sqlTailKeys, joined by seq alone) folds that row a second time.
func TestAttack54OrphanTailRowFoldsAnotherFormsRow(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s, db, path := a54Open(t, 20, [2]string{storetest.AccountA, "a"}, [2]string{storetest.AccountA, "b"})
	a, b := a54FormSeq(t, db, "a"), a54FormSeq(t, db, "b")
	// Form a's last row, the file's last seq, folded.
	n := 20
	for ; ; n++ {
		var last, folded int64
		is.NoErr(db.QueryRow(`SELECT feed_last, find_folded FROM formsapi_forms WHERE seq = ?`, a).Scan(&last, &folded))
		if last == folded {
			break
		}
		a54Add(t, s, "a", n)
	}
	var x int64
	is.NoErr(db.QueryRow(`SELECT max(seq) FROM formsapi_submissions`).Scan(&x))
	is.Equal(a54Count(t, db, `SELECT form_seq FROM formsapi_submissions WHERE seq = ?`, x), int(a))
	// Requeued, its keys dropped, deleted: all host SQL.
	for _, q := range []string{
		`UPDATE formsapi_submissions SET created_at = created_at + 1 WHERE seq = ?`,
		`UPDATE formsapi_submissions SET find_keys = NULL WHERE seq = ?`,
		`DELETE FROM formsapi_submissions WHERE seq = ?`,
	} {
		_, err := db.Exec(q, x)
		is.NoErr(err)
	}
	t.Logf("orphan tail rows: %d", a54Count(t, db, a54Orphans))
	// Form b's next rows: the first takes seq x; then b folds.
	for i := 100; ; i++ {
		a54Add(t, s, "b", i)
		var last, folded int64
		is.NoErr(db.QueryRow(`SELECT feed_last, find_folded FROM formsapi_forms WHERE seq = ?`, b).Scan(&last, &folded))
		if last == folded {
			break
		}
	}
	is.Equal(a54Count(t, db, `SELECT form_seq FROM formsapi_submissions WHERE seq = ?`, x), int(b))
	// (checkBlocks counts x as a tail row here: the orphan names it.)
	a54Check(t, s, db, storetest.AccountA, "b", "before reopen")
	// A host's row without keys, which Open indexes (indexRows, then
	// foldTail of every form's explicit tail).
	_, err := db.Exec(`INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version)
VALUES (?, 0, ?, ?, '[]', CAST('{}' AS BLOB), 0)`, a, int64(5000)*1e9, a54Data("a", 5000))
	is.NoErr(err)
	s.Close()
	s = mustOpen(t, path, sqlitestore.WithSearchIndex(), sqlitestore.WithFoldAt(8))
	is.Equal(a54Count(t, db, a54Orphans), 0)
	a54Check(t, s, db, storetest.AccountA, "b", "reopened")
	a54Check(t, s, db, storetest.AccountA, "a", "reopened")
	checkBlocks(t, db) // checkRuns: each folded row's entries in one run
}
