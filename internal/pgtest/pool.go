package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A test that needs a migrated store, not a migration, takes its schema
// from a pool (Pooled) rather than creating and migrating one (Schema):
// under -race a migration costs about half a second of PostgreSQL's CPU
// and more of the test's, emptying a schema a few milliseconds, and the
// module's tests open some hundreds of stores. This is how River's
// riverdbtest reuses its test schemas.
//
// A schema is made once per pool class by the caller's migrate (which
// opens a store with the class's options and closes it) and given back
// emptied when the test that took it has ended: every table but
// formsapi_migrations and formsapi_settings truncated with its triggers
// off (which takes a superuser, as the tests' server gives), every
// sequence restarted, so the next store in it makes a new cursor secret
// and counts versions from the start, as in a new schema. Before a schema
// goes back it is compared with itself as migrate left it: its relations
// (tables, indexes, sequences) and columns, constraints, column defaults,
// triggers (and whether each is enabled), functions, migrations and
// settings. A schema a test changed (say, a
// search index turned on, or a trigger dropped) or could not empty, and
// the schema of a failed test, is dropped instead of reused. A package
// that pools calls DropPooled from its TestMain.
var pool = struct {
	sync.Mutex
	dsn   string
	free  map[string][]string // by class
	all   []string            // to drop
	print map[string]string   // schema → fingerprint as migrate left it
}{free: map[string][]string{}, print: map[string]string{}}

// poolConn is the one connection that checks and empties the pool's
// schemas, one at a time: a new backend for each would first read the
// catalog entries of every table it truncates, which cost PostgreSQL more
// than the truncation.
var poolConn struct {
	sync.Mutex
	conn *pgx.Conn
}

// onPoolConn runs f on poolConn, connecting it to dsn first if need be;
// a connection f leaves broken is closed, for the next call to replace.
func onPoolConn(dsn string, f func(ctx context.Context, conn *pgx.Conn) error) error {
	poolConn.Lock()
	defer poolConn.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if poolConn.conn == nil || poolConn.conn.IsClosed() || poolConn.conn.Config().ConnString() != dsn {
		if poolConn.conn != nil {
			poolConn.conn.Close(ctx)
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			poolConn.conn = nil
			return err
		}
		poolConn.conn = conn
	}
	err := f(ctx, poolConn.conn)
	if err != nil {
		poolConn.conn.Close(ctx) // in whatever state f left it
		poolConn.conn = nil
	}
	return err
}

// Pooled returns the test server's DSN and a migrated schema of class,
// taken from the pool or made by migrate(dsn, schema), which must migrate
// the new, empty schema as the stores of class are opened (and close
// what it opened). The schema goes back to the pool, emptied, when the
// test's later cleanups (its stores' Close) have run: call Pooled before
// opening the store. Every store a test opens in the schema must be of
// the same class.
func Pooled(t testing.TB, class string, migrate func(dsn, schema string) error) (dsn, schema string) {
	t.Helper()
	dsn = DSN(t)
	pool.Lock()
	if free := pool.free[class]; len(free) > 0 {
		schema = free[len(free)-1]
		pool.free[class] = free[:len(free)-1]
	}
	pool.Unlock()
	if schema == "" {
		schema = "formsapi_test_" + strings.ToLower(rand.Text()[:12])
		exec(t, dsn, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
		pool.Lock()
		pool.dsn = dsn
		pool.all = append(pool.all, schema) // dropped by DropPooled
		pool.Unlock()
		if err := migrate(dsn, schema); err != nil {
			t.Fatalf("pgtest: migrate a schema for the pool %q: %v", class, err)
		}
		print, err := fingerprintAt(dsn, schema)
		if err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		pool.Lock()
		pool.print[schema] = print
		pool.Unlock()
	}
	t.Cleanup(func() {
		if t.Failed() {
			return // left as the test left it, never reused; dropped by DropPooled
		}
		if err := giveBack(dsn, schema); err != nil {
			t.Logf("pgtest: the schema %s is dropped, not reused: %v", schema, err)
			exec(t, dsn, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			return
		}
		pool.Lock()
		pool.free[class] = append(pool.free[class], schema)
		pool.Unlock()
	})
	return dsn, schema
}

// giveBack checks that schema is as migrate left it and empties it.
func giveBack(dsn, schema string) error {
	return onPoolConn(dsn, func(ctx context.Context, conn *pgx.Conn) error {
		print, err := fingerprint(ctx, conn, schema)
		if err != nil {
			return err
		}
		pool.Lock()
		want := pool.print[schema]
		pool.Unlock()
		if print != want {
			return fmt.Errorf("its tables, triggers, functions, migrations or settings are not as migrated")
		}
		return empty(ctx, conn, schema)
	})
}

// fingerprintSQL is a digest of what a test could change in a schema that
// emptying it does not restore ($1 the schema's name): its relations and
// their columns, and its triggers (enabled or not), functions,
// constraints and column defaults, each by its catalog row's identity
// and version (xmin, which an ALTER or CREATE OR REPLACE changes and a
// TRUNCATE does not). Deparsing each object instead (pg_get_triggerdef
// and the like) cost PostgreSQL four times the CPU, on every store a
// test closes.
const fingerprintSQL = `WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = $1),
rels AS (SELECT oid, relname, relkind, relnatts FROM pg_class WHERE relnamespace = (SELECT oid FROM ns))
SELECT md5(concat_ws(E'\n',
	(SELECT string_agg(concat_ws(' ', oid, relname, relkind, relnatts), ',' ORDER BY oid) FROM rels),
	(SELECT string_agg(concat_ws(' ', attrelid, attnum, attname, atttypid, atttypmod, attnotnull, atthasdef, attisdropped), ',' ORDER BY attrelid, attnum)
		FROM pg_attribute WHERE attrelid IN (SELECT oid FROM rels) AND attnum > 0),
	(SELECT string_agg(concat_ws(' ', oid, xmin, tgenabled), ',' ORDER BY oid) FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM rels)),
	(SELECT string_agg(concat_ws(' ', oid, xmin), ',' ORDER BY oid) FROM pg_proc WHERE pronamespace = (SELECT oid FROM ns)),
	(SELECT string_agg(concat_ws(' ', oid, xmin), ',' ORDER BY oid) FROM pg_constraint WHERE connamespace = (SELECT oid FROM ns)),
	(SELECT string_agg(concat_ws(' ', oid, xmin), ',' ORDER BY oid) FROM pg_attrdef WHERE adrelid IN (SELECT oid FROM rels))))`

// fingerprintAt is fingerprint on the pool's connection.
func fingerprintAt(dsn, schema string) (print string, err error) {
	err = onPoolConn(dsn, func(ctx context.Context, conn *pgx.Conn) error {
		print, err = fingerprint(ctx, conn, schema)
		return err
	})
	return print, err
}

// fingerprint returns schema's fingerprintSQL and the rows of its
// migrations and settings.
func fingerprint(ctx context.Context, conn *pgx.Conn, schema string) (string, error) {
	var print, rows string
	if err := conn.QueryRow(ctx, fingerprintSQL, schema).Scan(&print); err != nil {
		return "", fmt.Errorf("fingerprint the schema %s: %w", schema, err)
	}
	s := pgx.Identifier{schema}.Sanitize()
	if err := conn.QueryRow(ctx, `SELECT coalesce((SELECT string_agg(m::text, ',' ORDER BY m::text) FROM `+s+`.formsapi_migrations m), '') || ';' ||
		coalesce((SELECT string_agg(v::text, ',' ORDER BY v::text) FROM `+s+`.formsapi_settings v), '')`).Scan(&rows); err != nil {
		return "", fmt.Errorf("read the migrations and settings of %s: %w", schema, err)
	}
	return print + " " + rows, nil
}

// empty truncates every table of schema but the migrations and settings
// and restarts its sequences.
func empty(ctx context.Context, conn *pgx.Conn, schema string) error {
	s := pgx.Identifier{schema}.Sanitize()
	var tables, seqs []string
	rows, err := conn.Query(ctx, `SELECT c.relname, c.relkind = 'S' FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'S') AND c.relname NOT IN ('formsapi_migrations', 'formsapi_settings')`, schema)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var seq bool
		if err := rows.Scan(&name, &seq); err != nil {
			return err
		}
		if seq {
			seqs = append(seqs, s+"."+pgx.Identifier{name}.Sanitize())
		} else {
			tables = append(tables, s+"."+pgx.Identifier{name}.Sanitize())
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// The tables' TRUNCATE triggers (which move versions) are off: they
	// would write to tables the same statement truncates. Turning them off
	// takes a superuser, as the tests' server gives; without one the
	// schema is dropped rather than reused.
	sql := "BEGIN; SET LOCAL session_replication_role = replica; TRUNCATE " + strings.Join(tables, ", ") + " RESTART IDENTITY"
	for _, q := range seqs {
		sql += "; ALTER SEQUENCE " + q + " RESTART"
	}
	if _, err := conn.Exec(ctx, sql+"; COMMIT"); err != nil {
		return fmt.Errorf("empty the schema %s: %w", schema, err)
	}
	return nil
}

// DropPooled drops the pool's schemas, when the tests end: call it from
// the TestMain of a package whose tests call Pooled.
func DropPooled() {
	pool.Lock()
	defer pool.Unlock()
	if len(pool.all) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, pool.dsn)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	for _, s := range pool.all {
		conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
	}
	pool.all, pool.free = nil, map[string][]string{}
	poolConn.Lock()
	if poolConn.conn != nil {
		poolConn.conn.Close(ctx)
		poolConn.conn = nil
	}
	poolConn.Unlock()
}
