package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/stored"
)

// walkRows reads a filtered page's index entries, each with its
// submission, in batches sized to the page rather than in one statement
// of stored.Examined rows: PostgreSQL runs a statement to its end, so a
// page of one item read that way fetched and sent a thousand submissions
// (a filtered page of limit=1 on a form of 100 KB submissions cost 176 ms
// of the server's CPU and 234 ms of PostgreSQL's; SQLite stops where its
// reader stops). The first batch is the page and the one entry more that
// tells whether entries follow; each next one, read only when the walk
// asks for more and the last came back full, is twice the one before and
// starts after its last entry, until stored.Examined entries in all.
//
// Each batch is bounded in bytes too (the statements' last parameter;
// see byteBounded): by what is left of maxBytes once the bytes of the
// data and attachments read so far are taken off, which the walk's own
// bound on its work (find.MaxExaminedBytes, find.MaxExactCountBytes)
// reaches first: the walk stops at the row a batch cut there ends with,
// never asking for the next.
//
// It is a stored.Rows whose statement selects the entry's seq and
// created_at first (Scan reads them from its first two destinations),
// and the submission's data and attachments next.
type walkRows struct {
	ctx  context.Context
	pool interface {
		Query(context.Context, string, ...any) (pgx.Rows, error)
	}
	sql      string
	form     int64
	key      int64
	scan     bool // the statement walks the form's submissions, without a key
	oldest   bool
	lo, hi   keyset.Pos
	batch    int   // the size of the current batch
	got      int   // rows of the current batch read so far
	left     int   // entries not yet asked for
	maxBytes int64 // the bytes of data and attachments to read in all
	read     int64 // the bytes of data and attachments read so far
	rows     pgx.Rows
	err      error
	finished bool
}

func newWalkRows(ctx context.Context, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, form, key int64, q formsapi.Query, b pageBounds) *walkRows {
	return &walkRows{
		ctx: ctx, pool: pool, sql: sql, form: form, key: key,
		oldest: q.Order == formsapi.Oldest, lo: b.lo, hi: b.hi,
		left: stored.Examined, batch: min(q.Limit+1, stored.Examined),
		maxBytes: find.MaxExaminedBytes,
	}
}

// newScanRows is a walkRows over the form's submissions themselves, in
// page order: a search's page while the search index is off.
func newScanRows(ctx context.Context, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, form int64, q formsapi.Query, b pageBounds) *walkRows {
	w := newWalkRows(ctx, pool, sql, form, 0, q, b)
	w.scan = true
	return w
}

// newCountRows is a walkRows over the entries of key in the range b,
// oldest first, for an exact count (stored.CountMatches): up to
// find.MaxExactCount+1 of them, in batches from countBatch on, so that a
// count that stops early at its byte bound (find.MaxExactCountBytes) has
// not made PostgreSQL read ten thousand submissions' data.
func newCountRows(ctx context.Context, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, form, key int64, b pageBounds) *walkRows {
	return &walkRows{
		ctx: ctx, pool: pool, sql: sql, form: form, key: key,
		oldest: true, lo: b.lo, hi: b.hi,
		left: find.MaxExactCount + 1, batch: countBatch,
		maxBytes: find.MaxExactCountBytes,
	}
}

// countBatch is the first batch of an exact count's walk: with
// submissions of 1 KB, the 10,001 entries it may read come in 9 batches;
// with 100 KB ones, the 330 that fit its byte bound in 4 (480 read).
const countBatch = 32

// matchRows reads a page statement's rows (seq, created_at, data,
// attachments, the encoded size) as stored.CountMatches scans them:
// data and attachments alone.
type matchRows struct {
	*walkRows
	seq, at, size int64
}

// Scan reads the current entry's data and attachments into dest.
func (m *matchRows) Scan(dest ...any) error {
	return m.walkRows.Scan(append([]any{&m.seq, &m.at}, append(dest, &m.size)...)...)
}

// Next advances to the next entry, reading the next batch when the
// current one is used up and came back full.
func (w *walkRows) Next() bool {
	if w.err != nil || w.finished {
		return false
	}
	if w.rows != nil {
		if w.rows.Next() {
			w.got++
			return true
		}
		w.rows.Close()
		if err := w.rows.Err(); err != nil {
			w.err = err
			return false
		}
		w.rows = nil
		if w.got < w.batch || w.left == 0 {
			w.finished = true
			return false
		}
		w.batch = min(2*w.batch, w.left)
	}
	args := []any{w.form, w.key, w.lo.At, w.lo.Seq, w.hi.At, w.hi.Seq, w.batch, w.maxBytes - w.read}
	if w.scan {
		args = append(args[:1], args[2:]...)
	}
	rows, err := w.pool.Query(w.ctx, w.sql, args...)
	if err != nil {
		w.err = err
		return false
	}
	w.rows, w.got = rows, 0
	w.left -= w.batch
	if !rows.Next() {
		rows.Close()
		w.err, w.rows, w.finished = rows.Err(), nil, true
		return false
	}
	w.got++
	return true
}

// Scan reads the current entry into dest, whose first two are the entry's
// seq and created_at and next two its data and attachments, and moves
// the next batch's bounds past it.
func (w *walkRows) Scan(dest ...any) error {
	if err := w.rows.Scan(dest...); err != nil {
		return err
	}
	for _, d := range dest[2:min(len(dest), 4)] {
		if b, ok := d.(*[]byte); ok {
			w.read += int64(len(*b))
		}
	}
	seq, okSeq := dest[0].(*int64)
	at, okAt := dest[1].(*int64)
	if !okSeq || !okAt {
		return errors.New("pgstore: a filtered page's first two columns scan into *int64")
	}
	if p := (keyset.Pos{At: *at, Seq: *seq}); w.oldest {
		w.lo = p
	} else {
		w.hi = p
	}
	return nil
}

// Close releases the current batch's statement.
func (w *walkRows) Close() {
	if w.rows != nil {
		w.rows.Close()
	}
}

// Err is the first error of any batch.
func (w *walkRows) Err() error {
	if w.err != nil {
		return w.err
	}
	if w.rows != nil {
		return w.rows.Err()
	}
	return nil
}
