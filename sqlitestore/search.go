package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/stored"
)

// A searched or filtered page walks a key's entries and the form's
// unfolded tail, merged in keyset order, in one read transaction: a
// submission is in one or the other as one snapshot sees the file (a
// fold moves rows from the tail into the index in one transaction). A
// trigram's entries are in its posting blocks (migration 0022); a
// filter key's in the form's runs (migration 0031), each read on its
// own and merged.
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

	// A run's chunks before (?3, ?4, ?5), descending.
	sqlRunDesc = `SELECT key, lo_at, lo_seq, list FROM formsapi_find_runs
WHERE form_seq = ?1 AND run = ?2 AND (key, lo_at, lo_seq) < (?3, ?4, ?5)
ORDER BY key DESC, lo_at DESC, lo_seq DESC LIMIT 4`

	// A run's chunks from the one that holds (?3, ?4, ?5) on.
	sqlRunAsc = `SELECT key, lo_at, lo_seq, list FROM formsapi_find_runs
WHERE form_seq = ?1 AND run = ?2 AND (key, lo_at, lo_seq) >= (SELECT * FROM (SELECT key, lo_at, lo_seq FROM formsapi_find_runs
    WHERE form_seq = ?1 AND run = ?2 AND (key, lo_at, lo_seq) <= (?3, ?4, ?5) ORDER BY key DESC, lo_at DESC, lo_seq DESC LIMIT 1)
  UNION ALL SELECT ?3, ?4, ?5 LIMIT 1)
ORDER BY key, lo_at, lo_seq LIMIT 4`

	// A run's chunks after the last one read (?3, ?4, ?5), ascending.
	sqlRunAfter = `SELECT key, lo_at, lo_seq, list FROM formsapi_find_runs
WHERE form_seq = ?1 AND run = ?2 AND (key, lo_at, lo_seq) > (?3, ?4, ?5)
ORDER BY key, lo_at, lo_seq LIMIT 4`

	// The form's tail within (?2, ?3)–(?4, ?5): its rows above its mark,
	// by the index of feed positions (the tail is small, the form's range
	// need not be), and its rows of formsapi_find_tail, each with its
	// keys, which the walk checks for its own. CROSS JOIN keeps SQLite
	// reading the explicit tail first, by its primary key within the
	// range (a host's SQL can requeue a whole form): without statistics
	// (the store runs no ANALYZE) it read every submission of the form in
	// the range and looked each up in the tail (TestFindQueryPlans). A
	// tail row names its submission by its whole place, so a row left by
	// a submission that went without its trigger (keys set NULL first)
	// names no other form's row that later takes its seq.
	sqlTailRange = `SELECT s.created_at, s.seq, s.find_keys FROM formsapi_submissions s INDEXED BY formsapi_submissions_feed
WHERE s.form_seq = ?1 AND s.feed_pos > (SELECT find_folded FROM formsapi_forms WHERE seq = ?1)
    AND (s.created_at, s.seq) > (?2, ?3) AND (s.created_at, s.seq) < (?4, ?5)
UNION ALL
SELECT s.created_at, s.seq, s.find_keys FROM formsapi_find_tail t CROSS JOIN formsapi_submissions s
    ON s.seq = t.seq AND s.form_seq = t.form_seq AND s.created_at = t.created_at
WHERE t.form_seq = ?1 AND (t.created_at, t.seq) > (?2, ?3) AND (t.created_at, t.seq) < (?4, ?5)
    AND s.form_seq = ?1 AND (s.created_at, s.seq) > (?2, ?3) AND (s.created_at, s.seq) < (?4, ?5)`

	// sqlTailRange without bounds.
	sqlTailAll = `SELECT s.created_at, s.seq, s.find_keys FROM formsapi_submissions s INDEXED BY formsapi_submissions_feed
WHERE s.form_seq = ?1 AND s.feed_pos > (SELECT find_folded FROM formsapi_forms WHERE seq = ?1)
UNION ALL
SELECT s.created_at, s.seq, s.find_keys FROM formsapi_find_tail t CROSS JOIN formsapi_submissions s
    ON s.seq = t.seq AND s.form_seq = t.form_seq AND s.created_at = t.created_at
WHERE t.form_seq = ?1 AND s.form_seq = ?1`

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

// entrySource is where a walk reads a key's entries: a trigram's
// blocks, or one run of the form's filter entries.
type entrySource struct {
	run      int64   // the run; 0 for the blocks
	pending  []entry // entries read, in walk order, within the range
	lastLo   entry   // blocks: the first entry of the last block read
	lastName triple  // runs: the first entry of the last chunk read
	started  bool
	done     bool // nothing left to read
}

// searchRows walks the entries of one key of one form within (lo, hi)
// in keyset order, ascending or descending, and the form's tail in the
// range beside them, as stored.Rows. Its Close ends its read
// transaction.
type searchRows struct {
	ctx     context.Context
	conn    *sql.Conn   // the walk's own connection (searchWalk), or nil
	q       walkQuerier // conn, or the transaction a walk was given
	form    int64
	key     int64
	lo, hi  entry
	all     bool // every entry, the bounds' positions too (keyEntries)
	desc    bool
	mode    searchMode
	tail    []entry // in walk order
	srcs    []*entrySource
	last    entry // the last entry given, once any was
	given   bool
	rows    *sql.Rows // the submissions of the entries read last (load)
	runStmt [3]*sql.Stmt
	cur     searchRow
	err     error
}

// searchWalk opens a searchRows in a read transaction of its own.
func (s *Store) searchWalk(ctx context.Context, form, key int64, lo, hi entry, desc bool, mode searchMode) (*searchRows, error) {
	conn, err := s.read.Conn(ctx)
	if err != nil {
		return nil, err
	}
	r := &searchRows{ctx: ctx, conn: conn, q: conn, form: form, key: key, lo: lo, hi: hi, desc: desc, mode: mode}
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		conn.Close()
		return nil, err
	}
	if err := r.open(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// walkQuerier is what a walk reads with: a connection inside a
// transaction.
type walkQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// keyEntries returns every entry of key of the form, in its runs or
// blocks and its tail, in keyset order, read in the transaction of q.
func keyEntries(ctx context.Context, q walkQuerier, form, key int64) ([]entry, error) {
	// Every entry: the bounds' own positions too, which a walk's
	// exclusive bounds leave out (a host's row at seq and created_at
	// math.MaxInt64 is still Erase's).
	r := &searchRows{ctx: ctx, q: q, form: form, key: key, all: true,
		lo: entry{math.MinInt64, math.MinInt64}, hi: entry{math.MaxInt64, math.MaxInt64}, mode: searchData}
	defer r.Close()
	if err := r.open(); err != nil {
		return nil, err
	}
	var out []entry
	err := r.eachEntries(func(es []entry) bool {
		out = append(out, es...)
		return true
	})
	return out, err
}

// eachEntries calls fn with the walk's next entries (nextEntries), in
// walk order, until there are none or fn returns false.
func (r *searchRows) eachEntries(fn func([]entry) bool) error {
	for {
		es, err := r.nextEntries()
		if err != nil || len(es) == 0 || !fn(es) {
			return err
		}
	}
}

// open reads the tail and lists the walk's sources.
func (r *searchRows) open() error {
	var rows *sql.Rows
	var err error
	if r.all {
		rows, err = r.q.QueryContext(r.ctx, sqlTailAll, r.form)
	} else {
		rows, err = r.q.QueryContext(r.ctx, sqlTailRange, r.form, r.lo.at, r.lo.seq, r.hi.at, r.hi.seq)
	}
	if err != nil {
		return err
	}
	for rows.Next() {
		var e entry
		var keys []byte
		if err := rows.Scan(&e.at, &e.seq, &keys); err != nil {
			rows.Close()
			return err
		}
		if holdsKey(keys, r.key) {
			r.tail = append(r.tail, e)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	r.sort(r.tail)
	r.tail = slices.Compact(r.tail) // a row above the mark and in formsapi_find_tail too
	if r.key < 0 {
		r.srcs = []*entrySource{{}}
		return nil
	}
	runs, err := queryInts(r.ctx, r.q, sqlRunsOfForm, r.form)
	if err != nil {
		return err
	}
	for _, run := range runs {
		r.srcs = append(r.srcs, &entrySource{run: run})
	}
	return nil
}

// holdsKey says whether keys, a find_keys JSON array of integers, holds
// key.
func holdsKey(keys []byte, key int64) bool {
	var d [21]byte
	k := strconv.AppendInt(d[:0], key, 10)
	for i := 0; ; {
		j := bytes.Index(keys[i:], k)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(k)
		if (j == 0 || !isKeyByte(keys[j-1])) && (end == len(keys) || !isKeyByte(keys[end])) {
			return true
		}
		i = j + 1
	}
}

// isKeyByte says whether c can be part of a key in find_keys: a digit or
// a minus sign.
func isKeyByte(c byte) bool { return c == '-' || c >= '0' && c <= '9' }

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
	return r.all || e.compare(r.lo) > 0 && e.compare(r.hi) < 0
}

// fill reads the next blocks or chunks of src into its pending entries.
func (r *searchRows) fill(src *entrySource) error {
	if src.done {
		return nil
	}
	if r.key >= 0 {
		return r.fillRun(src)
	}
	var rows *sql.Rows
	var err error
	switch {
	case r.desc && !src.started:
		rows, err = r.q.QueryContext(r.ctx, sqlBlocksDesc, r.form, r.key, r.hi.at, r.hi.seq)
	case r.desc:
		rows, err = r.q.QueryContext(r.ctx, sqlBlocksDesc, r.form, r.key, src.lastLo.at, src.lastLo.seq)
	case !src.started:
		rows, err = r.q.QueryContext(r.ctx, sqlBlocksAsc, r.form, r.key, r.lo.at, r.lo.seq)
	default:
		rows, err = r.q.QueryContext(r.ctx, sqlBlocksAfter, r.form, r.key, src.lastLo.at, src.lastLo.seq)
	}
	if err != nil {
		return err
	}
	src.started = true
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
		src.lastLo = lo
		start := len(es)
		es = decodeBlock(es, list)
		if r.desc {
			slices.Reverse(es[start:])
		}
		// Descending, a block at or below the lower bound is the last;
		// ascending, one at or past the upper bound.
		if r.desc && lo.compare(r.lo) <= 0 || !r.desc && lo.compare(r.hi) >= 0 {
			src.done = true
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if n < 8 {
		src.done = true
	}
	for _, e := range es {
		if r.inRange(e) {
			src.pending = append(src.pending, e)
		}
	}
	return nil
}

// fillRun is fill for a run: its chunks, whose entries of other keys it
// leaves out.
func (r *searchRows) fillRun(src *entrySource) error {
	var from triple
	kind := 0 // sqlRunDesc, sqlRunAsc, sqlRunAfter
	switch {
	case r.desc && !src.started:
		from = triple{r.key, r.hi.at, r.hi.seq}
	case r.desc:
		from = src.lastName
	case !src.started:
		kind, from = 1, triple{r.key, r.lo.at, r.lo.seq}
	default:
		kind, from = 2, src.lastName
	}
	if r.runStmt[kind] == nil {
		st, err := r.q.PrepareContext(r.ctx, [...]string{sqlRunDesc, sqlRunAsc, sqlRunAfter}[kind])
		if err != nil {
			return err
		}
		r.runStmt[kind] = st
	}
	rows, err := r.runStmt[kind].QueryContext(r.ctx, r.form, src.run, from.key, from.at, from.seq)
	if err != nil {
		return err
	}
	src.started = true
	lo, hi := triple{r.key, r.lo.at, r.lo.seq}, triple{r.key, r.hi.at, r.hi.seq}
	n := 0
	var ts []triple
	for rows.Next() {
		var name triple
		var list []byte
		if err := rows.Scan(&name.key, &name.at, &name.seq, &list); err != nil {
			rows.Close()
			return err
		}
		n++
		src.lastName = name
		start := len(ts)
		ts = decodeTriples(ts, list)
		if r.desc {
			slices.Reverse(ts[start:])
		}
		// Descending, a chunk named at or below the lower bound is the
		// last; ascending, one at or past the upper bound.
		if r.desc && name.compare(lo) <= 0 || !r.desc && name.compare(hi) >= 0 {
			src.done = true
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if n < 4 {
		src.done = true
	}
	for _, t := range ts {
		if e := (entry{t.at, t.seq}); t.key == r.key && r.inRange(e) {
			src.pending = append(src.pending, e)
		}
	}
	return nil
}

// nextEntries returns the next entries to read, up to 64, in walk
// order: the sources' and the tail's merged, each once.
func (r *searchRows) nextEntries() ([]entry, error) {
	var out []entry
	for len(out) < 64 {
		// Every source that may hold more has an entry to compare: one
		// read later could come first.
		for _, src := range r.srcs {
			for len(src.pending) == 0 && !src.done {
				if err := r.fill(src); err != nil {
					return nil, err
				}
			}
		}
		var best *entrySource
		for _, src := range r.srcs {
			if len(src.pending) > 0 && (best == nil || r.before(src.pending[0], best.pending[0])) {
				best = src
			}
		}
		var e entry
		switch {
		case best == nil && len(r.tail) == 0:
			return out, nil
		case best == nil || len(r.tail) > 0 && r.before(r.tail[0], best.pending[0]):
			e, r.tail = r.tail[0], r.tail[1:]
		default:
			e, best.pending = best.pending[0], best.pending[1:]
		}
		if r.given && e == r.last {
			continue // in more than one run, or in a run and the tail
		}
		r.last, r.given = e, true
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
	r.rows, err = r.q.QueryContext(r.ctx, fmt.Sprintf(sqlChunk, last), string(list), r.form)
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

// Close ends the walk's read transaction, if it has its own.
func (r *searchRows) Close() error {
	if r.rows != nil {
		r.rows.Close()
		r.rows = nil
	}
	for i, st := range r.runStmt {
		if st != nil {
			st.Close()
			r.runStmt[i] = nil
		}
	}
	if r.conn == nil {
		return nil
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

// countSearch is CountSubmissions' count of a key's entries and the
// tail's rows that hold it in (lo, hi), up to find.MaxCount + 1.
func (s *Store) countSearch(ctx context.Context, form, key int64, lo, hi entry) (int64, error) {
	r, err := s.searchWalk(ctx, form, key, lo, hi, false, searchData)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var n int64
	err = r.eachEntries(func(es []entry) bool {
		n += int64(len(es))
		return n <= find.MaxCount
	})
	return n, err
}

// probeRuns is a probe (stored.Probe) of a filter key: its entries in
// the form's runs and tail, counted up to stored.Probed, oldest first,
// and the time of the last counted.
func (s *Store) probeRuns(ctx context.Context, form, key int64) (stored.Probe, error) {
	r, err := s.searchWalk(ctx, form, key, entry{math.MinInt64, math.MinInt64}, entry{math.MaxInt64, math.MaxInt64}, false, searchData)
	if err != nil {
		return stored.Probe{}, err
	}
	defer r.Close()
	var p stored.Probe
	err = r.eachEntries(func(es []entry) bool {
		take := min(int64(len(es)), stored.Probed-p.Entries)
		p.Entries += take
		p.Last = es[take-1].at
		return p.Entries < stored.Probed
	})
	return p, err
}
