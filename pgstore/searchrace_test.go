package pgstore_test

import (
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/internal/testenv"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/jackc/pgx/v5"
)

// turnOn opens a store on schema with WithSearchIndex in a goroutine: the
// channel gives Open's error once it returns, and the store is closed
// when the test ends.
func turnOn(t *testing.T, dsn, schema string) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	opened := make(chan *pgstore.Store, 1)
	go func() {
		s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema), pgstore.WithSearchIndex())
		opened <- s
		done <- err
	}()
	t.Cleanup(func() {
		if s := <-opened; s != nil {
			s.Close()
		}
	})
	return done
}

// searchLockAwaited reports whether a session waits for schema's search
// lock (formsapi_search_lock()), shared or exclusive.
func searchLockAwaited(t *testing.T, s *pgstore.Store) bool {
	t.Helper()
	var n int
	err := pgstore.Pool(s).QueryRow(ctx, `SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
AND ((classid::bigint << 32) | objid::bigint) = `+quote(s.Schema())+`.formsapi_search_lock()`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// findEntries counts the index entries of the submission seq: all of
// them, and the trigram ones, with those its row in the unfolded tail
// (migration 0023) has once folded.
func findEntries(t *testing.T, s *pgstore.Store, seq int64) (all, trigram int) {
	t.Helper()
	schema := quote(s.Schema())
	err := pgstore.Pool(s).QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE key < 0) FROM (
    SELECT key FROM `+indexEntries(schema+".")+` i WHERE seq = $1
    UNION ALL
    SELECT k FROM `+schema+`.formsapi_find_tail t JOIN `+schema+`.formsapi_submissions s ON s.seq = t.seq, unnest(s.find_keys) k
    WHERE t.seq = $1 AND k < 0
) e`, seq).Scan(&all, &trigram)
	if err != nil {
		t.Fatal(err)
	}
	return all, trigram
}

// TestSearchIndexTurnedOnWhileStrictWriteWaits: with the database's
// default isolation at repeatable read or serializable (as a host's DSN
// or role may set it, and AddSubmission's first try runs at it), a write
// that starts while another node turns the index on, before it commits,
// has a snapshot in which the setting is off, and keeps it after the
// turning on commits: the re-read under the search lock, which read
// committed answers from a fresh snapshot, answered off again and the
// row's trigrams were lost (the turning on's copy did not see the row
// either), so q never found it. The turning on is held inside its
// transaction, after it took the lock, by a stored row another
// transaction holds locked: the turning on computes its trigrams and
// sets its find_keys, the writers having left them out while the index
// was off.
func TestSearchIndexTurnedOnWhileStrictWriteWaits(t *testing.T) {
	t.Parallel()
	for _, level := range strictLevels {
		t.Run(strings.ReplaceAll(level, " ", "_"), func(t *testing.T) {
			t.Parallel()
			dsn, schema := pgtest.Schema(t)
			w := load(t, openAt(t, dsn, schema, level), storetest.SearchSeed())
			tbl := quote(schema) + "."
			hold, err := pgstore.Pool(w).BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
			if err != nil {
				t.Fatal(err)
			}
			defer hold.Rollback(ctx)
			var holder int
			if err := hold.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&holder); err != nil {
				t.Fatal(err)
			}
			if _, err := hold.Exec(ctx, `SELECT 1 FROM `+tbl+`formsapi_submissions ORDER BY seq LIMIT 1 FOR UPDATE`); err != nil {
				t.Fatal(err)
			}
			on := turnOn(t, dsn, schema)
			testenv.WaitFor(t, func() bool { // the indexing waits for the held row
				var n int
				if err := pgstore.Pool(w).QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted AND $1 = ANY (pg_blocking_pids(pid))", holder).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n > 0
			})
			added := make(chan error, 1)
			go func() {
				added <- w.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSearch, Data: []byte(`{"n":"Qzqzq late"}`)}, formsapi.Metadata{ID: "late"})
			}()
			testenv.WaitFor(t, func() bool { return searchLockAwaited(t, w) }) // the write waits for the turning on
			if err := hold.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-on; err != nil {
				t.Fatal(err)
			}
			if err := <-added; err != nil {
				t.Fatal(err)
			}
			p, err := w.ListSubmissions(ctx, storetest.AccountA, storetest.FormSearch, formsapi.Query{Limit: 10, Search: "qzqzq"})
			if err != nil || len(p.Items) != 1 {
				t.Fatalf("q qzqzq after the turning on: %d items, %v; want the submission written meanwhile", len(p.Items), err)
			}
		})
	}
}

// TestSearchIndexTurnedOnWhileDeleteWaits: a submission deleted by a
// transaction that has not committed when another node turns the index
// on is still a row to the turning on's copy, which indexes its
// trigrams; the delete's trigger, which took no lock, had already
// removed the row's entries, so those the copy added stayed, pointing
// at nothing, for good. The delete now holds the search lock shared, as
// writes do, so the turning on waits for it and copies without the row.
func TestSearchIndexTurnedOnWhileDeleteWaits(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
	s := load(t, mustOpenIn(t, dsn, schema), storetest.SearchSeed())
	tbl := quote(schema) + "."
	var seq int64
	if err := pgstore.Pool(s).QueryRow(ctx, `SELECT s.seq FROM `+tbl+`formsapi_submissions s JOIN `+tbl+`formsapi_forms f ON f.seq = s.form_seq
WHERE f.id = $1 ORDER BY s.seq LIMIT 1`, storetest.FormSearch).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	del, err := pgstore.Pool(s).BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer del.Rollback(ctx)
	if _, err := del.Exec(ctx, `DELETE FROM `+tbl+`formsapi_submissions WHERE seq = $1`, seq); err != nil {
		t.Fatal(err)
	}
	on := turnOn(t, dsn, schema)
	var early error
	returned := false
	testenv.WaitFor(t, func() bool { // the turning on waits for the delete, or (before) did not
		select {
		case early = <-on:
			returned = true
			return true
		default:
			return searchLockAwaited(t, s)
		}
	})
	if err := del.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !returned {
		early = <-on
	}
	if early != nil {
		t.Fatal(early)
	}
	if all, tri := findEntries(t, s, seq); all != 0 {
		t.Fatalf("the deleted submission has %d index entries (%d trigrams) after the turning on, want none", all, tri)
	}
	if n := trigrams(t, s); n == 0 {
		t.Fatal("no trigram indexed by the turning on")
	}
}
