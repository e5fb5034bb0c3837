package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
)

// fillN is the size of the forms the tests fill both ways: submission 0
// holds the rare name, and every row about a hundred trigram keys.
const fillN = 300

// state is what a fill leaves that a search or filter reads: every
// submission's row (seq, feed position, time, data, keys), every index
// entry, the search index's setting, and the answers of the bench's
// searches and filters through the handler.
type state struct {
	rows, entries []string
	// tail is the seq of each submission in the unfolded tail of the
	// search index (formsapi_find_tail): its trigram entries are not
	// written until a fold, and a search reads its row instead.
	tail    []string
	setting int64
	answers map[string][]int
}

var queries = []string{
	"q=zoe", fmt.Sprintf("q=number+%d%%2C", fillN/2), "q=hello&limit=100", "q=hello&limit=100&order=asc&total=exact", "q=qqqq&total=exact",
	"filter[plan]=gold&total=exact", fmt.Sprintf("filter[email]=user%d@example.com", fillN/2),
}

// answers reads each query's page through the handler over s: the n of
// each submission, then the total.
func answers(t *testing.T, s store) map[string][]int {
	t.Helper()
	h := formsapi.NewHandler(s, s)
	got := map[string][]int{}
	for _, q := range queries {
		r := httptest.NewRequest("GET", "/v1/forms/"+formID+"/submissions?"+q, nil)
		r.Header.Set("Authorization", "Bearer "+key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var p struct {
			Submissions []struct{ Data struct{ N int } }
			Total       struct{ Value int }
		}
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &p) != nil {
			t.Fatalf("?%s: %d %.300s", q, w.Code, w.Body.String())
		}
		for _, sub := range p.Submissions {
			got[q] = append(got[q], sub.Data.N)
		}
		got[q] = append(got[q], -1, p.Total.Value)
	}
	return got
}

// addEach fills s as a host's writes would: AddSubmission for each.
func addEach(t *testing.T, s store) {
	t.Helper()
	ctx := context.Background()
	for i := range fillN {
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: formID, Data: data(i), CreatedAt: at(i)}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
}

// same fails the test where the bulk fill's state differs from the
// writers'.
func same(t *testing.T, bulk, each state) {
	t.Helper()
	if bulk.setting != 1 || each.setting != 1 {
		t.Errorf("search_index setting: bulk %d, writers %d, want 1", bulk.setting, each.setting)
	}
	if len(each.rows) != fillN || !slices.Equal(bulk.rows, each.rows) {
		t.Errorf("rows: bulk %d, writers %d (want %d), or they differ", len(bulk.rows), len(each.rows), fillN)
	}
	// About a hundred trigram entries a row: a fill that left them out
	// would hold a few per row. The writers leave their last submissions
	// in the unfolded tail (fewer than a fold's 256; the bench has one form), whose entries
	// the bulk fill wrote: the entries of every other submission are the
	// same.
	if len(bulk.entries) < 50*fillN || len(each.tail) >= 256 || !slices.Equal(outside(bulk.entries, each.tail), outside(each.entries, each.tail)) {
		t.Errorf("index entries: bulk %d, writers %d and %d in the tail, or they differ", len(bulk.entries), len(each.entries), len(each.tail))
	}
	for _, q := range queries {
		if !slices.Equal(bulk.answers[q], each.answers[q]) {
			t.Errorf("?%s: bulk %v, writers %v", q, bulk.answers[q], each.answers[q])
		}
	}
	if got := each.answers["q=zoe"]; !slices.Equal(got, []int{0, -1, 0}) {
		t.Errorf("?q=zoe: %v, want submission 0", got)
	}
}

// blockEntries returns the trigram entries of formsapi_find_blocks
// (migration 0022: each block's list holds 16 bytes an entry, created_at
// then seq, big-endian) as lines of form_seq, key, created_at and seq,
// as lines reads formsapi_find's.
func blockEntries(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT form_seq, key, list FROM formsapi_find_blocks`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var form, key int64
		var list []byte
		if err := rows.Scan(&form, &key, &list); err != nil {
			t.Fatal(err)
		}
		if len(list)%16 != 0 {
			t.Fatalf("a block of %d bytes", len(list))
		}
		for e := list; len(e) > 0; e = e[16:] {
			at, seq := int64(binary.BigEndian.Uint64(e)), int64(binary.BigEndian.Uint64(e[8:]))
			out = append(out, fmt.Sprintf("%d|%d|%d|%d|", form, key, at, seq))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// runEntries returns the filters' entries of formsapi_find_runs
// (migration 0031: each chunk's list holds 24 bytes an entry, the key,
// created_at and seq, big-endian) as blockEntries returns the trigrams'.
func runEntries(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT form_seq, list FROM formsapi_find_runs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var form int64
		var list []byte
		if err := rows.Scan(&form, &list); err != nil {
			t.Fatal(err)
		}
		if len(list)%24 != 0 {
			t.Fatalf("a chunk of %d bytes", len(list))
		}
		for e := list; len(e) > 0; e = e[24:] {
			key, at, seq := int64(binary.BigEndian.Uint64(e)), int64(binary.BigEndian.Uint64(e[8:])), int64(binary.BigEndian.Uint64(e[16:]))
			out = append(out, fmt.Sprintf("%d|%d|%d|%d|", form, key, at, seq))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// outside returns the entries (lines of form_seq, key, created_at and
// seq) of submissions whose seq is not in tail (lines of seq).
func outside(entries, tail []string) []string {
	in := map[string]bool{}
	for _, l := range tail {
		in[strings.TrimSuffix(l, "|")] = true
	}
	var out []string
	for _, e := range entries {
		f := strings.Split(e, "|")
		if !in[f[3]] {
			out = append(out, e)
		}
	}
	return out
}

func lines(t *testing.T, rows interface {
	Next() bool
	Scan(...any) error
	Err() error
}, cols int) []string {
	t.Helper()
	var out []string
	for rows.Next() {
		v := make([]any, cols)
		for i := range v {
			v[i] = new(any)
		}
		if err := rows.Scan(v...); err != nil {
			t.Fatal(err)
		}
		line := ""
		for _, x := range v {
			line += fmt.Sprintf("%v|", *x.(*any))
		}
		out = append(out, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBulkSQLiteAsWriters: bulkSQLite leaves a file with the rows, index
// entries and setting that AddSubmission with the search index on
// leaves, and the same answers; opening it again changes nothing.
func TestBulkSQLiteAsWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fill := func(path string, bulk bool) state {
		s, err := sqlitestore.Open(path, sqlitestore.WithSearchIndex())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := addForm(ctx, s); err != nil {
			t.Fatal(err)
		}
		if bulk {
			if err := bulkSQLite(ctx, path, fillN); err != nil {
				t.Fatal(err)
			}
		} else {
			addEach(t, s)
		}
		s.Close()
		s, err = sqlitestore.Open(path, sqlitestore.WithSearchIndex()) // must find nothing to do
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		st := state{answers: answers(t, s)}
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.QueryContext(ctx, `SELECT seq, feed_pos, created_at, data, find_keys FROM formsapi_submissions ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		st.rows = lines(t, rows, 5)
		st.entries = append(runEntries(t, db), blockEntries(t, db)...)
		slices.Sort(st.entries)
		// The unfolded tail: rows above their form's mark, and those of
		// formsapi_find_tail (migration 0031).
		rows, err = db.QueryContext(ctx, `SELECT s.seq FROM formsapi_submissions s
WHERE s.feed_pos > (SELECT find_folded FROM formsapi_forms WHERE seq = s.form_seq) OR s.seq IN (SELECT seq FROM formsapi_find_tail) ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		st.tail = lines(t, rows, 1)
		if err := db.QueryRowContext(ctx, `SELECT value FROM formsapi_settings WHERE name = 'search_index'`).Scan(&st.setting); err != nil {
			t.Fatal(err)
		}
		return st
	}
	dir := t.TempDir()
	same(t, fill(filepath.Join(dir, "bulk.db"), true), fill(filepath.Join(dir, "each.db"), false))
}

// TestCopyPGAsWriters is TestBulkSQLiteAsWriters for copyPG, which also
// drops formsapi_find's primary key and adds it again: it must be there
// after, as the migration made it.
func TestCopyPGAsWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fill := func(bulk bool) state {
		dsn, schema := pgtest.Name(t)
		s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema), pgstore.WithSearchIndex())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := addForm(ctx, s); err != nil {
			t.Fatal(err)
		}
		if bulk {
			if err := copyPG(ctx, dsn, schema, fillN); err != nil {
				t.Fatal(err)
			}
		} else {
			addEach(t, s)
		}
		s.Close()
		s, err = pgstore.Open(ctx, dsn, pgstore.WithSchema(schema), pgstore.WithSearchIndex())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		st := state{answers: answers(t, s)}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		sch := pgx.Identifier{schema}.Sanitize()
		rows, err := conn.Query(ctx, `SELECT seq, feed_pos, created_at, data::text, find_keys::text FROM `+sch+`.formsapi_submissions ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		st.rows = lines(t, rows, 5)
		// The filters' entries and the trigrams' in their posting blocks
		// (migration 0035), which the two fills cut into blocks
		// differently: their entries are compared.
		rows, err = conn.Query(ctx, `SELECT form_seq, key, created_at, seq FROM `+sch+`.formsapi_find
UNION ALL
SELECT b.form_seq, b.key, u.at, u.seq FROM `+sch+`.formsapi_find_blocks b, unnest(b.ats, b.seqs) u (at, seq)
ORDER BY 1, 2, 3, 4`)
		if err != nil {
			t.Fatal(err)
		}
		st.entries = lines(t, rows, 4)
		rows, err = conn.Query(ctx, `SELECT seq FROM `+sch+`.formsapi_find_tail ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		st.tail = lines(t, rows, 1)
		if err := conn.QueryRow(ctx, `SELECT value FROM `+sch+`.formsapi_settings WHERE name = 'search_index'`).Scan(&st.setting); err != nil {
			t.Fatal(err)
		}
		var pk string
		if err := conn.QueryRow(ctx, `SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = $1::regclass AND indisprimary`, schema+".formsapi_find").Scan(&pk); err != nil {
			t.Fatalf("formsapi_find's primary key: %v", err)
		}
		if want := fmt.Sprintf("CREATE UNIQUE INDEX formsapi_find_pkey ON %s.formsapi_find USING btree (form_seq, key, created_at, seq)", schema); pk != want {
			t.Errorf("formsapi_find's primary key: %s, want %s", pk, want)
		}
		return st
	}
	same(t, fill(true), fill(false))
}
