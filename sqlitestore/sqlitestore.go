// Package sqlitestore keeps forms, submissions and API keys in SQLite
// through modernc.org/sqlite (pure Go, no cgo). It implements
// formsapi.Store, formsapi.FeedStore (the sync feed) with formsapi.FieldStore (the CSV
// export's columns), formsapi.KeyManager
// (scoped and expiring keys, last used; a formsapi.KeyAuthorizer and
// KeyResolver) and formsapi.Writer with formsapi.BatchWriter, exactly as memstore and pgstore do, so
// a host can swap one for another.
//
// [Open] opens a database file the store owns; [New] uses a *sql.DB the host
// already has, so the library can live in the host's own database file. All
// tables are prefixed formsapi_ and the schema version is kept in the table
// formsapi_migrations (not PRAGMA user_version, which belongs to the host).
//
// Only the SHA-256 of each API key is stored, never the key itself.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/feedwait"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/keyuse"
	"github.com/formsapi/formsapi/internal/pagecache"
	"github.com/formsapi/formsapi/internal/stored"
)

// readConns bounds the read-only pool of a store from Open: enough for
// parallel requests on every core, few enough that connections are reused
// and stay warm (each keeps its own page cache).
var readConns = max(4, 2*runtime.GOMAXPROCS(0))

// DefaultCacheSize is the read cache of a store from Open unless
// WithCacheSize says otherwise: 12 MiB, which holds 100-item pages of
// typical 340-byte submissions for about 340 lists (170 forms in both
// orders) and kept the example server under 64 MiB of RSS on the
// multi-tenant load run (BENCHMARKS.md).
const DefaultCacheSize = 12 << 20

type config struct {
	cacheBytes   int
	usedInterval time.Duration
	limits       formsapi.Limits
	now          func() time.Time
	keep         time.Duration // see WithTombstoneRetention
	searchIndex  bool          // see WithSearchIndex
	sortIndex    bool          // see WithSortIndex
	sortFields   []string      // see WithSortIndex: nil for every field
	progress     stored.Progress
	quiet        bool          // WithLogger(nil)
	waitCheck    time.Duration // see WithWaitCheck; 0: DefaultWaitCheck
	noKeyCopy    bool          // see WithKeyCopy
	foldAt       int           // see withFoldAt; 0: foldAt
}

// withFoldAt folds the search index's tail at n rows instead of foldAt:
// for tests, which walk a fold's every step with a few dozen writes
// instead of hundreds (export_test.go's WithFoldAt).
func withFoldAt(n int) Option {
	return func(c *config) { c.foldAt = n }
}

// foldAtRows is the fold's size the config asks for.
func (c *config) foldAtRows() int64 {
	if c.foldAt > 0 {
		return int64(c.foldAt)
	}
	return foldAt
}

// Option configures a store from Open or New.
type Option func(*config)

// WithLimits sets the limits AddForm, AddSubmission, AddKey and
// AddKeyWith apply (formsapi.DefaultLimits without it); a zero field keeps
// its default.
func WithLimits(l formsapi.Limits) Option {
	return func(c *config) { c.limits = l }
}

// WithCacheSize bounds the read cache to about n bytes of encoded pages
// of submissions; 0 turns the cache off, so every page is read from the
// file. The cache never serves a page older than the last commit to its
// form, whoever made it. A store from Open has a cache of
// DefaultCacheSize unless this says otherwise; a store from New has none
// unless this gives it one (the host's handle may be tuned for other
// work, so the store does not take memory unasked).
func WithCacheSize(n int) Option {
	return func(c *config) { c.cacheBytes = max(n, 0) }
}

// WithLastUsedInterval sets how often the store notes each key's use and
// writes the noted uses, in one transaction: a minute unless
// set. It panics if d is not positive.
func WithLastUsedInterval(d time.Duration) Option {
	if d <= 0 {
		panic("sqlitestore: WithLastUsedInterval needs a positive interval")
	}
	return func(c *config) { c.usedInterval = d }
}

// WithTombstoneRetention sets how long the store keeps a deletion in its
// form's sync feed (30 days without it): a feed reader whose token is
// older than a deletion it has not read, once that deletion is
// forgotten, gets 410 and must read the feed again from the start (see
// formsapi.FeedStore). A deletion is stamped with the store's clock (see
// WithClock) at the store's first deletion at or after it (a deletion in
// plain SQL is stamped at the store's next one, so it is kept longer),
// and forgotten at the first deletion at least d after its stamp, never
// earlier. It panics if d is not positive.
func WithTombstoneRetention(d time.Duration) Option {
	if d <= 0 {
		panic("sqlitestore: WithTombstoneRetention with a retention that is not positive")
	}
	return func(c *config) { c.keep = d }
}

// WithSearchIndex turns on the file's search index: Open or New sets the
// setting kept in the database (table formsapi_settings) and, in the same
// transaction, indexes the trigrams of every stored submission, once; on
// a big file that takes a while (about the time of writing every row's
// trigrams again) and holds the write lock meanwhile. From then on every
// write to the file, by any process, indexes about a hundred trigrams of
// its values: AddSubmission costs several times as much (BENCHMARKS.md,
// bench/writecost.sh), and a search (q=) walks the entries of its rarest
// trigram, so a rare term costs its matches.
//
// Without the index (the default for a new file), writes index only the
// keys of filters, and a search without filters walks the form's
// submissions in page order, checking each: a page examines at most
// 1,000 of them (find.MaxExamined) and may end short, or empty, with a
// next cursor, so a rare term in a big form takes many requests. A search
// with filters walks the entries of its rarest filter either way.
//
// The setting belongs to the file, not the store: a store opened without
// this option never turns it off, so every process over the file keeps
// the index complete once one turned it on.
func WithSearchIndex() Option {
	return func(c *config) { c.searchIndex = true }
}

// WithSortIndex turns on the file's sort index, the ordered index of
// sort keys that sorted lists (sort=<field>, formsapi.Query.Sort) walk,
// for the top-level fields named, or for every field when none is named:
// Open or New sets the setting and the fields kept in the database
// (tables formsapi_settings and formsapi_sort_fields) and, in the same
// transaction, builds what changed, with its progress logged: turned on,
// every stored submission is indexed; a field added gets the entries of
// every stored submission that has it; a field no longer named loses
// its entries. On a big file that takes a while and holds the write lock
// meanwhile. From then on every write to the file, by any process,
// stores its submission's sort keys and adds one index entry per kept
// field it has with a scalar value: for every field, on this file that
// costs a write about as much again; for one field, a few percent
// (BENCHMARKS.md, "Sort by a submitted field"). A sort by a field the
// index does not keep is not served: the handler answers 501 naming it.
// Without this option (the default for a new file), writes compute and
// store no sort key, and a sorted list is not served (501). As
// WithSearchIndex, the setting belongs to the file: a store opened
// without this option never turns it off, nor changes its fields; one
// opened with it sets them to its own (so give every process the same
// names). Open refuses a name that no sort index can keep (empty, not
// valid UTF-8, holding a NUL, longer than 64 bytes) or one named twice.
func WithSortIndex(fields ...string) Option {
	return func(c *config) {
		c.sortIndex = true
		c.sortFields = nil
		if len(fields) > 0 {
			c.sortFields = slices.Clone(fields)
		}
	}
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
		panic("sqlitestore: WithClock with a nil clock")
	}
	return func(c *config) { c.now = now }
}

// Store keeps forms, submissions, API keys and webhook endpoints in SQLite.
// Like memstore.Store and pgstore.Store, it implements every contract this
// module has for a store: a formsapi.Store, a formsapi.FeedStore (the sync
// feed) and formsapi.FieldStore (the CSV export's columns), a
// formsapi.KeyResolver and formsapi.KeyAuthorizer (scoped and expiring
// keys) and formsapi.KeyManager, a formsapi.Writer and formsapi.BatchWriter, a hookstore.Store
// (webhook endpoints and their streams) and a formsapi.Counter
// (it counts lists for total=). Give it to formsapi.NewHandler as both store and
// keys. It is safe for concurrent use. Make one with Open or New.
type Store struct {
	// afterBegin, set by tests, runs between the read cache's Begin and
	// the page's read (appendSubmissions): a commit there makes a page
	// that the cache began Mixed.
	afterBegin func()

	write  *sql.DB // one connection: SQLite has one writer at a time anyway
	read   *sql.DB // read-only pool; the same handle as write for New
	owned  bool    // Close closes the pools only when Open made them
	stmts  []*sql.Stmt
	cache  *pagecache.Cache // nil when off: see WithCacheSize
	used   *keyuse.Tracker  // when keys were last used, noted in memory
	limits formsapi.Limits
	now    func() time.Time // see WithClock
	keep   time.Duration    // see WithTombstoneRetention
	secret []byte           // the cursor secret kept in the file, for the handler
	gate   chan struct{}    // held by each write of the store: see writing
	keys   *keyCopy         // nil without the copy: see WithKeyCopy

	// searchOn is true once the store has seen the search index on (it
	// is never turned off): its writers then compute trigram keys, which
	// an index that is off would not store (see AddSubmission).
	searchOn atomic.Bool
	// sortOn is the sort index setting as this store last read it: it
	// never turns off.
	sortOn atomic.Bool
	// tails are this store's guesses at the forms' rows of
	// formsapi_find_tail, by their IDs' hash (see foldIfFull).
	tails [tailSlots]tailSlot
	// foldAt is a form's tail rows at which a write folds them: the constant
	// foldAt but in tests (withFoldAt).
	foldAt int64
	// progress is the store's logger (see WithLogger): its start's, and
	// a fold that fails after a write (see noteFold).
	progress *stored.Progress
	// foldsFailed counts the folds that failed in a row (see noteFold).
	foldsFailed atomic.Int64

	addForm, addSubmission, addKey, revokeKey, touchKey *sql.Stmt // on write

	formsDesc, formsAsc, subsDesc, subsAsc      *sql.Stmt // on read
	encodedDesc, encodedAsc                     *sql.Stmt // on read
	spliceRows                                  *sql.Stmt // on read: what a form's feed gained since a held page (sqlSplice)
	formTailCount                               *sql.Stmt // on write: a form's rows of formsapi_find_tail (see foldIfFull)
	feed, feedEncoded, feedKeyed                *sql.Stmt // on read
	formOf, resolveKey, authorizeForm, listKeys *sql.Stmt // on read
	scanEncodedDesc, scanEncodedAsc             *sql.Stmt // on read: searches without the index
	searchIndexed                               *sql.Stmt // on read: the setting, for searches

	// wait wakes the sync feed's waiting requests (wait.go).
	wait *feedwait.Hub
	// on read: sorted pages, [encoded][desc] (the JSON as sent, or its size)
	sorted, unsorted [2][2]*sql.Stmt
}

var (
	_ formsapi.Store       = (*Store)(nil)
	_ formsapi.KeyResolver = (*Store)(nil)
	_ formsapi.KeyManager  = (*Store)(nil)
	_ formsapi.Writer      = (*Store)(nil)
	_ formsapi.FeedStore   = (*Store)(nil)
	_ formsapi.FieldStore  = (*Store)(nil)
)

// Open opens the SQLite database file at path, creating it if needed,
// migrates it to the current schema and returns a store that owns it;
// call Close when done. A file Open creates is readable and writable by
// its owner only (mode 0600, whatever the umask), and so are its -wal and
// -shm files; an existing file keeps its mode, and Open narrows the side
// files to it.
//
// A store from Open keeps recently read pages of submissions in memory
// (see [WithCacheSize]). Each page is served only while its form has not
// changed: triggers in the file give a form a new version with every
// change to its submissions, whoever commits it (this store, the host,
// another process), and every request reads that version first, with the
// ownership check it needs anyway. A write forgets only its own form's
// pages. It also keeps a copy of its key lookups, answered after one
// check of the file for all the requests waiting (see [WithKeyCopy]), so
// a revocation holds for the very next request.
//
// The database runs in WAL mode, so readers never wait for the writer. WAL
// keeps an index in shared memory (the -shm file), so the file must be on a
// local filesystem: not NFS, SMB or another network share. Open fails if
// the file cannot be put in WAL mode. synchronous=NORMAL means a power loss
// or OS crash may roll back the last commits, but never corrupts the file.
//
// Open returns an error wrapping [ErrSchemaTooNew] if a newer version of
// this package has already migrated the file.
func Open(path string, opts ...Option) (*Store, error) {
	return openCtx(context.Background(), path, opts...)
}

// openCtx is Open, whose migrations end when ctx does (see Migrate).
func openCtx(ctx context.Context, path string, opts ...Option) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlitestore: open: empty path")
	}
	cfg := config{cacheBytes: DefaultCacheSize, usedInterval: keyuse.DefaultInterval, limits: formsapi.DefaultLimits, now: time.Now, keep: stored.TombstoneRetention}
	for _, o := range opts {
		o(&cfg)
	}
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	uri := "file:" + escapePath(path)
	// busy_timeout comes first so every later pragma waits for locks rather
	// than failing. _pragma (not an Exec after opening) reaches every
	// connection the pool ever opens.
	//
	// secure_delete: deleted rows (DeleteSubmission, DeleteForm, Erase, an
	// erasure must not leave a respondent's data in free pages) are
	// overwritten with zeros. It costs writes only when rows are deleted.
	//
	// The connection is counted (writeConns): the key copy's check,
	// PRAGMA data_version, is a connection's own, and database/sql opens
	// another when it finds the one it has unusable (after an interrupted
	// statement, say), whose count starts again.
	write, writeConns, err := openCounted(uri + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_pragma=secure_delete(1)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	s := &Store{write: write, owned: true, limits: cfg.limits, now: cfg.now, keep: cfg.keep, gate: make(chan struct{}, 1), foldAt: cfg.foldAtRows()}
	s.used = keyuse.New(cfg.usedInterval, cfg.now, s.writeUses)
	fail := func(err error) (*Store, error) {
		s.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	// The read-write pool goes first and migrates, so the file exists and
	// is in WAL mode before any read-only connection attaches.
	if err := write.PingContext(ctx); err != nil {
		return fail(err)
	}
	var mode string
	if err := write.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fail(err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fail(fmt.Errorf("journal_mode is %q, not wal: the file must be on a local filesystem, not in memory", mode))
	}
	if err := find.CheckSortFields(cfg.sortFields); err != nil {
		return fail(err)
	}
	s.progress = cfg.startProgress()
	on, sorted, err := migrate(ctx, write, cfg.searchIndex, cfg.sortIndex, cfg.sortFields, cfg.foldAtRows(), s.progress)
	if err != nil {
		return fail(err)
	}
	s.searchOn.Store(on)
	s.sortOn.Store(sorted)
	if s.secret, err = cursorSecret(ctx, write, cfg.now()); err != nil {
		return fail(err)
	}
	// mode=ro: SQLite itself refuses writes, unlike PRAGMA query_only,
	// which a statement could turn off again.
	//
	// cache_size: 512 KiB of SQLite pages per read connection, not the
	// 2 MiB default. The file's pages stay in the OS page cache either
	// way, and repeated reads come from the store's own cache; measured on
	// the multi-tenant load run (BENCHMARKS.md), the default cost the
	// server 14 MiB of RSS for no gain in throughput.
	s.read, err = sql.Open("sqlite", uri+"?mode=ro&_pragma=busy_timeout(5000)&_pragma=cache_size(-512)")
	if err != nil {
		return fail(err)
	}
	s.read.SetMaxOpenConns(readConns)
	s.read.SetMaxIdleConns(readConns)
	if err := s.read.PingContext(ctx); err != nil {
		return fail(err)
	}
	if err := s.prepare(ctx); err != nil {
		return fail(err)
	}
	if err := sideFilesLikeMain(path); err != nil {
		return fail(err)
	}
	if !cfg.noKeyCopy {
		check, err := write.PrepareContext(ctx, "PRAGMA data_version")
		if err != nil {
			return fail(err)
		}
		refresh, err := write.PrepareContext(ctx, sqlKeyCopyRefresh)
		if err != nil {
			return fail(err)
		}
		s.stmts = append(s.stmts, check, refresh)
		s.keys = newKeyCopy(check, refresh, s.gate, writeConns)
	}
	s.cache = pagecache.New(cfg.cacheBytes)
	s.used.Start()
	s.startWait(cfg)
	return s, nil
}

// New returns a store on db, a handle the host opened with the
// modernc.org/sqlite driver and still owns: Close on the store leaves db
// open, and the host closes it. New migrates the database to the current
// schema; the host's own tables are left alone. Reads and writes both go
// through db, so its DSN should set busy_timeout, and preferably WAL mode
// and _txlock=immediate, as Open does. The store's own writes take turns
// within the store, one at a time as on Open's single write connection,
// so they never wait on each other in SQLite; the busy_timeout is for
// the host's writes and other processes'. It keeps no read cache unless
// [WithCacheSize] asks for one; the cache is as exact as Open's, since the
// file's triggers version every form whoever writes to it.
//
// New returns an error wrapping [ErrSchemaTooNew] if a newer version of
// this package has already migrated the database. It panics if db is nil.
func New(db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		panic("sqlitestore: New with a nil *sql.DB")
	}
	// Duplicates are recognised by modernc.org/sqlite's error codes.
	if _, ok := db.Driver().(*sqlite.Driver); !ok {
		return nil, fmt.Errorf("sqlitestore: new: the database handle uses driver %T, not modernc.org/sqlite", db.Driver())
	}
	cfg := config{usedInterval: keyuse.DefaultInterval, limits: formsapi.DefaultLimits, now: time.Now, keep: stored.TombstoneRetention}
	for _, o := range opts {
		o(&cfg)
	}
	ctx := context.Background()
	if err := find.CheckSortFields(cfg.sortFields); err != nil {
		return nil, fmt.Errorf("sqlitestore: new: %w", err)
	}
	progress := cfg.startProgress()
	on, sorted, err := migrate(ctx, db, cfg.searchIndex, cfg.sortIndex, cfg.sortFields, cfg.foldAtRows(), progress)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: new: %w", err)
	}
	secret, err := cursorSecret(ctx, db, cfg.now())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: new: %w", err)
	}
	s := &Store{write: db, read: db, limits: cfg.limits, now: cfg.now, keep: cfg.keep, secret: secret, gate: make(chan struct{}, 1), progress: progress, foldAt: cfg.foldAtRows()}
	s.searchOn.Store(on)
	s.sortOn.Store(sorted)
	s.cache = pagecache.New(cfg.cacheBytes) // exact here too: the triggers see the host's writes
	s.used = keyuse.New(cfg.usedInterval, cfg.now, s.writeUses)
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlitestore: new: %w", err)
	}
	s.used.Start()
	s.startWait(cfg)
	return s, nil
}

// writing waits for the store's turn to write and returns the function
// that ends it, or ctx's error. The store's writes queue here, in this
// process, one at a time, rather than in SQLite: a writer that finds the
// database locked polls for it (busy_timeout) at growing intervals and
// takes it only if it happens to be free when it looks, so on a host's
// handle (New), whose pool has many connections, a few busy writers of
// one store can keep another away past its busy_timeout, which then
// fails with SQLITE_BUSY though no write held the lock for long. Open's
// single write connection queues them too; the gate makes both the
// same. Writes by the host itself, or by other processes, still meet the
// store's in SQLite, under busy_timeout.
func (s *Store) writing(ctx context.Context) (done func(), err error) {
	select {
	case s.gate <- struct{}{}:
		return func() { <-s.gate }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close writes the key uses noted since the last batch (see
// [Store.Authorize]), releases the store's prepared statements and, for
// a store from Open, closes its database connections. A store from New leaves the
// host's handle open.
func (s *Store) Close() error {
	if s.wait != nil {
		s.wait.Close()
	}
	var errs []error
	if s.used != nil {
		errs = append(errs, s.used.Stop(context.Background()))
	}
	s.cache = nil
	for _, st := range s.stmts {
		errs = append(errs, st.Close())
	}
	s.stmts = nil
	if s.owned {
		if s.read != nil {
			errs = append(errs, s.read.Close())
		}
		errs = append(errs, s.write.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlitestore: close: %w", err)
	}
	return nil
}

// prepare prepares every statement once; database/sql re-prepares each on
// the connections of its pool as needed.
func (s *Store) prepare(ctx context.Context) error {
	for _, p := range []struct {
		dst **sql.Stmt
		db  *sql.DB
		sql string
	}{
		{&s.addForm, s.write, sqlAddForm},
		{&s.addSubmission, s.write, sqlAddSubmission},
		{&s.formTailCount, s.write, sqlFormTailCount},
		{&s.addKey, s.write, sqlAddKey},
		{&s.revokeKey, s.write, sqlRevokeKey},
		{&s.touchKey, s.write, sqlTouchKey},
		{&s.formsDesc, s.read, sqlListFormsDesc},
		{&s.formsAsc, s.read, sqlListFormsAsc},
		{&s.subsDesc, s.read, sqlListSubmissionsDesc},
		{&s.subsAsc, s.read, sqlListSubmissionsAsc},
		{&s.encodedDesc, s.read, sqlAppendSubmissionsDesc},
		{&s.encodedAsc, s.read, sqlAppendSubmissionsAsc},
		{&s.spliceRows, s.read, sqlSplice},
		{&s.feed, s.read, sqlFeed},
		{&s.feedEncoded, s.read, sqlFeedEncoded},
		{&s.feedKeyed, s.read, sqlFeedKeyed},
		{&s.formOf, s.read, sqlFormOf},
		{&s.resolveKey, s.read, sqlResolveKey},
		{&s.authorizeForm, s.read, sqlAuthorizeForm},
		{&s.listKeys, s.read, sqlListKeys},
		{&s.scanEncodedDesc, s.read, sqlScanEncodedDesc},
		{&s.scanEncodedAsc, s.read, sqlScanEncodedAsc},
		{&s.searchIndexed, s.read, sqlSearchIndexed},
		{&s.sorted[0][0], s.read, fmt.Sprintf(sqlSortedAsc, "length(s.json)")},
		{&s.sorted[0][1], s.read, fmt.Sprintf(sqlSortedDesc, "length(s.json)")},
		{&s.sorted[1][0], s.read, fmt.Sprintf(sqlSortedAsc, "s.json")},
		{&s.sorted[1][1], s.read, fmt.Sprintf(sqlSortedDesc, "s.json")},
		{&s.unsorted[0][0], s.read, fmt.Sprintf(sqlUnsortedAsc, "length(json)")},
		{&s.unsorted[0][1], s.read, fmt.Sprintf(sqlUnsortedDesc, "length(json)")},
		{&s.unsorted[1][0], s.read, fmt.Sprintf(sqlUnsortedAsc, "json")},
		{&s.unsorted[1][1], s.read, fmt.Sprintf(sqlUnsortedDesc, "json")},
	} {
		st, err := p.db.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", firstLine(p.sql), err)
		}
		*p.dst = st
		s.stmts = append(s.stmts, st)
	}
	return nil
}

// createPrivate creates the database file readable and writable by its
// owner only (0600, whatever the umask) if it does not exist yet: it holds
// respondents' IP addresses, user agents and geo data. A file that exists
// keeps the mode its owner gave it.
func createPrivate(path string) error {
	if path == ":memory:" {
		return nil // no file; Open refuses it later for want of WAL
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create file: %w", err)
	}
	err = f.Chmod(0o600) // a umask can only have narrowed it; make it exact
	return errors.Join(err, f.Close())
}

// sideFilesLikeMain narrows the -wal and -shm files to the database file's
// mode if they are more open: SQLite gives them the main file's mode when
// it creates them, but one left behind by another program may differ.
func sideFilesLikeMain(path string) error {
	main, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat database file: %w", err)
	}
	want := main.Mode().Perm()
	for _, p := range []string{path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("stat %s: %w", filepath.Base(p), err)
		}
		if fi.Mode().Perm()&^want != 0 {
			if err := os.Chmod(p, fi.Mode().Perm()&want); err != nil {
				return fmt.Errorf("narrow the mode of %s: %w", filepath.Base(p), err)
			}
		}
	}
	return nil
}

// escapePath percent-encodes the characters that would end the path part
// of a file: URI; SQLite decodes them again.
func escapePath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// isUniqueViolation reports whether err is SQLite refusing a duplicate
// primary key or unique index entry. It goes by the driver's result code,
// never the message text, which SQLite does not promise to keep.
func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code()
	return code == sqlite3.SQLITE_CONSTRAINT_UNIQUE || code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}
