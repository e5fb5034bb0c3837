package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/coalesce"
)

// Every request looks its key up in the database (keys are never cached,
// so that a revocation holds on the very next request), and a statement
// costs PostgreSQL far more than the index probes in it: its fixed cost
// (a snapshot, executor start-up, the socket) dominates. So a node
// coalesces the lookups of concurrent requests (internal/coalesce): while
// one lookup statement is in flight, the lookups that arrive wait, and
// when it returns they all go in the next statement, one row each
// (sqlAuthorizeBatch). An idle node runs each lookup at once, alone, in
// the single statements; a busy one sends fewer, larger statements (a
// batch of 8 costs PostgreSQL about a third per key of 8 single ones,
// BENCHMARKS.md "The fleet"). A waiting lookup runs in a statement that
// starts after it arrived, so it sees every commit made before the
// request, as a lookup of its own would.

// maxBatch bounds the lookups in one statement; more wait for the next.
const maxBatch = 64

// keyLookup is one request's lookup: the key's hash, the form it asks for
// ("" for none), and what the database said.
type keyLookup struct {
	hash   []byte
	formID string
	row    keyRow
	err    error // pgx.ErrNoRows: no live key of that hash
	// age is, for a lookup a following node answered from its copy
	// without a round (bounded), how long before the answer the copy's
	// last round started; stale says it was answered so.
	age   time.Duration
	stale bool
	n     int64 // a following store's round: the lookup's row number, 0 when the copy answers it
	// tick marks no lookup: a round run for the sync feed's waiting
	// requests alone (waitRound), which reads the log and nothing else.
	tick bool
}

// keyRow is what a lookup reads: the key's grant and expiry, and the
// requested form's seq and version among its account's forms (NULL when
// there is no such form, or none was asked for), or for a lookup without
// a form, the version of the account's forms list (NULL when it has none:
// see migration 0009).
type keyRow struct {
	g            formsapi.Grant
	expires      *int64
	seq, version pgtype.Int8
	incarnation  pgtype.Int8
	list         pgtype.Int8
}

// newLookups returns the queue of key lookups of s.
func (s *Store) newLookups() *coalesce.Batcher[keyLookup] {
	return &coalesce.Batcher[keyLookup]{Run: s.lookupBatch, Max: maxBatch}
}

// lookupKey returns the key row of hash, with formID among its account's
// forms unless formID is "" (formID must be storable text). It returns
// pgx.ErrNoRows for no live key, and ctx's error when ctx ends first.
// With bounded, a following node with a staleness bound (WithStaleness)
// may answer from its copy without a round: l.stale and l.age say so.
func (s *Store) lookupKey(ctx context.Context, hash []byte, formID string, bounded bool) (*keyLookup, error) {
	if bounded && s.follow != nil {
		l := &keyLookup{hash: hash, formID: formID}
		if age, ok, refresh := s.follow.fromCopy(l, s.now()); ok {
			if refresh {
				s.refresh(hash, formID)
			}
			l.age, l.stale = age, true
			return l, nil
		}
	}
	for {
		l := &keyLookup{hash: hash, formID: formID}
		if err := s.lookups.Do(ctx, l); err != nil {
			// The batch still reads the row for nobody; its other lookups
			// are unaffected.
			return nil, err
		}
		if !errors.Is(l.err, errRetryLookup) {
			return l, nil
		}
		// A following store's round dropped the copy that was to answer
		// it (follow.go): the next round reads its row.
	}
}

// refreshTimeout bounds a round started in the background by an answer
// from a following node's copy (refresh).
const refreshTimeout = 10 * time.Second

// refresh starts a round in the background, for a following node whose
// copy answered a lookup past half its staleness bound (fromCopy), with
// that lookup in it: the copy answers it, so the round reads the log
// alone. The store's Close waits for it.
func (s *Store) refresh(hash []byte, formID string) {
	// Under bgMu, so that no round starts once Close has begun: Close
	// ends closing under it before it waits for background.
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.closing.Err() != nil {
		s.follow.refreshing.Store(false)
		return
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		defer s.follow.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(s.closing, refreshTimeout)
		defer cancel()
		_ = s.lookups.Do(ctx, &keyLookup{hash: hash, formID: formID}) // a failed round leaves the copy to age out
	}()
}

// lookupBatch reads the rows of batch, in the single statements for one
// lookup and in sqlAuthorizeBatch for more, and sets each lookup's row or
// error.
func (s *Store) lookupBatch(ctx context.Context, batch []*keyLookup) {
	if len(batch) == 1 {
		l := batch[0]
		r := &l.row
		l.err = retry(ctx, func() error {
			if l.formID == "" {
				return s.pool.QueryRow(ctx, s.sql.resolveKey, l.hash).Scan(&r.g.AccountID, &r.g.Forms, &r.expires, &r.list)
			}
			return s.pool.QueryRow(ctx, s.sql.authorizeForm, l.hash, l.formID).Scan(&r.g.AccountID, &r.g.Forms, &r.expires, &r.seq, &r.version, &r.incarnation)
		})
		return
	}
	hashes := make([][]byte, len(batch))
	forms := make([]string, len(batch))
	for i, l := range batch {
		hashes[i], forms[i] = l.hash, l.formID
	}
	err := retry(ctx, func() error {
		for _, l := range batch {
			l.row, l.err = keyRow{}, pgx.ErrNoRows // no row for it: no live key
		}
		rows, err := s.pool.Query(ctx, s.sql.authorizeBatch, hashes, forms)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				n       int64
				account pgtype.Text
				r       keyRow
			)
			if err := rows.Scan(&n, &account, &r.g.Forms, &r.expires, &r.seq, &r.version, &r.incarnation, &r.list); err != nil {
				return err
			}
			if n < 1 || n > int64(len(batch)) {
				return errors.New("pgstore: key lookup: a row for no lookup")
			}
			if !account.Valid {
				continue
			}
			r.g.AccountID = account.String
			batch[n-1].row, batch[n-1].err = r, nil
		}
		return rows.Err()
	})
	if err != nil {
		for _, l := range batch {
			l.row, l.err = keyRow{}, err
		}
	}
}
