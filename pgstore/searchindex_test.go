package pgstore_test

import (
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// trigrams counts the search index's entries in s's schema, with those
// of the rows in its unfolded tail (migration 0023): what it holds once
// they are folded.
func trigrams(t *testing.T, s *pgstore.Store) int {
	t.Helper()
	var n int
	schema := quote(s.Schema())
	if err := pgstore.Pool(s).QueryRow(ctx, `SELECT (SELECT count(*) FROM `+indexEntries(schema+".")+` e WHERE key < 0)
+ (SELECT count(*) FROM `+schema+`.formsapi_find_tail t JOIN `+schema+`.formsapi_submissions s ON s.seq = t.seq, unnest(s.find_keys) k WHERE k < 0)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSearchIndexTurnedOn: opening a schema that has rows with
// WithSearchIndex indexes their trigrams (as many entries as a schema
// indexed from its first write), a store opened before, without the
// option, then indexes its writes' trigrams too, and opening without the
// option never turns the index off. While the index is off, the writers
// compute no trigram keys at all (RELIABILITY case 104: before, every
// write computed them for its find_keys, a megabyte of U+FDFA taking 1.5
// s of CPU with the index off): turning it on computes them from the
// rows' data.
func TestSearchIndexTurnedOn(t *testing.T) {
	t.Parallel()
	indexed := load(t, mustOpen(t, pgstore.WithSearchIndex()), storetest.SearchSeed())
	want := trigrams(t, indexed)
	if want == 0 {
		t.Fatal("no trigram indexed with WithSearchIndex")
	}

	dsn, schema := pgtest.Schema(t)
	before := load(t, mustOpenIn(t, dsn, schema), storetest.SearchSeed())
	if n := trigrams(t, before); n != 0 {
		t.Fatalf("%d trigram entries without WithSearchIndex, want none", n)
	}
	var computed int
	if err := pgstore.Pool(before).QueryRow(ctx, `SELECT count(*) FROM `+quote(schema)+`.formsapi_submissions s, unnest(s.find_keys) k WHERE k < 0`).Scan(&computed); err != nil || computed != 0 {
		t.Fatalf("%d trigram keys computed while the index is off (%v), want none", computed, err)
	}
	stale := mustOpenIn(t, dsn, schema) // for a batch, below
	on := mustOpenIn(t, dsn, schema, pgstore.WithSearchIndex())
	if n := trigrams(t, on); n != want {
		t.Fatalf("turned on: %d trigram entries, want %d", n, want)
	}
	add := func(s *pgstore.Store, data string) {
		t.Helper()
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSearch, Data: []byte(data)}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	add(indexed, `{"qqqq":"wxyz"}`)
	add(before, `{"qqqq":"wxyz"}`)
	if a, b := trigrams(t, before), trigrams(t, indexed); a != b {
		t.Fatalf("a write of the store opened before: %d trigram entries, want %d", a, b)
	}
	// A batch of a store that has not written since the index was
	// turned on is made again with the trigrams.
	batch := func(s *pgstore.Store) {
		t.Helper()
		if err := s.AddSubmissions(ctx, submissions(
			formsapi.Submission{FormID: storetest.FormSearch, Data: []byte(`{"b":"uvwx"}`)},
			formsapi.Submission{FormID: storetest.FormSearch, Data: []byte(`{"b":"tuvw"}`)},
		)); err != nil {
			t.Fatal(err)
		}
	}
	batch(stale)
	batch(indexed)
	if a, b := trigrams(t, stale), trigrams(t, indexed); a != b {
		t.Fatalf("a batch of a store opened before the index was turned on: %d trigram entries, want %d", a, b)
	}
	again := mustOpenIn(t, dsn, schema)
	add(again, `{"n":"vwxy"}`)
	add(indexed, `{"n":"vwxy"}`)
	if a, b := trigrams(t, again), trigrams(t, indexed); a != b {
		t.Fatalf("opened again without the option: %d trigram entries, want %d (still on)", a, b)
	}
	for _, s := range []*pgstore.Store{before, again, stale} {
		p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormSearch, formsapi.Query{Limit: 10, Search: "vwxy"})
		if err != nil || len(p.Items) != 1 {
			t.Fatalf("q vwxy: %d items, %v; want the one", len(p.Items), err)
		}
	}
}

// submissions yields subs, without metadata, as a batch for
// AddSubmissions.
func submissions(subs ...formsapi.Submission) iter.Seq2[formsapi.Submission, formsapi.Metadata] {
	return func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		for _, s := range subs {
			if !yield(s, formsapi.Metadata{}) {
				return
			}
		}
	}
}

// TestSearchWithoutIndexExaminesABoundedNumber: with the search index off
// (the default), a search walks the form's submissions, and each page
// examines exactly 1,000 of them (find.MaxExamined) before it ends short
// with a cursor after the last one examined: the rare term, in n 2,400 of
// 2,500, takes two empty pages and a third with it.
func TestSearchWithoutIndexExaminesABoundedNumber(t *testing.T) {
	t.Parallel()
	s := load(t, mustOpen(t), storetest.DefaultSeed())
	var subs []formsapi.Submission
	for i := range 2500 {
		data := `{"a":"foo b","b":"o bar","n":` + itoa(i) + `}`
		if i == 2400 {
			data = `{"a":"Foo Bär","c":"zyxw","n":2400}`
		}
		subs = append(subs, formsapi.Submission{FormID: storetest.FormEmpty, Data: []byte(data)})
	}
	if err := s.AddSubmissions(ctx, submissions(subs...)); err != nil {
		t.Fatal(err)
	}
	if n := trigrams(t, s); n != 0 {
		t.Fatalf("%d trigram entries, want none", n)
	}
	for _, term := range []string{"zyxw", "foo bar"} {
		q := formsapi.Query{Limit: 10, Order: formsapi.Oldest, Search: find.Normalize(term)}
		for page, next := range []int{1000, 2000} {
			p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, q)
			if err != nil || len(p.Items) != 0 || p.NextCursor == "" {
				t.Fatalf("q %q, page %d: %d items, cursor %q, %v; want none and a cursor", term, page+1, len(p.Items), p.NextCursor, err)
			}
			after, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, formsapi.Query{Limit: 1, Order: formsapi.Oldest, Cursor: p.NextCursor})
			if err != nil {
				t.Fatal(err)
			}
			if got := submissionNs(t, after.Items); !slices.Equal(got, []int{next}) {
				t.Fatalf("q %q, page %d: the next submission after its cursor is n %v, want %d", term, page+1, got, next)
			}
			q.Cursor = p.NextCursor
		}
		p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, q)
		if err != nil || p.NextCursor != "" || !slices.Equal(submissionNs(t, p.Items), []int{2400}) {
			t.Fatalf("q %q, page 3: n %v, cursor %q, %v; want 2400 and the end", term, submissionNs(t, p.Items), p.NextCursor, err)
		}
	}
	exact, err := s.CountSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, formsapi.Query{Search: "zyxw"}, true)
	if err != nil || exact != (formsapi.Total{Value: 1, Kind: find.Exact}) {
		t.Fatalf("total=exact: %+v, %v; want exactly 1", exact, err)
	}
	est, err := s.CountSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, formsapi.Query{Search: "zyxw"}, false)
	if err != nil || est != (formsapi.Total{Value: 2500, Kind: find.Estimate}) {
		t.Fatalf("total=estimate: %+v, %v; want the range's 2500", est, err)
	}
}

// submissionNs lists the n of each submission.
func submissionNs(t *testing.T, subs []formsapi.Submission) []int {
	t.Helper()
	ns := []int{}
	for _, sub := range subs {
		var d struct{ N int }
		if err := json.Unmarshal(sub.Data, &d); err != nil {
			t.Fatal(err)
		}
		ns = append(ns, d.N)
	}
	return ns
}

// TestSearchIndexBuildWritesEntries: turning the search index on over
// stored rows (which writes the rows' entries itself, migration 0034,
// rather than through the update triggers) leaves each row the
// find_keys of a schema indexed from its first write, and exactly the
// entries of those keys: a filter key a row's find_keys held but its
// data no longer gives loses its entry, a row stored without find_keys
// gets them, a row in the unfolded tail leaves it (its entries are
// written), and every form whose rows were indexed gets a fresh version
// and base, as the triggers gave it. Searches then answer as on the
// schema indexed from the start. So they do when a trigram's entry was
// stored already and a filter key's missing, which the triggers and the
// store never leave: the build is then made again with inserts that
// skip the entries there, as the triggers' did.
func TestSearchIndexBuildWritesEntries(t *testing.T) {
	t.Parallel()
	indexed := load(t, mustOpen(t, pgstore.WithSearchIndex()), storetest.SearchSeed())
	for _, there := range []bool{false, true} {
		t.Run(fmt.Sprintf("entry_there_%t", there), func(t *testing.T) {
			dsn, schema := pgtest.Schema(t)
			off := load(t, mustOpenIn(t, dsn, schema), storetest.SearchSeed())
			tbl := quote(schema) + "."
			pool := pgstore.Pool(off)
			// A stale filter key (its entry written by the update trigger, the
			// index off), a row without find_keys (its entries deleted by it),
			// and a row in the tail.
			for _, q := range []string{
				`UPDATE ` + tbl + `formsapi_submissions SET find_keys = find_keys || 4242::bigint WHERE seq = (SELECT min(seq) FROM ` + tbl + `formsapi_submissions)`,
				`UPDATE ` + tbl + `formsapi_submissions SET find_keys = NULL WHERE seq = (SELECT max(seq) FROM ` + tbl + `formsapi_submissions)`,
				`INSERT INTO ` + tbl + `formsapi_find_tail (form_seq, created_at, seq) SELECT form_seq, created_at, seq FROM ` + tbl + `formsapi_submissions WHERE seq = (SELECT min(seq) + 1 FROM ` + tbl + `formsapi_submissions)`,
			} {
				if tag, err := pool.Exec(ctx, q); err != nil || tag.RowsAffected() != 1 {
					t.Fatalf("%s: %v, %v", q, tag, err)
				}
			}
			if there {
				// A filter key's entry stored already for the row without
				// find_keys, and another row's filter entry missing: the
				// build is made again with careful inserts. (Trigram
				// entries are folded into posting blocks since migration
				// 0035, never inserted by the build.)
				var form, at, seq int64
				var data string
				if err := pool.QueryRow(ctx, `SELECT form_seq, created_at, seq, data FROM `+tbl+`formsapi_submissions WHERE seq = (SELECT max(seq) FROM `+tbl+`formsapi_submissions)`).Scan(&form, &at, &seq, &data); err != nil {
					t.Fatal(err)
				}
				k := find.Keys([]byte(data))
				if len(k) == 0 || k[0] < 0 {
					t.Fatalf("keys %v of %s: want a filter's", k, data)
				}
				for _, q := range []struct {
					sql  string
					args []any
				}{
					{`INSERT INTO ` + tbl + `formsapi_find (form_seq, key, created_at, seq) VALUES ($1, $2, $3, $4)`, []any{form, k[0], at, seq}},
					{`DELETE FROM ` + tbl + `formsapi_find WHERE (form_seq, key, created_at, seq) = (SELECT form_seq, max(key), created_at, seq FROM ` + tbl + `formsapi_find
    WHERE seq = (SELECT min(seq) + 2 FROM ` + tbl + `formsapi_submissions) GROUP BY form_seq, created_at, seq)`, nil},
				} {
					if tag, err := pool.Exec(ctx, q.sql, q.args...); err != nil || tag.RowsAffected() != 1 {
						t.Fatalf("%s: %v, %v", q.sql, tag, err)
					}
				}
			}
			versions := func(tbl string) map[string][2]int64 {
				t.Helper()
				rows, err := pool.Query(ctx, `SELECT id, version, base FROM `+tbl+`formsapi_forms f WHERE EXISTS (SELECT 1 FROM `+tbl+`formsapi_submissions s WHERE s.form_seq = f.seq)`)
				if err != nil {
					t.Fatal(err)
				}
				v := map[string][2]int64{}
				for rows.Next() {
					var id string
					var version, base int64
					if err := rows.Scan(&id, &version, &base); err != nil {
						t.Fatal(err)
					}
					v[id] = [2]int64{version, base}
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				return v
			}
			before := versions(tbl)

			on := mustOpenIn(t, dsn, schema, pgstore.WithSearchIndex())
			keys := func(tbl string) string {
				t.Helper()
				var s string
				if err := pool.QueryRow(ctx, `SELECT string_agg(f.id || ' ' || s.feed_pos || ' ' || s.find_keys::text, E'\n' ORDER BY f.id, s.feed_pos)
		FROM `+tbl+`formsapi_submissions s JOIN `+tbl+`formsapi_forms f ON f.seq = s.form_seq`).Scan(&s); err != nil {
					t.Fatal(err)
				}
				return s
			}
			if got, want := keys(tbl), keys(quote(indexed.Schema())+"."); got != want {
				t.Fatalf("find_keys after the build differ from those of a schema indexed from its first write")
			}
			var extra, missing, tail int
			if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM (SELECT form_seq, key, created_at, seq FROM `+indexEntries(tbl)+` e
		    EXCEPT ALL SELECT s.form_seq, k, s.created_at, s.seq FROM `+tbl+`formsapi_submissions s, unnest(s.find_keys) k) x),
		(SELECT count(*) FROM (SELECT s.form_seq, k, s.created_at, s.seq FROM `+tbl+`formsapi_submissions s, unnest(s.find_keys) k
		    EXCEPT ALL SELECT form_seq, key, created_at, seq FROM `+indexEntries(tbl)+` e) x),
		(SELECT count(*) FROM `+tbl+`formsapi_find_tail)`).Scan(&extra, &missing, &tail); err != nil {
				t.Fatal(err)
			}
			if extra != 0 || missing != 0 || tail != 0 {
				t.Fatalf("after the build: %d entries of no key, %d keys without their entry, %d rows in the tail; want none", extra, missing, tail)
			}
			after := versions(tbl)
			if len(after) != len(before) || len(after) == 0 {
				t.Fatalf("forms with submissions: %d after, %d before", len(after), len(before))
			}
			for id, v := range after {
				if b := before[id]; v[0] == b[0] || v[1] == b[1] {
					t.Errorf("form %s: version and base %v after the build, %v before; want both fresh", id, v, b)
				}
			}
			for _, c := range []struct{ form, term string }{
				{storetest.FormSearch, "zoe"}, {storetest.FormSearch, "deepval1"}, {storetest.FormSearch, "unal"},
				{storetest.FormSearchMany, "foo bar"}, {storetest.FormSearchMany, "s11"},
			} {
				q := formsapi.Query{Limit: 100, Search: c.term}
				got, err := on.ListSubmissions(ctx, storetest.AccountA, c.form, q)
				if err != nil {
					t.Fatal(err)
				}
				want, err := indexed.ListSubmissions(ctx, storetest.AccountA, c.form, q)
				if err != nil {
					t.Fatal(err)
				}
				if a, b := datas(got.Items), datas(want.Items); len(a) == 0 || !slices.Equal(a, b) {
					t.Errorf("q %s on %s: %v, want %v (some)", c.term, c.form, a, b)
				}
			}
		})
	}
}

// datas returns the data of subs, in order.
func datas(subs []formsapi.Submission) []string {
	s := make([]string, len(subs))
	for i, sub := range subs {
		s[i] = string(sub.Data)
	}
	return s
}
