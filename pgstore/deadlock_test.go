package pgstore_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
)

// TestFormListsInOppositeOrders runs the deadlock that migration 0009
// made possible: two transactions, on a host's own connections, each
// change a form of account a and one of account b, in opposite orders
// (tx1 renames a1 then b1, tx2 renames b2 then a2). Under 0009 each
// rename wrote its account's forms list row at once, so tx1 waited for
// tx2's row of b while tx2 waited for tx1's row of a, and PostgreSQL
// aborted one with 40P01. Since 0014 the rows are written when each
// transaction commits, all of its accounts in one statement in account
// order: the renames wait for nothing, and two commits that meet (held
// at the row of a by a third transaction until both wait there) take
// the rows one after the other. Both commit, and each account's list
// gets a new version.
func TestFormListsInOppositeOrders(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pooledSchema(t)
	s := mustOpenIn(t, dsn, schema)
	for _, f := range []struct{ account, id string }{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"b", "b2"}} {
		is.NoErr(s.AddForm(ctx, f.account, formsapi.Form{ID: f.id, Title: f.id}))
	}
	q := quote(schema)
	versions := func() map[string]int64 {
		t.Helper()
		rows, err := pgx.Connect(ctx, dsn)
		is.NoErr(err)
		defer rows.Close(ctx)
		out := map[string]int64{}
		r, err := rows.Query(ctx, "SELECT account_id, version FROM "+q+".formsapi_form_lists")
		is.NoErr(err)
		for r.Next() {
			var a string
			var v int64
			is.NoErr(r.Scan(&a, &v))
			out[a] = v
		}
		is.NoErr(r.Err())
		return out
	}
	before := versions()

	conn := func() (*pgx.Conn, pgx.Tx, int32) {
		t.Helper()
		c, err := pgx.Connect(ctx, dsn)
		is.NoErr(err)
		t.Cleanup(func() { c.Close(ctx) })
		var pid int32
		is.NoErr(c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
		tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		is.NoErr(err)
		t.Cleanup(func() { tx.Rollback(ctx) })
		return c, tx, pid
	}
	_, tx1, pid1 := conn()
	_, tx2, pid2 := conn()
	rename := func(tx pgx.Tx, id string) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := tx.Exec(ctx, "UPDATE "+q+".formsapi_forms SET title = title || ' renamed' WHERE id = $1", id)
			done <- err
		}()
		return done
	}
	is.NoErr(<-rename(tx1, "a1"))
	is.NoErr(<-rename(tx2, "b2"))
	// Under 0009 the next rename waits for tx2, and the one after it
	// closes the cycle: one of them fails with 40P01 once PostgreSQL's
	// deadlock_timeout has passed. Both run at once, so neither blocks
	// the test's goroutine.
	b1, a2 := rename(tx1, "b1"), rename(tx2, "a2")
	is.NoErr(<-b1) // tx1's rename of b1, while tx2 holds b2
	is.NoErr(<-a2) // tx2's rename of a2, while tx1 holds a1

	// The commits meet: a third transaction holds account a's row, so
	// both commits, which write a's row first, wait for it; then it ends.
	_, holder, _ := conn()
	var v int64
	is.NoErr(holder.QueryRow(ctx, "SELECT version FROM "+q+".formsapi_form_lists WHERE account_id = 'a' FOR UPDATE").Scan(&v))
	commit := func(tx pgx.Tx) chan error {
		done := make(chan error, 1)
		go func() { done <- tx.Commit(ctx) }()
		return done
	}
	c1, c2 := commit(tx1), commit(tx2)
	pgtest.WaitForLock(t, dsn, "pid = $1", pid1)
	pgtest.WaitForLock(t, dsn, "pid = $1", pid2)
	is.NoErr(holder.Commit(ctx))
	is.NoErr(<-c1) // tx1 commits
	is.NoErr(<-c2) // tx2 commits

	var renamed int
	is.NoErr(pgstore.Pool(s).QueryRow(ctx, "SELECT count(*) FROM "+q+".formsapi_forms WHERE title LIKE '% renamed'").Scan(&renamed))
	is.Equal(renamed, 4) // every rename of both transactions
	after := versions()
	is.True(after["a"] != before["a"]) // account a's list has a new version
	is.True(after["b"] != before["b"]) // and so has b's
}
