package pgstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A host may make repeatable read or serializable its database's default
// isolation (default_transaction_isolation on the role, the database or
// in the DSN). PostgreSQL then aborts a transaction that conflicts with a
// concurrent one instead of letting it wait and go on, as read committed
// does, and expects the client to run it again: writers to one form queue
// on the form's row lock (see AddSubmission), and each the lock lets
// through finds the row changed since its snapshot. The store retries
// such aborts, a bounded number of times with a short jittered backoff.

// conflictAttempts bounds how many times a statement aborted by a
// conflict is run in all.
const conflictAttempts = 5

// conflictBackoff is the first retry's largest wait; each further retry
// may wait twice as long as the one before.
const conflictBackoff = 2 * time.Millisecond

// conflict reports whether err is PostgreSQL aborting a transaction for
// the sake of a concurrent one: 40001 (serialization_failure) or 40P01
// (deadlock_detected). Either way the server rolled the whole transaction
// back, so running it again cannot apply anything twice.
func conflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// backoff waits before the n-th retry (n from 1) a random time below
// conflictBackoff<<(n-1), so that transactions that collided do not
// collide again in step. It returns ctx's error if ctx ends first.
func backoff(ctx context.Context, n int) error {
	t := time.NewTimer(rand.N(conflictBackoff << (n - 1)))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// exec runs the write statement sql, retrying it when a conflict aborted
// it. The first try runs as one statement on the pool, at the database's
// default isolation: the common case, one round trip. A retry runs it in
// a transaction at read committed: every write of the store is one
// statement, and the one order they keep across transactions, the feed's
// (see AddSubmission), comes from a row lock, which read committed waits
// for and then re-reads rather than aborting. So a retried write does not
// lose to the next writer again, however many write to the form.
func (s *Store) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return s.execAt(ctx, false, sql, args...)
}

// execAt is exec, its first try at read committed too when committed
// says so (see execCommitted).
func (s *Store) execAt(ctx context.Context, committed bool, sql string, args ...any) (tag pgconn.CommandTag, err error) {
	if committed {
		tag, err = s.execCommitted(ctx, sql, args...)
	} else {
		tag, err = s.pool.Exec(ctx, sql, args...)
	}
	for n := 1; n < conflictAttempts && conflict(err); n++ {
		if backoff(ctx, n) != nil {
			break // the caller reports the conflict, with ctx's error
		}
		tag, err = s.execCommitted(ctx, sql, args...)
	}
	return tag, err
}

// execCommitted runs the write statement sql in a transaction at read
// committed: execAt's retries, and AddSubmission's first try when the
// database's default isolation is stricter (strictDefault) and the search
// index is on. The index's fold, which the insert whose turn it is runs,
// runs at read committed only (migration 0035): at a stricter default,
// no single write folded, and a form's unfolded tail grew with every
// write, each search walking it whole (TestSearchTailFoldsAtStrictIsolation).
// It costs two more round trips, BEGIN and COMMIT.
func (s *Store) execCommitted(ctx context.Context, sql string, args ...any) (tag pgconn.CommandTag, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var err error
		tag, err = tx.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

// writeRow is exec for a write statement that returns one row, scanned
// into dest, on conn: the rate limiter's upsert.
func writeRow(ctx context.Context, conn *pgxpool.Conn, sql string, args []any, dest ...any) error {
	err := conn.QueryRow(ctx, sql, args...).Scan(dest...)
	for n := 1; n < conflictAttempts && conflict(err); n++ {
		if backoff(ctx, n) != nil {
			break
		}
		err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, sql, args...).Scan(dest...)
		})
	}
	return err
}
