package sqlitestore

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/formsapi/formsapi/internal/stored"
	"modernc.org/sqlite"
)

// The posting blocks of search's trigram entries (migration 0022).
const (
	// foldAt is the number of a form's rows of formsapi_find_tail at
	// which a write folds that form's tail into the blocks (a store's
	// foldAt field; the tests set a smaller one, see withFoldAt). A
	// search reads one form's tail, so this bounds what it reads there.
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
	// The explicit tail's rows (formsapi_find_tail), in one value:
	// "form_seq created_at seq filters find_keys" for each (a NULL
	// find_keys as none), ';' between them, in the tail's order (so a
	// key's entries come sorted). filters says whether the row's filter
	// entries are folded too (migration 0031).
	//
	// A row above its form's mark is left to the form's fold, which
	// reads it once (sqlFormTailKeys): folded here too, its entries would
	// be folded twice.
	sqlTailKeys = `SELECT group_concat(printf('%d %d %d %d ', s.form_seq, s.created_at, s.seq, t.filters) || coalesce(s.find_keys, '[]'), ';'
    ORDER BY s.form_seq, s.created_at, s.seq)
FROM formsapi_find_tail t CROSS JOIN formsapi_submissions s
    ON s.seq = t.seq AND s.form_seq = t.form_seq AND s.created_at = t.created_at
WHERE s.feed_pos <= (SELECT find_folded FROM formsapi_forms WHERE seq = s.form_seq)`

	// sqlTailKeys for one form's tail (?1, its seq), in one pass and in
	// no order (a fold sorts what it writes): its ?2 rows of lowest feed
	// position above the form's mark, found by the index of feed
	// positions, and its rows of formsapi_find_tail at or below the mark
	// (those above it are read as the others, once); then the number of
	// rows read above the mark, the highest feed position among them,
	// and the form's last. CROSS JOIN, as in sqlTailRange: without it a
	// fold read every row of the form at or below the mark.
	sqlFormTailKeys = `SELECT group_concat(r, ';'), count(p), max(p), (SELECT feed_last FROM formsapi_forms WHERE seq = ?1) FROM (
SELECT feed_pos AS p, printf('%d %d %d 2 ', form_seq, created_at, seq) || coalesce(find_keys, '[]') AS r FROM (
    SELECT s.feed_pos, s.created_at, s.seq, s.form_seq, s.find_keys FROM formsapi_submissions s INDEXED BY formsapi_submissions_feed
    WHERE s.form_seq = ?1 AND s.feed_pos > (SELECT find_folded FROM formsapi_forms WHERE seq = ?1)
    ORDER BY s.feed_pos LIMIT ?2)
UNION ALL
SELECT NULL, printf('%d %d %d %d ', s.form_seq, s.created_at, s.seq, t.filters) || coalesce(s.find_keys, '[]')
FROM formsapi_find_tail t CROSS JOIN formsapi_submissions s
    ON s.seq = t.seq AND s.form_seq = t.form_seq AND s.created_at = t.created_at
WHERE t.form_seq = ?1 AND s.form_seq = ?1 AND s.feed_pos <= (SELECT find_folded FROM formsapi_forms WHERE seq = ?1))`

	// The last block of each key ?1 names (records of 40 characters: the
	// form_seq and the key, each a decimal right-aligned in 20), in one
	// value: for each key that has blocks, the record's offset in ?1
	// (4 bytes), the block's first entry (16) and the length of its list
	// (4), big-endian, then the list.
	sqlBlocksLast = `WITH RECURSIVE i(o) AS (SELECT 1 UNION ALL SELECT o + 40 FROM i WHERE o + 40 <= length(?1))
SELECT CAST(group_concat((SELECT unhex(printf('%08x%016x%016x%08x', i.o, b.lo_at, b.lo_seq, length(b.list))) || b.list
    FROM formsapi_find_blocks b
    WHERE b.form_seq = CAST(substr(?1, i.o, 20) AS INTEGER) AND b.key = CAST(substr(?1, i.o + 20, 20) AS INTEGER)
    ORDER BY b.lo_at DESC, b.lo_seq DESC LIMIT 1), '') AS BLOB)
FROM i`

	// Writes blocks: ?1 holds a record of 100 characters a block (its
	// form_seq, key, lo_at and lo_seq, each a decimal right-aligned in 20,
	// then the offset, 1-based, and length of its list in ?2, in 10 each);
	// a block that exists gets the new list.
	sqlBlocksWrite = `WITH RECURSIVE i(o) AS (SELECT 1 UNION ALL SELECT o + 100 FROM i WHERE o + 100 <= length(?1))
INSERT INTO formsapi_find_blocks (form_seq, key, lo_at, lo_seq, list)
SELECT CAST(substr(?1, o, 20) AS INTEGER), CAST(substr(?1, o + 20, 20) AS INTEGER),
    CAST(substr(?1, o + 40, 20) AS INTEGER), CAST(substr(?1, o + 60, 20) AS INTEGER),
    substr(?2, CAST(substr(?1, o + 80, 10) AS INTEGER), CAST(substr(?1, o + 90, 10) AS INTEGER))
FROM i WHERE true
ON CONFLICT (form_seq, key, lo_at, lo_seq) DO UPDATE SET list = excluded.list`

	// The block an entry goes in (the last whose first entry is at or
	// before it; kind 0) and the first block after that (kind 1).
	sqlBlockAround = `SELECT * FROM (SELECT 0, lo_at, lo_seq, list FROM formsapi_find_blocks
WHERE form_seq = ?1 AND key = ?2 AND (lo_at, lo_seq) <= (?3, ?4) ORDER BY lo_at DESC, lo_seq DESC LIMIT 1)
UNION ALL
SELECT * FROM (SELECT 1, lo_at, lo_seq, NULL FROM formsapi_find_blocks
WHERE form_seq = ?1 AND key = ?2 AND (lo_at, lo_seq) > (?3, ?4) ORDER BY lo_at, lo_seq LIMIT 1)`

	sqlBlockUpdate = `UPDATE formsapi_find_blocks SET list = ?5 WHERE form_seq = ?1 AND key = ?2 AND lo_at = ?3 AND lo_seq = ?4`
	sqlBlockInsert = `INSERT INTO formsapi_find_blocks (form_seq, key, lo_at, lo_seq, list) VALUES (?, ?, ?, ?, ?)`
	sqlTailEmpty   = `DELETE FROM formsapi_find_tail WHERE NOT EXISTS (SELECT 1 FROM formsapi_submissions s
    WHERE s.seq = formsapi_find_tail.seq AND s.feed_pos > (SELECT find_folded FROM formsapi_forms WHERE seq = s.form_seq))`

	// A form's seq and the rows of its tail, by the form's ID: the feed
	// positions above its mark (a deletion's too, so it counts at most
	// the rows there) and its rows of formsapi_find_tail at or below it
	// (those above are counted once, as the others).
	sqlFormTailCount = `SELECT f.seq, f.feed_last - f.find_folded + (SELECT count(*) FROM formsapi_find_tail t WHERE t.form_seq = f.seq
    AND (SELECT s.feed_pos FROM formsapi_submissions s WHERE s.seq = t.seq) <= f.find_folded)
FROM formsapi_forms f WHERE f.id = ?1`
	sqlFormTailEmpty = `DELETE FROM formsapi_find_tail WHERE form_seq = ?1`
	sqlLongTails     = `SELECT coalesce(sum(feed_last - find_folded), 0), (SELECT count(*) FROM formsapi_find_gone)
FROM formsapi_forms WHERE feed_last - find_folded >= ?1`
	sqlFormsWithTail = `SELECT seq FROM formsapi_forms WHERE feed_last > find_folded
UNION SELECT form_seq FROM formsapi_find_tail UNION SELECT form_seq FROM formsapi_find_gone`
	sqlFormTailFolded = `UPDATE formsapi_forms SET find_folded = max(find_folded, ?2) WHERE seq = ?1`
)

// postingKey names the blocks of one trigram of one form.
type postingKey struct{ form, key int64 }

func (k postingKey) compare(o postingKey) int {
	if c := cmp.Compare(k.form, o.form); c != 0 {
		return c
	}
	return cmp.Compare(k.key, o.key)
}

// posting is an entry of one trigram key of one form, and the index of
// its key in foldBuf.groups.
type posting struct {
	e entry
	g int32
}

// group is one key's new entries in a fold.
type group struct {
	pk    postingKey
	n     int32   // its postings
	start int32   // where its entries begin in foldBuf.es
	es    []entry // its entries, sorted, distinct
}

// foldBuf holds a fold's buffers, kept for the next fold (foldBufs): a
// fold allocates a few times, not a few times per trigram.
type foldBuf struct {
	tail   sql.RawBytes
	posts  []posting
	index  map[postingKey]int32 // a key's group, while reading the tail
	groups []group
	rank   []int32 // a group's place once sorted
	es     []entry
	in     []byte // sqlBlocksLast's keys
	recs   []byte // sqlBlocksWrite's records
	lists  []byte // and lists
	list   []entry
	merged []entry
	slow   []int // groups written a block at a time (folder.merge)
	// The filters' entries of each form of the tail, and the forms in
	// the order first read (foldRuns).
	triples map[int64][]triple
	forms   []int64
}

var foldBufs = sync.Pool{New: func() any {
	return &foldBuf{index: make(map[postingKey]int32), triples: make(map[int64][]triple)}
}}

// foldTail folds formsapi_find_tail in the transaction of q, but for the
// rows above their forms' marks, which their forms' folds read: each
// tail row's trigram keys (the negative ones of its find_keys) become
// entries of their keys' blocks, and its filter keys entries of a new
// run of its form (foldRuns), and the tail is emptied. The keys' last
// blocks are read in one statement and the blocks written in another; a
// key whose new entries reach before its last block (a late commit) is
// merged a block at a time (folder.merge).
func foldTail(ctx context.Context, q execQuerier) error {
	b := foldBufs.Get().(*foldBuf)
	defer foldBufs.Put(b)
	if err := b.read(ctx, q, sqlTailKeys, nil); err != nil {
		return err
	}
	if err := b.foldAll(ctx, q); err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, sqlTailEmpty); err != nil {
		return fmt.Errorf("fold: empty the tail: %w", err)
	}
	return nil
}

// foldEvery folds the tail of every form that has one (foldFormTail,
// batch rows at a time until none is left above its mark), and what
// formsapi_find_tail holds of others, in the transaction of q; step,
// when not nil, counts the rows.
func foldEvery(ctx context.Context, q execQuerier, batch int64, step *stored.Step) error {
	forms, err := queryInts(ctx, q, sqlFormsWithTail)
	if err != nil {
		return fmt.Errorf("fold: list the tails: %w", err)
	}
	for _, form := range forms {
		for n := batch; n == batch; {
			m, err := foldFormTail(ctx, q, form, batch)
			if err != nil {
				return err
			}
			if n = int64(m); step != nil {
				step.Add(n)
			}
		}
	}
	return foldTail(ctx, q)
}

// foldBatch is the most rows above its mark a form's fold reads, as
// many times the fold's size (4,096 for 256): a tail that grew past it
// (rows a host's SQL added, say) drains a batch a fold, each write's
// fold and Open's.
const foldBatch = 16

// foldFormTail is foldTail for the tail of one form, whose seq is form:
// its foldBatch rows of lowest feed position above the form's mark too,
// which the mark then passes, batch of them at most. It is the fold a
// write makes (foldIfFull); it returns the number of rows above the
// mark it read (batch: more may be left). Folding a form's rows
// by themselves keeps a fold's blocks together: writes spread over many
// forms would otherwise add an entry or two to each of many keys' last
// blocks, rewriting a page for each, at every fold.
func foldFormTail(ctx context.Context, q execQuerier, form, batch int64) (int, error) {
	b := foldBufs.Get().(*foldBuf)
	defer foldBufs.Put(b)
	var above, high, last sql.NullInt64
	if err := b.read(ctx, q, sqlFormTailKeys, []any{form, batch}, &above, &high, &last); err != nil {
		return 0, err
	}
	// The mark passes the rows read: every position of the form when
	// fewer than a batch were above it (a deletion's too), else the
	// highest read.
	mark := last.Int64
	if above.Int64 == batch {
		mark = high.Int64
	}
	if _, seen := b.triples[form]; !seen {
		// Its deleted rows' entries go even with nothing to fold.
		b.forms = append(b.forms, form)
	}
	if err := b.foldAll(ctx, q); err != nil {
		return 0, err
	}
	if _, err := q.ExecContext(ctx, sqlFormTailEmpty, form); err != nil {
		return 0, fmt.Errorf("fold: empty the tail: %w", err)
	}
	if _, err := q.ExecContext(ctx, sqlFormTailFolded, form, mark); err != nil {
		return 0, fmt.Errorf("fold: move the mark: %w", err)
	}
	return int(above.Int64), nil
}

// read reads the tail rows of keys (sqlTailKeys's value, and for
// sqlFormTailKeys its other columns into extra) with args, and groups
// them.
func (b *foldBuf) read(ctx context.Context, q execQuerier, keys string, args []any, extra ...any) error {
	rows, err := q.QueryContext(ctx, keys, args...)
	if err != nil {
		return fmt.Errorf("fold: read the tail: %w", err)
	}
	b.tail = b.tail[:0]
	for rows.Next() {
		if err := rows.Scan(append([]any{&b.tail}, extra...)...); err != nil {
			rows.Close()
			return fmt.Errorf("fold: read the tail: %w", err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("fold: read the tail: %w", err)
	}
	clear(b.triples)
	b.forms = b.forms[:0]
	b.groups = b.groups[:0]
	if len(b.tail) == 0 {
		return nil
	}
	if err := b.group(); err != nil {
		return fmt.Errorf("fold: %w", err)
	}
	return nil
}

// foldAll writes what read grouped: the trigram entries into their
// blocks, the filter entries into runs.
func (b *foldBuf) foldAll(ctx context.Context, q execQuerier) error {
	if err := b.fold(ctx, q); err != nil {
		return fmt.Errorf("fold: %w", err)
	}
	if err := foldRuns(ctx, q, b.forms, b.triples); err != nil {
		return fmt.Errorf("fold: %w", err)
	}
	return nil
}

// group reads b.tail (sqlTailKeys's value) into b.groups: each key's
// entries, the groups sorted by key.
func (b *foldBuf) group() error {
	clear(b.index)
	b.posts, b.groups = b.posts[:0], b.groups[:0]
	for rec := range bytes.SplitSeq(b.tail, []byte{';'}) {
		var form int64
		var e entry
		var ok bool
		if form, rec, ok = cutInt(rec); ok {
			if e.at, rec, ok = cutInt(rec); ok {
				e.seq, rec, ok = cutInt(rec)
			}
		}
		var filters int64
		if ok {
			filters, rec, ok = cutInt(rec)
		}
		if !ok {
			return fmt.Errorf("read the tail: a malformed row %.40q", rec)
		}
		if _, seen := b.triples[form]; !seen {
			b.forms = append(b.forms, form)
			b.triples[form] = nil
		}
		if filters != 0 {
			eachFilterKey(rec, func(k int64) {
				b.triples[form] = append(b.triples[form], triple{k, e.at, e.seq})
			})
		}
		eachNegativeKey(rec, func(k int64) {
			pk := postingKey{form, k}
			g, ok := b.index[pk]
			if !ok {
				g = int32(len(b.groups))
				b.index[pk] = g
				b.groups = append(b.groups, group{pk: pk})
			}
			b.groups[g].n++
			b.posts = append(b.posts, posting{e, g})
		})
	}
	// The groups in order of their keys, each given its range of b.es.
	b.rank = slices.Grow(b.rank[:0], len(b.groups))[:len(b.groups)]
	for i := range b.groups {
		b.groups[i].start = int32(i) // its index before the sort, for now
	}
	slices.SortFunc(b.groups, func(x, y group) int { return x.pk.compare(y.pk) })
	start := int32(0)
	for i := range b.groups {
		g := &b.groups[i]
		b.rank[g.start] = int32(i)
		g.start = start
		g.es = nil
		start += g.n
	}
	b.es = slices.Grow(b.es[:0], int(start))[:start]
	for _, p := range b.posts {
		g := &b.groups[b.rank[p.g]]
		b.es[int(g.start)+len(g.es)] = p.e
		g.es = b.es[g.start : int(g.start)+len(g.es)+1]
	}
	// The tail's order makes each key's entries sorted; a key twice in a
	// row's find_keys, or rows out of order, are put right here.
	for i := range b.groups {
		g := &b.groups[i]
		if !slices.IsSortedFunc(g.es, entry.compare) {
			slices.SortFunc(g.es, entry.compare)
		}
		g.es = slices.Compact(g.es)
	}
	return nil
}

// cutInt reads a decimal integer at the start of b and the space after
// it, and returns the rest of b.
func cutInt(b []byte) (int64, []byte, bool) {
	neg := len(b) > 0 && b[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	var v int64 // accumulated negatively: -2^63 fits
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		v = v*10 - int64(b[j]-'0')
		j++
	}
	if j == i || j-i > 19 || j == len(b) || b[j] != ' ' || !neg && v == math.MinInt64 {
		return 0, b, false
	}
	if !neg {
		v = -v
	}
	return v, b[j+1:], true
}

// fold writes the groups' entries into their keys' blocks.
func (b *foldBuf) fold(ctx context.Context, q execQuerier) error {
	if len(b.groups) == 0 {
		return nil
	}
	b.in = b.in[:0]
	for _, g := range b.groups {
		b.in = appendPadded(appendPadded(b.in, g.pk.form, 20), g.pk.key, 20)
	}
	var last sql.RawBytes
	rows, err := q.QueryContext(ctx, sqlBlocksLast, b.in)
	if err != nil {
		return fmt.Errorf("read the last blocks: %w", err)
	}
	for rows.Next() {
		if err := rows.Scan(&last); err != nil {
			rows.Close()
			return fmt.Errorf("read the last blocks: %w", err)
		}
		// Copied: last is the driver's until rows.Close.
		b.tail = append(b.tail[:0], last...)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the last blocks: %w", err)
	}
	lasts := b.tail
	b.recs, b.lists, b.slow = b.recs[:0], b.lists[:0], b.slow[:0]
	next := -1 // the group of the next block in lasts
	if len(lasts) > 0 {
		if len(lasts) < 4 {
			return errors.New("read the last blocks: a malformed value")
		}
		next = int(binary.BigEndian.Uint32(lasts)-1) / 40
	}
	for i, g := range b.groups {
		if i != next {
			// No blocks yet.
			b.writeChunks(g.pk, g.es)
			continue
		}
		if len(lasts) < 24 || int(binary.BigEndian.Uint32(lasts[20:])) > len(lasts)-24 {
			return errors.New("read the last blocks: a malformed value")
		}
		lo := entry{int64(binary.BigEndian.Uint64(lasts[4:])), int64(binary.BigEndian.Uint64(lasts[12:]))}
		n := int(binary.BigEndian.Uint32(lasts[20:]))
		list := lasts[24 : 24+n]
		lasts = lasts[24+n:]
		next = -1
		if len(lasts) >= 4 {
			next = int(binary.BigEndian.Uint32(lasts)-1) / 40
		}
		if g.es[0].compare(lo) < 0 {
			// A late commit: entries before the key's last block.
			b.slow = append(b.slow, i)
			continue
		}
		// Every new entry goes in the key's last block, which splits
		// past blockMax entries.
		b.list = decodeBlock(b.list[:0], list)
		b.merged = mergeEntries(b.merged[:0], b.list, g.es)
		first := b.merged[:min(len(b.merged), blockMax)]
		b.writeBlock(g.pk, lo, first)
		b.writeChunks(g.pk, b.merged[len(first):])
	}
	if next != -1 {
		return errors.New("read the last blocks: a malformed value")
	}
	if len(b.recs) > 0 {
		if _, err := q.ExecContext(ctx, sqlBlocksWrite, b.recs, b.lists); err != nil {
			return fmt.Errorf("write the blocks: %w", err)
		}
	}
	if len(b.slow) == 0 {
		return nil
	}
	f := folder{q: q}
	defer f.close()
	for _, i := range b.slow {
		if err := f.merge(ctx, b.groups[i].pk, b.groups[i].es); err != nil {
			return err
		}
	}
	return nil
}

// writeChunks adds to sqlBlocksWrite's arguments es (sorted) as new
// blocks of pk, blockMax entries each, the last one shorter.
func (b *foldBuf) writeChunks(pk postingKey, es []entry) {
	for len(es) > 0 {
		c := es[:min(len(es), blockMax)]
		es = es[len(c):]
		b.writeBlock(pk, c[0], c)
	}
}

// writeBlock adds to sqlBlocksWrite's arguments the block of pk named lo
// with the entries es.
func (b *foldBuf) writeBlock(pk postingKey, lo entry, es []entry) {
	b.recs = appendPadded(b.recs, pk.form, 20)
	b.recs = appendPadded(b.recs, pk.key, 20)
	b.recs = appendPadded(b.recs, lo.at, 20)
	b.recs = appendPadded(b.recs, lo.seq, 20)
	b.recs = appendPadded(b.recs, int64(len(b.lists)+1), 10)
	b.recs = appendPadded(b.recs, int64(len(es)*entrySize), 10)
	b.lists = appendBlock(b.lists, es)
}

// appendPadded appends v in decimal, right-aligned in width characters
// (spaces before it).
func appendPadded(b []byte, v int64, width int) []byte {
	var d [20]byte
	s := strconv.AppendInt(d[:0], v, 10)
	for range width - len(s) {
		b = append(b, ' ')
	}
	return append(b, s...)
}

// eachNegativeKey calls fn with each negative key (search's trigrams) of
// keys, a find_keys JSON array of integers.
func eachNegativeKey(keys []byte, fn func(int64)) {
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
			fn(k)
		}
		i = j
	}
}

// eachFilterKey calls fn with each key of keys (a find_keys JSON array
// of integers) that is not negative: the filters' keys.
func eachFilterKey(keys []byte, fn func(int64)) {
	for i := 0; i < len(keys); i++ {
		c := keys[i]
		if c == '-' {
			// A negative key: skip its digits.
			for i+1 < len(keys) && keys[i+1] >= '0' && keys[i+1] <= '9' {
				i++
			}
			continue
		}
		if c < '0' || c > '9' {
			continue
		}
		j := i
		var k int64
		ok := true
		for j < len(keys) && keys[j] >= '0' && keys[j] <= '9' {
			d := int64(keys[j] - '0')
			if k > (math.MaxInt64-d)/10 {
				ok = false
			}
			k = k*10 + d
			j++
		}
		if ok {
			fn(k)
		}
		i = j - 1
	}
}

// folder writes a key's entries into its blocks a block at a time, with
// statements prepared once per fold: the path of a key whose new entries
// reach before its last block (foldBuf.fold).
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

// tailReadEvery is the most writes of a form's tail slot (see
// Store.tails) a store makes between two reads of the form's tail
// count (foldIfFull): other stores and processes add rows to the tail
// too.
const tailReadEvery = 16

// tailSlots is the number of Store.tails: forms share a slot by their
// IDs' hash, which only makes the store read their counts more often.
const tailSlots = 256

// tailSlot is a store's guess at the tail rows of the forms that share
// it: the count it last read, plus its writes since; unread is its
// writes since it last read a count.
type tailSlot struct{ guess, unread atomic.Int64 }

// tailSlotOf is the index of form's slot in Store.tails: its ID's
// FNV-1a hash, computed here so that a write allocates nothing for it.
func tailSlotOf(form string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(form); i++ {
		h = (h ^ uint32(form[i])) * 16777619
	}
	return h % tailSlots
}

// foldIfFull folds the tail rows of form (its ID; see foldFormTail) in
// a transaction of its own when they are foldAt or more: the write that
// brings them there pays for the fold, after its own commit. The store
// reads the form's count only when its slot's guess reaches foldAt, or
// after tailReadEvery writes to the slot: so a fold waits for at most
// that many writes of each other writer of the file.
func (s *Store) foldIfFull(ctx context.Context, form string) error {
	slot := &s.tails[tailSlotOf(form)]
	if slot.guess.Add(1) < s.foldAt && slot.unread.Add(1) < tailReadEvery {
		return nil
	}
	slot.unread.Store(0)
	ctx = context.WithoutCancel(ctx) // the write is committed: its fold is not the request's
	var seq int64
	var n int
	if err := s.formTailCount.QueryRowContext(ctx, form).Scan(&seq, &n); err != nil {
		return fmt.Errorf("fold: count the tail: %w", err)
	}
	slot.guess.Store(int64(n))
	if int64(n) < s.foldAt {
		return nil
	}
	return s.immediate(ctx, func(conn *sql.Conn) error {
		// Another writer may have folded it meanwhile.
		if err := conn.QueryRowContext(ctx, sqlFormTailCount, form).Scan(&seq, &n); err != nil || int64(n) < s.foldAt {
			return err
		}
		n, err := foldFormTail(ctx, conn, seq, foldBatch*s.foldAt)
		if err != nil {
			return err
		}
		if int64(n) == foldBatch*s.foldAt {
			slot.guess.Store(s.foldAt) // the next write folds the next batch
		} else {
			slot.guess.Store(0)
		}
		return nil
	})
}

// foldFull folds the tail rows of each form of forms (their IDs) that
// has foldAt or more, in the transaction of q: a batch's fold.
func foldFull(ctx context.Context, q execQuerier, forms map[string]struct{}, foldAt int64) error {
	for form := range forms {
		var seq int64
		var n int
		rows, err := q.QueryContext(ctx, sqlFormTailCount, form)
		if err != nil {
			return fmt.Errorf("fold: count the tail: %w", err)
		}
		found := rows.Next()
		if found {
			err = rows.Scan(&seq, &n)
		}
		if err = errors.Join(err, rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("fold: count the tail: %w", err)
		}
		if found && int64(n) >= foldAt {
			if _, err := foldFormTail(ctx, q, seq, foldBatch*foldAt); err != nil {
				return err
			}
		}
	}
	return nil
}

// noteFold logs the result err of a write's foldIfFull: the first of
// the folds that fail in a row, at level Warn ("sqlitestore: the
// index's tail not folded"), with SQLite's result code when there is one
// (sqlite_code; the error's text is not logged: it may hold what is
// stored), and the next success, at level Info ("sqlitestore: the
// index's tail folded again"), with the number of folds that failed
// meanwhile (failed_folds). Every write past foldAt tries again, so a
// file that stays busy logs two lines, not one a write.
func (s *Store) noteFold(err error) {
	l := s.progress
	if err == nil {
		if s.foldsFailed.Load() == 0 {
			return
		}
		if n := s.foldsFailed.Swap(0); n > 0 && l != nil && l.Logger != nil {
			l.Logger.LogAttrs(context.Background(), slog.LevelInfo, "sqlitestore: the index's tail folded again",
				append(slices.Clip(l.Attrs), slog.Int64("failed_folds", n))...)
		}
		return
	}
	if s.foldsFailed.Add(1) != 1 || l == nil || l.Logger == nil {
		return
	}
	attrs := slices.Clip(l.Attrs)
	var se *sqlite.Error
	if errors.As(err, &se) {
		attrs = append(attrs, slog.Int("sqlite_code", se.Code()))
	}
	l.Logger.LogAttrs(context.Background(), slog.LevelWarn, "sqlitestore: the index's tail not folded; a later write folds it", attrs...)
}
