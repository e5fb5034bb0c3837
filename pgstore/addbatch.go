package pgstore

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/stored"
)

var _ formsapi.BatchWriter = (*Store)(nil)

// pipelined is how many of a batch's inserts go to PostgreSQL in one
// round trip (a pgx.Batch): enough that the round trips cost little
// beside the inserts, few enough that one pipeline's arguments stay a
// few megabytes at most.
const pipelined = 256

// AddSubmissions stores every submission batch yields, with its
// metadata, in one transaction, as that many AddSubmission calls would:
// the same statement for each, so the same rows, index entries, feed
// positions and fields, but one commit for the batch, and the statements
// sent in pipelines rather than one round trip each. A read, on any node,
// sees none of the batch or all of it.
//
// Every submission is checked against the store's limits before the
// transaction begins, so batch is iterated once and held in memory. If
// a submission is refused, nothing of the batch is written, and the
// error names it (its index in the batch, from 0) and wraps what
// AddSubmission would have returned: formsapi.ErrFormNotFound, or
// formsapi.ErrInvalidInput naming the field (a metadata ID the form has,
// or an earlier submission of the batch gave it, among others). So does
// a ctx that ends before the commit.
//
// The transaction runs at read committed whatever the database's
// default, and holds the row lock of each form it writes to until it
// commits: other writers to those forms wait for it, writers to other
// forms do not. Two batches that lock the same forms in different orders
// may deadlock; PostgreSQL aborts one, and the store runs it again (as
// it does a single write a conflict aborted).
func (s *Store) AddSubmissions(ctx context.Context, batch iter.Seq2[formsapi.Submission, formsapi.Metadata]) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: add submissions: %w", err)
	}
	var rs []newSubmission
	for sub, m := range batch {
		r, err := s.prepareSubmission(sub, m)
		if err != nil {
			return fmt.Errorf("pgstore: add submissions: %w", &stored.ItemError{Item: len(rs), Err: err})
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: add submissions: %w", err)
	}
	for n := 1; ; n++ {
		on := s.searchOn.Load()
		retry, err := s.addBatch(ctx, rs, on)
		switch {
		case err == nil && !retry:
			return nil
		case err == nil: // the search index was turned on since this store last looked
			s.searchOn.Store(true)
			continue
		case n < conflictAttempts && conflict(err) && backoff(ctx, n) == nil:
			continue
		}
		return fmt.Errorf("pgstore: add submissions: %w", withCtx(ctx, err))
	}
}

// addBatch writes rs in one transaction at read committed, with
// search's trigram keys when on, and reports whether it must be made
// again with on true: when an insert wrote nothing because the search
// index is on while on is false. Once an insert finds the index off, it
// stays off until the transaction ends (formsapi_search_indexed holds
// the search lock shared), so that can only happen to the first insert
// of a transaction; any other insert that writes nothing has no form.
func (s *Store) addBatch(ctx context.Context, rs []newSubmission, on bool) (retry bool, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		for start := 0; start < len(rs); start += pipelined {
			chunk := rs[start:min(start+pipelined, len(rs))]
			b := &pgx.Batch{}
			for i := range chunk {
				b.Queue(s.sql.addSubmission, chunk[i].args(on)...)
			}
			br := tx.SendBatch(ctx, b)
			for i := range chunk {
				r, item := &chunk[i], start+i
				tag, err := br.Exec()
				if err == nil && tag.RowsAffected() == 0 && !on {
					// The pipeline's later statements fail once the transaction is aborted; close it first.
					if err = br.Close(); err == nil {
						err = tx.QueryRow(ctx, s.sql.searchIndexed).Scan(&retry)
					}
					if err == nil && retry {
						return errRetry
					}
				}
				switch {
				case err != nil && (ctx.Err() != nil || conflict(err)):
					br.Close()
					return withCtx(ctx, err)
				case err != nil:
					br.Close()
					return &stored.ItemError{Item: item, Form: r.FormID, Err: r.insertError(ctx, err)}
				case tag.RowsAffected() == 0:
					br.Close()
					return &stored.ItemError{Item: item, Form: r.FormID, Err: formsapi.ErrFormNotFound}
				}
			}
			if err := br.Close(); err != nil {
				return withCtx(ctx, err)
			}
		}
		return ctx.Err()
	})
	if errors.Is(err, errRetry) {
		return true, nil
	}
	return false, err
}

// errRetry rolls back a batch's transaction that is to be made again.
var errRetry = errors.New("pgstore: the search index was turned on")
