// Package pgtest gives each PostgreSQL test a schema of its own on the
// server named by FORMSAPI_TEST_POSTGRES, dropped when the test ends, so
// tests run in parallel and leave nothing behind.
package pgtest

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi/internal/testenv"
)

// EnvVar names the DSN of the PostgreSQL server the tests use.
const EnvVar = "FORMSAPI_TEST_POSTGRES"

// example is a DSN of the local test server, for the skip message.
const example = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// SkipMessage is what a PostgreSQL test says when it cannot run.
var SkipMessage = testenv.SkipMessage(EnvVar, example)

// DSN returns the test server's DSN. Without one the test is skipped, or
// fails when CI is set (see testenv.Get).
func DSN(t testing.TB) string {
	t.Helper()
	return testenv.Get(t, EnvVar, example)
}

// Schema returns the DSN and the name of a new, empty schema named
// formsapi_test_<random>, dropped with everything in it when the test
// ends (after the test's own cleanups, which should close its pools).
func Schema(t testing.TB) (dsn, schema string) {
	t.Helper()
	dsn = DSN(t)
	schema = "formsapi_test_" + strings.ToLower(rand.Text()[:12])
	exec(t, dsn, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	t.Cleanup(func() { exec(t, dsn, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return dsn, schema
}

// Name returns a fresh schema name for a test that lets the store create
// the schema itself; it is dropped when the test ends.
func Name(t testing.TB) (dsn, schema string) {
	t.Helper()
	dsn = DSN(t)
	schema = "formsapi_test_" + strings.ToLower(rand.Text()[:12])
	t.Cleanup(func() { exec(t, dsn, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return dsn, schema
}

// Exec runs sql on its own connection to the test server.
func Exec(t testing.TB, dsn, sql string) { t.Helper(); exec(t, dsn, sql) }

func exec(t testing.TB, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}
