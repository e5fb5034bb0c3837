package sqlitestore

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
)

// The runs of the filters' index entries (migration 0031): each a
// sorted sequence of (key, created_at, seq) entries of one form, cut
// into chunks of runChunk entries, each chunk a row named by its first
// entry. A fold writes the entries of a form's tail as a new run of
// level 0; runFanIn runs of a level are merged into one of the next.
const (
	// runChunk is the most entries a chunk holds (24 bytes each: a
	// chunk row stays within a page).
	runChunk = 128
	// runFanIn is how many runs of one level make one of the next.
	runFanIn = 8
	// runLevels bounds the levels merged: a run built by migration
	// 0031 sits at level 8, apart.
	runLevels = 8
	// tripleSize is the size of an entry in a chunk's list.
	tripleSize = 24
)

// triple is an entry of a run: a filter key and a submission's keyset
// position.
type triple struct{ key, at, seq int64 }

func (t triple) compare(o triple) int {
	if c := cmp.Compare(t.key, o.key); c != 0 {
		return c
	}
	if c := cmp.Compare(t.at, o.at); c != 0 {
		return c
	}
	return cmp.Compare(t.seq, o.seq)
}

// decodeTriples appends the entries of a chunk's list to dst. A list
// whose length is not a multiple of tripleSize has its last bytes
// ignored.
func decodeTriples(dst []triple, list []byte) []triple {
	for len(list) >= tripleSize {
		dst = append(dst, triple{
			int64(binary.BigEndian.Uint64(list)),
			int64(binary.BigEndian.Uint64(list[8:])),
			int64(binary.BigEndian.Uint64(list[16:])),
		})
		list = list[tripleSize:]
	}
	return dst
}

// appendTriples appends a chunk's list of entries ts to b.
func appendTriples(b []byte, ts []triple) []byte {
	for _, t := range ts {
		b = binary.BigEndian.AppendUint64(b, uint64(t.key))
		b = binary.BigEndian.AppendUint64(b, uint64(t.at))
		b = binary.BigEndian.AppendUint64(b, uint64(t.seq))
	}
	return b
}

const (
	sqlRunNext     = `SELECT coalesce(max(run), 0) + 1 FROM formsapi_find_run_list WHERE form_seq = ?1`
	sqlRunListAdd  = `INSERT INTO formsapi_find_run_list (form_seq, run, level, entries) VALUES (?1, ?2, ?3, ?4)`
	sqlRunChunkAdd = `INSERT INTO formsapi_find_runs (form_seq, run, key, lo_at, lo_seq, list) VALUES (?1, ?2, ?3, ?4, ?5, ?6)`
	sqlRunsOfLevel = `SELECT run FROM formsapi_find_run_list WHERE form_seq = ?1 AND level = ?2 ORDER BY run`
	sqlRunsOfForm  = `SELECT run FROM formsapi_find_run_list WHERE form_seq = ?1 ORDER BY run`
	sqlRunChunks   = `SELECT list FROM formsapi_find_runs WHERE form_seq = ?1 AND run = ?2 ORDER BY key, lo_at, lo_seq`
	sqlRunDrop     = `DELETE FROM formsapi_find_runs WHERE form_seq = ?1 AND run = ?2`
	sqlRunListDrop = `DELETE FROM formsapi_find_run_list WHERE form_seq = ?1 AND run = ?2`

	// The chunk of a run that holds an entry: the last named at or
	// before it.
	sqlRunChunkOf = `SELECT key, lo_at, lo_seq, list FROM formsapi_find_runs
WHERE form_seq = ?1 AND run = ?2 AND (key, lo_at, lo_seq) <= (?3, ?4, ?5)
ORDER BY key DESC, lo_at DESC, lo_seq DESC LIMIT 1`
	// The name of the chunk after (?3, ?4, ?5).
	sqlRunChunkAfter = `SELECT key, lo_at, lo_seq FROM formsapi_find_runs
WHERE form_seq = ?1 AND run = ?2 AND (key, lo_at, lo_seq) > (?3, ?4, ?5)
ORDER BY key, lo_at, lo_seq LIMIT 1`
	sqlRunChunkSet  = `UPDATE formsapi_find_runs SET list = ?6 WHERE form_seq = ?1 AND run = ?2 AND key = ?3 AND lo_at = ?4 AND lo_seq = ?5`
	sqlRunChunkDrop = `DELETE FROM formsapi_find_runs WHERE form_seq = ?1 AND run = ?2 AND key = ?3 AND lo_at = ?4 AND lo_seq = ?5`
	sqlRunListTake  = `UPDATE formsapi_find_run_list SET entries = entries - ?3 WHERE form_seq = ?1 AND run = ?2`

	sqlGoneOfForm = `SELECT created_at, seq, keys FROM formsapi_find_gone WHERE form_seq = ?1`
	sqlGoneEmpty  = `DELETE FROM formsapi_find_gone WHERE form_seq = ?1`
	sqlGoneForms  = `SELECT DISTINCT form_seq FROM formsapi_find_gone`
)

// runWriter writes a run of one form, a chunk at a time, in the
// transaction of q.
type runWriter struct {
	q         execQuerier
	form, run int64
	level     int64
	entries   int64
	buf       []triple
	list      []byte
	add       *sql.Stmt
	last      triple
	started   bool
	ctx       context.Context
}

// newRunWriter starts a run of level for form, named after the form's
// last run.
func newRunWriter(ctx context.Context, q execQuerier, form, level int64) (*runWriter, error) {
	w := &runWriter{ctx: ctx, q: q, form: form, level: level}
	rows, err := q.QueryContext(ctx, sqlRunNext, form)
	if err != nil {
		return nil, err
	}
	if rows.Next() {
		err = rows.Scan(&w.run)
	}
	if err = errors.Join(err, rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	return w, nil
}

// write adds t, which comes after every entry written before it; an
// entry equal to the last one is written once.
func (w *runWriter) write(t triple) error {
	if w.started && t == w.last {
		return nil
	}
	w.started, w.last = true, t
	w.buf = append(w.buf, t)
	if len(w.buf) == runChunk {
		return w.flush()
	}
	return nil
}

// flush writes the entries buffered as a chunk.
func (w *runWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if w.add == nil {
		st, err := w.q.PrepareContext(w.ctx, sqlRunChunkAdd)
		if err != nil {
			return err
		}
		w.add = st
	}
	w.list = appendTriples(w.list[:0], w.buf)
	first := w.buf[0]
	if _, err := w.add.ExecContext(w.ctx, w.form, w.run, first.key, first.at, first.seq, w.list); err != nil {
		return err
	}
	w.entries += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}

// close writes what is buffered and lists the run, if it holds any
// entry.
func (w *runWriter) close() error {
	err := w.flush()
	if w.add != nil {
		err = errors.Join(err, w.add.Close())
	}
	if err != nil || w.entries == 0 {
		return err
	}
	_, err = w.q.ExecContext(w.ctx, sqlRunListAdd, w.form, w.run, w.level, w.entries)
	return err
}

// foldRuns writes, in the transaction of q, ts (each form's new entries,
// in any order) as a new run of level 0 of each form, after taking out
// of its runs the entries its deleted or changed rows left there
// (purgeGone), and merges each form's runs where a level holds
// runFanIn.
func foldRuns(ctx context.Context, q execQuerier, forms []int64, ts map[int64][]triple) error {
	for _, form := range forms {
		if err := purgeGone(ctx, q, form); err != nil {
			return fmt.Errorf("take out the entries of deleted rows: %w", err)
		}
		es := ts[form]
		if len(es) == 0 {
			continue
		}
		slices.SortFunc(es, triple.compare)
		w, err := newRunWriter(ctx, q, form, 0)
		if err != nil {
			return fmt.Errorf("write a run: %w", err)
		}
		for _, t := range es {
			if err = w.write(t); err != nil {
				break
			}
		}
		if err = errors.Join(err, w.close()); err != nil {
			return fmt.Errorf("write a run: %w", err)
		}
		if err := mergeRuns(ctx, q, form); err != nil {
			return fmt.Errorf("merge runs: %w", err)
		}
	}
	return nil
}

// mergeRuns merges the runs of form, in the transaction of q, while a
// level below runLevels holds runFanIn of them: those become one run of
// the next level.
func mergeRuns(ctx context.Context, q execQuerier, form int64) error {
	for level := int64(0); level < runLevels; level++ {
		runs, err := queryInts(ctx, q, sqlRunsOfLevel, form, level)
		if err != nil {
			return err
		}
		if len(runs) < runFanIn {
			return nil // a level below runFanIn: the levels above it did not change
		}
		if err := mergeRunList(ctx, q, form, level+1, runs); err != nil {
			return err
		}
	}
	return nil
}

// runCursor reads one run's entries in order, a chunk at a time.
type runCursor struct {
	rows *sql.Rows
	buf  []triple
	i    int
	done bool
	err  error // a chunk that could not be read: the merge fails
}

// head returns the cursor's next entry, and false once it has none (or
// failed: see err).
func (c *runCursor) head() (triple, bool) {
	for c.i == len(c.buf) {
		if c.done {
			return triple{}, false
		}
		if !c.rows.Next() {
			c.done = true
			continue
		}
		var list []byte
		if err := c.rows.Scan(&list); err != nil {
			c.done, c.err = true, err
			return triple{}, false
		}
		c.buf, c.i = decodeTriples(c.buf[:0], list), 0
	}
	return c.buf[c.i], true
}

// mergeRunList writes the entries of runs (of form) as one new run of
// level, each entry once, and drops them.
func mergeRunList(ctx context.Context, q execQuerier, form, level int64, runs []int64) (err error) {
	w, err := newRunWriter(ctx, q, form, level)
	if err != nil {
		return err
	}
	cs := make([]*runCursor, 0, len(runs))
	defer func() {
		for _, c := range cs {
			err = errors.Join(err, c.rows.Err(), c.rows.Close())
		}
	}()
	for _, run := range runs {
		rows, err := q.QueryContext(ctx, sqlRunChunks, form, run)
		if err != nil {
			return err
		}
		cs = append(cs, &runCursor{rows: rows})
	}
	for {
		best := -1
		var bt triple
		for i, c := range cs {
			if t, ok := c.head(); ok && (best < 0 || t.compare(bt) < 0) {
				best, bt = i, t
			}
		}
		if best < 0 {
			break
		}
		cs[best].i++
		if err := w.write(bt); err != nil {
			return err
		}
	}
	for _, c := range cs {
		if err := errors.Join(c.err, c.rows.Err()); err != nil {
			return err
		}
	}
	if err := w.close(); err != nil {
		return err
	}
	for _, run := range runs {
		if _, err := q.ExecContext(ctx, sqlRunDrop, form, run); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, sqlRunListDrop, form, run); err != nil {
			return err
		}
	}
	return nil
}

// queryInts returns the single integer column of query's rows.
func queryInts(ctx context.Context, q querier, query string, args ...any) ([]int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, v)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// purgeGone takes the entries formsapi_find_gone lists for form (those
// of its deleted rows, and the old keys of rows an update changed) out
// of the form's runs, in the transaction of q, and empties its list.
func purgeGone(ctx context.Context, q execQuerier, form int64) error {
	rows, err := q.QueryContext(ctx, sqlGoneOfForm, form)
	if err != nil {
		return err
	}
	var gone []triple
	for rows.Next() {
		var at, seq int64
		var keys []byte
		if err := rows.Scan(&at, &seq, &keys); err != nil {
			rows.Close()
			return err
		}
		// The keys as the trigger listed them from find_keys, which a
		// host's SQL may have filled with anything: the integers among
		// them (no entry was folded for anything else).
		d := json.NewDecoder(bytes.NewReader(keys))
		d.UseNumber()
		var ks []any
		if err := d.Decode(&ks); err != nil {
			continue
		}
		for _, v := range ks {
			if n, ok := v.(json.Number); ok {
				if k, err := n.Int64(); err == nil && k >= 0 {
					gone = append(gone, triple{k, at, seq})
				}
			}
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if len(gone) > 0 {
		if err := purgeTriples(ctx, q, form, gone); err != nil {
			return err
		}
	}
	_, err = q.ExecContext(ctx, sqlGoneEmpty, form)
	return err
}

// purgeLookups counts purgeTriples' chunk lookups (tests: its work is
// bounded by the chunks it edits, not by the entries it takes out).
var purgeLookups atomic.Int64

// purgeTriples takes the entries gone out of the runs of form: in each
// run, in one ordered pass, a lookup of the chunk that holds the next
// entry and of the chunk after it, whose name bounds the entries that
// chunk holds, so a chunk is looked up once whatever the entries taken
// out of it.
func purgeTriples(ctx context.Context, q execQuerier, form int64, gone []triple) error {
	slices.SortFunc(gone, triple.compare)
	gone = slices.Compact(gone)
	runs, err := queryInts(ctx, q, sqlRunsOfForm, form)
	if err != nil {
		return err
	}
	chunkOf, err := q.PrepareContext(ctx, sqlRunChunkOf)
	if err != nil {
		return err
	}
	defer chunkOf.Close()
	after, err := q.PrepareContext(ctx, sqlRunChunkAfter)
	if err != nil {
		return err
	}
	defer after.Close()
	for _, run := range runs {
		var lost int64
		for i := 0; i < len(gone); {
			var first triple
			var list []byte
			purgeLookups.Add(2)
			err := chunkOf.QueryRowContext(ctx, form, run, gone[i].key, gone[i].at, gone[i].seq).Scan(&first.key, &first.at, &first.seq, &list)
			if errors.Is(err, sql.ErrNoRows) {
				// Before every chunk of the run: not in it. The next
				// entry at or past its first chunk is looked up next.
				err = after.QueryRowContext(ctx, form, run, gone[i].key, gone[i].at, gone[i].seq).Scan(&first.key, &first.at, &first.seq)
				if errors.Is(err, sql.ErrNoRows) {
					break
				}
				if err != nil {
					return err
				}
				i, _ = slices.BinarySearchFunc(gone, first, triple.compare)
				continue
			}
			if err != nil {
				return err
			}
			// The entries before the next chunk's name are this chunk's.
			end := len(gone)
			var next triple
			err = after.QueryRowContext(ctx, form, run, first.key, first.at, first.seq).Scan(&next.key, &next.at, &next.seq)
			switch {
			case err == nil:
				end, _ = slices.BinarySearchFunc(gone, next, triple.compare)
				end = max(end, i+1)
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
			es := decodeTriples(nil, list)
			n := len(es)
			es = slices.DeleteFunc(es, func(t triple) bool {
				_, found := slices.BinarySearchFunc(gone[i:end], t, triple.compare)
				return found
			})
			i = end
			if len(es) == n {
				continue
			}
			lost += int64(n - len(es))
			if len(es) == 0 {
				_, err = q.ExecContext(ctx, sqlRunChunkDrop, form, run, first.key, first.at, first.seq)
			} else {
				_, err = q.ExecContext(ctx, sqlRunChunkSet, form, run, first.key, first.at, first.seq, appendTriples(nil, es))
			}
			if err != nil {
				return err
			}
		}
		if lost > 0 {
			if _, err := q.ExecContext(ctx, sqlRunListTake, form, run, lost); err != nil {
				return err
			}
		}
	}
	return nil
}

// purgeAllGone purges the deleted rows' entries of every form that has
// any (purgeGone), in the transaction of q: what the store's own
// deletions do before they commit.
func purgeAllGone(ctx context.Context, q execQuerier) error {
	forms, err := queryInts(ctx, q, sqlGoneForms)
	if err != nil {
		return err
	}
	for _, form := range forms {
		if err := purgeGone(ctx, q, form); err != nil {
			return err
		}
	}
	return nil
}
