package pgstore_test

import (
	"crypto/rand"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestRestoreUnderRunningNode restores a pg_dump of the schema, taken
// before the last writes, under a node that keeps running with those
// writes' pages in its read cache; then one new write per list, and the
// node must serve what the database holds, not the pages of the history
// the restore undid. The restore takes formsapi_versions back, so the
// write's version comes from the same sequence value as the undone
// write's did: migration 0012's random bits make the two versions differ
// (the test fails by chance once in 65,536 runs per list).
//
// It then checks the other way a node learns of a restore: a read that
// sees a version lower than one its cache holds drops the form's pages
// (internal/pagecache), whatever the versions do after.
func TestRestoreUnderRunningNode(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"pg_dump", "psql"} {
		if _, err := osexec.LookPath(tool); err != nil {
			t.Skipf("%s not found: the restore test runs PostgreSQL's own tools", tool)
		}
	}
	dsn, schema := pooledSchema(t)
	secret := []byte(rand.Text())
	a := newNode(t, dsn, schema, secret) // takes the writes
	load(t, a.store, storetest.DefaultSeed())
	b := newNode(t, dsn, schema, secret) // keeps running through the restore
	truthStore := mustOpenIn(t, dsn, schema, pgstore.WithCacheSize(0))
	truth := formsapi.NewHandler(truthStore, truthStore, formsapi.WithCursorSecret(secret))
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(name string) {
		t.Helper()
		at = at.Add(time.Hour)
		if err := a.store.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(`{"n":"` + name + `"}`), CreatedAt: at}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
		if err := a.store.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "form-" + name, Title: name, CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	lists := []string{
		"/v1/forms/" + storetest.FormSmall + "/submissions?limit=10",
		"/v1/forms/" + storetest.FormSmall + "/submissions?limit=10&order=asc",
		"/v1/forms?limit=10",
	}
	// same checks that node b answers every list as the database holds
	// it, and that the answers hold want and not gone.
	same := func(step, want, gone string) {
		t.Helper()
		for _, l := range lists {
			got := listed(t, get(b.handler, l, storetest.KeyA))
			if db := listed(t, get(truth, l, storetest.KeyA)); got != db {
				t.Errorf("%s: node b answered GET %s with\n%s\nthe database holds\n%s", step, l, got, db)
			}
			if !strings.Contains(got, want) || strings.Contains(got, gone) {
				t.Errorf("%s: GET %s on node b: %s, want %q in it and not %q", step, l, got, want, gone)
			}
		}
	}

	write("a")
	dump := pgDump(t, dsn, schema)
	write("c")
	for range 2 { // the second time from node b's cache
		same("before the restore", `:"c"`, `:"d"`)
	}
	restore(t, dsn, schema, dump)
	write("d")
	same("after the restore and one write", `:"d"`, `:"c"`)

	// A read between the restore and the write: node b sees the versions
	// lower than its pages', and drops them.
	dump = pgDump(t, dsn, schema)
	write("e")
	for range 2 {
		same("before the second restore", `:"e"`, `:"f"`)
	}
	wentBack := pgstore.CacheWentBack(b.store)
	restore(t, dsn, schema, dump)
	same("after the second restore", `:"d"`, `:"e"`)
	if n := pgstore.CacheWentBack(b.store) - wentBack; n < 2 {
		t.Errorf("node b's cache saw %d lists go back, want the form's and the forms list's", n)
	}
	write("f")
	same("after the second restore and one write", `:"f"`, `:"e"`)
}

// pgDump dumps schema with pg_dump, as plain SQL, and returns the file.
func pgDump(t *testing.T, dsn, schema string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "dump.sql")
	if out, err := osexec.CommandContext(ctx, "pg_dump", "--dbname", dsn, "--schema", schema, "--file", file).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	return file
}

// restore drops schema and restores it from dump with psql: what an
// operator restoring a dump does, while every node keeps running.
func restore(t *testing.T, dsn, schema, dump string) {
	t.Helper()
	pgtest.Exec(t, dsn, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	if out, err := osexec.CommandContext(ctx, "psql", "--dbname", dsn, "--quiet", "--no-psqlrc", "-v", "ON_ERROR_STOP=1", "--file", dump).CombinedOutput(); err != nil {
		t.Fatalf("psql: %v\n%s", err, out)
	}
}
