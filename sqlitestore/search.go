package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/stored"
)

// A searched page walks a trigram's posting blocks (migration 0022) and
// the form's unfolded tail, merged in keyset order, in one read
// transaction: a submission is in one or the other as one snapshot sees
// the file (the fold moves rows from the tail into the blocks in one
// transaction).
const (
	sqlBlocksDesc = `SELECT lo_at, lo_seq, list FROM formsapi_find_blocks
WHERE form_seq = ?1 AND key = ?2 AND (lo_at, lo_seq) < (?3, ?4)
ORDER BY lo_at DESC, lo_seq DESC LIMIT 8`

	// The blocks from the one that holds the lower bound (?3, ?4) on.
	sqlBlocksAsc = `SELECT lo_at, lo_seq, list FROM formsapi_find_blocks
WHERE form_seq = ?1 AND key = ?2 AND (lo_at, lo_seq) >= (SELECT * FROM (SELECT lo_at, lo_seq FROM formsapi_find_blocks
    WHERE form_seq = ?1 AND key = ?2 AND (lo_at, lo_seq) <= (?3, ?4) ORDER BY lo_at DESC, lo_seq DESC LIMIT 1)
  UNION ALL SELECT ?3, ?4 LIMIT 1)
ORDER BY lo_at, lo_seq LIMIT 8`

	// The blocks after the last one read (?3, ?4), ascending.
	sqlBlocksAfter = `SELECT lo_at, lo_seq, list FROM formsapi_find_blocks
WHERE form_seq = ?1 AND key = ?2 AND (lo_at, lo_seq) > (?3, ?4)
ORDER BY lo_at, lo_seq LIMIT 8`

	sqlTailRange = `SELECT created_at, seq FROM formsapi_find_tail
WHERE form_seq = ?1 AND (created_at, seq) > (?2, ?3) AND (created_at, seq) < (?4, ?5)`

	sqlProbeBlocks = `SELECT list FROM formsapi_find_blocks WHERE form_seq = ?1 AND key = ?2 ORDER BY lo_at, lo_seq`
)

// searchMode is what a searchRows row holds.
type searchMode int

const (
	searchLength  searchMode = iota // seq, created_at, data, attachments, length of the JSON
	searchEncoded                   // seq, created_at, data, attachments, the JSON
	searchData                      // data, attachments (totals)
)

// searchRow is a submission a searched walk yields.
type searchRow struct {
	seq, at           int64
	data, attachments []byte
	last              any
}

// searchRows walks the entries of one trigram key of one form within
// (lo, hi) in keyset order, ascending or descending, and the form's tail
// in the range beside them, as stored.Rows. Its Close ends its read
// transaction.
type searchRows struct {
	ctx      context.Context
	conn     *sql.Conn
	form     int64
	key      int64
	lo, hi   entry
	desc     bool
	mode     searchMode
	tail     []entry // in walk order
	pending  []entry // the blocks' entries read, in walk order, within the range
	lastLo   entry   // the first entry of the last block read
	started  bool
	blocksAt bool      // no block left
	rows     *sql.Rows // the submissions of the entries read last (load)
	cur      searchRow
	err      error
}

// searchWalk opens a searchRows in a read transaction of its own.
func (s *Store) searchWalk(ctx context.Context, form, key int64, lo, hi entry, desc bool, mode searchMode) (*searchRows, error) {
	conn, err := s.read.Conn(ctx)
	if err != nil {
		return nil, err
	}
	r := &searchRows{ctx: ctx, conn: conn, form: form, key: key, lo: lo, hi: hi, desc: desc, mode: mode}
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		conn.Close()
		return nil, err
	}
	rows, err := conn.QueryContext(ctx, sqlTailRange, form, lo.at, lo.seq, hi.at, hi.seq)
	if err != nil {
		r.Close()
		return nil, err
	}
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.at, &e.seq); err != nil {
			rows.Close()
			r.Close()
			return nil, err
		}
		r.tail = append(r.tail, e)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		r.Close()
		return nil, err
	}
	r.sort(r.tail)
	return r, nil
}

// sort puts es in walk order.
func (r *searchRows) sort(es []entry) {
	if r.desc {
		slices.SortFunc(es, func(a, b entry) int { return b.compare(a) })
	} else {
		slices.SortFunc(es, entry.compare)
	}
}

// before says whether a comes before b in walk order.
func (r *searchRows) before(a, b entry) bool {
	if r.desc {
		return a.compare(b) > 0
	}
	return a.compare(b) < 0
}

// inRange says whether e is within (lo, hi).
func (r *searchRows) inRange(e entry) bool {
	return e.compare(r.lo) > 0 && e.compare(r.hi) < 0
}

// fill reads the next blocks into pending, and reports whether any was
// left.
func (r *searchRows) fill() error {
	if r.blocksAt {
		return nil
	}
	var rows *sql.Rows
	var err error
	switch {
	case r.desc && !r.started:
		rows, err = r.conn.QueryContext(r.ctx, sqlBlocksDesc, r.form, r.key, r.hi.at, r.hi.seq)
	case r.desc:
		rows, err = r.conn.QueryContext(r.ctx, sqlBlocksDesc, r.form, r.key, r.lastLo.at, r.lastLo.seq)
	case !r.started:
		rows, err = r.conn.QueryContext(r.ctx, sqlBlocksAsc, r.form, r.key, r.lo.at, r.lo.seq)
	default:
		rows, err = r.conn.QueryContext(r.ctx, sqlBlocksAfter, r.form, r.key, r.lastLo.at, r.lastLo.seq)
	}
	if err != nil {
		return err
	}
	r.started = true
	n := 0
	var es []entry
	for rows.Next() {
		var lo entry
		var list []byte
		if err := rows.Scan(&lo.at, &lo.seq, &list); err != nil {
			rows.Close()
			return err
		}
		n++
		r.lastLo = lo
		start := len(es)
		es = decodeBlock(es, list)
		if r.desc {
			slices.Reverse(es[start:])
		}
		// Descending, a block at or below the lower bound is the last;
		// ascending, one at or past the upper bound.
		if r.desc && lo.compare(r.lo) <= 0 || !r.desc && lo.compare(r.hi) >= 0 {
			r.blocksAt = true
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if n < 8 {
		r.blocksAt = true
	}
	for _, e := range es {
		if r.inRange(e) {
			r.pending = append(r.pending, e)
		}
	}
	return nil
}

// next returns the next entries to read, up to 64, in walk order: the
// blocks' and the tail's merged, each once.
func (r *searchRows) nextEntries() ([]entry, error) {
	var out []entry
	for len(out) < 64 {
		if len(r.pending) == 0 && !r.blocksAt {
			if err := r.fill(); err != nil {
				return nil, err
			}
			continue
		}
		var e entry
		switch {
		case len(r.pending) == 0 && len(r.tail) == 0:
			return out, nil
		case len(r.pending) == 0:
			e, r.tail = r.tail[0], r.tail[1:]
		case len(r.tail) == 0 || r.before(r.pending[0], r.tail[0]):
			e, r.pending = r.pending[0], r.pending[1:]
		case r.pending[0] == r.tail[0]:
			e, r.pending, r.tail = r.pending[0], r.pending[1:], r.tail[1:]
		default:
			e, r.tail = r.tail[0], r.tail[1:]
		}
		out = append(out, e)
	}
	return out, nil
}

// sqlChunk reads the submissions of a chunk of entries, a JSON array of
// [seq, created_at], in its order; an entry whose submission is gone
// (or whose seq another row took) has no row. ?2 is the form; %s the
// last column.
const sqlChunk = `SELECT s.seq, s.created_at, s.data, s.attachments, %s
FROM json_each(?1) j CROSS JOIN formsapi_submissions s ON s.seq = j.value ->> 0
WHERE s.created_at = j.value ->> 1 AND s.form_seq = ?2`

// load opens the rows of the submissions of the next entries, and
// reports whether there were any. The rows are stepped one at a time, as
// the walk asks for them: a walk that stops reads no more.
func (r *searchRows) load() (bool, error) {
	es, err := r.nextEntries()
	if err != nil || len(es) == 0 {
		return false, err
	}
	list := make([]byte, 0, 2+len(es)*32)
	list = append(list, '[')
	for i, e := range es {
		if i > 0 {
			list = append(list, ',')
		}
		list = append(list, '[')
		list = strconv.AppendInt(list, e.seq, 10)
		list = append(list, ',')
		list = strconv.AppendInt(list, e.at, 10)
		list = append(list, ']')
	}
	list = append(list, ']')
	last := "length(s.json)"
	if r.mode == searchEncoded {
		last = "s.json"
	}
	r.rows, err = r.conn.QueryContext(r.ctx, fmt.Sprintf(sqlChunk, last), string(list), r.form)
	return err == nil, err
}

// Next is stored.Rows' Next.
func (r *searchRows) Next() bool {
	for r.err == nil {
		if r.rows == nil {
			more, err := r.load()
			if err != nil {
				r.err = err
			}
			if !more {
				return false
			}
			continue
		}
		if r.rows.Next() {
			row := &r.cur
			if err := r.rows.Scan(&row.seq, &row.at, &row.data, &row.attachments, &row.last); err != nil {
				r.err = err
				return false
			}
			return true
		}
		r.err = errors.Join(r.rows.Err(), r.rows.Close())
		r.rows = nil
	}
	return false
}

// Scan is stored.Rows' Scan.
func (r *searchRows) Scan(dest ...any) error {
	row := r.cur
	if r.mode == searchData {
		if len(dest) != 2 {
			return fmt.Errorf("scan: %d columns, want 2", len(dest))
		}
		*dest[0].(*[]byte), *dest[1].(*[]byte) = row.data, row.attachments
		return nil
	}
	if len(dest) != 5 {
		return fmt.Errorf("scan: %d columns, want 5", len(dest))
	}
	*dest[0].(*int64), *dest[1].(*int64) = row.seq, row.at
	*dest[2].(*[]byte), *dest[3].(*[]byte) = row.data, row.attachments
	switch d := dest[4].(type) {
	case *[]byte:
		switch v := row.last.(type) {
		case []byte:
			*d = v
		case string:
			*d = []byte(v)
		default:
			*d = nil
		}
	case *int:
		v, _ := row.last.(int64)
		*d = int(v)
	default:
		return fmt.Errorf("scan: column 5 into %T", dest[4])
	}
	return nil
}

// Err is sql.Rows' Err.
func (r *searchRows) Err() error { return r.err }

// Close ends the walk's read transaction.
func (r *searchRows) Close() error {
	if r.conn == nil {
		return nil
	}
	if r.rows != nil {
		r.rows.Close()
		r.rows = nil
	}
	_, err := r.conn.ExecContext(context.WithoutCancel(r.ctx), "ROLLBACK")
	err = errors.Join(err, r.conn.Close())
	r.conn = nil
	return err
}

// probeBlocks is a probe (stored.Probe) of a trigram key's blocks: its
// entries counted up to stored.Probed, oldest first, and the time of the
// last counted.
func (s *Store) probeBlocks(ctx context.Context, form, key int64) (stored.Probe, error) {
	rows, err := s.read.QueryContext(ctx, sqlProbeBlocks, form, key)
	if err != nil {
		return stored.Probe{}, err
	}
	defer rows.Close()
	var p stored.Probe
	var es []entry
	for rows.Next() && p.Entries < stored.Probed {
		var list []byte
		if err := rows.Scan(&list); err != nil {
			return stored.Probe{}, err
		}
		es = decodeBlock(es[:0], list)
		if len(es) == 0 {
			continue
		}
		take := min(int64(len(es)), stored.Probed-p.Entries)
		p.Entries += take
		p.Last = es[take-1].at
	}
	return p, rows.Err()
}

// countSearch is CountSubmissions' count of a trigram key's entries and
// the tail's rows in (lo, hi), up to find.MaxCount + 1.
func (s *Store) countSearch(ctx context.Context, form, key int64, lo, hi entry) (int64, error) {
	r, err := s.searchWalk(ctx, form, key, lo, hi, false, searchData)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := int64(len(r.tail))
	for n <= find.MaxCount {
		if len(r.pending) == 0 {
			if r.blocksAt {
				break
			}
			if err := r.fill(); err != nil {
				return 0, err
			}
			continue
		}
		n += int64(len(r.pending))
		r.pending = r.pending[:0]
	}
	return n, nil
}
