package sqlitestore_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
	"github.com/formsapi/formsapi/sqlitestore"
)

// TestKeyCopySQLRestore: a host that shares the file restores only the
// library's tables from a VACUUM INTO copy, by SQL (the backup API would
// take its own tables back too): every formsapi_ table emptied and
// filled again from the copy, formsapi_settings and formsapi_clock
// included. keys_gen and the highest seq are then where the key copy saw
// them before a submission the restore undid; one new submission brings
// the highest seq back, and the copy must not keep the undone one's
// version of its form. Then keys_gen's row written back by an UPDATE (as
// a restore by UPDATE ... FROM would) in the transaction that revokes a
// key: the copy must not keep the key.
func TestKeyCopySQLRestore(t *testing.T) {
	t.Parallel()
	path, s, key := newTenant(t)
	other := mustOpen(t, path)
	host := hostDB(t, path)
	truth := mustOpen(t, path, sqlitestore.WithKeyCopy(false), sqlitestore.WithCacheSize(0))
	list := "/v1/forms/f0/submissions?limit=2"
	file := filepath.Join(t.TempDir(), "backup.db")
	if _, err := host.ExecContext(ctx, "VACUUM INTO ?", file); err != nil {
		t.Fatal(err)
	}
	served(t, s, key, list)
	add := func(n string) {
		t.Helper()
		if err := other.AddSubmission(ctx, formsapi.Submission{FormID: "f0", Data: []byte(`{"n":` + n + `}`), CreatedAt: t0.Add(time.Hour)}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	add("800")
	if got := served(t, s, key, list); !slices.Equal(got, []string{"800", "29"}) {
		t.Fatalf("before the restore: %q", got)
	}

	conn, err := host.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			t.Fatal(q, err)
		}
	}
	exec("ATTACH ? AS bak", file)
	rows, err := conn.QueryContext(ctx, `SELECT name FROM bak.sqlite_master WHERE type = 'table' AND name LIKE 'formsapi%' AND name <> 'formsapi_migrations' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	// The clock and the settings last: the triggers of the other tables
	// read them.
	last := func(tb string) bool { return tb == "formsapi_clock" || tb == "formsapi_settings" }
	exec("BEGIN IMMEDIATE")
	for _, tb := range tables {
		if !last(tb) {
			exec("DELETE FROM main." + tb)
		}
	}
	for _, tb := range tables {
		if !last(tb) {
			exec("INSERT INTO main." + tb + " SELECT * FROM bak." + tb)
		}
	}
	for _, tb := range tables {
		if last(tb) {
			exec("INSERT OR REPLACE INTO main." + tb + " SELECT * FROM bak." + tb)
		}
	}
	exec("COMMIT")
	exec("DETACH bak")

	add("801")
	code, got, _ := get(t, s, key, list)
	wantCode, want, _ := get(t, truth, key, list)
	if code != wantCode || !slices.Equal(got, want) {
		t.Errorf("after the restore and one submission: %d %q, the file holds %d %q", code, got, wantCode, want)
	}

	served(t, s, key, list)
	var was int64
	if err := conn.QueryRowContext(ctx, `SELECT value FROM formsapi_settings WHERE name = 'keys_gen'`).Scan(&was); err != nil {
		t.Fatal(err)
	}
	h := keyformat.Hash(key)
	exec("BEGIN IMMEDIATE")
	exec(`UPDATE formsapi_keys SET revoked_at = 1 WHERE key_hash = ?`, h[:])
	exec(`UPDATE formsapi_settings SET value = ? WHERE name = 'keys_gen'`, was)
	exec("COMMIT")
	if code, _, _ := get(t, s, key, list); code != 401 {
		t.Errorf("a key revoked with keys_gen written back: %d", code)
	}
}
