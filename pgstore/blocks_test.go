package pgstore_test

import (
	"context"
	"fmt"
	"github.com/jackc/pgx/v5"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/matryer/is"
)

// indexEntries is the SQL of every index entry of the schema tbl (quoted,
// with its dot) as rows (form_seq, key, created_at, seq): the filters'
// in formsapi_find, the trigrams' in their posting blocks (migration
// 0035).
func indexEntries(tbl string) string {
	return `(SELECT form_seq, key, created_at, seq FROM ` + tbl + `formsapi_find
    UNION ALL
    SELECT b.form_seq, b.key, u.at, u.seq FROM ` + tbl + `formsapi_find_blocks b, unnest(b.ats, b.seqs) u (at, seq))`
}

// checkBlocks fails t unless the posting blocks of s's schema (migration
// 0035) are as the fold, the deletions and the updates must leave them:
// every block holds 1 to 56 entries, its two lists of one length, sorted
// by (created_at, seq), none before the block's name; a key's blocks
// partition its range (a block's entries come before the next block's
// name); formsapi_find holds no trigram entry; and the entries of the
// blocks are exactly the trigram keys of the rows not in the tail, each
// once, none of a row in the tail (no entry of a row gone). It returns
// the number of blocks and of rows in the tail.
func checkBlocks(t *testing.T, s *pgstore.Store) (blocks, tail int) {
	t.Helper()
	tbl := quote(s.Schema()) + "."
	var bad, order, stray, missing, extra, both int
	err := pgstore.Pool(s).QueryRow(ctx, `WITH nb AS (
    SELECT b.*, lead(b.lo_at) OVER k AS next_at, lead(b.lo_seq) OVER k AS next_seq
    FROM `+tbl+`formsapi_find_blocks b
    WINDOW k AS (PARTITION BY b.form_seq, b.key ORDER BY b.lo_at, b.lo_seq)
), e AS (
    SELECT b.form_seq, b.key, b.lo_at, b.lo_seq, b.next_at, b.next_seq, u.at, u.seq,
        lag(u.at) OVER p AS prev_at, lag(u.seq) OVER p AS prev_seq
    FROM nb b, unnest(b.ats, b.seqs) WITH ORDINALITY u (at, seq, i)
    WINDOW p AS (PARTITION BY b.form_seq, b.key, b.lo_at, b.lo_seq ORDER BY u.i)
), want AS (
    SELECT DISTINCT s.form_seq, k AS key, s.created_at AS at, s.seq FROM `+tbl+`formsapi_submissions s, unnest(s.find_keys) k
    WHERE k < 0 AND NOT EXISTS (SELECT 1 FROM `+tbl+`formsapi_find_tail t WHERE t.seq = s.seq)
)
SELECT
    (SELECT count(*) FROM `+tbl+`formsapi_find_blocks),
    (SELECT count(*) FROM `+tbl+`formsapi_find_tail),
    (SELECT count(*) FROM `+tbl+`formsapi_find_blocks
        WHERE cardinality(ats) NOT BETWEEN 1 AND 56 OR cardinality(ats) <> cardinality(seqs) OR (ats[1], seqs[1]) < (lo_at, lo_seq)),
    (SELECT count(*) FROM e WHERE (next_at IS NOT NULL AND (at, seq) >= (next_at, next_seq))
        OR (prev_at IS NOT NULL AND (prev_at, prev_seq) >= (at, seq)) OR (at, seq) < (lo_at, lo_seq)),
    (SELECT count(*) FROM `+tbl+`formsapi_find WHERE key < 0),
    (SELECT count(*) FROM (SELECT * FROM want EXCEPT ALL SELECT form_seq, key, at, seq FROM e) x),
    (SELECT count(*) FROM (SELECT form_seq, key, at, seq FROM e EXCEPT ALL SELECT * FROM want) x),
    (SELECT count(*) FROM e JOIN `+tbl+`formsapi_find_tail t ON t.seq = e.seq)`).Scan(&blocks, &tail, &bad, &order, &stray, &missing, &extra, &both)
	if err != nil {
		t.Fatal(err)
	}
	if bad+order+stray+missing+extra+both != 0 {
		t.Fatalf("posting blocks: %d blocks of a bad shape, %d entries out of order, %d trigram entries in formsapi_find, %d entries missing, %d extra, %d of rows in the tail",
			bad, order, stray, missing, extra, both)
	}
	return blocks, tail
}

// TestSearchBlocks: a form's trigram entries in posting blocks (migration
// 0035) through folds of writes whose times go back and forth (late
// commits, each into the block of its place), a host's updates of
// find_keys, deletions oldest first and TRUNCATE: at every step the
// blocks are as checkBlocks wants them (no empty block, none out of
// order, no entry of a row gone, none missing), and a search finds every
// match, each once, in order both ways and in its exact total, a page at
// a time.
func TestSearchBlocks(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t, pgstore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "blocks"}))
	tbl := quote(s.Schema()) + "."
	pool := pgstore.Pool(s)
	want := map[int]bool{}
	r := rand.New(rand.NewPCG(37, 37))
	base := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	add := func(n int) {
		t.Helper()
		data := `{"n":` + strconv.Itoa(n) + `,"a":"plain words"}`
		if n%4 == 0 {
			data = `{"n":` + strconv.Itoa(n) + `,"a":"a needle here"}`
			want[n] = true
		}
		// Mostly later than the writes before, one in five earlier than
		// many (a late commit, into a block already folded).
		at := base.Add(time.Duration(n) * time.Second)
		if r.IntN(5) == 0 {
			at = base.Add(time.Duration(r.IntN(n+1)) * time.Second).Add(-time.Millisecond)
		}
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "blocks", Data: []byte(data), CreatedAt: at}, formsapi.Metadata{ID: strconv.Itoa(n)}))
	}
	check := func(when string) {
		t.Helper()
		checkBlocks(t, s)
		var ns []int
		for n := range want {
			ns = append(ns, n)
		}
		slices.Sort(ns)
		for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
			for _, limit := range []int{7, 100} {
				q := formsapi.Query{Search: "needle", Limit: limit, Order: o}
				got := walkAll(t, s, "blocks", q)
				sorted := slices.Clone(got)
				slices.Sort(sorted)
				if !slices.Equal(sorted, ns) {
					t.Fatalf("%s, %+v: got n %v, want %v", when, q, got, ns)
				}
			}
		}
		total, err := s.CountSubmissions(ctx, storetest.AccountA, "blocks", formsapi.Query{Limit: 1, Search: "needle"}, true)
		is.NoErr(err)
		is.Equal(total, formsapi.Total{Value: int64(len(ns)), Kind: find.Exact})
	}
	n := 0
	for ; n < 800; n++ {
		add(n)
		if n%200 == 199 {
			check(fmt.Sprintf("after %d writes", n+1))
		}
	}
	blocks, _ := checkBlocks(t, s)
	is.True(blocks > 0)
	// Late commits went into blocks already folded: some block of the
	// needle's keys holds entries of writes far apart in seq.
	var spread int64
	is.NoErr(pool.QueryRow(ctx, `SELECT max(s) FROM (SELECT (SELECT max(x) - min(x) FROM unnest(seqs) x) AS s FROM `+tbl+`formsapi_find_blocks) b`).Scan(&spread))
	is.True(spread > 256)

	// A host's update of find_keys: rows that lose the needle (their
	// data changed with their keys), and rows that gain it.
	for _, m := range []int{8, 400, 796} {
		data := fmt.Sprintf(`{"n":%d,"a":"plain again"}`, m)
		keys := find.IndexKeys([]byte(data), nil)
		_, err := pool.Exec(ctx, `UPDATE `+tbl+`formsapi_submissions SET data = $1, find_keys = $2 WHERE host_id = $3`, data, keys, strconv.Itoa(m))
		is.NoErr(err)
		delete(want, m)
	}
	for _, m := range []int{1, 401, 799} {
		data := fmt.Sprintf(`{"n":%d,"a":"needle now"}`, m)
		keys := find.IndexKeys([]byte(data), nil)
		_, err := pool.Exec(ctx, `UPDATE `+tbl+`formsapi_submissions SET data = $1, find_keys = $2 WHERE host_id = $3`, data, keys, strconv.Itoa(m))
		is.NoErr(err)
		want[m] = true
	}
	// A host's find_keys that lists a key twice: its entry is folded once.
	_, err := pool.Exec(ctx, `UPDATE `+tbl+`formsapi_submissions SET find_keys = find_keys || find_keys WHERE host_id = '12'`)
	is.NoErr(err)
	check("after the host's updates")

	// Deletions oldest first (a retention purge), by the store and by a
	// host's statement of many rows.
	var oldest []string
	rows, err := pool.Query(ctx, `SELECT host_id FROM `+tbl+`formsapi_submissions ORDER BY created_at, seq LIMIT 300`)
	is.NoErr(err)
	for rows.Next() {
		var id string
		is.NoErr(rows.Scan(&id))
		oldest = append(oldest, id)
	}
	is.NoErr(rows.Err())
	for i, id := range oldest[:100] {
		is.NoErr(s.DeleteSubmission(ctx, storetest.AccountA, "blocks", id))
		m, _ := strconv.Atoi(id)
		delete(want, m)
		if i%50 == 49 {
			check(fmt.Sprintf("after %d deletions", i+1))
		}
	}
	_, err = pool.Exec(ctx, `DELETE FROM `+tbl+`formsapi_submissions WHERE host_id = ANY ($1)`, oldest[100:])
	is.NoErr(err)
	for _, id := range oldest[100:] {
		m, _ := strconv.Atoi(id)
		delete(want, m)
	}
	check("after a host's deletion of 200 rows")
	for ; n < 1100; n++ {
		add(n)
	}
	check("after more writes")

	// Every row deleted: no block is left.
	_, err = pool.Exec(ctx, `DELETE FROM `+tbl+`formsapi_submissions`)
	is.NoErr(err)
	blocks, tail := checkBlocks(t, s)
	is.Equal([]int{blocks, tail}, []int{0, 0})
	clear(want)
	for ; n < 1400; n++ {
		add(n)
	}
	check("written again")
	_, err = pool.Exec(ctx, `TRUNCATE `+tbl+`formsapi_submissions CASCADE`)
	is.NoErr(err)
	blocks, tail = checkBlocks(t, s)
	is.Equal([]int{blocks, tail}, []int{0, 0})
}

// TestSearchBlocksMigration: migration 0035 over a schema whose trigram
// entries are in formsapi_find (as 0034 left every schema), some rows in
// the tail, and again over itself: the entries become blocks (56 to a
// block, in order), formsapi_find keeps the filters' entries only, the
// tail stays, and searches find what they found before, and the writes
// after it.
func TestSearchBlocksMigration(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s := mustOpenIn(t, dsn, schema, pgstore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "old"}))
	var all []int
	add := func(st *pgstore.Store, n int) {
		t.Helper()
		is.NoErr(st.AddSubmission(ctx, formsapi.Submission{FormID: "old", Data: []byte(fmt.Sprintf(`{"n":%d,"a":"Needle %d"}`, n, n)), CreatedAt: time.Unix(0, int64(n))}, formsapi.Metadata{}))
		all = append(all, n)
	}
	for n := range 300 {
		add(s, n)
	}
	s.Close()
	tbl := quote(schema) + "."
	// As 0034 left it: the blocks' entries in formsapi_find, the table
	// gone, 0035 not applied.
	pgtest.Exec(t, dsn, `INSERT INTO `+tbl+`formsapi_find (form_seq, key, created_at, seq)
SELECT b.form_seq, b.key, u.at, u.seq FROM `+tbl+`formsapi_find_blocks b, unnest(b.ats, b.seqs) u (at, seq);
DROP TABLE `+tbl+`formsapi_find_blocks; DELETE FROM `+tbl+`formsapi_migrations WHERE version >= 35`)
	var entries, tail int
	// A connection of its own: a store opened on another schema (this
	// used "public") migrates that schema, which a run of a branch with a
	// newer migration then leaves too new for every other checkout.
	conn, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+tbl+`formsapi_find WHERE key < 0), (SELECT count(*) FROM `+tbl+`formsapi_find_tail)`).Scan(&entries, &tail)
	is.NoErr(err)
	is.True(entries > 0 && tail > 0) // entries and tail rows, before
	search := formsapi.Query{Limit: 7, Order: formsapi.Oldest, Search: "needle"}
	for range 2 { // and again over itself
		again := mustOpenIn(t, dsn, schema)
		blocks, tailAfter := checkBlocks(t, again)
		is.Equal(tailAfter, tail)
		is.True(blocks > 0)
		is.Equal(walkAll(t, again, "old", search), all)
		add(again, len(all))
		tail++
		is.Equal(walkAll(t, again, "old", search), all)
		again.Close()
		pgtest.Exec(t, dsn, `DELETE FROM `+tbl+`formsapi_migrations WHERE version >= 35`)
	}
}

// TestSearchBlocksConcurrent: writers (whose writes fold the tail) and
// deleters (whose deletions take entries out of the blocks the folds
// write) at once, on two forms: afterwards the blocks are exactly the
// rows' (checkBlocks: no entry a fold wrote lost by a deletion that read
// its block before, none of a deleted row left), and a search finds
// every match left.
func TestSearchBlocksConcurrent(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t, pgstore.WithSearchIndex())
	forms := []string{"c1", "c2"}
	for _, f := range forms {
		is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: f}))
	}
	// Rows written before, which the deleters take out newest first: the
	// entries of the keys' last blocks, which the writers' folds append to.
	const before = 1000
	ids := make(chan string, before)
	var old []string
	for i := range before {
		id := fmt.Sprintf("old-%d", i)
		data := fmt.Sprintf(`{"i":%d,"a":"needle before"}`, i)
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: forms[i%2], Data: []byte(data)}, formsapi.Metadata{ID: id}))
		if i%3 == 0 {
			old = append(old, forms[i%2]+" "+id)
		}
	}
	for _, x := range slices.Backward(old) {
		ids <- x
	}
	const writers, each = 4, 200
	errs := make(chan error, writers+2)
	done := make(chan struct{})
	var wg, dg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("%d-%d", w, i)
				data := fmt.Sprintf(`{"w":%d,"i":%d,"a":"needle and thread"}`, w, i)
				if err := s.AddSubmission(ctx, formsapi.Submission{FormID: forms[w%2], Data: []byte(data)}, formsapi.Metadata{ID: id}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 2 {
		dg.Add(1)
		go func() {
			defer dg.Done()
			for {
				select {
				case x := <-ids:
					f, id, _ := strings.Cut(x, " ")
					if err := s.DeleteSubmission(ctx, storetest.AccountA, f, id); err != nil {
						errs <- err
						return
					}
				case <-done:
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	dg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	blocks, _ := checkBlocks(t, s)
	is.True(blocks > 0)
	var left int
	is.NoErr(pgstore.Pool(s).QueryRow(ctx, `SELECT count(*) FROM `+quote(s.Schema())+`.formsapi_submissions`).Scan(&left))
	found := 0
	for _, f := range forms {
		got := walkAll2(t, s, f, formsapi.Query{Search: "needle", Limit: 100})
		if len(got) != len(slices.Compact(slices.Sorted(slices.Values(got)))) {
			t.Fatalf("form %s: a match found twice", f)
		}
		found += len(got)
	}
	is.Equal(found, left)
}

// walkAll2 walks every page of q of form and returns its items' data.
func walkAll2(t *testing.T, s formsapi.Store, form string, q formsapi.Query) []string {
	t.Helper()
	var got []string
	for {
		p, err := s.ListSubmissions(ctx, storetest.AccountA, form, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, sub := range p.Items {
			got = append(got, string(sub.Data))
		}
		if p.NextCursor == "" {
			return got
		}
		q.Cursor = p.NextCursor
	}
}

// TestSearchBlocksDeleteWaitsForFold: a deletion whose row's entries are
// in the blocks a fold not yet committed is appending to waits for the
// fold's lock (migration 0035), then reads the blocks as the fold left
// them: without the lock it read them before the fold, waited for the
// blocks' row locks, and wrote its lists over the fold's, losing the
// fold's entries (a search then missed their submissions).
func TestSearchBlocksDeleteWaitsForFold(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s := mustOpenIn(t, dsn, schema, pgstore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "race"}))
	pool := pgstore.Pool(s)
	fold := func(tx interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}) {
		t.Helper()
		_, err := tx.Exec(ctx, `SET LOCAL search_path TO `+quote(schema)+`; SELECT pg_advisory_xact_lock(formsapi_fold_lock()); SELECT formsapi_fold_tail()`)
		is.NoErr(err)
	}
	add := func(i int) {
		t.Helper()
		data := fmt.Sprintf(`{"i":%d,"a":"needle"}`, i)
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "race", Data: []byte(data)}, formsapi.Metadata{ID: strconv.Itoa(i)}))
	}
	for i := range 20 {
		add(i)
	}
	tx, err := pool.Begin(ctx)
	is.NoErr(err)
	fold(tx)
	is.NoErr(tx.Commit(ctx))
	for i := 20; i < 30; i++ {
		add(i) // in the tail
	}
	tx, err = pool.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	fold(tx) // appends rows 20 to 29 to the blocks rows 0 to 19 are in
	deleted := make(chan error, 1)
	go func() { deleted <- s.DeleteSubmission(ctx, storetest.AccountA, "race", "19") }()
	pgtest.WaitForLock(t, dsn, "query LIKE '%' || $1 || '%' AND query LIKE 'DELETE%'", schema)
	is.NoErr(tx.Commit(ctx))
	is.NoErr(<-deleted)
	checkBlocks(t, s)
	is.Equal(len(walkAll2(t, s, "race", formsapi.Query{Search: "needle", Limit: 100})), 29)
}
