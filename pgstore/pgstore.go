// Package pgstore keeps forms, submissions and API keys in PostgreSQL
// through github.com/jackc/pgx/v5. It implements formsapi.Store,
// formsapi.KeyResolver and formsapi.Writer, exactly as sqlitestore does:
// the same data gives the same API responses, byte for byte.
//
// [Open] makes a pool the store owns; [New] uses a *pgxpool.Pool the host
// already has. Every table is named formsapi_ and lives in one schema
// ([WithSchema]; by default the connection's current schema). The schema
// version is kept in the table formsapi_migrations, and migrations run
// at open in one transaction under an advisory lock, so several nodes
// starting at once migrate exactly once and none sees half a schema.
//
// The store keeps no cache: every read goes to the database, so several
// API nodes over one database all see every write at once, and a revoked
// key is refused by each of them on the very next request.
//
// Only the SHA-256 of each API key is stored, never the key itself.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyuse"
	"github.com/formsapi/formsapi/internal/pagecache"
)

type config struct {
	schema       string
	cacheBytes   int
	usedInterval time.Duration
	limits       formsapi.Limits
	now          func() time.Time
}

// Option configures a store from Open or New.
type Option func(*config)

// WithSchema keeps the store's tables in the PostgreSQL schema name, which
// the store creates if it does not exist (that needs the CREATE privilege
// on the database; an existing schema needs only CREATE on itself). The
// tables are prefixed formsapi_ either way. Without it, the store uses
// the current schema of the pool's connections (the first existing schema
// on their search_path, usually public), determined once at open.
func WithSchema(name string) Option {
	return func(c *config) { c.schema = name }
}

// DefaultCacheSize is the read cache of a store unless WithCacheSize
// says otherwise: 12 MiB, as sqlitestore's, which holds 100-item pages of
// typical 340-byte submissions for about 340 lists.
const DefaultCacheSize = 12 << 20

// WithCacheSize bounds the store's read cache to about n bytes of encoded
// pages of submissions (DefaultCacheSize unless set); 0 turns it off, so
// every page is read from the database. The cache never serves a page
// older than the last commit to its form, whoever made it, on any node:
// see the package documentation.
func WithCacheSize(n int) Option {
	return func(c *config) { c.cacheBytes = max(n, 0) }
}

// WithLastUsedInterval sets how often the store notes each key's use and
// writes the noted uses, in one statement: a minute unless
// set. It panics if d is not positive.
func WithLastUsedInterval(d time.Duration) Option {
	if d <= 0 {
		panic("pgstore: WithLastUsedInterval needs a positive interval")
	}
	return func(c *config) { c.usedInterval = d }
}

// WithLimits sets the limits AddForm, AddSubmission, AddKey and
// AddKeyWith apply (formsapi.DefaultLimits without it); a zero field keeps
// its default.
func WithLimits(l formsapi.Limits) Option {
	return func(c *config) { c.limits = l }
}

// WithClock sets the store's notion of now: the time by which keys
// expire (Authorize, ResolveKey and AddKeyWith, which refuses an
// ExpiresAt that is not after it), the CreatedAt and RevokedAt of keys,
// the time of each key use noted for LastUsedAt, and the CreatedAt given
// to a form or submission added without one. It is time.Now unless set.
// It exists for tests, which move a clock of their own instead of waiting
// for time to pass, and for hosts that must judge expiry on a clock of
// their own. The handler still refuses a grant past its ExpiresAt by the
// wall clock, so a clock behind the wall clock cannot keep a key alive
// longer. It panics if now is nil.
func WithClock(now func() time.Time) Option {
	if now == nil {
		panic("pgstore: WithClock with a nil clock")
	}
	return func(c *config) { c.now = now }
}

// Store is a formsapi.Store, formsapi.KeyResolver and formsapi.Writer on
// PostgreSQL. It is safe for concurrent use. Make one with Open or New.
type Store struct {
	pool   *pgxpool.Pool
	owned  bool   // Close closes the pool only when Open made it
	schema string // the schema the tables are in
	sql    queries
	used   *keyuse.Tracker // when keys were last used, noted in memory
	limits formsapi.Limits
	now    func() time.Time // see WithClock
	cache  *pagecache.Cache // nil when off: see WithCacheSize
}

var (
	_ formsapi.Store       = (*Store)(nil)
	_ formsapi.KeyResolver = (*Store)(nil)
	_ formsapi.Writer      = (*Store)(nil)
	_ formsapi.KeyManager  = (*Store)(nil)
	_ formsapi.FeedStore   = (*Store)(nil)
)

// Open connects to the database at dsn (a URL or key=value string, as
// pgxpool.ParseConfig reads it; pool_max_conns and the other pool_
// parameters size the pool), migrates the store's tables to the current
// schema and returns a store that owns the pool; call Close when done.
//
// The pool defaults to pgxpool's: at most 4 connections or one per CPU,
// whichever is more. Each API request holds a connection for one query
// at a time, so that is also how many queries one node runs at once.
//
// Open fails if the database cannot be reached, since it migrates first;
// an open store rides out later outages, and its pool reconnects. It
// returns an error wrapping [ErrSchemaTooNew] if a newer version of this
// package has already migrated the schema.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The parse error may quote the DSN, password and all: say only
		// that it is malformed.
		return nil, errors.New("pgstore: open: the DSN cannot be parsed")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	s, err := newStore(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	s.owned = true
	return s, nil
}

// New returns a store on pool, which the host made and still owns: Close
// on the store leaves the pool open, and the host closes it. New migrates
// the store's tables to the current schema; the host's own tables are
// left alone. The store's queries run in the pool's query exec mode; the
// default, which caches prepared statements per connection, is fastest.
//
// New returns an error wrapping [ErrSchemaTooNew] if a newer version of
// this package has already migrated the schema. It panics if pool is nil.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		panic("pgstore: New with a nil *pgxpool.Pool")
	}
	s, err := newStore(ctx, pool, opts)
	if err != nil {
		return nil, fmt.Errorf("pgstore: new: %w", err)
	}
	return s, nil
}

func newStore(ctx context.Context, pool *pgxpool.Pool, opts []Option) (*Store, error) {
	cfg := config{cacheBytes: DefaultCacheSize, usedInterval: keyuse.DefaultInterval, limits: formsapi.DefaultLimits, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	schema := cfg.schema
	if schema == "" {
		err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema)
		if err != nil {
			return nil, fmt.Errorf("find the current schema: %w", err)
		}
		if schema == "" {
			return nil, errors.New("no schema on the search_path exists: create one or use WithSchema")
		}
	}
	if err := migrate(ctx, pool, schema); err != nil {
		return nil, err
	}
	s := &Store{pool: pool, schema: schema, sql: newQueries(schema), limits: cfg.limits, now: cfg.now, cache: pagecache.New(cfg.cacheBytes)}
	s.used = keyuse.New(cfg.usedInterval, cfg.now, s.writeUses)
	s.used.Start()
	return s, nil
}

// closeFlushTimeout bounds the last write of key uses in Close.
const closeFlushTimeout = 5 * time.Second

// Schema returns the schema the store's tables are in.
func (s *Store) Schema() string { return s.schema }

// Close writes the key uses noted since the last batch (see
// [Store.Authorize]; a failure is dropped, so call [Store.FlushKeyUses]
// first to see it), then closes the pool of a store from Open. A store
// from New leaves the host's pool open. Close waits for queries in
// progress to finish.
func (s *Store) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
	defer cancel()
	s.used.Stop(ctx)
	if s.owned {
		s.pool.Close()
	}
}

// qualify returns the schema-qualified, quoted name of one of the store's
// tables.
func qualify(schema, table string) string {
	return pgx.Identifier{schema, table}.Sanitize()
}

// isUniqueViolation reports whether err is PostgreSQL refusing a
// duplicate key. It goes by the SQLSTATE, never the message text.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// withCtx makes err wrap ctx's error when ctx ended while the database
// was working: pgx does not always say so itself when the connection was
// closed under it, and the handler answers 503 only for an expired ctx.
func withCtx(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%w)", cerr, err)
	}
	return err
}
