package pagecache

import (
	"slices"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/observe"
)

// Incremental pages. A form written to all day changes its version with
// every submission, and every cached page of it would be read again in
// full on every node at its next request. Most of those changes are
// additions, and an addition changes a page only where its position
// falls: a newest-first first page gains it at its head, an oldest-first
// page that holds its whole list gains it at its end, and a page whose
// held items all come before it does not change at all. So a store that
// can tell exactly what was added to a form since a version, and that
// nothing else changed, reads only that and splices it into the page it
// holds (Since, Splice), which costs the database a few rows instead of
// a page.
//
// What the store tells the cache, with each page it reads (DoneAt) and
// with each splice, read in the same snapshot as the page or the rows, is
// the form's Head:
//
//   - Base, a value that changes, to one it never had before, with every
//     change to the form's submissions that is not an addition at the end
//     of its feed (a deletion, an update, a truncation, an insert that did
//     not take the form's next feed position, a new form, a form whose
//     ID, owner or seq changes), and never with an addition;
//   - Last, the form's last feed position: every addition takes the next
//     one, so what was added since a head is exactly the submissions
//     whose feed position is above its Last;
//   - Anchor, the keyset position of the submission at feed position
//     Last (zero when none is there): after a restore that took the
//     database back past the page's state, the submission the store finds
//     at Last is another one (or none), and the splice is refused; Base
//     and Last alone could match the restored history by chance.
//
// The cache splices only when Base is the page's, the rows the store
// read are every feed position above the page's Last up to the new Last
// (none missing, none more), and the anchor is where it was; otherwise
// the store reads the page in full, as without splicing. Additions are
// placed by their keyset position, wherever their writers' clocks put
// them, not assumed to come first.

// Deletions. A deletion takes the form's next feed position too, for a
// tombstone that names the deleted submission's feed position and keyset
// position (pgstore migration 0026, sqlitestore 0029), and leaves Base
// alone. A store that reads the tombstones above a page's Last with the
// additions (sqlitestore's splice statement, pgstore's rounds) hands them
// to Splice as rows with Deleted set: the page loses the submission (a
// page that ends before it, in a list that goes on, does not hold it),
// and an addition since the page that a tombstone names was deleted
// again, and is not added. A store that reads only the additions hands
// Splice a feed with positions missing, and the splice is refused, as
// before.

// Head is where a form's feed stood when a page of it was read: see the
// comment above Since.
type Head struct {
	// Base changes with every change to the form's submissions that is
	// not an addition at the end of its feed, and never otherwise.
	Base int64
	// Last is the form's last feed position.
	Last int64
	// Anchor is the keyset position of the submission at feed position
	// Last; its Seq is 0 when no submission is there.
	Anchor keyset.Pos
}

// Added is a row a store read for Splice: a submission's feed position,
// its keyset position and its stored JSON, which Splice copies; or, with
// Deleted, a tombstone at feed position Feed of the submission that had
// keyset position Pos and feed position Of.
type Added struct {
	Feed    int64
	Pos     keyset.Pos
	Encoded []byte
	Deleted bool
	Of      int64
}

// Since reports whether the cache holds r's list at an older version of
// the form, tagged with the Head of that version: the store may then read
// what was added to the form since (every submission whose feed position
// is from h.Last to the form's last, in feed order, with the form's
// version and head, in one snapshot) and hand it to Splice. At most MaxSplice rows are worth
// reading: beyond that the page is read in full.
func (r *Read) Since() (h Head, ok bool) {
	if r.older == nil {
		return Head{}, false
	}
	return r.older.head, true
}

// MaxSplice is the most additions Splice takes in one go: a form that
// gained more since a page was read has its page read again in full.
const MaxSplice = 32

// Splice serves r's page from the page the cache holds at an older
// version (see Since) and the rows the store read since its head: rows
// holds every submission whose feed position is from that head's Last to
// last, and every tombstone above that head's Last (see Deletions), in
// feed order, read with the form's version v and its new head's Base and
// Last (in one snapshot, or in several that all had this Base). It
// reports whether it served the page (appended to the page as Begin
// would, and kept for the next request, tagged with v); if not, the store
// reads the page in full, as Range says, and nothing in the page has
// changed. It never serves a page when anything but additions and
// deletions at the end of the feed came between (see Head), when a
// position above the held page's Last has no row, when a row is damaged,
// or when the page needs items the cache does not hold (a deletion inside
// a page of a list that goes on leaves it an item short).
func (r *Read) Splice(v, base, last int64, rows []Added) bool {
	old := r.older
	if old == nil || r.served || v <= old.version || base != old.head.Base || last < old.head.Last {
		return false
	}
	// The anchor first: rows[0] is at the old Last exactly when a
	// submission was there.
	if old.head.Anchor.Seq != 0 {
		if len(rows) == 0 || rows[0].Feed != old.head.Last || rows[0].Deleted || rows[0].Pos != old.head.Anchor {
			return false
		}
		rows = rows[1:]
	} else if len(rows) > 0 && rows[0].Feed == old.head.Last {
		return false
	}
	// Then every position above the old Last, once, in order: a row, or
	// an addition that a tombstone says was deleted since.
	var gone map[int64]bool // additions since the page, deleted again
	for _, a := range rows {
		if a.Deleted && a.Of > old.head.Last {
			if gone == nil {
				gone = map[int64]bool{}
			}
			gone[a.Of] = true
		}
	}
	i := 0
	for p := old.head.Last + 1; p <= last; p++ {
		switch {
		case i < len(rows) && rows[i].Feed == p:
			i++
		case gone[p]:
		default:
			return false
		}
	}
	if i != len(rows) {
		return false
	}
	h := Head{Base: base, Last: last, Anchor: old.head.Anchor}
	if len(rows) > 0 { // then the last is at last
		h.Anchor = keyset.Pos{}
		if a := rows[len(rows)-1]; !a.Deleted {
			h.Anchor = a.Pos
		}
	}
	var added, deleted []Added
	for _, a := range rows {
		switch {
		case a.Deleted && a.Of <= old.head.Last:
			deleted = append(deleted, a) // a submission of the page's list then
		case a.Deleted, gone[a.Feed]:
		default:
			added = append(added, a)
		}
	}
	rows = added
	e, ok := old.spliced(r.q, r.lo, r.hi, rows, deleted)
	if !ok {
		return false
	}
	e.version, e.head, e.hasHead = v, h, true
	if int64(len(e.body))*8 <= r.c.maxBytes {
		r.c.put(r.key, e) // kept even when it does not serve this page: a longer one reads only the rest
	}
	if !e.serve(r.q, r.p) {
		return false
	}
	r.served = true
	r.p.Cache = observe.CacheSpliced
	return true
}

// spliced returns a new entry: e's items less those deleted and with the
// rows added to the list (those between lo and hi) merged in by
// position, q's order, for as far as e knew the list; or false if a row
// is damaged or already held, or a deleted submission of the list is not
// where e says it was.
func (e *entry) spliced(q formsapi.Query, lo, hi keyset.Pos, rows, deleted []Added) (*entry, bool) {
	n := len(e.pos)
	if n == 0 && e.more {
		return nil, false // nothing held tells where the list goes on
	}
	// before reports whether position a comes before b in the list.
	before := func(a, b keyset.Pos) bool { return b.Less(a) }
	if q.Order == formsapi.Oldest {
		before = func(a, b keyset.Pos) bool { return a.Less(b) }
	}
	var (
		add     []Added
		scratch wire.Page // validates and encodes each added row as Row would
		dropped bool      // an added or deleted row past the last held item of a list that goes on
		del     map[keyset.Pos]bool
	)
	for _, d := range deleted {
		switch {
		case !(lo.Less(d.Pos) && d.Pos.Less(hi)):
			continue // not in this list
		case e.more && before(e.pos[n-1], d.Pos):
			dropped = true // past the last held item: it may have been the next
			continue
		}
		if _, held := slices.BinarySearchFunc(e.pos, d.Pos, func(p, t keyset.Pos) int {
			switch {
			case p == t:
				return 0
			case before(p, t):
				return -1
			}
			return 1
		}); !held {
			return nil, false // the list had it where e holds the list: not e's list
		}
		if del == nil {
			del = map[keyset.Pos]bool{}
		}
		del[d.Pos] = true
	}
	for _, a := range rows {
		if !(lo.Less(a.Pos) && a.Pos.Less(hi)) {
			continue // not in this list
		}
		if e.more && !before(a.Pos, e.pos[n-1]) {
			dropped = true
			continue
		}
		start := len(scratch.Body)
		if scratch.AddedAny() {
			start++ // the comma Add puts first
		}
		if !scratch.Add(a.Pos.Seq, a.Encoded) {
			return nil, false // damaged: a full read leaves it out and logs it
		}
		add = append(add, Added{Pos: a.Pos, Encoded: scratch.Body[start:]})
	}
	slices.SortFunc(add, func(a, b Added) int {
		if before(a.Pos, b.Pos) {
			return -1
		}
		return 1
	})
	out := &entry{more: e.more, nextSize: e.nextSize, limit: max(e.limit, q.Limit)}
	if dropped {
		out.nextSize = 0 // the item after the last held may be one of them
	}
	max := max(n, out.limit)
	out.pos = make([]keyset.Pos, 0, min(n+len(add), max))
	out.ends = make([]int, 0, cap(out.pos))
	out.body = make([]byte, 0, len(e.body)+len(scratch.Body)+1)
	i, j := 0, 0
	for i < n || j < len(add) {
		var pos keyset.Pos
		var obj []byte
		switch {
		case j == len(add) || i < n && before(e.pos[i], add[j].Pos):
			pos, obj = e.pos[i], e.body[e.start(i):e.ends[i]]
			i++
			if del[pos] {
				continue
			}
		case i < n && e.pos[i] == add[j].Pos:
			return nil, false // already held: not an addition
		default:
			pos, obj = add[j].Pos, add[j].Encoded
			j++
		}
		if len(out.pos) == max {
			out.more, out.nextSize = true, len(obj)
			break
		}
		if len(out.body) > 0 {
			out.body = append(out.body, ',')
		}
		out.body = append(out.body, obj...)
		out.ends, out.pos = append(out.ends, len(out.body)), append(out.pos, pos)
	}
	return out, true
}

// start returns where item i begins in e.body.
func (e *entry) start(i int) int {
	if i == 0 {
		return 0
	}
	return e.ends[i-1] + 1 // after the comma
}
