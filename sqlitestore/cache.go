package sqlitestore

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
)

// cache keeps encoded pages of submissions, each tagged with the version
// of its form when it was read.
//
// Why it is never stale: the triggers of migration 0003 give a form a new
// version, never used before in the file, in the same transaction as any
// change to its submissions, whoever commits it: this store, a host's
// connection, another process. Before a page is served, the form's
// current version is read from the database (the ownership check, one
// indexed lookup that every request needs anyway); the page is served
// only if it carries that version. The version is read before the page,
// so a page always holds data at least as new as its tag: a commit in
// between makes the page newer than its tag, never older, and the tag then
// no longer matches.
//
// A write therefore forgets only its own form's pages, and lazily: the
// next request for them misses and replaces them.
//
// A page is stored under its list (form, order and keyset bounds) without
// its limit, holding the items read and whether more follow, so a page of
// 100 answers any limit up to 100 and a shorter list any limit at all.
//
// The cache is split in shards, each with its own lock, so concurrent
// requests rarely meet on one lock; hits take it only for reading. The
// byte budget is the whole cache's, so one big page can use all of it.
type cache struct {
	seed     maphash.Seed
	shards   [cacheShards]shard
	bytes    atomic.Int64 // held by all shards together
	maxBytes int64
}

// cacheShards is well above the number of cores a server has, so two
// requests rarely want the same shard at once.
const cacheShards = 32

type shard struct {
	mu    sync.RWMutex
	pages map[pageKey]*entry
	_     [64]byte // keeps shards' locks off each other's cache lines
}

// pageKey names a list's page: the form, what selects the list (its
// order and filters, formsapi.Query.AppendKey, so a parameter added to
// Query is in the key without a change here) and the page's keyset
// bounds.
type pageKey struct {
	formSeq int64
	list    string
	lo, hi  keyset.Pos
}

// newPageKey is the key of q's page of the form with seq formSeq, between
// the bounds lo and hi that keyset.Bounds found for q.
func newPageKey(formSeq int64, q formsapi.Query, lo, hi keyset.Pos) pageKey {
	var buf [32]byte
	return pageKey{formSeq: formSeq, list: string(q.AppendKey(buf[:0])), lo: lo, hi: hi}
}

// entry is the start of one list: its first len(ends) items. It never
// changes once stored.
type entry struct {
	version int64
	body    []byte       // the items' JSON objects, separated by commas
	ends    []int        // ends[i]: the end of item i in body
	pos     []keyset.Pos // pos[i]: the keyset position of item i
	more    bool         // an item follows the last one held
	// nextSize is the length of the item after the last one held when a
	// byte budget ended the read there, 0 when not known (no item is 0
	// bytes long): it lets a page that the same budget ends be served.
	nextSize int
}

// itemSize returns the length of item i's JSON.
func (e *entry) itemSize(i int) int {
	if i == 0 {
		return e.ends[0]
	}
	return e.ends[i] - e.ends[i-1] - 1 // less the comma
}

// entryOverhead approximates an entry's bytes beyond its slices.
const entryOverhead = 128

func (e *entry) size() int64 {
	return int64(len(e.body) + len(e.ends)*8 + len(e.pos)*16 + entryOverhead)
}

func newCache(maxBytes int) *cache {
	c := &cache{seed: maphash.MakeSeed(), maxBytes: int64(maxBytes)}
	for i := range c.shards {
		c.shards[i].pages = map[pageKey]*entry{}
	}
	return c
}

func (c *cache) shard(k pageKey) int {
	return int(maphash.Comparable(c.seed, k) % cacheShards)
}

// get returns what the cache holds for list k at version v, or nil.
func (c *cache) get(v int64, k pageKey) *entry {
	sh := &c.shards[c.shard(k)]
	sh.mu.RLock()
	e := sh.pages[k]
	sh.mu.RUnlock()
	if e == nil || e.version != v {
		return nil
	}
	return e
}

// items returns the positions of the items e holds; none for a nil e.
func (e *entry) items() []keyset.Pos {
	if e == nil {
		return nil
	}
	return e.pos
}

// serve appends the first limit items of e's list to body and returns
// body and the page's next cursor, if e holds them all (a nil e holds
// none).
func (e *entry) serve(q formsapi.Query, body []byte) ([]byte, string, bool) {
	if e == nil {
		return body, "", false
	}
	n := len(e.ends)
	m, budget := 0, keyset.NewBudget(q)
	for m < min(q.Limit, n) && budget.Take(e.itemSize(m)) {
		m++
	}
	if m == n && q.Limit > n && e.more && (e.nextSize == 0 || budget.Fits(e.nextSize)) {
		return body, "", false // the page needs items not held
	}
	if m == 0 {
		return body, "", true
	}
	body = append(body, e.body[:e.ends[m-1]]...)
	if m < n || e.more {
		return body, e.pos[m-1].String(), true
	}
	return body, "", true
}

// put stores e for list k unless the cache holds a newer version or as
// many items of the same version. It makes room by dropping entries at
// random, from k's shard first and then from the next ones.
func (c *cache) put(k pageKey, e *entry) {
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
	for i := 0; i < cacheShards && c.bytes.Load()+size > c.maxBytes; i++ {
		c.evict(&c.shards[(home+i)%cacheShards], size)
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
func (c *cache) replace(sh *shard, k pageKey, e *entry) bool {
	old, ok := sh.pages[k]
	if !ok {
		return true
	}
	if old.version > e.version || old.version == e.version && (len(old.ends) >= len(e.ends) || !old.more) {
		return false
	}
	delete(sh.pages, k)
	c.bytes.Add(-old.size())
	return true
}

// evict drops entries of sh in map order, which Go randomises, until size
// more bytes fit: random eviction, with no bookkeeping on the hit path.
func (c *cache) evict(sh *shard, size int64) {
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

// stats returns how many entries and bytes the cache holds.
func (c *cache) stats() (entries, bytes int) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		entries += len(sh.pages)
		sh.mu.RUnlock()
	}
	return entries, int(c.bytes.Load())
}
