package pgstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi/internal/pgtest"
)

// The contract's factories open each store in a migrated schema taken from
// a pool and given back emptied, rather than in a schema created and
// migrated for it (the way River's riverdbtest reuses its test schemas):
// under -race a migration costs about a second, emptying the tables a few
// milliseconds, and the contract suite opens some two hundred stores. A
// schema is emptied once the store in it is closed: every table but the
// migrations and the settings is truncated and every sequence restarted,
// so the next store in it makes a new cursor secret and counts versions
// from the start, as in a new schema. The search index setting is kept
// per pool: a schema is given back to the pool of its setting. TestMain
// drops the pooled schemas.
var schemas = struct {
	sync.Mutex
	dsn  string
	free map[bool][]string // by the search index setting
	all  []string
}{free: map[bool][]string{}}

// pooledSchema returns a schema for a store whose search index is on
// (index) or off: a schema emptied by an earlier test, or a new one the
// store will migrate. It goes back to the pool, emptied, when the test's
// later cleanups (the store's Close) have run: call it before opening the
// store.
func pooledSchema(t *testing.T, index bool) (dsn, schema string) {
	t.Helper()
	dsn = pgtest.DSN(t)
	schemas.Lock()
	if free := schemas.free[index]; len(free) > 0 {
		schema = free[len(free)-1]
		schemas.free[index] = free[:len(free)-1]
	}
	schemas.Unlock()
	if schema == "" {
		schema = "formsapi_test_" + strings.ToLower(rand.Text()[:12])
		pgtest.Exec(t, dsn, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
		schemas.Lock()
		schemas.dsn = dsn
		schemas.all = append(schemas.all, schema) // dropped by TestMain
		schemas.Unlock()
	}
	t.Cleanup(func() {
		if t.Failed() {
			return // left as the test left it, never reused
		}
		if err := empty(dsn, schema, index); err != nil {
			t.Logf("the schema is dropped, not reused: empty it: %v", err)
			pgtest.Exec(t, dsn, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			return
		}
		schemas.Lock()
		schemas.free[index] = append(schemas.free[index], schema)
		schemas.Unlock()
	})
	return dsn, schema
}

// empty truncates every table of schema but the migrations and settings
// and restarts its sequences, after checking that its search index
// setting is still index.
func empty(dsn, schema string, index bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	s := pgx.Identifier{schema}.Sanitize()
	var on bool
	if err := conn.QueryRow(ctx, "SELECT value = 1 FROM "+s+".formsapi_settings WHERE name = 'search_index'").Scan(&on); err != nil {
		return fmt.Errorf("read the search index setting: %w", err)
	}
	if on != index {
		return fmt.Errorf("the search index setting is %v, the pool's %v", on, index)
	}
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
	_, err = conn.Exec(ctx, sql+"; COMMIT")
	return err
}

// dropPooledSchemas drops the schemas of the pool, when the tests end.
func dropPooledSchemas() {
	schemas.Lock()
	defer schemas.Unlock()
	if len(schemas.all) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, schemas.dsn)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	for _, s := range schemas.all {
		conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
	}
}
