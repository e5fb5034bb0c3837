package pgstore_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// tailState reads the unfolded tail of the search index (migration 0023)
// in s's schema: the rows in it, the rows with trigram entries (in the
// posting blocks, migration 0035), and the rows in both, which must be
// none.
func tailState(t *testing.T, s *pgstore.Store) (tail, folded, both int) {
	t.Helper()
	schema := quote(s.Schema())
	err := pgstore.Pool(s).QueryRow(ctx, `WITH e AS (SELECT DISTINCT u.seq FROM `+schema+`.formsapi_find_blocks b, unnest(b.seqs) u (seq))
SELECT (SELECT count(*) FROM `+schema+`.formsapi_find_tail),
    (SELECT count(*) FROM e),
    (SELECT count(*) FROM `+schema+`.formsapi_find_tail t JOIN e ON e.seq = t.seq)`).Scan(&tail, &folded, &both)
	if err != nil {
		t.Fatal(err)
	}
	return tail, folded, both
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
		for _, sub := range p.Items {
			var d struct{ N int }
			if err := json.Unmarshal(sub.Data, &d); err != nil {
				t.Fatal(err)
			}
			got = append(got, d.N)
		}
		if p.NextCursor == "" {
			return got
		}
		q.Cursor = p.NextCursor
	}
}

// TestSearchTailFolds: with the search index on, a write puts its
// submission in the unfolded tail, not its trigram entries, until a write
// whose seq is a multiple of 256 (64 before migration 0035) folds the
// tail into the index; a search
// finds every match at every step, each once, and in its exact total,
// whichever side a match is on, and so does a filter, whose entries every
// write inserts at once; a deleted row leaves its side; no row is ever in
// the tail and folded.
func TestSearchTailFolds(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t, pgstore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "tail"}))
	var want []int
	add := func(n int) int64 {
		data := `{"n":` + strconv.Itoa(n) + `,"a":"plain"}`
		if n%3 == 0 {
			data = `{"n":` + strconv.Itoa(n) + `,"a":"Zoë Needle"}`
			want = append(want, n)
		}
		at := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC).Add(-time.Duration(1+7*(n%11)) * time.Second)
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "tail", Data: []byte(data), CreatedAt: at}, formsapi.Metadata{ID: strconv.Itoa(n)}))
		var seq int64
		is.NoErr(pgstore.Pool(s).QueryRow(ctx, `SELECT max(seq) FROM `+quote(s.Schema())+`.formsapi_submissions`).Scan(&seq))
		return seq
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
	n, folds := 0, 0
	for folds < 2 {
		seq := add(n)
		n++
		tail, folded, both := tailState(t, s)
		is.Equal(both, 0) // never on both sides
		if seq%256 == 0 {
			folds++
			is.Equal(tail, 0)   // the fold took every row
			is.Equal(folded, n) // into the index
			check("just folded")
		} else if tail > 0 && tail%80 == 0 {
			check(fmt.Sprintf("%d rows in the tail", tail))
		}
	}
	for range 10 {
		add(n)
		n++
	}
	tail, folded, _ := tailState(t, s)
	is.True(tail > 0 && folded > 0)
	check("rows on both sides")
	// A match in the tail deleted, and one folded.
	for _, m := range []int{n - 3, 3} {
		if m%3 != 0 {
			m -= m % 3
		}
		is.NoErr(s.DeleteSubmission(ctx, storetest.AccountA, "tail", strconv.Itoa(m)))
		want = slices.DeleteFunc(want, func(k int) bool { return k == m })
	}
	_, _, both := tailState(t, s)
	is.Equal(both, 0)
	check("after deletions")
}

// TestSearchTailMigration: migration 0023 over a schema whose index
// entries are all in formsapi_find (as 0022 left every schema) and no tail
// table,
// and again over itself: the entries stay and are found, the tail starts
// empty, and the writes after it go to the tail, found beside them.
func TestSearchTailMigration(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s := mustOpenIn(t, dsn, schema, pgstore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "old"}))
	for n := range 5 {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "old", Data: []byte(fmt.Sprintf(`{"n":%d,"a":"Needle %d"}`, n, n)), CreatedAt: time.Unix(0, int64(n))}, formsapi.Metadata{}))
	}
	s.Close()
	q := quote(schema)
	// The entries all folded and the tail table gone, as before 0023.
	pgtest.Exec(t, dsn, fmt.Sprintf(`SET search_path TO %[1]s; SELECT formsapi_fold_tail(); DROP TABLE %[1]s.formsapi_find_tail; DELETE FROM %[1]s.formsapi_migrations WHERE version >= 23`, q))
	again := mustOpenIn(t, dsn, schema)
	tail, folded, both := tailState(t, again)
	is.Equal([]int{tail, folded, both}, []int{0, 5, 0}) // the entries kept, the tail empty
	search := formsapi.Query{Limit: 2, Order: formsapi.Oldest, Search: "needle"}
	is.Equal(walkAll(t, again, "old", search), []int{0, 1, 2, 3, 4})
	for n := 5; n < 8; n++ {
		is.NoErr(again.AddSubmission(ctx, formsapi.Submission{FormID: "old", Data: []byte(fmt.Sprintf(`{"n":%d,"a":"needle"}`, n)), CreatedAt: time.Unix(0, int64(n))}, formsapi.Metadata{}))
	}
	tail, folded, both = tailState(t, again)
	is.Equal([]int{tail, folded, both}, []int{3, 5, 0})
	is.Equal(walkAll(t, again, "old", search), []int{0, 1, 2, 3, 4, 5, 6, 7})
	again.Close()

	// And again over itself, with rows in the tail.
	pgtest.Exec(t, dsn, fmt.Sprintf(`DELETE FROM %[1]s.formsapi_migrations WHERE version >= 23`, q))
	third := mustOpenIn(t, dsn, schema)
	tail, folded, both = tailState(t, third)
	is.Equal([]int{tail, folded, both}, []int{3, 5, 0})
	is.Equal(walkAll(t, third, "old", search), []int{0, 1, 2, 3, 4, 5, 6, 7})
}

// TestSearchTailFoldsByForm: a write folds its own form's tail rows
// (migration 0038), not the other forms', once they are 256 (counted by
// a write whose position in its form's feed is a multiple of 16, so two
// forms written in turn are both counted); a batch folds each form it
// writes to the same way; every search finds its form's matches
// whichever side they are on.
func TestSearchTailFoldsByForm(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t, pgstore.WithSearchIndex())
	const fold, every = 256, 16
	forms := []string{"a", "b", "c"}
	for _, f := range forms {
		is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: f}))
	}
	schema := quote(s.Schema())
	formTail := func(form string) (n int) {
		t.Helper()
		is.NoErr(pgstore.Pool(s).QueryRow(ctx, `SELECT count(*) FROM `+schema+`.formsapi_find_tail t JOIN `+schema+`.formsapi_forms f ON f.seq = t.form_seq WHERE f.id = $1`, form).Scan(&n))
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
			q := formsapi.Query{Limit: 50, Order: formsapi.Oldest, Search: "needle " + f}
			if got := walkAll(t, s, f, q); !slices.Equal(got, want[f]) {
				t.Fatalf("%s: form %s: got %v, want %v", when, f, got, want[f])
			}
		}
	}
	// b and c a row short of a fold each, then a's rows past a fold.
	for range fold - 1 {
		is.NoErr(s.AddSubmission(ctx, sub("b"), formsapi.Metadata{}))
		is.NoErr(s.AddSubmission(ctx, sub("c"), formsapi.Metadata{}))
	}
	is.Equal([]int{formTail("b"), formTail("c")}, []int{fold - 1, fold - 1})
	for range fold + every {
		is.NoErr(s.AddSubmission(ctx, sub("a"), formsapi.Metadata{}))
	}
	is.True(formTail("a") <= every)                                          // a's folded
	is.Equal([]int{formTail("b"), formTail("c")}, []int{fold - 1, fold - 1}) // alone
	check("a folded, b and c in the tail")
	// Writes spread over the three: each form's tail stays below a fold
	// and a count's spacing past it.
	for i := range 3 * fold {
		is.NoErr(s.AddSubmission(ctx, sub(forms[i%3]), formsapi.Metadata{}))
		if i%every == 0 {
			for _, f := range forms {
				if got := formTail(f); got >= fold+every {
					t.Fatalf("form %s: %d rows in the tail", f, got)
				}
			}
		}
	}
	check("spread writes")
	// A batch to b and c: each folded as it reaches a fold, a left as it was.
	aTail := formTail("a")
	is.NoErr(s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		for i := range 3 * fold {
			if !yield(sub(forms[1+i%2]), formsapi.Metadata{}) {
				return
			}
		}
	}))
	is.Equal(formTail("a"), aTail)
	is.True(formTail("b") < fold+every && formTail("c") < fold+every)
	check("a batch")
	_, _, both := tailState(t, s)
	is.Equal(both, 0)
}

// TestFoldBodies: the fold of one form's tail (migration 0038) is the
// fold of the whole tail (0037) but for the rows of the tail it takes.
func TestFoldBodies(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	var all, form string
	err := pgstore.Pool(s).QueryRow(ctx, `SELECT
    (SELECT prosrc FROM pg_proc WHERE oid = ($1 || '.formsapi_fold_tail_to(bigint)')::regprocedure),
    (SELECT prosrc FROM pg_proc WHERE oid = ($1 || '.formsapi_fold_form_tail_to(bigint, bigint)')::regprocedure)`, quote(s.Schema())).Scan(&all, &form)
	if err != nil {
		t.Fatal(err)
	}
	const allRows = `WHERE seq <= last OR NOT (formsapi_find_tail.xmin = pg_current_xact_id()::xid)`
	// The form's oldest 1,024 of them (migration 0042).
	const formRows = `WHERE (form_seq, created_at, seq) IN (
            SELECT form_seq, created_at, seq FROM formsapi_find_tail
            WHERE form_seq = form AND (seq <= last OR NOT (formsapi_find_tail.xmin = pg_current_xact_id()::xid))
            ORDER BY form_seq, created_at, seq LIMIT 1024
        )`
	if strings.Count(all, allRows) != 1 || strings.Count(form, formRows) != 1 {
		t.Fatalf("the folds' first parts are not as this test knows them:\n%s\n%s", all, form)
	}
	if strings.Replace(form, formRows, allRows, 1) != all {
		t.Errorf("the fold of a form's tail differs from the fold of the whole tail beyond the rows it takes:\n%s\n---\n%s", form, all)
	}
}
