package pgstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

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

// sortedIDs lists the createdAt and data of each submission of form
// sorted by sort, walking every page of 7.
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
// those fields complete (a write's, one at a time and in batches), serves a sort by them as the index of every
// field does, and refuses one by another field with a
// *find.NotSortedError naming it; opened with other names, a field added
// gets the entries of every stored submission (its progress logged) and
// lists as the index of every field lists it, a field removed loses them,
// and another node's store sees the change at its next sorted page; a
// store opened without the option changes nothing, and WithSortIndex()
// goes back to every field.
func TestSortIndexFields(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s := load(t, mustOpenIn(t, dsn, schema, pgstore.WithSortIndex("n")), storetest.FindSeed())
	dsn2, schema2 := pgtest.Schema(t)
	every := load(t, mustOpenIn(t, dsn2, schema2, pgstore.WithSortIndex()), storetest.FindSeed())
	pool := pgstore.Pool(s)
	count := counter(t, s)
	sortTable := quote(schema) + `.formsapi_sort`
	fieldEntries := func(name string) int {
		return count(`SELECT count(*) FROM `+sortTable+` WHERE substring(entry from 1 for 8) = $1`, pgstore.SortPrefix(name))
	}
	is.True(fieldEntries("n") > 0)
	// The store's own inserts write the listed fields' entries only
	// (migration 0032): a field's entries are complete, and no other
	// field has any.
	is.Equal(count(`SELECT count(*) FROM `+sortTable), fieldEntries("n"))
	is.Equal(sortedIDs(t, s, storetest.FormFind, "-n"), sortedIDs(t, every, storetest.FormFind, "-n"))
	_, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormFind, formsapi.Query{Limit: 5, Sort: "-name"})
	var notSorted *find.NotSortedError
	is.True(errors.As(err, &notSorted))
	is.Equal(notSorted.Field, "name")

	// A write's entries: its listed fields' only, its keys all stored.
	add := func(s *pgstore.Store, data string, at time.Time) {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormFind, Data: []byte(data), CreatedAt: at}, formsapi.Metadata{}))
	}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	add(s, `{"n":1000,"name":"Zed","score":3}`, at)
	add(every, `{"n":1000,"name":"Zed","score":3}`, at)
	is.NoErr(s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		yield(formsapi.Submission{FormID: storetest.FormFind, Data: []byte(`{"n":1001,"name":"Ann"}`), CreatedAt: at.Add(time.Second)}, formsapi.Metadata{})
	}))
	add(every, `{"n":1001,"name":"Ann"}`, at.Add(time.Second))
	for n, keys := range map[int]int{1000: 3, 1001: 2} {
		var seq int64
		is.NoErr(pool.QueryRow(ctx, `SELECT seq FROM `+quote(schema)+`.formsapi_submissions WHERE data::jsonb->>'n' = $1`, fmt.Sprint(n)).Scan(&seq))
		is.True(count(`SELECT count(*) FROM `+sortTable+` WHERE seq = $1 AND substring(entry from 1 for 8) = $2`, seq, pgstore.SortPrefix("n")) == 1)
		is.Equal(count(`SELECT count(*) FROM `+sortTable+` WHERE seq = $1`, seq), 1) // n's entry alone
		is.Equal(count(`SELECT cardinality(sort_keys) FROM `+quote(schema)+`.formsapi_submissions WHERE seq = $1`, seq), keys)
	}

	// A store opened without the option changes nothing.
	before := count(`SELECT count(*) FROM ` + sortTable)
	mustOpenIn(t, dsn, schema)
	is.Equal(count(`SELECT count(*) FROM `+sortTable), before)

	// Another list: name added from the rows, n dropped, progress logged.
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(6 * time.Second); return now }
	h := &records{got: make(chan map[string]any, 1000)}
	s2 := mustOpenIn(t, dsn, schema, pgstore.WithSortIndex("name", "score"), pgstore.WithLogger(slog.New(h)),
		pgstore.WithProgressClock(clock, func(time.Duration) (<-chan time.Time, func()) { return nil, func() {} }))
	is.Equal(fieldEntries("n"), 0)
	is.Equal(count(`SELECT count(*) FROM `+sortTable), fieldEntries("name")+fieldEntries("score"))
	is.Equal(count(`SELECT count(*) FROM `+quote(schema)+`.formsapi_submissions s WHERE jsonb_typeof(s.data::jsonb->'name') = 'string'
AND NOT EXISTS (SELECT 1 FROM `+sortTable+` e WHERE e.seq = s.seq AND substring(e.entry from 1 for 8) = $1)`, pgstore.SortPrefix("name")), 0)
	for _, sort := range []string{"name", "-name", "score"} {
		is.Equal(sortedIDs(t, s2, storetest.FormFind, sort), sortedIDs(t, every, storetest.FormFind, sort))
	}
	for _, st := range []*pgstore.Store{s, s2} { // s, as another node, reads the list afresh
		_, err = st.ListSubmissions(ctx, storetest.AccountA, storetest.FormFind, formsapi.Query{Limit: 5, Sort: "n"})
		is.True(errors.As(err, &notSorted))
	}
	total := count(`SELECT count(*) FROM ` + quote(schema) + `.formsapi_submissions`)
	var added, dropped bool
	h.mu.Lock()
	for _, l := range h.all {
		if l["msg"] == "start: step ended" && l["step"] == "index the sort index's added fields" {
			added = fmt.Sprint(l["rows_done"]) == fmt.Sprint(total)
		}
		dropped = dropped || l["msg"] == "start: step ended" && l["step"] == "drop the sort index's removed fields"
	}
	h.mu.Unlock()
	is.True(added)
	is.True(dropped)

	// Every field again: as the index that always kept every field.
	s3 := mustOpenIn(t, dsn, schema, pgstore.WithSortIndex())
	var want int
	is.NoErr(pgstore.Pool(every).QueryRow(ctx, `SELECT count(*) FROM `+quote(schema2)+`.formsapi_sort`).Scan(&want))
	is.Equal(count(`SELECT count(*) FROM `+sortTable), want)
	for _, sort := range []string{"n", "-tag", "even", "html"} {
		is.Equal(sortedIDs(t, s3, storetest.FormFind, sort), sortedIDs(t, every, storetest.FormFind, sort))
	}
}

// TestSortFieldsChangedWhileWriting: stores write submissions one at a
// time and in batches while other opens change the sort index's list
// back and forth; afterwards every row has the entry of each listed
// field it has, and none of a field not listed. The store's statement
// reads the list after the sort lock (migration 0032): a list read in
// the statement's own snapshot, which predates the lock, would let a
// change that committed in between miss the write's entry.
func TestSortFieldsChangedWhileWriting(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s := load(t, mustOpenIn(t, dsn, schema, pgstore.WithSortIndex("a")), storetest.DefaultSeed())
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				data := []byte(fmt.Sprintf(`{"a":%d,"b":%d,"c":%d}`, i, w, i))
				var err error
				if w%2 == 0 {
					err = s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormEmpty, Data: data}, formsapi.Metadata{})
				} else {
					err = s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
						for range 2 {
							if !yield(formsapi.Submission{FormID: storetest.FormEmpty, Data: data}, formsapi.Metadata{}) {
								return
							}
						}
					})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 7 { // the last list is a and b
		fields := []string{"a", "b"}
		if i%2 == 1 {
			fields = []string{"a"}
		}
		mustOpenIn(t, dsn, schema, pgstore.WithSortIndex(fields...)).Close()
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	count := counter(t, s)
	q := quote(schema)
	rows := count(`SELECT count(*) FROM ` + q + `.formsapi_submissions WHERE data::jsonb ? 'b'`)
	is.True(rows > 0)
	for _, field := range []string{"a", "b"} {
		missing := count(`SELECT count(*) FROM `+q+`.formsapi_submissions s WHERE data::jsonb ? $2
AND NOT EXISTS (SELECT 1 FROM `+q+`.formsapi_sort e WHERE e.seq = s.seq AND substring(e.entry from 1 for 8) = $1)`, pgstore.SortPrefix(field), field)
		is.Equal(missing, 0) // every row has the listed field's entry
	}
	is.Equal(count(`SELECT count(*) FROM `+q+`.formsapi_sort WHERE substring(entry from 1 for 8) = $1`, pgstore.SortPrefix("c")), 0) // c was never listed
}

// counter returns a func that runs a query of one integer (a count) on
// s's pool and returns it, failing t on an error.
func counter(t *testing.T, s *pgstore.Store) func(q string, args ...any) int {
	return func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := pgstore.Pool(s).QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%.80s: %v", q, err)
		}
		return n
	}
}
