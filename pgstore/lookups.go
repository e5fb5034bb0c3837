package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/formsapi/formsapi"
)

// Every request looks its key up in the database (keys are never cached,
// so that a revocation holds on the very next request), and a statement
// costs PostgreSQL far more than the index probes in it: its fixed cost
// (a snapshot, executor start-up, the socket) dominates. So a node
// coalesces the lookups of concurrent requests: while one lookup
// statement is in flight, the lookups that arrive wait, and when it
// returns they all go in the next statement, one row each
// (sqlAuthorizeBatch). An idle node runs each lookup at once, alone, in
// the single statements; a busy one sends fewer, larger statements (a
// batch of 8 costs PostgreSQL about a third per key of 8 single ones,
// BENCHMARKS.md "The fleet"). Nothing is read before the request came:
// a waiting lookup runs in a statement that starts after it arrived, so
// it sees every commit made before the request, as a lookup of its own
// would.

// maxBatch bounds the lookups in one statement; more wait for the next.
const maxBatch = 64

// lookups is the queue of key lookups of one store.
type lookups struct {
	mu       sync.Mutex
	inFlight bool         // a lookup statement is running
	waiting  []*keyLookup // for the next statement, in arrival order
}

// keyLookup is one request's lookup: the key's hash, the form it asks for
// ("" for none), and when done is closed, what the database said.
type keyLookup struct {
	hash   []byte
	formID string
	ctx    context.Context // the request's: a batch runs while one of its lookups waits
	row    keyRow
	err    error // pgx.ErrNoRows: no live key of that hash
	done   chan struct{}
}

// keyRow is what a lookup reads: the key's grant and expiry, and the
// requested form's seq and version among its account's forms (NULL when
// there is no such form, or none was asked for).
type keyRow struct {
	g            formsapi.Grant
	expires      *int64
	seq, version pgtype.Int8
}

// lookupKey returns the key row of hash, with formID among its account's
// forms unless formID is "" (formID must be storable text). It returns
// pgx.ErrNoRows for no live key, and ctx's error when ctx ends first.
func (s *Store) lookupKey(ctx context.Context, hash []byte, formID string) (keyRow, error) {
	l := &keyLookup{hash: hash, formID: formID, ctx: ctx, done: make(chan struct{})}
	q := &s.lookups
	q.mu.Lock()
	if q.inFlight {
		q.waiting = append(q.waiting, l)
		q.mu.Unlock()
		select {
		case <-l.done:
			return l.row, l.err
		case <-ctx.Done():
			// The batch still reads the row for nobody; its other
			// lookups are unaffected.
			return keyRow{}, ctx.Err()
		}
	}
	q.inFlight = true
	q.mu.Unlock()
	s.runLookups([]*keyLookup{l})
	return l.row, l.err
}

// runLookups runs batch (every lookup in it done when it returns), then
// starts the next statement for the lookups that arrived meanwhile, in a
// goroutine of its own, so that no request waits for others' lookups
// beyond its own.
func (s *Store) runLookups(batch []*keyLookup) {
	s.lookupBatch(batch)
	for _, l := range batch {
		close(l.done)
	}
	q := &s.lookups
	q.mu.Lock()
	next := q.waiting
	if len(next) > maxBatch {
		next = next[:maxBatch:maxBatch]
		q.waiting = q.waiting[maxBatch:]
	} else {
		q.waiting = nil
	}
	q.inFlight = len(next) > 0
	q.mu.Unlock()
	if len(next) > 0 {
		go s.runLookups(next)
	}
}

// lookupBatch reads the rows of batch, in the single statements for one
// lookup and in sqlAuthorizeBatch for more, and sets each lookup's row or
// error. The statement runs under a context that ends when every
// lookup's context has ended (so that a batch of abandoned lookups does
// not hold a connection), with the latest of their deadlines.
func (s *Store) lookupBatch(batch []*keyLookup) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	if len(batch) == 1 {
		l := batch[0]
		r := &l.row
		l.err = retry(ctx, func() error {
			if l.formID == "" {
				return s.pool.QueryRow(ctx, s.sql.resolveKey, l.hash).Scan(&r.g.AccountID, &r.g.Forms, &r.expires)
			}
			return s.pool.QueryRow(ctx, s.sql.authorizeForm, l.hash, l.formID).Scan(&r.g.AccountID, &r.g.Forms, &r.expires, &r.seq, &r.version)
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
			if err := rows.Scan(&n, &account, &r.g.Forms, &r.expires, &r.seq, &r.version); err != nil {
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

// batchContext returns a context for one statement on behalf of batch:
// done when every lookup's context is done, and no later than the latest
// of their deadlines.
func batchContext(batch []*keyLookup) (context.Context, context.CancelFunc) {
	if len(batch) == 1 {
		return batch[0].ctx, func() {}
	}
	var (
		latest   time.Time
		deadline = true
	)
	for _, l := range batch {
		d, ok := l.ctx.Deadline()
		if !ok {
			deadline = false
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	if deadline {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, latest)
		c1 := cancel
		cancel = func() { c2(); c1() }
	}
	// Cancel when the last lookup's context ends.
	var (
		mu   sync.Mutex
		live = len(batch)
	)
	stops := make([]func() bool, len(batch))
	for i, l := range batch {
		stops[i] = context.AfterFunc(l.ctx, func() {
			mu.Lock()
			live--
			last := live == 0
			mu.Unlock()
			if last {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
