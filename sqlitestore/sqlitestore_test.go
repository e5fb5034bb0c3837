package sqlitestore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

var ctx = context.Background()

// dbPath returns a fresh database file name in a temporary directory.
func dbPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "forms.db")
}

// mustOpen opens the store at path with opts and closes it when the test
// ends. A path with no file yet gets a copy of a migrated database first
// (see migrated): a test of what Open does to a new file calls Open.
func mustOpen(t *testing.T, path string, opts ...sqlitestore.Option) *sqlitestore.Store {
	t.Helper()
	is := is.New(t)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		migrated(t, path, opts...)
	}
	s, err := sqlitestore.Open(path, opts...)
	is.NoErr(err) // open store
	t.Cleanup(func() { s.Close() })
	return s
}

// hostDB opens a handle the way a host application would, closed when
// the test ends.
func hostDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	is := is.New(t)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	is.NoErr(err) // open host database
	t.Cleanup(func() { db.Close() })
	return db
}

// mustNew makes a store on the host's handle with opts and closes the
// store (not the handle) when the test ends.
func mustNew(t *testing.T, db *sql.DB, opts ...sqlitestore.Option) *sqlitestore.Store {
	t.Helper()
	is := is.New(t)
	s, err := sqlitestore.New(db, opts...)
	is.NoErr(err) // new store on host handle
	t.Cleanup(func() { s.Close() })
	return s
}

func load(t *testing.T, s *sqlitestore.Store, seed storetest.Seed) *sqlitestore.Store {
	t.Helper()
	is := is.New(t)
	is.NoErr(storetest.Load(ctx, s, seed)) // load seed
	return s
}

// factories make a seeded store both ways: from Open, and from New on a
// host-owned handle. Each keeps time by the seed's clock.
var factories = []struct {
	name string
	open func(t *testing.T, seed storetest.Seed, opts ...sqlitestore.Option) *sqlitestore.Store
}{
	{"Open", func(t *testing.T, seed storetest.Seed, opts ...sqlitestore.Option) *sqlitestore.Store {
		path, loaded := seededPath(t, seed, opts...)
		return loaded(mustOpen(t, path, append(opts, sqlitestore.WithClock(seed.Clock.Now))...))
	}},
	{"New", func(t *testing.T, seed storetest.Seed, opts ...sqlitestore.Option) *sqlitestore.Store {
		path, loaded := seededPath(t, seed, opts...)
		return loaded(mustNew(t, hostDB(t, path), append(opts, sqlitestore.WithClock(seed.Clock.Now))...))
	}},
}

// seededPath returns a new database file for a store opened with opts and
// loaded with seed, and what to do with the store once open: a seed
// without a Clock is copied in already loaded (see seeded), and one with
// a Clock is loaded into a migrated copy by the store, reading the clock.
func seededPath(t *testing.T, seed storetest.Seed, opts ...sqlitestore.Option) (string, func(*sqlitestore.Store) *sqlitestore.Store) {
	path := dbPath(t)
	if seed.Clock == nil {
		seeded(t, path, seed, opts...)
		return path, func(s *sqlitestore.Store) *sqlitestore.Store { return s }
	}
	migrated(t, path, opts...)
	return path, func(s *sqlitestore.Store) *sqlitestore.Store { return load(t, s, seed) }
}

// onNew are the groups of the contract run on a store made by New as well
// as by Open. The two differ only in who owns the handle (the host's one *sql.DB for reads and writes, with its own pragmas), so the groups that read and
// write through every kind of statement run on both; the others (the fast
// paths, the search index, lifecycle, grants, export, fields and damaged
// data) run the same statements over the same connections and are held on
// Open's store alone, which halves the suite's cost.
var onNew = []string{"Store", "Keys", "Writes", "Batch", "Feed", "Webhooks"}

// TestContract holds the store made by Open to every contract it
// implements, its fast paths and the damaged-data clauses included, with
// the search index off (the default) and the search clauses again with it
// on, the sort index on throughout, and the store made by New to the
// groups of onNew.
func TestContract(t *testing.T) {
	for _, f := range factories {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			opts := []storetest.Option{storetest.WithDamage(damage),
				storetest.WithSearchIndex(func(t *testing.T, seed storetest.Seed) formsapi.Store {
					return f.open(t, seed, sqlitestore.WithSearchIndex(), sqlitestore.WithSortIndex())
				})}
			if f.name == "New" {
				opts = append(opts, storetest.Groups(onNew...))
			} else {
				// Another node beside the first: how the first got its
				// connections does not change what the clause checks.
				opts = append(opts, storetest.WithNode(node))
			}
			// With the sort index on, so that the sort clauses run
			// (TestSortIndexOff checks a store without it).
			storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store {
				return f.open(t, seed, sqlitestore.WithSortIndex())
			}, opts...)
		})
	}
}

// node opens another node over the file of s (storetest.WithNode): a
// Store of its own on the same file, with the options' defaults, as a
// second process would be; the indexes s turned on are the file's.
func node(t *testing.T, s formsapi.Store) formsapi.Store {
	t.Helper()
	var seq int
	var name, file string
	if err := sqlitestore.WriteDB(s.(*sqlitestore.Store)).QueryRow(`PRAGMA database_list`).Scan(&seq, &name, &file); err != nil || file == "" {
		t.Fatalf("the file of the store: %q, %v", file, err)
	}
	n, err := sqlitestore.Open(file)
	if err != nil {
		t.Fatalf("open another node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// damage writes c into the row of the submission of formID added last,
// behind the store's back: c.Data where its data is kept, c.Object where
// its JSON as the API sends it is.
func damage(t *testing.T, s formsapi.Store, accountID, formID string, c storetest.DamageCase) {
	t.Helper()
	_, err := sqlitestore.WriteDB(s.(*sqlitestore.Store)).Exec(`UPDATE formsapi_submissions SET data = ?, json = ?
		WHERE seq = (SELECT MAX(seq) FROM formsapi_submissions
			WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = ? AND account_id = ?))`,
		c.Data, c.Object, formID, accountID)
	if err != nil {
		t.Fatalf("damage a row: %v", err)
	}
}

// view is everything the seed accounts can see.
type view struct {
	Forms       map[string][]formsapi.Form
	Submissions map[string][]formsapi.Submission
	Keys        map[string]string
}

func snapshot(t *testing.T, s *sqlitestore.Store) view {
	t.Helper()
	is := is.New(t)
	v := view{Forms: map[string][]formsapi.Form{}, Submissions: map[string][]formsapi.Submission{}, Keys: map[string]string{}}
	q := formsapi.Query{Limit: 1000}
	for _, account := range []string{storetest.AccountA, storetest.AccountB, storetest.AccountEmpty} {
		p, err := s.ListForms(ctx, account, q)
		is.NoErr(err)              // list forms
		is.Equal(p.NextCursor, "") // all forms on one page
		v.Forms[account] = p.Items
		for _, f := range p.Items {
			sp, err := s.ListSubmissions(ctx, account, f.ID, q)
			is.NoErr(err)               // list submissions
			is.Equal(sp.NextCursor, "") // all submissions on one page
			v.Submissions[f.ID] = sp.Items
		}
	}
	for _, k := range []string{storetest.KeyA, storetest.KeyA2, storetest.KeyB, storetest.KeyRevoked, storetest.KeyNotAdded} {
		account, err := s.ResolveKey(ctx, k)
		if err != nil {
			is.True(errors.Is(err, formsapi.ErrInvalidKey)) // only invalid keys fail
			account = "invalid"
		}
		v.Keys[k] = account
	}
	return v
}

func TestReopenKeepsEverything(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s, err := sqlitestore.Open(path)
	is.NoErr(err)                                             // open store
	is.NoErr(storetest.Load(ctx, s, storetest.DefaultSeed())) // load seed
	key, err := formsapi.NewKey()
	is.NoErr(err)                               // new key
	is.NoErr(s.AddKey(ctx, key, "acct-late"))   // add a key
	is.NoErr(s.RevokeKey(ctx, storetest.KeyA2)) // revoke a key
	before := snapshot(t, s)
	is.Equal(before.Keys[storetest.KeyA2], "invalid")         // revoked before reopening
	is.Equal(len(before.Submissions[storetest.FormBusy]), 23) // seed submissions
	is.NoErr(s.Close())                                       // close store

	s = mustOpen(t, path)
	is.Equal(cmp.Diff(before, snapshot(t, s)), "") // reopened store (-before +after)
	account, err := s.ResolveKey(ctx, key)
	is.NoErr(err)                  // key added before reopening
	is.Equal(account, "acct-late") // its account
	err = s.AddKey(ctx, storetest.KeyRevoked, storetest.AccountA)
	is.True(errors.Is(err, formsapi.ErrKeyExists)) // a revoked key stays dead after reopening
	err = s.AddForm(ctx, storetest.AccountB, formsapi.Form{ID: storetest.FormBusy})
	is.True(errors.Is(err, formsapi.ErrFormExists)) // form IDs stay taken after reopening
}

func migrationRows(t *testing.T, db *sql.DB) []int {
	t.Helper()
	is := is.New(t)
	rows, err := db.QueryContext(ctx, "SELECT version FROM formsapi_migrations ORDER BY version")
	is.NoErr(err) // read migrations table
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		is.NoErr(rows.Scan(&v)) // scan version
		vs = append(vs, v)
	}
	is.NoErr(rows.Err()) // migrations rows
	return vs
}

// TestSecretMadeOnce: stores of several processes that find no cursor
// secret in the file at once (each on a handle of its own) all read one,
// made once; a store opened later reads it too, and another file has
// another. (Processes creating a new file at the same instant are not
// what this checks: the secret is made after the migrations, so the
// race is between stores of a migrated file without a secret row, as
// after an upgrade.)
func TestSecretMadeOnce(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path := dbPath(t)
	is.NoErr(mustOpen(t, path).Close())
	_, err := hostDB(t, path).Exec(`DELETE FROM formsapi_secrets`)
	is.NoErr(err) // as a file migrated by an earlier version has none

	stores := make([]*sqlitestore.Store, 4)
	errs := make([]error, len(stores))
	handles := make([]*sql.DB, len(stores))
	for i := range handles {
		handles[i] = hostDB(t, path)
	}
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() { stores[i], errs[i] = sqlitestore.New(handles[i]) })
	}
	wg.Wait()
	for i, s := range stores {
		is.NoErr(errs[i]) // every process opens
		t.Cleanup(func() { s.Close() })
	}
	secret := stores[0].FastPath().Secret
	is.Equal(len(secret), 32)
	for _, s := range stores {
		is.Equal(s.FastPath().Secret, secret) // one secret for all
	}
	var rows int
	is.NoErr(handles[0].QueryRow(`SELECT count(*) FROM formsapi_secrets`).Scan(&rows))
	is.Equal(rows, 1)
	is.Equal(mustOpen(t, path).FastPath().Secret, secret)                   // after a restart
	is.True(!bytes.Equal(mustOpen(t, dbPath(t)).FastPath().Secret, secret)) // another file

	_, err = handles[0].Exec(`UPDATE formsapi_secrets SET secret = x'00'`)
	is.NoErr(err)
	_, err = sqlitestore.Open(path)
	is.True(err != nil && strings.Contains(err.Error(), "delete the row to have a new one made")) // a short one is refused
}

func TestMigrateTwiceIsNoOp(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	var want []int
	for v := 1; v <= sqlitestore.MigrationCount(); v++ {
		want = append(want, v)
	}
	is.True(len(want) > 0) // embedded migrations found

	s, err := sqlitestore.Open(path)
	is.NoErr(err)                                               // first open
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "kept"})) // add form
	is.NoErr(s.Close())                                         // close store

	s = mustOpen(t, path)
	is.Equal(migrationRows(t, sqlitestore.WriteDB(s)), want) // one row per migration after two opens

	db := hostDB(t, path)
	mustNew(t, db)
	is.Equal(migrationRows(t, db), want) // still one row per migration after New
	p, err := s.ListForms(ctx, "acct", formsapi.Query{Limit: 10})
	is.NoErr(err)                   // list forms
	is.Equal(len(p.Items), 1)       // data survives migrating again
	is.Equal(p.Items[0].ID, "kept") // the form added first
}

func TestSchemaTooNew(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s, err := sqlitestore.Open(path)
	is.NoErr(err)       // open store
	is.NoErr(s.Close()) // close store

	db := hostDB(t, path)
	_, err = db.ExecContext(ctx, "INSERT INTO formsapi_migrations (version, name, applied_at) VALUES (?, 'future.sql', 0)",
		sqlitestore.MigrationCount()+1)
	is.NoErr(err) // record a newer migration

	_, err = sqlitestore.Open(path)
	is.True(errors.Is(err, sqlitestore.ErrSchemaTooNew)) // Open refuses a newer schema
	_, err = sqlitestore.New(db)
	is.True(errors.Is(err, sqlitestore.ErrSchemaTooNew)) // New refuses a newer schema
}

func TestSharesHostDatabase(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	db := hostDB(t, path)
	for _, q := range []string{
		"CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
		"CREATE INDEX users_by_name ON users (name)",
		"CREATE TABLE forms (id TEXT PRIMARY KEY)", // a name the library must not take
		"INSERT INTO users (name) VALUES ('ann'), ('bob')",
		"INSERT INTO forms (id) VALUES ('host-form')",
		"PRAGMA user_version = 7",
	} {
		_, err := db.ExecContext(ctx, q)
		is.NoErr(err) // host schema and data
	}
	host := schema(t, db)

	load(t, mustNew(t, db), storetest.DefaultSeed())
	s := mustOpen(t, path)                                           // Open on the same file migrates nothing more
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "host-form"})) // host's forms table is not ours

	var names []string
	rows, err := db.QueryContext(ctx, "SELECT group_concat(name) FROM (SELECT name FROM users ORDER BY id)")
	is.NoErr(err) // read host table
	for rows.Next() {
		var n string
		is.NoErr(rows.Scan(&n)) // scan names
		names = append(names, n)
	}
	is.NoErr(rows.Err()) // host rows
	rows.Close()
	is.Equal(names, []string{"ann,bob"}) // host rows untouched
	var version int
	is.NoErr(db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version)) // read user_version
	is.Equal(version, 7)                                                    // host's user_version untouched

	after := schema(t, db)
	for name, def := range host {
		is.Equal(after[name], def) // host object unchanged
	}
	var ours int
	for name := range after {
		if _, ok := host[name]; ok {
			continue
		}
		ours++
		if !strings.HasPrefix(name, "formsapi_") {
			t.Errorf("the store made %q, which lacks the formsapi_ prefix", name)
		}
	}
	is.True(ours >= 4) // the store's tables and indexes are there
}

// schema returns every object in sqlite_schema by name, with its SQL.
func schema(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	is := is.New(t)
	rows, err := db.QueryContext(ctx, "SELECT type, name, COALESCE(sql, '') FROM sqlite_schema")
	is.NoErr(err) // read sqlite_schema
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var typ, name, text string
		is.NoErr(rows.Scan(&typ, &name, &text)) // scan schema row
		m[name] = typ + ": " + text
	}
	is.NoErr(rows.Err()) // schema rows
	return m
}

func TestKeyNeverOnDisk(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s, err := sqlitestore.Open(path)
	is.NoErr(err) // open store
	var keys []string
	for i := 0; i < 3; i++ {
		k, err := formsapi.NewKey()
		is.NoErr(err)                                         // new key
		is.NoErr(s.AddKey(ctx, k, fmt.Sprintf("acct-%d", i))) // add key
		keys = append(keys, k)
	}
	is.NoErr(s.RevokeKey(ctx, keys[2])) // revoke one
	// A failed write must not leak the key into the file either.
	is.True(errors.Is(s.AddKey(ctx, keys[0], "acct-x"), formsapi.ErrKeyExists)) // duplicate refused

	check := func(when string) {
		var all []byte
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			b, err := os.ReadFile(path + suffix)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			is.NoErr(err) // read database file
			all = append(all, b...)
		}
		for _, k := range keys {
			is.True(!bytes.Contains(all, []byte(k)))                         // the plain key is not on disk
			is.True(!bytes.Contains(all, []byte(k[len(keyformat.Prefix):]))) // nor its random part
			h := sha256.Sum256([]byte(k))
			is.True(bytes.Contains(all, h[:])) // its SHA-256 is
		}
		t.Logf("%s: checked %d bytes", when, len(all))
	}
	check("open")
	is.NoErr(s.Close()) // close store, checkpointing the WAL
	check("closed")
}

func TestPoolPragmas(t *testing.T) {
	is := is.New(t)
	s := load(t, mustOpen(t, dbPath(t)), storetest.DefaultSeed())
	read := sqlitestore.ReadDB(s)
	// Hold three connections at once, so they are three different ones.
	var conns []*sql.Conn
	for i := 0; i < 3; i++ {
		c, err := read.Conn(ctx)
		is.NoErr(err) // reader connection
		defer c.Close()
		conns = append(conns, c)
	}
	for _, c := range conns {
		var timeout int
		var mode string
		is.NoErr(c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout)) // read busy_timeout
		is.Equal(timeout, 5000)                                                // busy_timeout on every reader
		is.NoErr(c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))    // read journal_mode
		is.Equal(mode, "wal")                                                  // WAL on every reader
		var pages int
		is.NoErr(c.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&pages)) // read cache_size
		is.Equal(pages, -512)                                              // 512 KiB of pages per reader
		_, err := c.ExecContext(ctx, "INSERT INTO formsapi_keys (key_hash, account_id, created_at) VALUES (zeroblob(32), 'x', 0)")
		is.True(err != nil) // the read pool cannot write
		_, err = c.ExecContext(ctx, "DELETE FROM formsapi_keys")
		is.True(err != nil) // nor delete
	}
	_, err := s.ResolveKey(ctx, storetest.KeyA)
	is.NoErr(err)                                                    // keys survive the refused writes
	is.Equal(read.Stats().MaxOpenConnections, sqlitestore.ReadConns) // the read pool is bounded

	write := sqlitestore.WriteDB(s)
	is.Equal(write.Stats().MaxOpenConnections, 1) // one writer
	var timeout, fk, syncMode int
	var mode string
	is.NoErr(write.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout)) // writer busy_timeout
	is.NoErr(write.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk))      // writer foreign_keys
	is.NoErr(write.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode)) // writer synchronous
	is.NoErr(write.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))    // writer journal_mode
	is.Equal(timeout, 5000)                                                    // writer waits for locks
	is.Equal(fk, 1)                                                            // foreign keys enforced
	is.Equal(syncMode, 1)                                                      // synchronous=NORMAL
	is.Equal(mode, "wal")                                                      // writer in WAL
}

func TestConcurrentReadsAndWrites(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, dbPath(t))
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "busy", CreatedAt: base})) // add form
	key, err := formsapi.NewKey()
	is.NoErr(err)                        // new key
	is.NoErr(s.AddKey(ctx, key, "acct")) // add key

	const writes, readers, reads = 200, 8, 50
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	report := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < writes; i++ {
			// Every third shares a timestamp, so ties are paged too.
			sub := formsapi.Submission{FormID: "busy", Data: []byte(fmt.Sprintf(`{"n":%d}`, i)), CreatedAt: base.Add(time.Duration(i/3) * time.Millisecond)}
			if err := s.AddSubmission(ctx, sub, formsapi.Metadata{ClientIP: "192.0.2.1"}); err != nil {
				report(fmt.Errorf("write %d: %w", i, err))
			}
		}
	}()
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := formsapi.Query{Limit: 7}
			if r%2 == 1 {
				q.Order = formsapi.Oldest
			}
			for i := 0; i < reads; i++ {
				p, err := s.ListSubmissions(ctx, "acct", "busy", q)
				if err != nil {
					report(fmt.Errorf("reader %d, read %d: %w", r, i, err))
					return
				}
				q.Cursor = p.NextCursor // back to the first page after the last
				if i%10 == 0 {
					if _, err := s.ResolveKey(ctx, key); err != nil {
						report(fmt.Errorf("reader %d: resolve key: %w", r, err))
					}
					if _, err := s.ListForms(ctx, "acct", formsapi.Query{Limit: 5}); err != nil {
						report(fmt.Errorf("reader %d: list forms: %w", r, err))
					}
				}
			}
		}()
	}
	wg.Wait()
	is.Equal(errors.Join(errs...), nil) // no errors, no SQLITE_BUSY

	seen := map[string]bool{}
	q := formsapi.Query{Limit: 50}
	for {
		p, err := s.ListSubmissions(ctx, "acct", "busy", q)
		is.NoErr(err) // walk all submissions
		for _, sub := range p.Items {
			is.True(!seen[string(sub.Data)]) // no submission twice
			seen[string(sub.Data)] = true
		}
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
	}
	is.Equal(len(seen), writes) // every write is visible
	var check string
	is.NoErr(sqlitestore.WriteDB(s).QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check)) // integrity check
	is.Equal(check, "ok")                                                                        // database intact after the load
	is.True(sqlitestore.ReadDB(s).Stats().OpenConnections <= sqlitestore.ReadConns)              // the read pool stayed bounded
}

// plan returns the EXPLAIN QUERY PLAN details of query with args.
func plan(t *testing.T, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	is := is.New(t)
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	is.NoErr(err) // explain query plan
	defer rows.Close()
	var details []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		is.NoErr(rows.Scan(&id, &parent, &unused, &detail)) // scan plan row
		details = append(details, detail)
	}
	is.NoErr(rows.Err()) // plan rows
	return details
}

func checkPlan(t *testing.T, details []string, index string) {
	t.Helper()
	used := false
	for _, d := range details {
		if strings.HasPrefix(d, "SCAN") || strings.Contains(d, "TEMP B-TREE") {
			t.Errorf("plan step %q scans or sorts", d)
		}
		if strings.Contains(d, "USING INDEX "+index) || strings.Contains(d, "USING COVERING INDEX "+index) || strings.Contains(d, "USING "+index) {
			used = true
		}
	}
	if !used {
		t.Errorf("plan %q does not use %s", details, index)
	}
}

func TestQueryPlans(t *testing.T) {
	s := load(t, mustOpen(t, dbPath(t)), storetest.DefaultSeed())
	db := sqlitestore.ReadDB(s)
	since := time.Date(2024, 3, 1, 9, 1, 0, 0, time.UTC)
	until := since.Add(3 * time.Minute)
	cursor := func(o formsapi.Order) string {
		p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormBusy, formsapi.Query{Limit: 2, Order: o})
		if err != nil || p.NextCursor == "" {
			t.Fatalf("no cursor: %v", err)
		}
		return p.NextCursor
	}
	for _, list := range []struct {
		table, index string
		owner        any
	}{
		{"forms", "formsapi_forms_account", storetest.AccountA},
		{"submissions", "formsapi_submissions_form", int64(1)},
		{"encoded", "formsapi_submissions_form", int64(1)},
	} {
		for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
			for _, c := range []string{"", cursor(o)} {
				for _, f := range []struct{ since, until time.Time }{{}, {since, time.Time{}}, {time.Time{}, until}, {since, until}} {
					q := formsapi.Query{Limit: 10, Order: o, Cursor: c, Since: f.since, Until: f.until}
					name := fmt.Sprintf("%s/%s/cursor=%t/since=%t/until=%t", list.table, o, c != "", !f.since.IsZero(), !f.until.IsZero())
					t.Run(name, func(t *testing.T) {
						is := is.New(t)
						args, err := sqlitestore.ListArgs(list.owner, q)
						is.NoErr(err) // list arguments
						details := plan(t, db, sqlitestore.ListSQL(list.table, o), args...)
						checkPlan(t, details, list.index)
						for _, d := range details {
							// Both bounds seek the index: none of since,
							// until and cursor is left as a filter.
							// (The fast path's statement reads the form's
							// row and the submission at its feed_last too,
							// one row each: see sqlAppendSubmissions.)
							if strings.HasPrefix(d, "SEARCH") && strings.Contains(d, list.index) && !strings.Contains(d, "created_at>? AND created_at<?") {
								t.Errorf("plan %q does not bound the index range on both sides", d)
							}
						}
					})
				}
			}
		}
	}
	t.Run("purge", func(t *testing.T) {
		// Every deletion's purge of tombstones past retention reads
		// those by their index, not every tombstone of the store.
		for _, query := range sqlitestore.PurgeSQL {
			details := plan(t, db, query, 1)
			for _, d := range details {
				if strings.HasPrefix(d, "SCAN formsapi_") {
					t.Errorf("%s: plan step %q walks a table", query, d)
				}
			}
			if !strings.Contains(strings.Join(details, "\n"), "formsapi_tombstones_deleted_at") {
				t.Errorf("%s: plan %q does not read the tombstones by deleted_at", query, details)
			}
		}
	})
	t.Run("key copy refresh", func(t *testing.T) {
		// The new submissions by their seq and their forms by theirs
		// (migration 0025): never a scan of a table.
		details := plan(t, db, sqlitestore.KeyCopyRefreshSQL, 1, 1025)
		used := false
		for _, d := range details {
			if strings.HasPrefix(d, "SCAN formsapi_") || strings.Contains(d, "TEMP B-TREE") {
				t.Errorf("plan step %q scans or sorts a table", d)
			}
			used = used || strings.Contains(d, "SEARCH formsapi_submissions USING INTEGER PRIMARY KEY (rowid>?)")
		}
		if !used {
			t.Errorf("plan %q does not find the new submissions by their seq", details)
		}
	})
	t.Run("splice", func(t *testing.T) {
		details := plan(t, db, sqlitestore.SpliceSQL, int64(1), int64(3))
		checkPlan(t, details, "formsapi_submissions_feed")
		checkPlan(t, details, "PRIMARY KEY")
	})
	for query, args := range sqlitestore.LookupSQL {
		t.Run(strings.Fields(query)[3], func(t *testing.T) {
			details := plan(t, db, query, args...)
			if strings.Contains(query, "formsapi_keys") {
				checkPlan(t, details, "PRIMARY KEY")
			}
			if strings.Contains(query, "formsapi_forms") { // the combined lookup reads both
				checkPlan(t, details, "formsapi_forms_id")
			}
		})
	}
}

func TestCanceledWrites(t *testing.T) {
	for _, f := range factories {
		t.Run(f.name, func(t *testing.T) {
			is := is.New(t)
			s := f.open(t, storetest.DefaultSeed())
			before := snapshot(t, s)
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			key, err := formsapi.NewKey()
			is.NoErr(err) // new key
			err = s.AddForm(cctx, storetest.AccountA, formsapi.Form{ID: "canceled"})
			is.True(errors.Is(err, context.Canceled)) // AddForm
			err = s.AddSubmission(cctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`{"canceled":true}`)}, formsapi.Metadata{})
			is.True(errors.Is(err, context.Canceled)) // AddSubmission
			err = s.AddKey(cctx, key, storetest.AccountA)
			is.True(errors.Is(err, context.Canceled)) // AddKey
			err = s.RevokeKey(cctx, storetest.KeyA)
			is.True(errors.Is(err, context.Canceled)) // RevokeKey

			is.Equal(cmp.Diff(before, snapshot(t, s)), "") // nothing written (-before +after)
			_, err = s.ResolveKey(ctx, key)
			is.True(errors.Is(err, formsapi.ErrInvalidKey)) // the key was not added
			_, err = s.ListSubmissions(ctx, storetest.AccountA, "canceled", formsapi.Query{Limit: 1})
			is.True(errors.Is(err, formsapi.ErrFormNotFound)) // the form was not added
		})
	}
}

func TestStoredForm(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, dbPath(t))
	at := time.Date(2024, 6, 1, 10, 0, 0, 123456789, time.FixedZone("X", 2*3600))
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "f", Title: "T", CreatedAt: at}))                                                                                                      // add form
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(" { \"a\" : [1, 2] ,\n \"b\": \"<&>\" } "), CreatedAt: at}, formsapi.Metadata{Geo: []byte(" {\"x\": 1} ")})) // add submission

	forms, err := s.ListForms(ctx, "acct", formsapi.Query{Limit: 10})
	is.NoErr(err)                                           // list forms
	is.Equal(len(forms.Items), 1)                           // one form
	is.True(forms.Items[0].CreatedAt.Equal(at))             // same instant
	is.Equal(forms.Items[0].CreatedAt.Location(), time.UTC) // returned in UTC

	subs, err := s.ListSubmissions(ctx, "acct", "f", formsapi.Query{Limit: 10})
	is.NoErr(err)                // list submissions
	is.Equal(len(subs.Items), 1) // one submission
	sub := subs.Items[0]
	is.Equal(string(sub.Data), `{"a":[1,2],"b":"<&>"}`) // data compacted, not re-encoded
	is.True(sub.Attachments != nil)                     // attachments never nil
	is.Equal(len(sub.Attachments), 0)                   // and empty
	is.Equal(sub.CreatedAt.Location(), time.UTC)        // returned in UTC
	is.True(sub.CreatedAt.Equal(at))                    // same instant
	b, err := json.Marshal(sub)
	is.NoErr(err)                                          // marshal submission
	is.True(bytes.Contains(b, []byte(`"attachments":[]`))) // [] on the wire, not null

	var stored int64
	is.NoErr(sqlitestore.WriteDB(s).QueryRowContext(ctx, "SELECT created_at FROM formsapi_submissions").Scan(&stored)) // read raw time
	is.Equal(stored, at.UnixNano())                                                                                    // stored as Unix nanoseconds
}

func TestLimits(t *testing.T) {
	is := is.New(t)
	s := load(t, mustOpen(t, dbPath(t)), storetest.DefaultSeed())
	p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormBusy, formsapi.Query{Limit: math.MaxInt})
	is.NoErr(err)              // the largest limit
	is.Equal(len(p.Items), 23) // everything
	is.Equal(p.NextCursor, "") // on one page
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	old := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		since, until time.Time
		want         int
	}{{far, time.Time{}, 0}, {time.Time{}, far, 23}, {old, time.Time{}, 23}, {time.Time{}, old, 0}, {old, far, 23}} {
		p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormBusy, formsapi.Query{Limit: 100, Since: c.since, Until: c.until})
		is.NoErr(err)                  // bounds beyond the storable years
		is.Equal(len(p.Items), c.want) // clamp to nothing or everything
	}
}

func TestOpenOddPaths(t *testing.T) {
	is := is.New(t)
	_, err := sqlitestore.Open("")
	is.True(err != nil) // empty path refused
	_, err = sqlitestore.Open(":memory:")
	is.True(err != nil) // in-memory databases cannot be in WAL mode
	dir := filepath.Join(t.TempDir(), "odd ?#% name")
	is.NoErr(os.Mkdir(dir, 0o755)) // make directory
	path := filepath.Join(dir, "f?x#y%20.db")
	s, err := sqlitestore.Open(path)
	is.NoErr(err)                                            // open a path with URI characters
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "f"})) // write to it
	is.NoErr(s.Close())                                      // close store
	_, err = os.Stat(path)
	is.NoErr(err) // the file is exactly at path
	s = mustOpen(t, path)
	p, err := s.ListForms(ctx, "acct", formsapi.Query{Limit: 10})
	is.NoErr(err)             // list forms
	is.Equal(len(p.Items), 1) // the form is there after reopening
}

// TestCacheIsNeverStale warms the read cache and then commits in every
// way there is: through the store, and through another connection as a
// second process would. The very next read must show each commit.
func TestCacheIsNeverStale(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	s := load(t, mustOpen(t, path), storetest.DefaultSeed())
	h := formsapi.NewHandler(s, s)
	first := func() string { // the newest submission of FormSmall
		r := httptest.NewRequest("GET", "/v1/forms/"+storetest.FormSmall+"/submissions?limit=1", nil)
		r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		is.Equal(w.Code, 200) // list
		var page struct {
			Submissions []struct{ Data json.RawMessage }
		}
		is.NoErr(json.Unmarshal(w.Body.Bytes(), &page))
		is.Equal(len(page.Submissions), 1)
		return string(page.Submissions[0].Data)
	}
	is.Equal(first(), `{"n":102,"plan":"pro"}`)
	is.Equal(first(), `{"n":102,"plan":"pro"}`) // from the cache
	pages, _ := sqlitestore.CachedPages(s)
	is.True(pages > 0) // the cache is in use

	// A commit through the store.
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(`{"via":"store"}`),
		CreatedAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}, formsapi.Metadata{}))
	is.Equal(first(), `{"via":"store"}`) // seen at once

	// A commit through another connection, as another process would.
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	is.NoErr(err) // second connection
	defer other.Close()
	_, err = other.Exec(`INSERT INTO formsapi_submissions (form_seq, created_at, data, attachments, json)
		SELECT seq, ?, '{"via":"other"}', '[]', ? FROM formsapi_forms WHERE id = ?`,
		time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano(),
		[]byte(`{"formId":"signup-a","data":{"via":"other"},"attachments":[],"createdAt":"2031-01-01T00:00:00Z"}`), storetest.FormSmall)
	is.NoErr(err)                        // insert elsewhere
	is.Equal(first(), `{"via":"other"}`) // seen at once

	// Keys: revoked through the store, and through the other connection.
	account, err := s.ResolveKey(ctx, storetest.KeyA2)
	is.NoErr(err) // warm
	is.Equal(account, storetest.AccountA)
	is.NoErr(s.RevokeKey(ctx, storetest.KeyA2))
	_, err = s.ResolveKey(ctx, storetest.KeyA2)
	is.True(errors.Is(err, formsapi.ErrInvalidKey)) // revoked at once
	_, err = s.ResolveKey(ctx, storetest.KeyB)
	is.NoErr(err) // warm
	h32 := sha256.Sum256([]byte(storetest.KeyB))
	_, err = other.Exec(`UPDATE formsapi_keys SET revoked_at = 1 WHERE key_hash = ?`, h32[:])
	is.NoErr(err) // revoke elsewhere
	_, err = s.ResolveKey(ctx, storetest.KeyB)
	is.True(errors.Is(err, formsapi.ErrInvalidKey)) // revoked at once
}

func TestCacheIsBounded(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, dbPath(t))
	big := strings.Repeat("x", 200_000)
	is.NoErr(s.AddForm(ctx, "a", formsapi.Form{ID: "big"}))
	for i := 0; i < 60; i++ {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "big", Data: []byte(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, big))}, formsapi.Metadata{}))
	}
	h := formsapi.NewHandler(s, formsapi.KeyResolverFunc(func(context.Context, string) (string, error) { return "a", nil }))
	// Distinct pages of 200 kB to 4 MiB, the page budget
	// (formsapi.DefaultPageBytes), which cuts the pages from limit 21 on:
	// 24 of them are about 59 MB, five times the cache. (Limits up to 60
	// served 200 MB, 40 pages of 4 MiB, for the same check and 30 s of
	// CPU under -race.)
	limits := []int{}
	for limit := 1; limit <= 24; limit++ {
		limits = append(limits, limit)
	}
	for _, limit := range append(limits, 1, 2, 3) { // then small ones again
		// Each limit its own list (until differs), so pages do not share
		// an entry.
		until := time.Date(2200, 1, 1, 0, 0, limit, 0, time.UTC).Format(time.RFC3339)
		r := httptest.NewRequest("GET", fmt.Sprintf("/v1/forms/big/submissions?limit=%d&until=%s", limit, until), nil)
		r.Header.Set("Authorization", "Bearer k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		is.Equal(w.Code, 200) // list
	}
	_, bytes := sqlitestore.CachedPages(s)
	is.True(bytes > 0 && bytes <= sqlitestore.DefaultCacheSize) // bounded
	pages, _ := sqlitestore.CachedPages(s)
	// Eviction is random, so which older pages survive varies; the
	// newest (three 200 kB items) always made room for itself.
	is.True(pages >= 1 && bytes >= 3*200_000) // still in use: old pages made room for new ones
}

// dataVersion reads PRAGMA data_version on its own connection: it changes
// whenever anyone else commits to the file.
func dataVersion(t *testing.T, c *sql.Conn) int64 {
	t.Helper()
	var v int64
	if err := c.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestLastUsedWithoutAWritePerRequest(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path := dbPath(t)
	s, err := sqlitestore.Open(path)
	is.NoErr(err) // open store
	load(t, s, storetest.DefaultSeed())
	watch := hostDB(t, path)
	conn, err := watch.Conn(ctx)
	is.NoErr(err) // watching connection
	defer conn.Close()
	v := dataVersion(t, conn)
	for i := 0; i < 200; i++ {
		for _, k := range []string{storetest.KeyA, storetest.KeyA2, storetest.KeyB} {
			_, err := s.Authorize(ctx, k)
			is.NoErr(err) // authorize
		}
	}
	is.Equal(dataVersion(t, conn), v) // 600 requests committed nothing
	is.NoErr(s.Close())               // close store, writing the noted uses

	s2 := mustOpen(t, path)
	keys, err := s2.ListKeys(ctx, storetest.AccountA)
	is.NoErr(err) // list keys after reopening
	used := 0
	for _, k := range keys {
		if !k.LastUsedAt.IsZero() {
			used++
		}
	}
	is.Equal(used, 2) // KeyA and KeyA2 were used, and Close wrote it
}

func TestLastUsedWrittenInBatches(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path := dbPath(t)
	s, err := sqlitestore.Open(path, sqlitestore.WithLastUsedInterval(50*time.Millisecond))
	is.NoErr(err) // open store
	t.Cleanup(func() { s.Close() })
	batches := sqlitestore.UseBatches(s)
	load(t, s, storetest.DefaultSeed())
	other := mustOpen(t, path) // a second node: sees only what is written
	_, err = s.Authorize(ctx, storetest.KeyB)
	is.NoErr(err)            // authorize
	for b := range batches { // the batches the store writes every interval, without Close
		is.NoErr(b.Err) // batch written
		if b.N > 0 {
			break
		}
	}
	keys, err := other.ListKeys(ctx, storetest.AccountB)
	is.NoErr(err)                         // list keys on the other store
	is.True(!keys[0].LastUsedAt.IsZero()) // the batch holds the use
}
