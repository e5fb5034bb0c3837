// Package pgtest gives each PostgreSQL test a schema of its own on the
// server named by FORMSAPI_TEST_POSTGRES, so tests run in parallel and
// leave nothing behind: a new one dropped when the test ends (Schema,
// Name), or a migrated one from a pool, emptied for the next test and
// dropped when the tests end (Pooled, DropPooled).
package pgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strconv"
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

// WaitForLock waits until a backend that matches where, a condition on
// pg_stat_activity with $1 bound to arg (say "pid = $1"), waits on a lock,
// and returns the statement it waits in. PostgreSQL signals nothing when
// a backend starts to wait, so this asks pg_stat_activity again every few
// milliseconds until one does: the test waits for that condition, never
// for an amount of time. It fails the test if none waits within 30
// seconds.
func WaitForLock(t testing.TB, dsn, where string, arg any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var query string
		err := conn.QueryRow(ctx, `SELECT query FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND `+where+` LIMIT 1`, arg).Scan(&query)
		if err == nil {
			return query
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("pgtest: pg_stat_activity: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: no backend where %s ($1 = %v) waited on a lock within 30 s", where, arg)
		}
		time.Sleep(5 * time.Millisecond) // the poll's pace; nothing depends on it
	}
}

// BackendCPU is the CPU time so far of the backends of application app,
// and false when they are not processes of this machine. It asks on a
// connection of its own, outside the application.
func BackendCPU(t testing.TB, dsn, app string) (time.Duration, bool) {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	var total time.Duration
	for _, pid := range pids {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || !strings.HasPrefix(string(comm), "postgres") {
			return 0, false
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
		if err != nil {
			return 0, false
		}
		ns, err := strconv.ParseInt(strings.Fields(string(stat))[0], 10, 64)
		if err != nil {
			return 0, false
		}
		total += time.Duration(ns)
	}
	return total, len(pids) > 0
}
