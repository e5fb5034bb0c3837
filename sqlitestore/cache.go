package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
)

// cache keeps encoded pages and resolved keys until anyone commits to the
// database file: this store's writer, a host's connection, another process.
//
// Why it is never stale: PRAGMA data_version on one connection changes
// whenever another connection commits (sqlite.org/pragma.html#pragma_data_version).
// The cache owns a read-only connection that never writes, so every commit
// anywhere changes its data_version. Each lookup first reads the current
// version; an entry is stored with the version read before the database
// was, and is served only while the version read is still the same, that
// is, while nothing has been committed since the entry was read.
type cache struct {
	mu       sync.Mutex
	watch    *sql.Conn // the read-only connection whose data_version is read
	version  int64
	pages    map[pageKey]cachedPage
	bytes    int
	maxBytes int
	keys     map[[32]byte]grant // key hash → live key
}

// maxCachedKeys bounds the resolved keys kept.
const maxCachedKeys = 10_000

type pageKey struct {
	account, formID string
	order           formsapi.Order
	lo, hi          keyset.Pos
	limit           int
}

type cachedPage struct {
	body []byte // the page's objects, separated by commas
	next string
}

func newCache(ctx context.Context, read *sql.DB, maxBytes int) (*cache, error) {
	watch, err := read.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("cache connection: %w", err)
	}
	return &cache{watch: watch, maxBytes: maxBytes, pages: map[pageKey]cachedPage{}, keys: map[[32]byte]grant{}}, nil
}

// sync reads the current data_version and forgets everything if it moved.
// It returns the version the caller's entries must carry.
func (c *cache) sync(ctx context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var v int64
	if err := c.watch.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("data_version: %w", err)
	}
	if v != c.version {
		c.version = v
		clear(c.pages)
		clear(c.keys)
		c.bytes = 0
	}
	return v, nil
}

func (c *cache) page(v int64, k pageKey) (cachedPage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pages[k]
	return p, ok && c.version == v
}

func (c *cache) putPage(v int64, k pageKey, p cachedPage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != v || len(p.body) > c.maxBytes {
		return
	}
	// Make room by dropping entries in map order, which Go randomises:
	// random eviction, with no bookkeeping on the hit path.
	for old, op := range c.pages {
		if c.bytes+len(p.body) <= c.maxBytes {
			break
		}
		delete(c.pages, old)
		c.bytes -= len(op.body)
	}
	if prev, ok := c.pages[k]; ok {
		c.bytes -= len(prev.body)
	}
	c.pages[k] = p
	c.bytes += len(p.body)
}

func (c *cache) grant(v int64, h [32]byte) (grant, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.keys[h]
	return g, ok && c.version == v
}

func (c *cache) putGrant(v int64, h [32]byte, g grant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != v {
		return
	}
	for old := range c.keys {
		if len(c.keys) < maxCachedKeys {
			break
		}
		delete(c.keys, old)
	}
	c.keys[h] = g
}

func (c *cache) close() error {
	return c.watch.Close()
}
