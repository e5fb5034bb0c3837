// Package wire carries pages the library's own stores have already encoded
// as the API sends them. The handler's fast path takes a *Page; since the
// type is internal, only stores in this module can offer that path, and a
// host's store always goes through the checked formsapi.Store path.
package wire

import (
	"math"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/formsapi/formsapi/observe"
)

// Page is a page of submissions being appended to a response body.
type Page struct {
	// Body is the response being built. A store appends each submission's
	// JSON object to it with Add or AddTrusted, after what is already there.
	Body []byte
	// NextCursor is the store's cursor after this page, "" at the end.
	NextCursor string
	// Skipped lists the stored submissions Add left out as damaged, for
	// the handler to log; the rest of the page is served as usual.
	Skipped []Skipped
	// Form is what the store told the handler about the page's form when
	// the request's key was looked up (see Form), or nil: the store then
	// reads it itself.
	Form *Form
	// Cache is what the store's read cache did for the page, for an
	// observer (internal/pagecache sets it); CacheNone without a cache.
	Cache observe.Cache
	// Incarnation is the incarnation of the page's form, set by the store
	// with the page: a value that the form keeps for its life and that a
	// form created again with the same ID after a deletion does not have,
	// never 0. 0 means the store cannot tell. The handler seals it into the
	// page's cursor or sync token, and answers 410 to a cursor or token
	// that carries another incarnation than the form's.
	Incarnation uint64

	// A feed page also records, as the store appends it, the feed
	// position of each object it appended (Positions), the positions of
	// the submissions whose deletions the page holds (Deleted), and the
	// last position of a deletion the store no longer keeps (Purged).
	// See formsapi.FeedPage.
	Positions []int64
	Deleted   []int64
	Purged    int64
	// Ends holds, for each object recorded in Positions, the offset in
	// Body just past it, so that a reader of the page (the export) can
	// take its objects one by one.
	Ends []int
	// Excluded counts the submissions a feed page read with keys
	// (FeedQuery.Keys) left out, none of whose index keys is one of them
	// (or whose stored JSON holds none of FeedQuery.Values), and
	// ExcludedBytes their stored JSON's bytes: the reader counts them as
	// walked, and checks no more of them.
	Excluded      int
	ExcludedBytes int64
	// KeysChecked says that the store checked the keys of the page's
	// submissions (FeedQuery.Keys), or their stored JSON's bytes for the
	// values (FeedQuery.Values), and left out those that hold none: those
	// it sent hold one, but for the few whose keys it does not know (or
	// whose bytes it could not tell by). The reader may then skip its own
	// quick tests that a submission holds one of those keys' values
	// (find.MatchKeyed), never its exact check.
	KeysChecked bool
	// Locate, when not nil, names members of a submission's data (a
	// filtered export's clauses' fields) that Add finds in the pass
	// that checks each object (ScanObjectLocating), recording for each
	// object it appends LocatedStride(len(Locate)) offsets in Located,
	// relative to the object's first byte: the reader then checks its
	// clauses without another pass to find them. AddTrusted records an
	// object's offsets as not found (-1), and an object appended by
	// Append records none: Located is to be read only when it holds
	// LocatedStride(len(Locate)) offsets for each of the page's objects,
	// and an object's only when its first is not -1.
	Locate  []string
	Located []int

	// Digests, when the store's read cache served the page's items whole
	// from a page it holds (and only then), is where the handler keeps its
	// digest of those items, DigestItems of them, with the held page: a
	// repeat of the request then tags the page without hashing its items
	// again (formsapi's pageTag). The held page never changes, so neither
	// does the digest of its first DigestItems items.
	Digests     *Digests
	DigestItems int

	items int // objects appended so far, for the separating commas
}

// Digests keeps a few 16-byte digests of a held page's first n items, each
// under the key of the handler that computed it (owner, a pointer of the
// handler's: two handlers over one store may key their tags differently).
// It is bounded: a fifth digest takes the place of the oldest. Safe for
// concurrent use; the zero value is empty.
type Digests struct {
	slots [digestSlots]atomic.Pointer[digest]
	next  atomic.Uint32
}

const digestSlots = 4

type digest struct {
	owner   any
	n, size int
	sum     [16]byte
}

// Load returns the digest owner stored for the first n items, size bytes
// of them, if it is still held.
func (d *Digests) Load(owner any, n, size int) ([16]byte, bool) {
	for i := range d.slots {
		if g := d.slots[i].Load(); g != nil && g.n == n && g.size == size && g.owner == owner {
			return g.sum, true
		}
	}
	return [16]byte{}, false
}

// Store keeps sum as owner's digest of the first n items, size bytes of
// them, in place of the oldest digest held.
func (d *Digests) Store(owner any, n, size int, sum [16]byte) {
	i := (d.next.Add(1) - 1) % digestSlots
	d.slots[i].Store(&digest{owner: owner, n: n, size: size, sum: sum})
}

// Form is the form a request lists, as a store of this module found it
// in the same statement as the request's key: the handler's combined
// lookup, which saves a cached page every database round trip but that
// one. The handler hands it back to the same store with the page (and
// only to that store: Seq and Version mean nothing to another), which
// then skips its own ownership check and version read.
type Form struct {
	// Found reports whether the form is one of the key's account; the
	// other fields are zero when it is not.
	Found bool
	// Seq is the form's row in the store, and Version its version when it
	// was read (see internal/pagecache).
	Seq, Version int64
	// Incarnation is the form's incarnation (see Page.Incarnation), 0
	// when the store did not read it.
	Incarnation uint64
	// Stale reports an answer a following node gave from its copy
	// without waiting for a round (pgstore.WithStaleness): it may miss
	// writes committed up to the node's bound before the request. Age is
	// then how long before the answer the copy's last round started; the
	// handler sends it as the Data-Age header.
	Stale bool
	Age   time.Duration
}

// Forms is the version of an account's forms list, as a store of this
// module read it in the same statement as the key of a request for the
// list (the handler's combined lookup for GET /v1/forms). The handler
// hands it back to the same store, and only to that store, for every
// page of forms the request reads, so that a page the store's read cache
// holds at that version costs no statement.
//
// The store also keeps it: when it reads a page from the database, it
// sets Version to the version read with that page, so that the later
// pages of the same request are read at that version or a later one,
// never at an earlier one.
type Forms struct {
	// Known reports whether the store could tell the list's version; when
	// it could not (no version is kept for the account), every page is
	// read from the database and none is cached.
	Known bool
	// Version is the list's version when Known.
	Version int64
	// Stale and Age are Form's: an answer from a following node's copy,
	// and its age.
	Stale bool
	Age   time.Duration
	// Cache is what the store's read cache did for the page last read, for
	// an observer; CacheNone without a cache.
	Cache observe.Cache
}

// Skipped names a stored submission left out of a page, by the store's
// own sequence number (never its content), and why.
type Skipped struct {
	Seq    int64
	Reason string
}

// Add appends obj, a submission object as read back from storage, unless
// it is damaged: an obj that is not one JSON object, or that nests so deep
// that the response would pass encoding/json's limit, is left out and
// recorded in p.Skipped, and invalid UTF-8 inside its strings is sent as
// U+FFFD, as encoding/json would. It reports whether obj was appended.
// This is the store side of the Store contract's damaged-data clause.
func (p *Page) Add(seq int64, obj []byte) bool {
	var valid, utf8OK, tooDeep bool
	located := len(p.Located)
	if p.Locate != nil {
		p.Located = append(p.Located, make([]int, LocatedStride(len(p.Locate)))...)
		valid, utf8OK, tooDeep = ScanObjectLocating(obj, MaxSubmissionDepth, p.Locate, p.Located[located:])
	} else {
		valid, utf8OK, tooDeep = ScanObjectWithin(obj, MaxSubmissionDepth)
	}
	switch {
	case tooDeep:
		// Stored before the write side had limits: a response holding it
		// would be past what encoding/json decodes.
		p.Skipped = append(p.Skipped, Skipped{Seq: seq, Reason: "stored JSON nests too deep for a client to decode"})
		p.Located = p.Located[:located]
		return false
	case !valid:
		p.Skipped = append(p.Skipped, Skipped{Seq: seq, Reason: "stored JSON is not one object"})
		p.Located = p.Located[:located]
		return false
	}
	p.comma()
	if utf8OK {
		p.Body = append(p.Body, obj...)
	} else {
		p.Body = appendValidUTF8(p.Body, obj)
	}
	return true
}

// AddTrusted appends obj without checking it: for objects the store made
// in this process and never let out of its hands.
func (p *Page) AddTrusted(obj []byte) {
	p.comma()
	p.Body = append(p.Body, obj...)
	if p.Locate != nil {
		n := len(p.Located)
		p.Located = append(p.Located, make([]int, LocatedStride(len(p.Locate)))...)
		for i := n; i < len(p.Located); i++ {
			p.Located[i] = -1 // not looked for: the reader finds them
		}
	}
}

// AddAt is Add for a feed page: it also records pos in p.Positions when
// obj is appended.
func (p *Page) AddAt(pos int64, obj []byte) bool {
	if !p.Add(pos, obj) {
		return false
	}
	p.Positions, p.Ends = append(p.Positions, pos), append(p.Ends, len(p.Body))
	return true
}

// AddTrustedAt is AddTrusted for a feed page, recording pos.
func (p *Page) AddTrustedAt(pos int64, obj []byte) {
	p.AddTrusted(obj)
	p.Positions, p.Ends = append(p.Positions, pos), append(p.Ends, len(p.Body))
}

// Objects returns how many objects were appended to p.
func (p *Page) Objects() int { return p.items }

// AddedAny reports whether any object was appended to p.
func (p *Page) AddedAny() bool { return p.items > 0 }

func (p *Page) comma() {
	if p.items > 0 {
		p.Body = append(p.Body, ',')
	}
	p.items++
}

// appendValidUTF8 appends s with each run of invalid UTF-8 replaced by
// U+FFFD; inside a valid JSON object such bytes can only be in strings.
func appendValidUTF8(b, s []byte) []byte {
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
			for len(s) > 0 {
				if r, size = utf8.DecodeRune(s); r != utf8.RuneError || size != 1 {
					break
				}
				s = s[1:]
			}
			continue
		}
		b = append(b, s[:size]...)
		s = s[size:]
	}
	return b
}

// Append appends the object enc writes to p.Body, after a separating
// comma, and returns the object's length. When enc fails, p is left as
// it was. It is for objects the caller encodes itself, from values it
// checked, as the handler does for a host's store.
func (p *Page) Append(enc func(b []byte) ([]byte, error)) (int, error) {
	mark := p.Mark()
	p.comma()
	start := len(p.Body)
	b, err := enc(p.Body)
	if err != nil {
		p.Body = b
		p.Rewind(mark)
		return 0, err
	}
	p.Body = b
	return len(b) - start, nil
}

// Mark is where a page stood, for Rewind.
type Mark struct {
	body, skipped, items int
	positions, deleted   int
	purged               int64
	next                 string
	excluded             int
	excludedBytes        int64
}

// Mark records where p stands now.
func (p *Page) Mark() Mark {
	return Mark{body: len(p.Body), skipped: len(p.Skipped), items: p.items, next: p.NextCursor,
		positions: len(p.Positions), deleted: len(p.Deleted), purged: p.Purged,
		excluded: p.Excluded, excludedBytes: p.ExcludedBytes}
}

// Rewind undoes everything added to p since m: its objects, separating
// commas, skipped rows and cursor. A store that fails partway through a
// page, and may read it again, rewinds first, so the retry cannot leave a
// stray comma or a duplicate item.
func (p *Page) Rewind(m Mark) {
	p.Body, p.Skipped, p.items, p.NextCursor = p.Body[:m.body], p.Skipped[:m.skipped], m.items, m.next
	p.Positions, p.Deleted, p.Purged = p.Positions[:m.positions], p.Deleted[:m.deleted], m.purged
	p.Ends = p.Ends[:min(len(p.Ends), m.positions)]
	p.Excluded, p.ExcludedBytes = m.excluded, m.excludedBytes
	p.Located = p.Located[:min(len(p.Located), m.items*LocatedStride(len(p.Locate)))]
	p.Digests, p.DigestItems = nil, 0
}

// Budget ends a page at a number of bytes: before an item that would take
// the page's items past it, unless that item would be the page's first,
// so a page is never empty while items remain. Each item counts as the
// length of its JSON as the API sends it. A zero Budget has no bound.
type Budget struct {
	max, used int
	n         int // items taken
}

// NewBudget returns a budget of max bytes: none if max is not positive.
func NewBudget(max int) Budget {
	return Budget{max: max}
}

// Fits reports whether an item of size bytes still fits on the page.
func (b *Budget) Fits(size int) bool {
	return b.max <= 0 || b.n == 0 || b.used+size <= b.max
}

// Count counts an item of size bytes as on the page. Stores count only
// the items they put on it, not damaged ones they leave out.
func (b *Budget) Count(size int) {
	b.used += size
	b.n++
}

// Room returns how many more bytes of items fit before the budget ends
// the page (the item that passes it comes after them): math.MaxInt for no
// budget. A store may bound what it reads by it.
func (b *Budget) Room() int {
	if b.max <= 0 {
		return math.MaxInt
	}
	return max(b.max-b.used, 0)
}

// Take counts an item of size bytes and reports true if it fits.
func (b *Budget) Take(size int) bool {
	if !b.Fits(size) {
		return false
	}
	b.Count(size)
	return true
}

// FeedRows reads the rows of a store's feed statement into a page: the
// one rule by which every database store fills a feed page. Each row is
// a position with either a submission as sent (encoded) or, for a
// deletion, the position of the deleted submission (of > 0), or, for a
// submission that a page read with keys leaves out (FeedQuery.Keys or
// FeedQuery.Values), no encoded and its stored JSON's bytes as -of (of <
// 0); the row at position 0 is the form's own, whose of is the last
// forgotten deletion. The statement reads one row more than limit.
type FeedRows struct {
	Page   *Page
	Budget Budget
	Limit  int
	// Next is the position after the last row taken, More whether the
	// feed goes on after it; n counts the positions taken.
	Next int64
	More bool
	n    int
}

// Row takes one row and reports whether to read another: false once the
// page is full, by its limit or its byte budget (More is then set).
func (f *FeedRows) Row(pos int64, encoded []byte, of int64) bool {
	switch {
	case pos == 0: // the form's row
		f.Page.Purged = of
		return true
	case f.n == f.Limit:
		f.More = true
		return false
	}
	f.n++
	if of > 0 { // a deletion
		f.Page.Deleted = append(f.Page.Deleted, of)
		f.Next = pos
		return true
	}
	if of < 0 && encoded == nil { // left out by the page's keys: walked, not sent
		f.Page.Excluded++
		f.Page.ExcludedBytes -= of
		f.Next = pos
		return true
	}
	if !f.Budget.Fits(len(encoded)) {
		f.More = true
		return false
	}
	f.Next = pos
	// The database may have been damaged or edited by hand: AddAt leaves
	// out what is not the object AppendSubmissionJSON wrote.
	if f.Page.AddAt(pos, encoded) {
		f.Budget.Count(len(encoded))
	}
	return true
}

// Taken returns how many positions the page took, deletions included.
func (f *FeedRows) Taken() int { return f.n }

// FeedQuery selects one page of a form's sync feed, as formsapi.Query
// selects a page of a list: a parameter the feed's readers gain is a
// field here, not another argument of every store's AppendFeed.
type FeedQuery struct {
	// After is the position the page starts after: 0 for the beginning
	// of the feed.
	After int64
	// Limit is the most entries (submissions and deletions) the page
	// holds: at least 1.
	Limit int
	// MaxBytes is the page's byte budget, as formsapi.Query.MaxBytes
	// counts it; 0 for none.
	MaxBytes int
	// Keys, when not empty, are index keys (find.Keys, sorted) of which a
	// submission must hold one for the reader to want it: a filtered
	// export's (find.ClauseKeys). A store that keeps each submission's
	// keys may leave out one that holds none of them, counting it in the
	// page's Excluded and ExcludedBytes instead, as an entry of the page
	// (Limit counts it) past which the page moves on; it must never leave
	// out one that holds one, nor one whose keys it does not know. A
	// store may ignore Keys: the reader checks every submission it gets.
	Keys []int64
	// Values, when not empty, are the canonical texts (find.Clause) of
	// the values of the clause Keys came from (find.KeyedClause). A store
	// may leave out instead, counted as for Keys, a submission whose
	// stored JSON's bytes show that it holds none of them (find.Absent:
	// strings without escapes, none of them in bytes without escapes),
	// without its keys; a store may ignore Values.
	Values []string
}
