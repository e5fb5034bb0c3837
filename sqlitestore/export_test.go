package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/feedwait"
	"github.com/formsapi/formsapi/internal/keyformat"
)

// ReadDB returns the pool the store reads through.
func ReadDB(s *Store) *sql.DB { return s.read }

// WriteDB returns the pool the store writes through. Its commits are
// the store's own, which PRAGMA data_version on that connection does not
// show, and which no write method of the store marks in the key copy
// (WithKeyCopy): so WriteDB empties the copy first, as if the test's
// write were one of the store's. Call it for each write, right before
// it, and make no request meanwhile; a test of another connection's
// writes uses a handle of its own (hostDB).
func WriteDB(s *Store) *sql.DB {
	if s.keys != nil {
		s.keys.mu.Lock()
		s.keys.clearLocked()
		s.keys.mu.Unlock()
	}
	return s.write
}

// ListSQL returns the statement the store runs for a page of forms
// (table "forms"), submissions (table "submissions") or encoded
// submissions (table "encoded", the handler's fast path) in order o.
func ListSQL(table string, o formsapi.Order) string {
	switch {
	case table == "encoded" && o == formsapi.Oldest:
		return sqlAppendSubmissionsAsc
	case table == "encoded":
		return sqlAppendSubmissionsDesc
	case table == "forms" && o == formsapi.Oldest:
		return sqlListFormsAsc
	case table == "forms":
		return sqlListFormsDesc
	case o == formsapi.Oldest:
		return sqlListSubmissionsAsc
	default:
		return sqlListSubmissionsDesc
	}
}

// ListArgs returns the arguments the store binds to ListSQL for q.
func ListArgs(owner any, q formsapi.Query) ([]any, error) { return listArgs(owner, q) }

// LookupSQL are the store's single-row lookups with example arguments.
var LookupSQL = map[string][]any{
	sqlFormOf:        {"form-id", "account-id"},
	sqlResolveKey:    {make([]byte, 32)},
	sqlAuthorizeForm: {make([]byte, 32), "form-id"},
}

// MigrationCount is the number of embedded migrations.
func MigrationCount() int {
	ms, err := migrations()
	if err != nil {
		panic(err)
	}
	return len(ms)
}

// CachedPages returns how many lists and bytes the store's cache holds.
func CachedPages(s *Store) (pages, bytes int) { return s.cache.Stats() }

// ReadConns is the size of the read pool of a store from Open.
var ReadConns = readConns

// CachedVersions returns, for each form with pages in the store's cache,
// the versions those pages carry.
func CachedVersions(s *Store) map[int64][]int64 { return s.cache.Versions() }

// MigrateBefore brings db to the schema just before the migration whose
// file is named NNNN_<name>.sql, as an older version of the package left it.
func MigrateBefore(ctx context.Context, db *sql.DB, name string) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	for i, m := range ms {
		if strings.HasSuffix(m.Name, "_"+name+".sql") {
			return migrateThrough(ctx, db, ms[:i], nil)
		}
	}
	return fmt.Errorf("no migration named %s", name)
}

// FeedSQL are the statements of the sync feed and its fast path.
var FeedSQL = []string{sqlFeed, sqlFeedEncoded, sqlFeedKeyed}

// UseBatches returns a channel that gets the size and error of each
// batch of key uses the store writes on its own, every interval: a test
// waits for a batch instead of for time to pass. A batch that finds the
// channel full is not reported.
func UseBatches(s *Store) <-chan UseBatch {
	ch := make(chan UseBatch, 16)
	s.used.OnTick(func(n int, err error) {
		select {
		case ch <- UseBatch{n, err}:
		default:
		}
	})
	return ch
}

// UseBatch is one batch of key uses written.
type UseBatch struct {
	N   int
	Err error
}

// CacheWentBack is how many times the store's read cache saw a version go
// back (internal/pagecache's WentBack).
func CacheWentBack(s *Store) int64 { return s.cache.WentBack() }

// RunSQL returns the statements that read and purge the runs of the
// filters' entries (migration 0031), by name; each takes the form's seq,
// the run, and an entry's key, created_at and seq.
var RunSQL = map[string]string{
	"run desc": sqlRunDesc, "run asc": sqlRunAsc, "run after": sqlRunAfter, "chunk of": sqlRunChunkOf,
}

// TailRangeSQL is the statement of a walk's tail: the form's seq, then
// the keyset bounds.
const TailRangeSQL = sqlTailRange

// TailSQL returns the statements that read a form's tail, by name: the
// walk's, unbounded (the form's seq), and the fold's (the form's seq
// and the most rows above the mark).
var TailSQL = map[string]string{"tail all": sqlTailAll, "fold's tail": sqlFormTailKeys}

// BlockSQL returns the statements that read and fold search's posting
// blocks (migration 0022), by name; each takes the form's seq, the key
// and a keyset position.
var BlockSQL = map[string]string{
	"blocks desc": sqlBlocksDesc, "blocks asc": sqlBlocksAsc, "blocks after": sqlBlocksAfter,
	"probe": sqlProbeBlocks, "fold's block": sqlBlockAround, "fold's update": sqlBlockUpdate,
}

// ScanSQL returns the statements of a search while the search index is
// off, by name: the form's submissions in keyset order (the plain list's
// statements serve the plain page) and the range's rows counted or read
// for a total. Each takes the form's seq and the keyset bounds.
var ScanSQL = map[string]string{
	"scan encoded desc": sqlScanEncodedDesc, "scan encoded asc": sqlScanEncodedAsc,
	"list desc": sqlListSubmissionsDesc, "list asc": sqlListSubmissionsAsc,
	"count rows": sqlCountRows, "count scan": sqlCountScan,
}

// EraseSQL returns Erase's statements through the index: a chunk of
// entries' submissions (a JSON array of [seq, created_at], then the
// form's seq), and a form's rows not indexed yet (the form's seq).
var EraseSQL = map[string]string{"chunk": sqlEraseChunk, "unindexed": sqlEraseUnindexed}

// MigrateFile creates the database file at path and brings it to the
// current schema as Open with opts would, but makes no cursor secret
// (Open makes one, each database its own): a template that a test copies
// instead of migrating a database of its own.
func MigrateFile(path string, opts ...Option) error {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if err := createPrivate(path); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", "file:"+escapePath(path)+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate")
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	_, _, err = migrate(context.Background(), db, cfg.searchIndex, cfg.sortIndex, cfg.sortFields, cfg.foldAtRows(), nil)
	return errors.Join(err, db.Close())
}

// SearchIndexOn reports whether opts turn the search index on.
func SearchIndexOn(opts ...Option) bool {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	return cfg.searchIndex
}

// SortIndexOn reports whether opts turn the sort index on.
func SortIndexOn(opts ...Option) bool {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	return cfg.sortIndex
}

// WithProgressClock gives the store's start-up progress log (see
// WithLogger) the clock now and the ticker tick, which tests move and
// send on instead of waiting.
func WithProgressClock(now func() time.Time, tick func(time.Duration) (<-chan time.Time, func())) Option {
	return func(c *config) { c.progress.Now, c.progress.Tick = now, tick }
}

// WaitHub returns the store's hub of waiting sync requests.
func WaitHub(s *Store) *feedwait.Hub { return s.wait }

// KeyHash is the hash the store keeps of key.
func KeyHash(key string) [32]byte { return keyformat.Hash(key) }

// SortSQL returns the statements of sorted pages: the ordered index's
// walk ("sorted") and the submissions without a key ("unsorted").
var SortSQL = map[string]string{
	"sorted asc": fmt.Sprintf(sqlSortedAsc, "s.json"), "sorted desc": fmt.Sprintf(sqlSortedDesc, "s.json"),
	"unsorted asc": fmt.Sprintf(sqlUnsortedAsc, "json"), "unsorted desc": fmt.Sprintf(sqlUnsortedDesc, "json"),
}

// FoldAt is the number of rows of the unfolded tail at which a write
// folds it (migration 0022).
const FoldAt = foldAt

// TailReadEvery is the most writes to a form's slot between two reads
// of its tail's count.
const TailReadEvery = tailReadEvery

// WithFoldAt makes a store fold the tail at n rows instead of FoldAt.
func WithFoldAt(n int) Option { return withFoldAt(n) }

// FoldTail folds every form's unfolded tail in a transaction of db's,
// as a write that finds its form's full does (migrations 0022, 0031).
func FoldTail(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := foldEvery(ctx, tx, foldBatch*foldAt, nil); err != nil {
		return err
	}
	return tx.Commit()
}

// TrigramEntry is an entry of search's posting blocks.
type TrigramEntry struct{ Form, Key, At, Seq int64 }

// TrigramEntries returns every entry of search's posting blocks
// (migration 0022), block by block.
func TrigramEntries(db *sql.DB) ([]TrigramEntry, error) {
	rows, err := db.Query(`SELECT form_seq, key, list FROM formsapi_find_blocks ORDER BY form_seq, key, lo_at, lo_seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TrigramEntry
	for rows.Next() {
		var form, key int64
		var list []byte
		if err := rows.Scan(&form, &key, &list); err != nil {
			return nil, err
		}
		for _, e := range decodeBlock(nil, list) {
			out = append(out, TrigramEntry{form, key, e.at, e.seq})
		}
	}
	return out, rows.Err()
}

// FilterEntries returns every entry of the runs of the filters' entries
// (migration 0031), run by run.
func FilterEntries(db *sql.DB) ([]TrigramEntry, error) {
	rows, err := db.Query(`SELECT form_seq, list FROM formsapi_find_runs ORDER BY form_seq, run, key, lo_at, lo_seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TrigramEntry
	for rows.Next() {
		var form int64
		var list []byte
		if err := rows.Scan(&form, &list); err != nil {
			return nil, err
		}
		for _, t := range decodeTriples(nil, list) {
			out = append(out, TrigramEntry{form, t.key, t.at, t.seq})
		}
	}
	return out, rows.Err()
}

// KeyCopyRefreshSQL is the key copy's refresh (migration 0025).
const KeyCopyRefreshSQL = sqlKeyCopyRefresh

// SpliceSQL is the statement that reads what a form's feed gained since
// a held page (pagecache.Splice).
const SpliceSQL = sqlSplice

// DeleteSubmissionSQL is DeleteSubmission's statement.
const DeleteSubmissionSQL = sqlDeleteSubmission

// PurgeSQL are the statements every deletion runs on the tombstones.
var PurgeSQL = []string{sqlStampTombstones, sqlPurgedUpTo, sqlPurgeTombstones}

// PurgeLookups returns the chunk lookups the purges of deleted rows'
// entries made so far, in every store of the process (purgeTriples).
func PurgeLookups() int64 { return purgeLookups.Load() }
