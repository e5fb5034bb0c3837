package pgstore_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// checkSearchAll fails t unless a search for "needle" in form finds the
// submissions numbered want (their data's n), each once, both ways a
// page of 9 at a time, and counts them exactly.
func checkSearchAll(t *testing.T, s *pgstore.Store, form string, want []int) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	for _, o := range []formsapi.Order{formsapi.Oldest, formsapi.Newest} {
		got := walkAll(t, s, form, formsapi.Query{Search: "needle", Limit: 9, Order: o})
		if slices.Sort(got); !slices.Equal(got, want) {
			t.Fatalf("order %v: found %d submissions %v, want %d", o, len(got), got, len(want))
		}
	}
	total, err := s.CountSubmissions(ctx, storetest.AccountA, form, formsapi.Query{Limit: 1, Search: "needle"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if total != (formsapi.Total{Value: int64(len(want)), Kind: find.Exact}) {
		t.Fatalf("total %+v, want %d exactly", total, len(want))
	}
}

// TestSearchBlocksLateChunkNamedAsBlock: a fold whose late entries (all
// before a key's first block) number exactly a block's 56, so that the
// merged list's second chunk starts with the block's first entry and
// takes its name while the first chunk renames the block (migration
// 0037): every write succeeds, the write whose fold it is included, and
// the blocks and searches hold every submission. Before 0037 the fold
// inserted that chunk before deleting the block, failed with a unique
// violation, and failed the store's write (as invalid input) every time
// its seq came to a multiple of 256.
func TestSearchBlocksLateChunkNamedAsBlock(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t, pgstore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "late"}))
	tbl := quote(s.Schema()) + "."
	pool := pgstore.Pool(s)
	base := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	var all []int
	add := func(at time.Time) {
		t.Helper()
		n := len(all)
		// One text for all, so that every trigram has every row.
		data := fmt.Sprintf(`{"n":%d,"a":"needle"}`, n)
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: "late", Data: []byte(data), CreatedAt: at}, formsapi.Metadata{}); err != nil {
			t.Fatalf("write %d: %v", n, err)
		}
		all = append(all, n)
	}
	tail := func() (n int) {
		t.Helper()
		is.NoErr(pool.QueryRow(ctx, `SELECT count(*) FROM `+tbl+`formsapi_find_tail`).Scan(&n))
		return n
	}
	// 56 rows folded into each trigram's one, full block (the host's fold,
	// as a write whose seq is a multiple of 256 folds).
	for i := range 56 {
		add(base.Add(time.Duration(i) * time.Second))
	}
	tx, err := pool.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `SET LOCAL search_path TO `+quote(s.Schema())+`; SELECT pg_advisory_xact_lock(formsapi_fold_lock()); SELECT formsapi_fold_tail()`)
	is.NoErr(err)
	is.NoErr(tx.Commit(ctx))
	is.Equal(tail(), 0)
	blocks, _ := checkBlocks(t, s)
	is.True(blocks > 0)
	// 56 late rows, before every folded entry, then later ones until the
	// store's own write folds them all.
	for i := range 56 {
		add(base.Add(-time.Hour + time.Duration(i)*time.Second))
	}
	for i := 0; tail() > 0; i++ {
		if i == 600 {
			t.Fatal("no write folded the tail in 600 writes")
		}
		add(base.Add(time.Minute + time.Duration(i)*time.Second))
	}
	checkBlocks(t, s)
	checkSearchAll(t, s, "late", all)
}

// TestSearchIndexBuildLateRows: turning the search index on over rows
// whose created_at goes back as their seq grows (an import, newest
// first), 2,056 of them: the build folds 2,000 rows, then 56 that all
// come before every folded entry (TestSearchBlocksLateChunkNamedAsBlock's
// case). Before migration 0037 that fold failed, and so did Open: the
// index could not be turned on.
func TestSearchIndexBuildLateRows(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s := mustOpenIn(t, dsn, schema)
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "import"}))
	base := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	const rows = 2056
	var all []int
	for start := 0; start < rows; start += 500 {
		var order []formsapi.Submission
		for n := start; n < min(start+500, rows); n++ {
			sub := formsapi.Submission{FormID: "import", Data: []byte(`{"n":` + strconv.Itoa(n) + `,"a":"needle"}`), CreatedAt: base.Add(-time.Duration(n) * time.Second)}
			order = append(order, sub)
			all = append(all, n)
		}
		is.NoErr(s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
			for _, sub := range order {
				if !yield(sub, formsapi.Metadata{}) {
					return
				}
			}
		}))
	}
	s.Close()
	on := mustOpenIn(t, dsn, schema, pgstore.WithSearchIndex())
	checkBlocks(t, on)
	checkSearchAll(t, on, "import", all)
}
