package pgstore

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/internal/wire"
)

var _ formsapi.BatchWriter = (*Store)(nil)

// pipelined is how many of a batch's inserts go to PostgreSQL in one
// round trip (a pgx.Batch): enough that the round trips cost little
// beside the inserts, few enough that one pipeline's arguments stay a
// few megabytes at most.
const pipelined = 256

// AddSubmissions stores every submission batch yields, with its
// metadata, in one transaction, leaving the rows, index entries (the
// search index's unfolded tail among them), feed positions, fields and
// forms' bases that that many AddSubmission calls would, but with one
// commit for the batch. A read, on any node, sees none of the batch or
// all of it.
//
// The submissions go in statements of up to bulkRows each, in their
// order, several statements a round trip: each statement updates the
// row of each form it writes to once (feed_last moved by the form's
// count, one new version), not once a submission, so a batch leaves a
// form's row one dead version a statement rather than one a submission,
// and inserts the submissions with one statement's index maintenance
// (migration 0024). When a statement is refused, the batch is written
// again, the statements before it as they were and from it on in a
// statement a submission (AddSubmission's, pipelined), which finds the
// one to name.
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
	write := s.addBulk
	narrowed := false
	for n := 1; ; n++ {
		on := s.searchOn.Load()
		retry, err := write(ctx, rs, on)
		switch {
		case err == nil && !retry:
			for _, r := range rs {
				s.wait.WakeForm(r.FormID) // the same form twice wakes nothing more
			}
			return nil
		case err == nil: // an index was turned on since this store last looked (searchTurnedOn noted it)
			continue
		case errors.Is(err, errRefused):
			// A statement of many refused them: the batch again, one
			// statement a submission from that statement on (the
			// statements before it as they went), finds the one to name;
			// once narrowed, a second refusal (the statements before
			// refused too: a concurrent write) writes it all one at a
			// time.
			from := 0
			var at *refusedAt
			if errors.As(err, &at) && !narrowed {
				from = at.from
			}
			narrowed = true
			write = func(ctx context.Context, rs []newSubmission, on bool) (bool, error) {
				return s.addEach(ctx, rs, on, from)
			}
			n--
			continue
		case n < conflictAttempts && conflict(err) && backoff(ctx, n) == nil:
			continue
		}
		return fmt.Errorf("pgstore: add submissions: %w", withCtx(ctx, err))
	}
}

// bulkRows is how many submissions go in one statement of
// AddSubmissions (sqlAddSubmissions); bulkPipelined is how many
// statements go to PostgreSQL in one round trip (a pgx.Batch).
const (
	bulkRows      = 1000
	bulkPipelined = 4
)

// addBulk writes rs in one transaction at read committed, as addEach
// does, but in statements of up to bulkRows submissions each
// (sqlAddSubmissions), in their order: each form's row is updated once
// a statement, not once a submission. It returns a *refusedAt (errRefused)
// naming the statement, having written nothing, when a statement fails
// for a reason that is not a conflict or ctx's end, or finds a form
// missing: which submission to blame is addEach's to find.
func (s *Store) addBulk(ctx context.Context, rs []newSubmission, on bool) (retry bool, err error) {
	return s.batchTx(ctx, func(tx pgx.Tx) error { return s.bulkIn(ctx, tx, rs, on) })
}

// bulkIn writes rs in tx as addBulk says.
func (s *Store) bulkIn(ctx context.Context, tx pgx.Tx, rs []newSubmission, on bool) error {
	sorted := s.sortOn.Load()
	for start := 0; start < len(rs); start += bulkRows * bulkPipelined {
		b := &pgx.Batch{}
		var counts []int
		for from := start; from < min(start+bulkRows*bulkPipelined, len(rs)); from += bulkRows {
			chunk := rs[from:min(from+bulkRows, len(rs))]
			b.Queue(s.sql.addSubmissions, bulkArgs(chunk, on, sorted)...)
			counts = append(counts, len(chunk))
		}
		br := tx.SendBatch(ctx, b)
		for k, n := range counts {
			tag, err := br.Exec()
			if err == nil && tag.RowsAffected() == 0 && (!on || !sorted) {
				if err = s.searchTurnedOn(ctx, tx, br, on, sorted); errors.Is(err, errRetry) {
					return err
				}
			}
			switch {
			case err != nil && (ctx.Err() != nil || conflict(err)):
				br.Close()
				return withCtx(ctx, err)
			case err != nil || tag.RowsAffected() != int64(n):
				br.Close()
				return &refusedAt{from: start + k*bulkRows}
			}
		}
		if err := br.Close(); err != nil {
			return withCtx(ctx, err)
		}
	}
	return ctx.Err()
}

// errRefused rolls back a batch's transaction whose statement of many
// submissions was refused.
var errRefused = errors.New("pgstore: a statement of the batch was refused")

// refusedAt is errRefused for the statement of many whose first
// submission is rs[from]: the statements before it were accepted.
type refusedAt struct{ from int }

func (e *refusedAt) Error() string { return fmt.Sprintf("%v (from submission %d)", errRefused, e.from) }

func (e *refusedAt) Unwrap() error { return errRefused }

// bulkArgs returns sqlAddSubmissions's arguments for rs: those of args,
// one array a column, with search's trigram keys when the search index
// is on.
func bulkArgs(rs []newSubmission, on, sorted bool) []any {
	n := len(rs)
	var forms []string
	var counts []int64
	form := make(map[string]int32)
	formIdx, rank, at := make([]int32, n), make([]int64, n), make([]int64, n)
	data, attachments, hosts := make([]string, n), make([]string, n), make([]string, n)
	encoded, ips, agents, geos, traces := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	lo, hi := make([]int32, n), make([]int32, n)
	noKeys := make([]bool, n)
	keys := make([]int64, 0, 16*n) // never nil: every slice of a NULL array is NULL
	var names [][]byte
	var nameItems, nameOrds []int64
	sorts := make([][]byte, 0, 4*n) // never nil, as keys
	slo, shi := make([]int32, n), make([]int32, n)
	for j := range rs {
		r := &rs[j]
		f, ok := form[r.FormID]
		if !ok {
			forms, counts = append(forms, r.FormID), append(counts, 0)
			f = int32(len(forms))
			form[r.FormID] = f
		}
		counts[f-1]++
		formIdx[j], rank[j] = f, counts[f-1]
		at[j], data[j], attachments[j], hosts[j] = r.At, string(r.Data), string(r.Attachments), r.Meta.ID
		encoded[j], ips[j], agents[j], geos[j], traces[j] = r.Encoded, []byte(r.Meta.ClientIP), []byte(r.Meta.UserAgent), r.Geo, []byte(r.Meta.TraceID)
		k := find.Keys(r.Data)
		if on {
			k = find.IndexKeys(r.Data, r.URLs)
		}
		noKeys[j] = k == nil
		lo[j] = int32(len(keys) + 1)
		keys = append(keys, k...)
		hi[j] = int32(len(keys))
		slo[j] = int32(len(sorts) + 1)
		if sorted {
			sorts = append(sorts, sortKeys(r.Data)...)
		}
		shi[j] = int32(len(sorts))
		for o, name := range wire.FieldNames(r.Data) {
			names = append(names, []byte(name))
			nameItems = append(nameItems, int64(j+1))
			nameOrds = append(nameOrds, int64(o+1))
		}
	}
	return []any{forms, counts, int64(n), formIdx, rank, at, data, attachments, encoded, ips, agents, geos, traces, hosts,
		lo, hi, noKeys, int8ArrayText(keys), names, nameItems, nameOrds, on, stored.Version, sorts, slo, shi, sorted}
}

// addEach writes rs in one transaction at read committed: rs[:from] in
// statements of many (as addBulk, which accepted them), the rest one
// statement a submission (AddSubmission's, pipelined), so that the one
// refused is named; with search's trigram keys when on. It reports
// whether it must be made again with on true: when an insert wrote
// nothing because the search index is on while on is false. Once an
// insert finds the index off, it stays off until the transaction ends
// (formsapi_search_indexed holds the search lock shared), so that can
// only happen to the first insert of a transaction; any other insert
// that writes nothing has no form. The statements of many refused (a
// concurrent write since addBulk) is errRefused, without a place.
func (s *Store) addEach(ctx context.Context, rs []newSubmission, on bool, from int) (retry bool, err error) {
	return s.batchTx(ctx, func(tx pgx.Tx) error {
		if err := s.bulkIn(ctx, tx, rs[:from], on); err != nil {
			if errors.Is(err, errRefused) {
				return errRefused
			}
			return err
		}
		sorted := s.sortOn.Load()
		for start := from; start < len(rs); start += pipelined {
			chunk := rs[start:min(start+pipelined, len(rs))]
			b := &pgx.Batch{}
			for i := range chunk {
				b.Queue(s.sql.addSubmission, chunk[i].args(on, sorted)...)
			}
			br := tx.SendBatch(ctx, b)
			for i := range chunk {
				r, item := &chunk[i], start+i
				tag, err := br.Exec()
				if err == nil && tag.RowsAffected() == 0 && (!on || !sorted) {
					if err = s.searchTurnedOn(ctx, tx, br, on, sorted); errors.Is(err, errRetry) {
						return err
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
}

// batchTx runs fn in a transaction at read committed, without JIT
// compilation (sqlNoJIT), and reports retry when fn rolled it back with
// errRetry.
func (s *Store) batchTx(ctx context.Context, fn func(tx pgx.Tx) error) (retry bool, err error) {
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlNoJIT); err != nil {
			return err
		}
		return fn(tx)
	})
	if errors.Is(err, errRetry) {
		return true, nil
	}
	return false, err
}

// searchTurnedOn is asked when an insert of tx, sent with the search
// index off (on false) or the sort index off (sorted false), wrote
// nothing: it returns errRetry when such an index is on now (the store
// notes it, and the batch is made again with its keys), nil when they
// are still off (the insert found no form). It closes br first: the
// pipeline's later statements fail once the transaction is aborted.
func (s *Store) searchTurnedOn(ctx context.Context, tx pgx.Tx, br pgx.BatchResults, on, sorted bool) error {
	if err := br.Close(); err != nil {
		return err
	}
	var searchNow, sortNow bool
	if err := tx.QueryRow(ctx, s.sql.searchIndexed).Scan(&searchNow); err != nil {
		return err
	}
	if err := tx.QueryRow(ctx, s.sql.sortIndexed).Scan(&sortNow); err != nil {
		return err
	}
	retry := false
	if searchNow && !on {
		s.searchOn.Store(true)
		retry = true
	}
	if sortNow && !sorted {
		s.sortOn.Store(true)
		retry = true
	}
	if retry {
		return errRetry
	}
	return nil
}

// errRetry rolls back a batch's transaction that is to be made again.
var errRetry = errors.New("pgstore: an index was turned on")
