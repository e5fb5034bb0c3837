// Package pgstore keeps forms, submissions and API keys in PostgreSQL
// through github.com/jackc/pgx/v5. It implements formsapi.Store,
// formsapi.FeedStore (the sync feed) with formsapi.FieldStore (the CSV
// export's columns), formsapi.KeyManager (scoped and
// expiring keys, last used; a formsapi.KeyAuthorizer and KeyResolver) and
// formsapi.Writer with formsapi.BatchWriter, exactly as sqlitestore and memstore do: the same data
// gives the same API responses, byte for byte. [Store.RateLimiter] is a
// ratelimit.Limiter shared by every node on the database.
//
// [Open] makes a pool the store owns; [New] uses a *pgxpool.Pool the host
// already has. Every table is named formsapi_ and lives in one schema
// ([WithSchema]; by default the connection's current schema). The schema
// version is kept in the table formsapi_migrations, and migrations run
// at open in one transaction under an advisory lock, so several nodes
// starting at once migrate exactly once and none sees half a schema.
//
// # The read cache
//
// Each store keeps recently read pages of submissions and of forms lists
// in memory ([WithCacheSize], [DefaultCacheSize]), and serves a page of
// submissions only while its form has not changed, on whichever node or
// connection the change was made. Migration 0006 gives every form a version, which triggers on the
// submissions table set to a fresh value from a sequence in the
// transaction of each insert, update, delete or TRUNCATE, whoever runs it
// (this package, the host's own SQL, another program); a new form, or one
// whose ID, owner or seq changes, gets a fresh version too. Versions never
// repeat, so a form's version names one state of its submissions.
//
// A request reads the form's version with its ownership check, before it
// looks in the cache, and is served a cached page only if the page carries
// that very version. A page read from the database carries the version its
// own statement read from the form's row, in the same snapshot as the
// page: it is tagged with exactly the state it holds.
//
// Why that is exact at read committed, with the version and the page read
// by two statements on different connections, even of different nodes:
// a transaction that changes a form's submissions also updates the form's
// row, so the row's lock orders it after every earlier such transaction
// of that form, and it becomes visible at once with its new version. A
// snapshot that shows version V therefore shows exactly the submissions
// committed up to the transaction that set V, and every snapshot showing
// V shows the same ones: a page tagged V is the page of any moment the
// form has V. The request's version was current when its first statement
// ran, so a hit serves the form as it was then. On a miss the page's
// statement starts after the first one returned, so (PostgreSQL's
// snapshots see every transaction that committed before they were taken,
// on any connection) the page is as new as the version read first or
// newer, never older; when newer, it is tagged with its own version, and
// a page whose start the cache held at the first version and whose rest
// was read at another is read again whole, so no page mixes two states.
// Pages that left a damaged row out are never cached, so every read logs
// the damage. A writer that bypasses the triggers (disabled triggers,
// session_replication_role = replica, a host setting the version column
// itself or resetting the sequence) is not seen.
//
// The forms list is cached the same way, one level up: migration 0009
// gives every account a version (formsapi_form_lists, from the same
// sequence) that triggers on formsapi_forms set afresh, in the writer's
// transaction as it commits (migration 0014: every account it changed in
// one statement, in account order, so that two transactions changing
// forms of two accounts in opposite orders cannot deadlock on those
// rows), whenever a form is added or deleted, or its ID, owner,
// title, icon, notification email, creation time or seq changes (a form
// moved to another account changes both accounts; TRUNCATE changes
// every account); the updates of a form's version and feed counters
// that every submission makes leave it alone. The argument above holds
// with the account's row in place of the form's: every change to a list
// writes that row. A request reads the account's version with its key,
// and a page of forms read from the database is tagged with the version
// its own statement read. An account without a version row (deleted by
// hand) is read from the database every time, and nothing is cached for
// it until a change of its list writes the row again.
//
// Keys are never cached: the key's row is read on every request, so a
// revoked or expired key is refused on the very next request, on every
// node.
//
// # One round trip for a cached page
//
// A handler given the store as both its Store and its KeyResolver
// (formsapi.NewHandler(s, s)) looks the key up together with the requested
// form's ownership and version, in one statement ([Store.AuthorizeForm]),
// and hands the form back to the store with the page: a page the cache
// holds then costs that one statement, and one that it does not, one
// more. The forms list works the same way ([Store.AuthorizeForms] and
// [Store.ListFormsAt]): the key's statement reads the account's forms list
// version too, and the handler hands it to the store for every read of
// the list the request makes. A host's type that embeds the store keeps
// its overrides and takes the separate statements.
//
// # Read replicas
//
// [WithReplica] reads the handler's page misses, feed pages and export
// pages from a streaming replica, while the key and the form's version
// still come from the primary in the request's one lookup; a replica
// page of another version than that one is never used (the page is read
// from the primary instead). With [WithReplicaRounds], a following
// node's rounds ([WithFollow]) go to the replica too, once it has
// replayed what the primary had written when the round began; the
// primary then answers one statement a round that touches no table.
//
// Only the SHA-256 of each API key is stored, never the key itself.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/coalesce"
	"github.com/formsapi/formsapi/internal/feedwait"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/keyuse"
	"github.com/formsapi/formsapi/internal/pagecache"
	"github.com/formsapi/formsapi/internal/stored"
)

type config struct {
	schema        string
	cacheBytes    int
	usedInterval  time.Duration
	limits        formsapi.Limits
	now           func() time.Time
	keep          time.Duration    // see WithTombstoneRetention
	replica       *pgxpool.Pool    // see WithReplica
	replicaRounds bool             // see WithReplicaRounds
	replicaWait   [2]time.Duration // a round's wait for its replica and timeout; tests' only (export_test.go)
	searchIndex   bool             // see WithSearchIndex
	sortIndex     bool             // see WithSortIndex
	sortFields    []string         // see WithSortIndex: nil for every field
	follow        bool             // see WithFollow
	spacing       time.Duration    // see WithFollow
	roundTarget   int              // see WithRoundBatch
	roundMax      time.Duration    // see WithRoundBatch
	staleness     time.Duration    // see WithStaleness
	waitCheck     time.Duration    // see WithWaitCheck; 0: DefaultWaitCheck
	exchange      RoundExchange    // see WithSharedRounds
	shareWait     time.Duration    // see WithShareWait
	leaseRenew    time.Duration    // see WithLeaseRenew
	notify        bool             // see WithNotify
	notifyConn    *pgx.ConnConfig  // see WithNotify: nil for the pool's
	noticeRenew   time.Duration    // see WithNotify: noticeRenew, shorter in tests
	progress      stored.Progress
	quiet         bool // WithLogger(nil)
}

// Option configures a store from Open or New.
type Option func(*config)

// WithSearchIndex turns on the schema's search index: Open or New sets the
// setting kept in the schema (table formsapi_settings) and, in its
// migration transaction, indexes the trigrams of every stored submission,
// once; on a big schema that takes a while (about the time of writing
// every row's trigrams again), during which other nodes' writes wait. From
// then on every write to the schema, by any node, indexes about a hundred
// trigrams of its values: AddSubmission costs more than twice as much,
// and PostgreSQL's CPU per write three times (BENCHMARKS.md,
// bench/writecost.sh), and a search (q=) walks the entries of its rarest
// trigram, so a rare term costs its matches.
//
// Without the index (the default for a new schema), writes index only the
// keys of filters, and a search without filters walks the form's
// submissions in page order, checking each: a page examines at most
// 1,000 of them (find.MaxExamined) and may end short, or empty, with a
// next cursor, so a rare term in a big form takes many requests. A search
// with filters walks the entries of its rarest filter either way.
//
// The setting belongs to the schema, not the store: a store opened
// without this option never turns it off, so every node keeps the index
// complete once one turned it on.
func WithSearchIndex() Option {
	return func(c *config) { c.searchIndex = true }
}

// WithSortIndex turns on the schema's sort index, the ordered index of
// sort keys that sorted lists (sort=<field>, formsapi.Query.Sort) walk,
// for the top-level fields named, or for every field when none is named:
// Open sets the setting and the fields kept in the database (tables
// formsapi_settings and formsapi_sort_fields) and, in its migration's
// transaction, builds what changed, with its progress logged: turned on,
// every stored submission is indexed; a field added gets the entries of
// every stored submission that has it; a field no longer named loses
// its entries. Meanwhile it holds the migration lock and the sort
// index's lock (every write waits). From then on every write, by any
// node, stores its submission's sort keys and adds one index entry per
// kept field it has with a scalar value (BENCHMARKS.md, "Sort by a
// submitted field", has its cost). A sort by a field the index does not
// keep is not served: the handler answers 501 naming it. Without this
// option (the default), writes compute and store no sort key, and a
// sorted list is not served (501). As WithSearchIndex, the setting
// belongs to the schema: a store opened without this option never turns
// it off, nor changes its fields; one opened with it sets them to its own
// (so give every node the same names). Open refuses a name that no sort
// index can keep (empty, not valid UTF-8, holding a NUL, longer than 64
// bytes) or one named twice.
func WithSortIndex(fields ...string) Option {
	return func(c *config) {
		c.sortIndex = true
		c.sortFields = nil
		if len(fields) > 0 {
			c.sortFields = slices.Clone(fields)
		}
	}
}

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
// pages of submissions and pages of forms lists together (DefaultCacheSize
// unless set, for a store from Open and from New alike); 0 turns it off,
// so every page is read from the database. The cache never serves a page
// older than the last commit to its form (or, for a forms list, to its
// account's forms), whoever made it, on any node: see the package
// documentation. Each node keeps its own cache; a write forgets only its
// own form's pages (or its account's forms lists), and lazily (the next
// request for them reads them again).
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

// WithTombstoneRetention sets how long the store keeps a deletion in its
// form's sync feed (30 days without it): a feed reader whose token is
// older than a deletion it has not read, once that deletion is
// forgotten, gets 410 and must read the feed again from the start (see
// formsapi.FeedStore). A deletion is stamped with the store's clock (see
// WithClock) at the first deletion through a store of the schema at or
// after it (one in plain SQL is stamped at the next such deletion, so it
// is kept longer), and forgotten at the first deletion at least d after
// its stamp, never earlier. Nodes over one schema should agree on d. It
// panics if d is not positive.
func WithTombstoneRetention(d time.Duration) Option {
	if d <= 0 {
		panic("pgstore: WithTombstoneRetention with a retention that is not positive")
	}
	return func(c *config) { c.keep = d }
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

// WithFollow makes the node follow the change log (docs/fleet.md, "Nodes
// that follow the log"; issue 38): the store keeps a copy of
// the keys, forms and forms lists its requests looked up, and a request's
// lookup waits for a round, one statement for every request waiting, that
// starts after it arrived and reads what changed since the last round;
// the request is then answered from the copy, or from its own row of the
// round's statement when the copy holds nothing for it. A revocation,
// expiry or write committed before a request arrived holds for it, as
// without the option. spacing, when positive, is the least time between
// the starts of two rounds: it bounds the node's statements to one per
// spacing whatever its request rate, and adds up to spacing to each
// request's wait. Off by default.
func WithFollow(spacing time.Duration) Option {
	return func(c *config) { c.follow, c.spacing = true, max(spacing, 0) }
}

// WithRoundBatch spaces a following node's rounds (WithFollow, which it
// implies, rounds spacing 0 unless WithFollow says otherwise) by its
// request rate: a round waits until target requests wait for it (and
// WithFollow's spacing has passed since the last round started), or
// until maxSpacing has passed since then, whichever is first. A node
// whose requests come at rate r so runs a round every target/r, clamped
// between the two spacings: about r/target rounds a second, so that the
// primary's rounds follow the fleet's total request rate, not the number
// of nodes it is spread over (docs/fleet.md, "Rounds spaced by the request
// rate"). The cost is each request's wait for its round: up to
// maxSpacing more, plus the round in flight; a request that comes
// maxSpacing or more after the last round started (an idle node) goes at
// once. Every answer stays exact: a request still waits for a round that
// starts after it arrived. A target below 1 or a maxSpacing of zero or
// less leaves the rounds spaced by WithFollow's spacing alone, the
// default.
func WithRoundBatch(target int, maxSpacing time.Duration) Option {
	return func(c *config) {
		c.roundTarget, c.roundMax = max(target, 0), max(maxSpacing, 0)
		c.follow = c.follow || target > 0 && maxSpacing > 0
	}
}

// WithStaleness lets a following node (WithFollow, which it implies,
// rounds spacing 0 unless WithFollow says otherwise) answer the handler's
// combined lookups, AuthorizeForm and AuthorizeForms, from its copy
// without waiting for a round, while the last round that succeeded
// started at most bound ago by the store's clock (WithClock): the answer
// may then miss writes, revocations included, committed up to bound
// before it, never more (docs/fleet.md, "Bounded staleness"). Such an
// answer carries its age (wire.Form.Age, wire.Forms.Age), which the
// handler sends as the Data-Age header. A lookup the copy cannot answer,
// or past the bound, waits for a round as without the option, so a node
// whose rounds fail stops answering from its copy once bound has passed
// since its last good one; an answer from the copy older than half the
// bound starts a round in the background, so that a node with steady
// traffic seldom makes a request wait. Authorize and ResolveKey, which
// the handler's other routes (the export, the summary, webhook control)
// use, stay exact. A bound of zero or less is exact mode, the default.
func WithStaleness(bound time.Duration) Option {
	return func(c *config) {
		c.staleness = max(bound, 0)
		c.follow = c.follow || bound > 0
	}
}

// Store keeps forms, submissions, API keys and webhook endpoints in
// PostgreSQL, for any number of nodes over one database. Like
// memstore.Store and sqlitestore.Store, it implements every contract this
// module has for a store: a formsapi.Store, a formsapi.FeedStore (the sync
// feed) and formsapi.FieldStore (the CSV export's columns), a
// formsapi.KeyResolver and formsapi.KeyAuthorizer (scoped and expiring
// keys) and formsapi.KeyManager, a formsapi.Writer and formsapi.BatchWriter, a hookstore.Store
// (webhook endpoints and their streams) and a formsapi.Counter
// (it counts lists for total=), and its RateLimiter is a ratelimit.Limiter shared
// by the nodes. Give it to formsapi.NewHandler as both store and keys. It
// is safe for concurrent use. Make one with Open or New.
type Store struct {
	pool    *pgxpool.Pool
	owned   bool   // Close closes the pool only when Open made it
	schema  string // the schema the tables are in
	sql     queries
	hooks   hookQueries     // webhook.Store's statements (webhooks.go)
	used    *keyuse.Tracker // when keys were last used, noted in memory
	limits  formsapi.Limits
	now     func() time.Time             // see WithClock
	keep    time.Duration                // see WithTombstoneRetention
	cache   *pagecache.Cache             // nil when off: see WithCacheSize
	lookups *coalesce.Batcher[keyLookup] // key lookups, coalesced: see lookups.go
	secret  []byte                       // the cursor secret kept in the schema, for the handler
	replica *pgxpool.Pool                // nil without WithReplica
	// roundReplica is replica when the rounds read it too
	// (WithReplicaRounds), nil otherwise.
	roundReplica *pgxpool.Pool
	follow       *follower     // nil without WithFollow
	wait         *feedwait.Hub // the sync feed's waiting requests (wait.go)

	// Work the store started in the background (a following node's
	// refresh rounds): closing ends when Close begins, which waits for
	// background.
	closing    context.Context
	stop       context.CancelFunc
	background sync.WaitGroup
	bgMu       sync.Mutex // orders background.Add before Close's Wait

	replicaCounts replicaCounts // see ReplicaReads
	notices       notices       // see WithNotify

	// searchOn is true once the store has seen the search index on (it
	// is never turned off): its writers then compute trigram keys, which
	// an index that is off would not store (see AddSubmission).
	searchOn atomic.Bool
	// sortOn is the sort index setting as this store last saw it: it
	// never turns off.
	sortOn atomic.Bool
	// strictDefault is whether the pool's default isolation, as Open or
	// New found it, is repeatable read or serializable: AddSubmission
	// then writes at read committed while the search index is on (see
	// execCommitted).
	strictDefault bool
}

var (
	_ formsapi.Store       = (*Store)(nil)
	_ formsapi.KeyResolver = (*Store)(nil)
	_ formsapi.Writer      = (*Store)(nil)
	_ formsapi.KeyManager  = (*Store)(nil)
	_ formsapi.FeedStore   = (*Store)(nil)
	_ formsapi.FieldStore  = (*Store)(nil)
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
	cfg := config{cacheBytes: DefaultCacheSize, usedInterval: keyuse.DefaultInterval, limits: formsapi.DefaultLimits, now: time.Now, keep: stored.TombstoneRetention}
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
	if err := find.CheckSortFields(cfg.sortFields); err != nil {
		return nil, err
	}
	secret, err := migrate(ctx, pool, schema, cfg.now(), cfg.searchIndex, cfg.sortIndex, cfg.sortFields, cfg.startProgress())
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, schema: schema, sql: newQueries(schema), hooks: newHookQueries(schema), limits: cfg.limits, now: cfg.now, keep: cfg.keep, cache: pagecache.New(cfg.cacheBytes), secret: secret, replica: cfg.replica}
	if cfg.replicaRounds {
		s.roundReplica = cfg.replica
	}
	var on bool
	if err := pool.QueryRow(ctx, s.sql.searchIndexed).Scan(&on); err != nil {
		return nil, fmt.Errorf("read the search index setting: %w", err)
	}
	s.searchOn.Store(on)
	if err := pool.QueryRow(ctx, s.sql.sortIndexed).Scan(&on); err != nil {
		return nil, fmt.Errorf("read the sort index setting: %w", err)
	}
	s.sortOn.Store(on)
	if err := pool.QueryRow(ctx, `SELECT current_setting('transaction_isolation') <> 'read committed'`).Scan(&s.strictDefault); err != nil {
		return nil, fmt.Errorf("read the default isolation: %w", err)
	}
	s.closing, s.stop = context.WithCancel(context.Background())
	s.lookups = s.newLookups()
	if cfg.follow {
		s.follow = newFollower()
		s.follow.staleness = cfg.staleness
		s.follow.replicaWait, s.follow.replicaTimeout = replicaRoundWait, replicaRoundTimeout
		if cfg.replicaWait[0] > 0 {
			s.follow.replicaWait, s.follow.replicaTimeout = cfg.replicaWait[0], cfg.replicaWait[1]
		}
		s.lookups = s.newFollowLookups(cfg.spacing, cfg.roundTarget, cfg.roundMax)
	}
	s.startWait(cfg)
	s.startNotify(cfg)
	if s.follow != nil && cfg.exchange != nil {
		s.startSharing(cfg)
	}
	s.used = keyuse.New(cfg.usedInterval, cfg.now, s.writeUses)
	s.used.Start()
	return s, nil
}

// closeFlushTimeout bounds the last write of key uses in Close.
const closeFlushTimeout = 5 * time.Second

// Schema returns the schema the store's tables are in.
func (s *Store) Schema() string { return s.schema }

// Close writes the key uses noted since the last batch (see
// [Store.Authorize]), then closes the pool of a store from Open, and
// returns the error of that last write, if any (the pool is closed
// either way), like sqlitestore's Close. A store from New leaves the
// host's pool open. Close waits for queries in progress to finish.
func (s *Store) Close() error {
	s.wait.Close()
	if s.follow != nil && s.follow.shared != nil {
		s.stopSharing()
	}
	s.bgMu.Lock()
	s.stop()
	s.bgMu.Unlock()
	s.background.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
	defer cancel()
	err := s.used.Stop(ctx)
	if s.owned {
		s.pool.Close()
	}
	if err != nil {
		return fmt.Errorf("pgstore: close: writing the last key uses: %w", err)
	}
	return nil
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
