package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

var ctx = context.Background()

// mustOpen opens a store with opts on a migrated schema from the pool
// (pooledSchema), and closes it when the test ends, before the schema
// goes back.
func mustOpen(t *testing.T, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	dsn, schema := pooledSchema(t, opts...)
	return mustOpenIn(t, dsn, schema, opts...)
}

// mustOpenFresh is mustOpen on a new schema of its own, which the store
// migrates, dropped when the test ends: for the plan tests, whose
// statistics (ANALYZE) a schema of the pool would keep.
func mustOpenFresh(t *testing.T, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	dsn, schema := pgtest.Schema(t)
	return mustOpenIn(t, dsn, schema, opts...)
}

// withDecoy opens a store on a schema of the pool, and another store, the
// decoy, on another schema holding formsapi tables too, and returns them
// with a connection of the host's own whose search_path names the decoy:
// plain SQL on it that names the first store's tables must qualify them,
// and a trigger that wrote by search_path would write to the decoy. All
// are closed when the test ends.
func withDecoy(t *testing.T) (s, decoy *pgstore.Store, host *pgx.Conn) {
	t.Helper()
	dsn, schema := pooledSchema(t)
	_, other := pooledSchema(t)
	s, decoy = mustOpenIn(t, dsn, schema), mustOpenIn(t, dsn, other)
	host, err := pgx.Connect(ctx, withParam(dsn, "search_path", other))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(ctx) })
	return s, decoy, host
}

// mustOpenIn opens a store on schema, closed when the test ends.
func mustOpenIn(t *testing.T, dsn, schema string, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(ctx, dsn, append([]pgstore.Option{pgstore.WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// hostPool opens a pool the way a host would, with search_path set to a
// fresh, empty schema, closed when the test ends.
func hostPool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	dsn, schema := pgtest.Schema(t)
	return hostPoolOn(t, dsn, schema)
}

// hostPoolOn opens a pool the way a host would, with search_path set to
// schema, closed when the test ends.
func hostPoolOn(t *testing.T, dsn, schema string) (*pgxpool.Pool, string) {
	t.Helper()
	pool, err := pgxpool.New(ctx, withParam(dsn, "search_path", schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, schema
}

// withParam adds a query parameter to a URL DSN.
func withParam(dsn, key, value string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + key + "=" + value
}

func load(t *testing.T, s *pgstore.Store, seed storetest.Seed) *pgstore.Store {
	t.Helper()
	if err := storetest.Load(ctx, s, seed); err != nil {
		t.Fatal(err)
	}
	return s
}

// factories make a seeded store both ways: from Open with WithSchema, and
// from New on a host's pool, in the pool's current schema. Each keeps time
// by the seed's clock.
var factories = []struct {
	name string
	open func(t *testing.T, seed storetest.Seed, opts ...pgstore.Option) *pgstore.Store
}{
	{"Open", func(t *testing.T, seed storetest.Seed, opts ...pgstore.Option) *pgstore.Store {
		dsn, schema := pooledSchema(t, opts...)
		return load(t, mustOpenIn(t, dsn, schema, append(opts, pgstore.WithClock(seed.Clock.Now))...), seed)
	}},
	{"New", func(t *testing.T, seed storetest.Seed, opts ...pgstore.Option) *pgstore.Store {
		dsn, schema := pooledSchema(t, opts...)
		pool, _ := hostPoolOn(t, dsn, schema)
		s, err := pgstore.New(ctx, pool, append(opts, pgstore.WithClock(seed.Clock.Now))...)
		if err != nil {
			t.Fatal(err)
		}
		if s.Schema() != schema {
			t.Fatalf("store in schema %q, want the pool's current schema %q", s.Schema(), schema)
		}
		return load(t, s, seed)
	}},
}

// onNew are the groups of the contract run on a store made by New as well
// as by Open. The two differ only in who owns the pool and which schema the store is in (the pool's search_path), so the groups that read and
// write through every kind of statement run on both; the others (the fast
// paths, the search index, lifecycle, grants, export, fields and damaged
// data) run the same statements over the same connections and are held on
// Open's store alone, which halves the suite's cost.
var onNew = []string{"Store", "Keys", "Writes", "Feed", "Webhooks"}

// TestContract holds the store made by Open to every contract it
// implements, its fast paths and the damaged-data clauses included, with
// the search index off (the default) and the search clauses again with it
// on, the sort index on throughout, and the store made by New to the
// groups of onNew.
func TestContract(t *testing.T) {
	pgtest.DSN(t)
	for _, f := range factories {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			opts := []storetest.Option{storetest.WithDamage(damage),
				storetest.WithSearchIndex(func(t *testing.T, seed storetest.Seed) formsapi.Store {
					return f.open(t, seed, pgstore.WithSearchIndex(), pgstore.WithSortIndex())
				})}
			if f.name == "New" {
				opts = append(opts, storetest.Groups(onNew...))
			} else {
				// Another node beside the first: how the first got its
				// connections does not change what the clause checks.
				opts = append(opts, storetest.WithNode(anotherNode))
			}
			// With the sort index on, so that the sort clauses run
			// (TestSortIndexOff checks a store without it).
			storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store {
				return f.open(t, seed, pgstore.WithSortIndex())
			}, opts...)
		})
	}
}

// anotherNode opens another node over the schema of s (storetest.WithNode):
// a store of its own, with the options' defaults, as a node deployed
// beside it would be; the indexes s turned on are the schema's.
func anotherNode(t *testing.T, s formsapi.Store) formsapi.Store {
	t.Helper()
	n, err := pgstore.Open(ctx, pgtest.DSN(t), pgstore.WithSchema(s.(*pgstore.Store).Schema()))
	if err != nil {
		t.Fatalf("open another node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// damage writes c into the row of the submission of formID added last,
// behind the store's back: c.Object where its JSON as the API sends it
// is kept, and c.Data where its data is, unless c.Data is not valid
// UTF-8, which a text column cannot hold.
func damage(t *testing.T, s formsapi.Store, accountID, formID string, c storetest.DamageCase) {
	t.Helper()
	ps := s.(*pgstore.Store)
	subs, forms := quote(ps.Schema())+".formsapi_submissions", quote(ps.Schema())+".formsapi_forms"
	set, args := "json = $3", []any{formID, accountID, c.Object}
	if utf8.Valid(c.Data) {
		set, args = set+", data = $4", append(args, string(c.Data))
	}
	_, err := pgstore.Pool(ps).Exec(ctx, "UPDATE "+subs+" SET "+set+" WHERE seq = (SELECT MAX(seq) FROM "+subs+
		" WHERE form_seq = (SELECT seq FROM "+forms+" WHERE id = $1 AND account_id = $2))", args...)
	if err != nil {
		t.Fatalf("damage a row: %v", err)
	}
}

// TestConcurrentFirstOpen starts ten stores at once on a schema that does
// not exist yet, as ten nodes deploying together would: all succeed, the
// schema is migrated exactly once, and every store works.
func TestConcurrentFirstOpen(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Name(t)
	stores := openAtOnce(t, dsn, schema, 10)
	is.Equal(migrationVersions(t, stores[0]), allVersions()) // each migration recorded once
	is.NoErr(stores[3].AddForm(ctx, "acct", formsapi.Form{ID: "f"}))
	p, err := stores[7].ListForms(ctx, "acct", formsapi.Query{Limit: 10})
	is.NoErr(err)
	is.Equal(len(p.Items), 1) // a write through one node is seen by another
	secret := stores[0].FastPath().Secret
	is.Equal(len(secret), 32) // made once, from crypto/rand
	for _, s := range stores {
		is.Equal(s.FastPath().Secret, secret) // every node read the one secret
	}
	var rows int
	is.NoErr(pgstore.Pool(stores[0]).QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.formsapi_secrets", quote(schema))).Scan(&rows))
	is.Equal(rows, 1)
}

// TestSecretSharedByNodes: nodes starting together on an empty schema,
// with no cursor secret set, take back each other's cursors and sync
// tokens, give the same refs and ETags, and so do nodes started later.
func TestSecretSharedByNodes(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Name(t)
	stores := openAtOnce(t, dsn, schema, 4)
	load(t, stores[0], storetest.DefaultSeed())
	later, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	is.NoErr(err)
	defer later.Close()
	const list = "/v1/forms/" + storetest.FormBusy + "/submissions?limit=2"
	const feed = "/v1/forms/" + storetest.FormBusy + "/submissions?sync=start&limit=3"
	type handedOut struct {
		NextCursor, SyncToken, etag string
		Refs                        []string
	}
	handOut := func(s *pgstore.Store) handedOut {
		h := formsapi.NewHandler(s, s)
		var o handedOut
		page, sync := get(h, list, storetest.KeyA), get(h, feed, storetest.KeyA)
		is.NoErr(json.Unmarshal(page.body, &o))
		is.NoErr(json.Unmarshal(sync.body, &o))
		o.etag = page.header.Get("ETag")
		return o
	}
	first := handOut(stores[0])
	is.True(first.NextCursor != "" && first.SyncToken != "" && first.etag != "" && len(first.Refs) == 3)
	for _, s := range append(stores[1:], later) {
		o := handOut(s)
		is.Equal(o.Refs, first.Refs) // the same refs on every node
		is.Equal(o.etag, first.etag) // and the same ETags
		h := formsapi.NewHandler(s, s)
		is.Equal(get(h, list+"&cursor="+first.NextCursor, storetest.KeyA).status, 200) // node 0's cursor
		is.Equal(get(h, "/v1/forms/"+storetest.FormBusy+"/submissions?sync="+first.SyncToken, storetest.KeyA).status, 200)
	}
}

// TestShortSecretRefused: a secret row a host wrote by hand, too short to
// key anything, stops Open with an error that says what to do.
func TestShortSecretRefused(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t)
	_, err := pgstore.Pool(s).Exec(ctx, fmt.Sprintf("UPDATE %s.formsapi_secrets SET secret = 'short'", quote(s.Schema())))
	is.NoErr(err)
	_, err = pgstore.New(ctx, pgstore.Pool(s), pgstore.WithSchema(s.Schema()))
	is.True(err != nil && strings.Contains(err.Error(), "delete the row to have a new one made"))
}

func allVersions() []int {
	var vs []int
	for v := 1; v <= pgstore.MigrationCount(); v++ {
		vs = append(vs, v)
	}
	return vs
}

func migrationVersions(t *testing.T, s *pgstore.Store) []int {
	t.Helper()
	rows, err := pgstore.Pool(s).Query(ctx, fmt.Sprintf("SELECT version FROM %s.formsapi_migrations ORDER BY version", quote(s.Schema())))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

func TestReopenMigratesNothingAndKeepsData(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	is.NoErr(err)
	is.NoErr(storetest.Load(ctx, s, storetest.DefaultSeed()))
	is.NoErr(s.RevokeKey(ctx, storetest.KeyA2))
	s.Close()

	s, err = pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	is.NoErr(err)
	defer s.Close()
	is.Equal(migrationVersions(t, s), allVersions()) // nothing applied twice
	_, err = s.ResolveKey(ctx, storetest.KeyA2)
	is.True(errors.Is(err, formsapi.ErrInvalidKey)) // revoked before reopening
	account, err := s.ResolveKey(ctx, storetest.KeyA)
	is.NoErr(err)
	is.Equal(account, storetest.AccountA)
	err = s.AddForm(ctx, storetest.AccountB, formsapi.Form{ID: storetest.FormBusy})
	is.True(errors.Is(err, formsapi.ErrFormExists)) // form IDs stay taken
}

func TestSchemaTooNew(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t)
	_, err := pgstore.Pool(s).Exec(ctx, fmt.Sprintf("INSERT INTO %s.formsapi_migrations (version, name, applied_at) VALUES ($1, 'future.sql', 0)", quote(s.Schema())), pgstore.MigrationCount()+1)
	is.NoErr(err)
	_, err = pgstore.New(ctx, pgstore.Pool(s), pgstore.WithSchema(s.Schema()))
	is.True(errors.Is(err, pgstore.ErrSchemaTooNew)) // a newer schema is refused
}

// TestNewLeavesHostPoolOpen: Close on a store from New must not close
// the host's pool, and the store's migration leaves the host's session
// settings alone.
func TestNewLeavesHostPoolOpen(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	pool, schema := hostPool(t)
	other := schema + "_lib"
	t.Cleanup(func() { pgtest.Exec(t, pgtest.DSN(t), "DROP SCHEMA IF EXISTS "+quote(other)+" CASCADE") })
	s, err := pgstore.New(ctx, pool, pgstore.WithSchema(other))
	is.NoErr(err)
	is.Equal(s.Schema(), other) // WithSchema creates and uses its schema
	s.Close()
	var path string
	is.NoErr(pool.QueryRow(ctx, "SELECT current_schema()").Scan(&path))
	is.Equal(path, schema) // the host's search_path is untouched
	var n int
	is.NoErr(pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1", schema).Scan(&n))
	is.Equal(n, 0) // nothing created in the host's schema
}

// TestOddSchemaName: a schema name that needs quoting works.
func TestOddSchemaName(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, base := pgtest.Name(t)
	name := base + `"; DROP TABLE x; --`
	t.Cleanup(func() { pgtest.Exec(t, dsn, "DROP SCHEMA IF EXISTS "+quote(name)+" CASCADE") })
	s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(name))
	is.NoErr(err)
	defer s.Close()
	load(t, s, storetest.DefaultSeed())
	p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormBusy, formsapi.Query{Limit: 5})
	is.NoErr(err)
	is.Equal(len(p.Items), 5)
}

func TestOpenBadDSN(t *testing.T) {
	t.Parallel()
	_, err := pgstore.Open(ctx, "postgres://user:s3cret@[bad")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open with a malformed DSN: %v (want an error without the password)", err)
	}
}

// openAtOnce opens n stores on one schema at the same moment, as nodes
// starting together do, and fails the test unless every one opens.
func openAtOnce(t *testing.T, dsn, schema string, n int) []*pgstore.Store {
	t.Helper()
	stores := make([]*pgstore.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("node %d: %v", i, err)
			continue
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	if t.Failed() {
		t.FailNow()
	}
	return stores
}
