package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"slices"
)

// The posting blocks of search's trigram entries (migration 0022).
const (
	// foldAt is the number of rows of formsapi_find_tail at which a
	// write folds the tail into the blocks.
	foldAt = 256
	// blockMax is the most entries a block holds (16 bytes each: a row
	// of formsapi_find_blocks stays within its page).
	blockMax = 56
	// entrySize is the size of an entry in a block's list.
	entrySize = 16
)

// execQuerier is what the fold needs of a transaction (a *sql.Tx or a
// *sql.Conn inside BEGIN).
type execQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// entry is a trigram entry's keyset position: (created_at, seq).
type entry struct{ at, seq int64 }

func (e entry) compare(o entry) int {
	if c := cmp.Compare(e.at, o.at); c != 0 {
		return c
	}
	return cmp.Compare(e.seq, o.seq)
}

// decodeBlock appends the entries of a block's list to dst. A list whose
// length is not a multiple of entrySize (not one this package wrote) has
// its last bytes ignored.
func decodeBlock(dst []entry, list []byte) []entry {
	for len(list) >= entrySize {
		dst = append(dst, entry{int64(binary.BigEndian.Uint64(list)), int64(binary.BigEndian.Uint64(list[8:]))})
		list = list[entrySize:]
	}
	return dst
}

// encodeBlock is a block's list of entries.
func encodeBlock(es []entry) []byte {
	return appendBlock(make([]byte, 0, len(es)*entrySize), es)
}

// appendBlock appends a block's list of entries es to b.
func appendBlock(b []byte, es []entry) []byte {
	for _, e := range es {
		b = binary.BigEndian.AppendUint64(b, uint64(e.at))
		b = binary.BigEndian.AppendUint64(b, uint64(e.seq))
	}
	return b
}

const (
	sqlTailKeys = `SELECT t.form_seq, t.created_at, t.seq, s.find_keys
FROM formsapi_find_tail t JOIN formsapi_submissions s ON s.seq = t.seq`

	// The block an entry goes in (the last whose first entry is at or
	// before it; kind 0) and the first block after that (kind 1).
	sqlBlockAround = `SELECT * FROM (SELECT 0, lo_at, lo_seq, list FROM formsapi_find_blocks
WHERE form_seq = ?1 AND key = ?2 AND (lo_at, lo_seq) <= (?3, ?4) ORDER BY lo_at DESC, lo_seq DESC LIMIT 1)
UNION ALL
SELECT * FROM (SELECT 1, lo_at, lo_seq, NULL FROM formsapi_find_blocks
WHERE form_seq = ?1 AND key = ?2 AND (lo_at, lo_seq) > (?3, ?4) ORDER BY lo_at, lo_seq LIMIT 1)`

	sqlBlockUpdate = `UPDATE formsapi_find_blocks SET list = ?5 WHERE form_seq = ?1 AND key = ?2 AND lo_at = ?3 AND lo_seq = ?4`
	sqlBlockInsert = `INSERT INTO formsapi_find_blocks (form_seq, key, lo_at, lo_seq, list) VALUES (?, ?, ?, ?, ?)`
	sqlTailCount   = `SELECT count(*) FROM formsapi_find_tail`
	sqlTailEmpty   = `DELETE FROM formsapi_find_tail`
)

// postingKey names the blocks of one trigram of one form.
type postingKey struct{ form, key int64 }

// foldTail folds formsapi_find_tail into formsapi_find_blocks in the
// transaction of q: each tail row's trigram keys (the negative ones of
// its find_keys) become entries of their keys' blocks, and the tail is
// emptied.
func foldTail(ctx context.Context, q execQuerier) error {
	rows, err := q.QueryContext(ctx, sqlTailKeys)
	if err != nil {
		return fmt.Errorf("fold: read the tail: %w", err)
	}
	var posts []posting
	n := 0
	for rows.Next() {
		var form int64
		var e entry
		var keys sql.RawBytes
		if err := rows.Scan(&form, &e.at, &e.seq, &keys); err != nil {
			rows.Close()
			return fmt.Errorf("fold: read the tail: %w", err)
		}
		n++
		posts = appendNegativeKeys(posts, keys, form, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("fold: read the tail: %w", err)
	}
	if n == 0 {
		return nil
	}
	slices.SortFunc(posts, posting.compare)
	posts = slices.Compact(posts)
	f := folder{q: q}
	defer f.close()
	if err := f.fold(ctx, posts); err != nil {
		return fmt.Errorf("fold: %w", err)
	}
	if _, err := q.ExecContext(ctx, sqlTailEmpty); err != nil {
		return fmt.Errorf("fold: empty the tail: %w", err)
	}
	return nil
}

// posting is an entry of one trigram key of one form.
type posting struct {
	pk postingKey
	e  entry
}

func (p posting) compare(o posting) int {
	if c := cmp.Compare(p.pk.form, o.pk.form); c != 0 {
		return c
	}
	if c := cmp.Compare(p.pk.key, o.pk.key); c != 0 {
		return c
	}
	return p.e.compare(o.e)
}

// appendNegativeKeys appends to dst an entry e of form for each negative
// key (search's trigrams) of keys, a find_keys JSON array of integers.
func appendNegativeKeys(dst []posting, keys []byte, form int64, e entry) []posting {
	for i := 0; i < len(keys); i++ {
		if keys[i] != '-' {
			continue
		}
		j := i + 1
		for j < len(keys) && keys[j] >= '0' && keys[j] <= '9' {
			j++
		}
		if j > i+1 && j-i <= 20 {
			var k int64 // accumulated negatively: -2^63 fits
			for _, c := range keys[i+1 : j] {
				k = k*10 - int64(c-'0')
			}
			dst = append(dst, posting{postingKey{form, k}, e})
		}
		i = j
	}
	return dst
}

// folder writes a fold's entries into their blocks, a key at a time,
// with statements prepared once per fold. (Reading every key's last
// block in one statement and writing them in one or two more, through
// json_each, cost more CPU than these statements did: BENCHMARKS.md,
// "Search's posting blocks".)
type folder struct {
	q                      execQuerier
	around, update, insert *sql.Stmt
}

func (f *folder) close() {
	for _, st := range []*sql.Stmt{f.around, f.update, f.insert} {
		if st != nil {
			st.Close()
		}
	}
}

// fold writes posts (sorted by form, key and entry, distinct) into their
// keys' blocks.
func (f *folder) fold(ctx context.Context, posts []posting) error {
	var es []entry
	for len(posts) > 0 {
		pk := posts[0].pk
		es = es[:0]
		i := 0
		for i < len(posts) && posts[i].pk == pk {
			es = append(es, posts[i].e)
			i++
		}
		posts = posts[i:]
		if err := f.merge(ctx, pk, es); err != nil {
			return err
		}
	}
	return nil
}

func (f *folder) prepare(ctx context.Context) error {
	if f.around != nil {
		return nil
	}
	var err error
	if f.around, err = f.q.PrepareContext(ctx, sqlBlockAround); err != nil {
		return err
	}
	if f.update, err = f.q.PrepareContext(ctx, sqlBlockUpdate); err != nil {
		return err
	}
	f.insert, err = f.q.PrepareContext(ctx, sqlBlockInsert)
	return err
}

// merge adds es (sorted, distinct) to the blocks of pk.
func (f *folder) merge(ctx context.Context, pk postingKey, es []entry) error {
	if err := f.prepare(ctx); err != nil {
		return err
	}
	for len(es) > 0 {
		var cur *entry // the first entry of the block es[0] goes in, if any
		var next *entry
		var list []byte
		rows, err := f.around.QueryContext(ctx, pk.form, pk.key, es[0].at, es[0].seq)
		if err != nil {
			return err
		}
		for rows.Next() {
			var kind int
			var lo entry
			var l []byte
			if err := rows.Scan(&kind, &lo.at, &lo.seq, &l); err != nil {
				rows.Close()
				return err
			}
			if kind == 0 {
				cur, list = &lo, l
			} else {
				next = &lo
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// The entries before the next block's first are this block's.
		i := len(es)
		if next != nil {
			i, _ = slices.BinarySearchFunc(es, *next, entry.compare)
		}
		take := es[:i]
		es = es[i:]
		if cur == nil {
			// Before every block of the key: blocks of their own.
			if err := f.insertChunks(ctx, pk, take); err != nil {
				return err
			}
			continue
		}
		merged := mergeEntries(nil, decodeBlock(nil, list), take)
		first := merged
		if len(first) > blockMax {
			first = first[:blockMax]
		}
		if _, err := f.update.ExecContext(ctx, pk.form, pk.key, cur.at, cur.seq, encodeBlock(first)); err != nil {
			return err
		}
		if err := f.insertChunks(ctx, pk, merged[len(first):]); err != nil {
			return err
		}
	}
	return nil
}

// insertChunks writes es (sorted) as new blocks of pk, blockMax entries
// each, the last one shorter.
func (f *folder) insertChunks(ctx context.Context, pk postingKey, es []entry) error {
	for len(es) > 0 {
		c := es[:min(len(es), blockMax)]
		es = es[len(c):]
		if _, err := f.insert.ExecContext(ctx, pk.form, pk.key, c[0].at, c[0].seq, encodeBlock(c)); err != nil {
			return err
		}
	}
	return nil
}

// mergeEntries appends to dst the sorted union of a and b (each sorted),
// each entry once.
func mergeEntries(dst, a, b []entry) []entry {
	for len(a) > 0 && len(b) > 0 {
		switch c := a[0].compare(b[0]); {
		case c < 0:
			dst, a = append(dst, a[0]), a[1:]
		case c > 0:
			dst, b = append(dst, b[0]), b[1:]
		default:
			dst, a, b = append(dst, a[0]), a[1:], b[1:]
		}
	}
	dst = append(dst, a...)
	return append(dst, b...)
}

// foldIfFull folds the tail (see foldTail) in a transaction of its own
// when it holds foldAt rows or more: the write that brings it there
// pays for the fold, after its own commit.
func (s *Store) foldIfFull(ctx context.Context) error {
	var n int
	if err := s.tailCount.QueryRowContext(ctx).Scan(&n); err != nil {
		return fmt.Errorf("fold: count the tail: %w", err)
	}
	if n < foldAt {
		return nil
	}
	return s.immediate(ctx, func(conn *sql.Conn) error {
		// Another writer may have folded it meanwhile.
		if err := conn.QueryRowContext(ctx, sqlTailCount).Scan(&n); err != nil || n < foldAt {
			return err
		}
		return foldTail(ctx, conn)
	})
}
