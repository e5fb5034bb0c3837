package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"iter"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/stored"
)

var _ formsapi.BatchWriter = (*Store)(nil)

// AddSubmissions stores every submission batch yields, with its
// metadata, in one transaction, as that many AddSubmission calls would:
// the same rows, index entries, feed positions and fields, but one commit
// (one sync of the write-ahead log) for the batch, and the insert
// statement prepared once. A read sees none of the batch or all of it.
//
// If a submission is refused, nothing of the batch is written, and the
// error names it (its index in the batch, from 0) and wraps what
// AddSubmission would have returned: formsapi.ErrFormNotFound, or
// formsapi.ErrInvalidInput naming the field (a metadata ID the form has,
// or an earlier submission of the batch gave it, among others). So does
// a ctx that ends before the commit.
//
// The batch is one write transaction from its first submission to its
// commit, iteration of batch included: every other write of the file
// (this store's, the host's, other processes') waits for it, and a
// write that waits longer than its busy_timeout fails. Batches of a few
// thousand submissions take milliseconds to a few hundred of them
// (BENCHMARKS.md).
func (s *Store) AddSubmissions(ctx context.Context, batch iter.Seq2[formsapi.Submission, formsapi.Metadata]) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: add submissions: %w", err)
	}
	forms := map[string]bool{} // the forms written, whose waiters to wake
	ch := s.keys.change()
	err := s.addBatch(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		for sub, m := range batch {
			if !forms[sub.FormID] {
				forms[sub.FormID] = true
				ch.form(sub.FormID) // in the transaction, before the commit: see keyCopy
			}
			if !yield(sub, m) {
				return
			}
		}
	})
	ch.end()
	if err != nil {
		return fmt.Errorf("sqlitestore: add submissions: %w", err)
	}
	for id := range forms {
		s.wait.WakeForm(id)
	}
	return nil
}

// addBatch writes batch in a BEGIN IMMEDIATE transaction on one
// connection, whatever the handle's DSN says (see deleting): the search
// setting is read in it and cannot change before it commits, so every
// submission is written with the trigram keys the setting asks for, and
// an insert that writes nothing means the form is not stored.
func (s *Store) addBatch(ctx context.Context, batch iter.Seq2[formsapi.Submission, formsapi.Metadata]) error {
	return s.immediate(ctx, func(conn *sql.Conn) error { return s.addBatchIn(ctx, conn, batch) })
}

// addBatchIn is addBatch in its transaction on conn.
func (s *Store) addBatchIn(ctx context.Context, conn *sql.Conn, batch iter.Seq2[formsapi.Submission, formsapi.Metadata]) error {
	var on bool
	if err := conn.QueryRowContext(ctx, sqlSearchIndexed).Scan(&on); err != nil {
		return fmt.Errorf("search index setting: %w", err)
	}
	if on {
		s.searchOn.Store(true)
	}
	var sorted bool
	if err := conn.QueryRowContext(ctx, sqlSortIndexed).Scan(&sorted); err != nil {
		return fmt.Errorf("sort index setting: %w", err)
	}
	if sorted {
		s.sortOn.Store(true)
	}
	insert, err := conn.PrepareContext(ctx, sqlAddSubmission)
	if err != nil {
		return err
	}
	defer insert.Close()
	i := 0
	touched := map[string]struct{}{} // forms written since their tails were checked
	for sub, m := range batch {
		r, err := s.prepareSubmission(sub, m)
		if err != nil {
			return &stored.ItemError{Item: i, Err: err}
		}
		res, err := insert.ExecContext(ctx, r.args(on, sorted)...)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return &stored.ItemError{Item: i, Form: r.FormID, Err: r.insertError(err)}
		case n == 0:
			return &stored.ItemError{Item: i, Form: r.FormID, Err: formsapi.ErrFormNotFound}
		}
		i++
		// A form's tail is folded once it holds foldAt rows, as single
		// writes fold it (foldIfFull), checked every foldAt rows and at
		// the end.
		touched[r.FormID] = struct{}{}
		if int64(i)%s.foldAt == 0 {
			if err := foldFull(ctx, conn, touched, s.foldAt); err != nil {
				return err
			}
			clear(touched)
		}
	}
	if len(touched) > 0 {
		if err := foldFull(ctx, conn, touched, s.foldAt); err != nil {
			return err
		}
	}
	return ctx.Err()
}
