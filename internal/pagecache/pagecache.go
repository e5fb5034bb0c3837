// Package pagecache is the exact read cache of sqlitestore and pgstore:
// encoded pages of submissions kept in memory, each tagged with the
// version its form had when it was read, and served only while the form
// still has that version; and pages of an account's forms list (pgstore),
// tagged with the version of that list, under keys of their own in the
// same shards and byte budget (Forms, KeepForms).
//
// The cache itself knows nothing of databases. What makes it exact is the
// contract its stores keep:
//
//   - A form's version changes, to a value it never had before, in the
//     same transaction as any change to its submissions, whoever commits
//     it (the stores keep versions with triggers, so a host's own SQL is
//     covered too).
//   - A store reads the form's current version with its ownership check,
//     before it looks in the cache, and asks for the page at that version
//     (Begin): a page tagged with another version is never served.
//   - A page it reads is tagged (Done) with a version that is not newer
//     than the data it holds: the version read in the same snapshot as the
//     page (pgstore), or one read before the page (sqlitestore). In the
//     second case a commit in between makes the page newer than its tag;
//     the form then has another version already, and since versions never
//     come back, the page is never served.
//
// Versions never come back while the database keeps its history, but a
// restore from a backup or a dump, a point-in-time recovery or a failover
// to a replica that missed commits takes the counters back, and the
// versions after that point are given again, to other states. A store
// that reads a version lower than one the cache holds for the same list
// has seen that happen: the cache drops every page of that form or forms
// list (see get). A restored form whose version climbs back to exactly a
// held page's before any read sees it lower is what this cannot see; the
// stores make that unlikely by giving versions random low bits (pgstore
// migration 0012, sqlitestore migration 0010), and docs/stores.md tells
// hosts to restart their nodes after one.
//
// A page held at an older version of its form can be brought to the
// current one without reading it again when only submissions were added
// or deleted meanwhile, and the store can tell which (pgstore and
// sqlitestore): see splice.go.
//
// A store that cannot tell a form's current version does not use the
// cache: it reads from the database. The same contract holds for an
// account's forms list and its version.
//
// A page is stored under its list (form, order and filters, keyset
// bounds) without its limit, holding the items read and whether more
// follow, so a page of 100 answers any limit up to 100 and a shorter list
// any limit at all; a request for more items than are held reads only the
// rest, after the last one held.
//
// The cache is split in shards, each with its own lock, so concurrent
// requests rarely meet on one lock; hits take it only for reading. The
// byte budget is the whole cache's, so one big page can use all of it.
// Eviction is random: no bookkeeping on the hit path.
package pagecache

import (
	"bytes"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/observe"
)

// Cache keeps encoded pages of submissions, each tagged with the version
// of its form when it was read. A nil *Cache is no cache: Begin reads
// every page from the store. It is safe for concurrent use.
type Cache struct {
	seed     maphash.Seed
	shards   [shards]shard
	bytes    atomic.Int64 // held by all shards together
	maxBytes int64
	wentBack atomic.Int64 // times get saw a version go back (see get)
}

// shards is well above the number of cores a server has, so two
// requests rarely want the same shard at once.
const shards = 32

type shard struct {
	mu    sync.RWMutex
	pages map[key]*entry
	_     [64]byte // keeps shards' locks off each other's cache lines
}

// key names a list's page: the form (or, for a forms list, the account),
// what selects the list (its order and filters, formsapi.Query.AppendKey,
// so a parameter added to Query is in the key without a change here) and
// the page's keyset bounds. Pages of submissions and of forms lists never
// share a key: forms tells them apart.
type key struct {
	formSeq int64
	account string // the forms list's account; "" for submissions
	forms   bool   // a page of an account's forms list
	list    string
	lo, hi  keyset.Pos
}

// newKey is the key of q's page of the form with seq formSeq, between the
// bounds lo and hi that keyset.Bounds found for q.
func newKey(formSeq int64, q formsapi.Query, lo, hi keyset.Pos) key {
	var buf [32]byte
	return key{formSeq: formSeq, list: string(q.AppendKey(buf[:0])), lo: lo, hi: hi}
}

// entry is the start of one list: its first len(pos) items, encoded (a
// list of submissions: body and ends) or as the store read them (a forms
// list: forms). It never changes once stored.
type entry struct {
	version int64
	body    []byte          // the items' JSON objects, separated by commas
	ends    []int           // ends[i]: the end of item i in body
	forms   []formsapi.Form // the items of a forms list
	pos     []keyset.Pos    // pos[i]: the keyset position of item i
	more    bool            // an item follows the last one held
	// nextSize is the length of the item after the last one held when a
	// byte budget ended the read there, 0 when not known (no item is 0
	// bytes long): it lets a page that the same budget ends be served.
	nextSize int
	// limit is the largest limit of the requests that read it: a splice
	// keeps that many items, so that they still find the page whole.
	limit int
	// head is where the form's feed stood at version, when the store told
	// (hasHead): what lets a later version's additions be spliced in.
	head    Head
	hasHead bool
	// digests are the handler's digests of the items served from this
	// entry (wire.Page.Digests): the entry never changes, so they hold.
	digests wire.Digests
}

// itemSize returns the length of item i's JSON.
func (e *entry) itemSize(i int) int {
	if i == 0 {
		return e.ends[0]
	}
	return e.ends[i] - e.ends[i-1] - 1 // less the comma
}

// entryOverhead approximates an entry's bytes beyond its slices, and
// formOverhead a form's beyond its strings (their headers and CreatedAt).
const (
	entryOverhead = 128 + 4*(8+56) // the fields, and the digests (four pointers and what they point to)
	formOverhead  = 88
)

func (e *entry) size() int64 {
	n := len(e.body) + len(e.ends)*8 + len(e.pos)*16 + entryOverhead
	for _, f := range e.forms {
		n += formOverhead + len(f.ID) + len(f.Title) + len(f.Icon) + len(f.NotificationEmail)
	}
	return int64(n)
}

// New returns a cache of about maxBytes bytes of pages, or nil (no cache)
// if maxBytes is not positive.
func New(maxBytes int) *Cache {
	if maxBytes <= 0 {
		return nil
	}
	c := &Cache{seed: maphash.MakeSeed(), maxBytes: int64(maxBytes)}
	for i := range c.shards {
		c.shards[i].pages = map[key]*entry{}
	}
	return c
}

func (c *Cache) shard(k key) int {
	return int(maphash.Comparable(c.seed, k) % shards)
}

// get returns what the cache holds for list k at version v, the version
// of k's form or forms list that the store just read as current, or nil;
// and what it holds at an older version, if that is what it holds.
//
// If it holds k at a later version, the form or list went back in time:
// the database was restored from a backup or a dump, recovered to a point
// in time, or failed over to a replica that had not seen every commit.
// Pages read after the point it went back to are then of a history that
// no longer is, and their versions may be given again, to other states:
// get drops every page of the form (or list), not only k's. A reader that
// read the version just before a commit and looks here just after
// another reader kept the newer page also lands here: that costs the
// form's pages, never exactness.
func (c *Cache) get(v int64, k key) (e, older *entry) {
	sh := &c.shards[c.shard(k)]
	sh.mu.RLock()
	e = sh.pages[k]
	sh.mu.RUnlock()
	if e == nil || e.version == v {
		return e, nil
	}
	if e.version < v {
		return nil, e
	}
	{
		c.wentBack.Add(1)
		if k.forms {
			c.ForgetForms(k.account)
		} else {
			c.Forget(k.formSeq)
		}
	}
	return nil, nil
}

// serve appends the first limit items of e's list to p.Body and sets the
// page's next cursor and the digests of its items, if e holds them all (a
// nil e holds none). It reports whether it served the page.
func (e *entry) serve(q formsapi.Query, p *wire.Page) bool {
	body, next, m, ok := e.items(q, p.Body)
	if !ok {
		return false
	}
	p.Body, p.NextCursor = body, next
	if m > 0 {
		p.Digests, p.DigestItems = &e.digests, m
	}
	return true
}

// items appends the first limit items of e's list to body and returns
// body, the page's next cursor and the number of items, if e holds them
// all (a nil e holds none).
func (e *entry) items(q formsapi.Query, body []byte) ([]byte, string, int, bool) {
	if e == nil {
		return body, "", 0, false
	}
	n := len(e.ends)
	m, budget := 0, keyset.NewBudget(q)
	for m < min(q.Limit, n) && budget.Take(e.itemSize(m)) {
		m++
	}
	if m == n && q.Limit > n && e.more && (e.nextSize == 0 || budget.Fits(e.nextSize)) {
		return body, "", 0, false // the page needs items not held
	}
	if m == 0 {
		return body, "", 0, true
	}
	body = append(body, e.body[:e.ends[m-1]]...)
	if m < n || e.more {
		return body, e.pos[m-1].String(), m, true
	}
	return body, "", m, true
}

// put stores e for list k unless the cache holds a newer version or as
// many items of the same version. It makes room by dropping entries at
// random, from k's shard first and then from the next ones.
//
// "Newer" is the larger version: the stores take versions from counters
// that grow, so that is the later state of one form. Exactness never
// depends on it: an entry is served only at its exact version.
func (c *Cache) put(k key, e *entry) {
	size := e.size()
	if size > c.maxBytes {
		return
	}
	home := c.shard(k)
	sh := &c.shards[home]
	sh.mu.Lock()
	ok := c.replace(sh, k, e)
	sh.mu.Unlock()
	if !ok {
		return
	}
	for i := 0; i < shards && c.bytes.Load()+size > c.maxBytes; i++ {
		c.evict(&c.shards[(home+i)%shards], size)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.replace(sh, k, e) { // again: another request may have stored k meanwhile
		sh.pages[k] = e
		c.bytes.Add(size)
	}
}

// replace reports whether e should take the place of what sh holds for k,
// and if so drops that. The caller holds sh's lock.
func (c *Cache) replace(sh *shard, k key, e *entry) bool {
	old, ok := sh.pages[k]
	if !ok {
		return true
	}
	if old.version > e.version || old.version == e.version && (len(old.pos) >= len(e.pos) || !old.more) {
		return false
	}
	delete(sh.pages, k)
	c.bytes.Add(-old.size())
	return true
}

// evict drops entries of sh in map order, which Go randomises, until size
// more bytes fit: random eviction, with no bookkeeping on the hit path.
func (c *Cache) evict(sh *shard, size int64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for k, e := range sh.pages {
		if c.bytes.Load()+size <= c.maxBytes {
			return
		}
		delete(sh.pages, k)
		c.bytes.Add(-e.size())
	}
}

// Forget drops every page the cache holds of the forms with these seqs:
// what a store calls after deleting their submissions, so that deleted
// data does not stay in memory until evicted. Exactness never depends on
// it (a page of an older version is never served), and a page a reader
// puts back afterwards is of the old version, never served either.
func (c *Cache) Forget(formSeqs ...int64) {
	if c == nil || len(formSeqs) == 0 {
		return
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for k, e := range sh.pages {
			for _, seq := range formSeqs {
				if !k.forms && k.formSeq == seq {
					delete(sh.pages, k)
					c.bytes.Add(-e.size())
					break
				}
			}
		}
		sh.mu.Unlock()
	}
}

// ForgetForms drops every page the cache holds of the forms list of
// account: what a store calls after deleting one of its forms, so that
// the form's fields do not stay in memory until evicted. As for Forget,
// exactness never depends on it.
func (c *Cache) ForgetForms(account string) {
	if c == nil {
		return
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for k, e := range sh.pages {
			if k.forms && k.account == account {
				delete(sh.pages, k)
				c.bytes.Add(-e.size())
			}
		}
		sh.mu.Unlock()
	}
}

// Stats returns how many lists and bytes the cache holds.
func (c *Cache) Stats() (entries, bytes int) {
	if c == nil {
		return 0, 0
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		entries += len(sh.pages)
		sh.mu.RUnlock()
	}
	return entries, int(c.bytes.Load())
}

// WentBack returns how many times a store read a version of a form or a
// forms list lower than one the cache held for it, and the cache dropped
// that form's or list's pages (see the package documentation).
func (c *Cache) WentBack() int64 {
	if c == nil {
		return 0
	}
	return c.wentBack.Load()
}

// Versions returns, for each form with pages in the cache, the versions
// those pages carry: what the stores' tests check that a write changed.
func (c *Cache) Versions() map[int64][]int64 {
	m := map[int64][]int64{}
	if c == nil {
		return m
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		for k, e := range sh.pages {
			if !k.forms {
				m[k.formSeq] = append(m[k.formSeq], e.version)
			}
		}
		sh.mu.RUnlock()
	}
	return m
}

// Read is one page of a list being appended to a wire.Page: from the
// cache where it holds the whole page, else from the rows the store reads
// for it (Range, Row), after any start of the page the cache held. Done
// then keeps the page for the next request.
//
//	r, err := cache.Begin(version, formSeq, q, p)
//	if err != nil || r.Served() { ... }
//	lo, hi, fetch := r.Range()
//	// read at most fetch rows strictly between lo and hi, in q.Order:
//	for each row { if !r.Row(pos, json) { break } }
//	r.Done(version of the rows)
type Read struct {
	c       *Cache
	key     key
	p       *wire.Page
	start   int // where the page's items begin in p.Body
	skipped int // len(p.Skipped) before the page
	budget  keyset.Budget
	lo, hi  keyset.Pos // the rows still to read lie strictly between
	last    keyset.Pos // the position of the last item read or held
	limit   int        // items still to read
	n       int        // rows given to Row
	served  bool
	held    bool   // the page starts with items from the cache
	e       *entry // what Done stores; nil when nothing will be
	q       formsapi.Query
	older   *entry // the list at an older version, with its head (see Since)
}

// Begin starts q's page of the form with seq formSeq, whose version the
// store just read, into p: q.Limit items at most, within q.MaxBytes (see
// keyset). If the cache holds the whole page at that version, it is
// appended and Served reports true; if it holds the start of the page,
// that is appended and Range leaves it out. It returns an error for a
// query no store serves (a limit below 1, a malformed cursor). c may be
// nil.
func (c *Cache) Begin(version, formSeq int64, q formsapi.Query, p *wire.Page) (Read, error) {
	return c.begin(version, formSeq, q, p, true)
}

// BeginWhole is Begin for a page that must not start with items the
// cache holds: it serves the whole page from the cache or reads all of
// it. A store calls it after Mixed.
func (c *Cache) BeginWhole(version, formSeq int64, q formsapi.Query, p *wire.Page) (Read, error) {
	return c.begin(version, formSeq, q, p, false)
}

func (c *Cache) begin(version, formSeq int64, q formsapi.Query, p *wire.Page, extend bool) (Read, error) {
	if _, err := keyset.Fetch(q); err != nil { // before the cache could answer it
		return Read{}, err
	}
	lo, hi, err := keyset.Bounds(q)
	if err != nil {
		return Read{}, err
	}
	p.Digests, p.DigestItems = nil, 0 // set only when the page is served whole from a held one
	r := Read{c: c, p: p, start: len(p.Body), skipped: len(p.Skipped), budget: keyset.NewBudget(q), lo: lo, hi: hi, limit: q.Limit, q: q}
	if c == nil {
		return r, nil
	}
	r.key = newKey(formSeq, q, lo, hi)
	held, older := c.get(version, r.key)
	if older != nil && older.hasHead && extend {
		r.older = older
	}
	if held.serve(q, p) {
		r.served = true
		p.Cache = observe.CacheHit
		return r, nil
	}
	r.e = &entry{version: version, limit: q.Limit}
	p.Cache = observe.CacheMiss
	if !extend || held == nil || len(held.ends) == 0 {
		return r, nil
	}
	p.Cache = observe.CachePartial
	// The cache holds the start of the page at this version: read only
	// the rest, after its last item. serve found that they all fit.
	n := len(held.ends)
	p.AddTrusted(held.body) // read and checked at this version
	r.e.limit = max(q.Limit, held.limit)
	r.e.ends = append(make([]int, 0, q.Limit), held.ends...)
	r.e.pos = append(make([]keyset.Pos, 0, q.Limit), held.pos...)
	for i := range n {
		r.budget.Count(held.itemSize(i))
	}
	r.last, r.held, r.limit = held.pos[n-1], true, q.Limit-n
	if q.Order == formsapi.Oldest {
		r.lo = r.last
	} else {
		r.hi = r.last
	}
	return r, nil
}

// Served reports whether Begin served the whole page from the cache.
func (r *Read) Served() bool { return r.served }

// Range returns the rows the store must read, in the query's order: those
// strictly between lo and hi, at most fetch of them (one more than the
// items wanted, to learn whether more follow).
func (r *Read) Range() (lo, hi keyset.Pos, fetch int) {
	fetch = r.limit
	if fetch < math.MaxInt {
		fetch++
	}
	return r.lo, r.hi, fetch
}

// Row takes the next row the store read: its position and its stored
// JSON, which it copies. It appends the row unless it is damaged (then
// it is left out and recorded in the page's Skipped), and reports false
// when the page is full: the row was not taken, the page's NextCursor is
// set, and the store stops reading.
func (r *Read) Row(pos keyset.Pos, encoded []byte) bool {
	if r.n == r.limit {
		r.p.NextCursor = r.last.String()
		return false
	}
	r.n++
	if !r.budget.Fits(len(encoded)) {
		r.p.NextCursor = r.last.String()
		if r.e != nil {
			r.e.nextSize = len(encoded)
		}
		return false
	}
	r.last = pos
	// The database may have been damaged or edited by hand: Add leaves
	// out what is not the object AppendSubmissionJSON wrote.
	if !r.p.Add(pos.Seq, encoded) {
		return true
	}
	r.budget.Count(len(encoded))
	if r.e != nil {
		r.e.ends = append(r.e.ends, len(r.p.Body)-r.start)
		r.e.pos = append(r.e.pos, pos)
	}
	return true
}

// Room returns the bytes of rows the store may read before the page's
// byte budget ends it, the row that passes it aside (see wire.Budget).
func (r *Read) Room() int { return r.budget.Room() }

// Cut ends the page after the last row Row took, with a cursor: the store
// stopped reading before Row said the page was full, because it counts
// the budget over rows it could not tell were damaged, and rows follow.
func (r *Read) Cut() {
	if r.p.NextCursor == "" {
		r.p.NextCursor = r.last.String()
	}
}

// Mixed reports whether the page began with items the cache held at
// another version than v, the version the store read the rest at: a
// commit came between, and no single version describes the page. It is
// still an answer two reads in a row could give, and Done does not keep
// it; a store that can tell (one whose rows carry their version) reads
// the page again with BeginWhole instead, so that every page it serves is
// the page of one version.
func (r *Read) Mixed(v int64) bool { return r.held && v != r.e.version }

// Done ends a page read from rows, which the store read at the form's
// version v (or later: see the package doc), and keeps it in the cache
// tagged with v, unless a damaged row was left out of it (so that every
// read logs the damage), it is Mixed, or it is larger than an eighth of
// the cache.
func (r *Read) Done(v int64) { r.done(v, Head{}, false) }

// DoneAt is Done for a store that read, in the same snapshot as the
// page's rows, where the form's feed stood (h): a later request that
// finds the form at a newer version may then splice in what was added
// since (see Since) instead of reading the page again.
func (r *Read) DoneAt(v int64, h Head) { r.done(v, h, true) }

func (r *Read) done(v int64, h Head, hasHead bool) {
	if r.e == nil || r.served || len(r.p.Skipped) > r.skipped || r.Mixed(v) {
		return
	}
	// A page of more than an eighth of the cache is not kept: it would
	// push out many others to serve one list, and copying it (a page of
	// large submissions is megabytes) would double the memory a request
	// takes, on every miss.
	if int64(len(r.p.Body)-r.start)*8 > r.c.maxBytes {
		return
	}
	r.e.version, r.e.head, r.e.hasHead = v, h, hasHead
	r.e.body = bytes.Clone(r.p.Body[r.start:])
	r.e.more = r.p.NextCursor != ""
	r.c.put(r.key, r.e)
}

// Forms returns q's page of the forms list of account if the cache holds
// it at version v, the list's version the store just read: the first
// q.Limit forms held and the store's cursor after them ("" at the end of
// the list), as the store's own statement would give them. The page is
// the caller's: nothing in it is shared with the cache. c may be nil.
func (c *Cache) Forms(v int64, account string, q formsapi.Query) (formsapi.Page[formsapi.Form], bool) {
	if c == nil || q.Limit < 1 {
		return formsapi.Page[formsapi.Form]{}, false
	}
	lo, hi, err := keyset.Bounds(q)
	if err != nil {
		return formsapi.Page[formsapi.Form]{}, false
	}
	e, _ := c.get(v, formsKey(account, q, lo, hi))
	if e == nil {
		return formsapi.Page[formsapi.Form]{}, false
	}
	n := len(e.pos)
	if q.Limit > n && e.more {
		return formsapi.Page[formsapi.Form]{}, false // the page needs forms not held
	}
	m := min(q.Limit, n)
	p := formsapi.Page[formsapi.Form]{Items: make([]formsapi.Form, m)}
	copy(p.Items, e.forms)
	if m > 0 && (m < n || e.more) {
		p.NextCursor = e.pos[m-1].String()
	}
	return p, true
}

// KeepForms keeps forms, the start of the forms list of account that q
// asks for, read from the database at version v, the list's version read
// in the same snapshot: pos[i] is the keyset position of forms[i], and
// more whether a form follows the last. It copies what it keeps, and
// keeps nothing larger than an eighth of the cache. c may be nil.
func (c *Cache) KeepForms(v int64, account string, q formsapi.Query, forms []formsapi.Form, pos []keyset.Pos, more bool) {
	if c == nil || len(forms) != len(pos) {
		return
	}
	lo, hi, err := keyset.Bounds(q)
	if err != nil {
		return
	}
	e := &entry{version: v, forms: slices.Clone(forms), pos: slices.Clone(pos), more: more}
	if e.size()*8 > c.maxBytes {
		return
	}
	c.put(formsKey(account, q, lo, hi), e)
}

// formsKey is the key of q's page of account's forms list, between the
// bounds lo and hi that keyset.Bounds found for q.
func formsKey(account string, q formsapi.Query, lo, hi keyset.Pos) key {
	var buf [32]byte
	return key{account: account, forms: true, list: string(q.AppendKey(buf[:0])), lo: lo, hi: hi}
}
