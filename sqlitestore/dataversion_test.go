package sqlitestore_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
)

// TestDataVersionSeesOnlyOtherConnections holds the premise of the key
// copy (WithKeyCopy) to modernc.org/sqlite's SQLite in WAL mode, as Open
// opens the file: PRAGMA data_version, read on the store's one write
// connection, stays the same across the store's own commits and its own
// rolled-back transactions, and across another connection's write
// transaction while it is open and after it rolls back; it changes once
// another connection of this process, or another process, commits,
// including when the write connection has written since (its own write
// noticed the other commit first).
func TestDataVersionSeesOnlyOtherConnections(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path, s, _ := newTenant(t)
	w := sqlitestore.WriteDB(s) // one connection
	version := func() int64 {
		t.Helper()
		var v int64
		if err := w.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	var mode string
	is.NoErr(w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)) // journal mode
	is.Equal(mode, "wal")

	v := version()
	is.Equal(version(), v) // nothing happened
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "f1", Data: []byte(`{"n":100}`), CreatedAt: t0}, formsapi.Metadata{}))
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "f8", CreatedAt: t0}))
	is.Equal(version(), v) // the store's own commits

	// The store's own write transaction, rolled back.
	conn, err := w.Conn(ctx)
	is.NoErr(err)
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	is.NoErr(err)
	_, err = conn.ExecContext(ctx, "UPDATE formsapi_forms SET title = 'x' WHERE id = 'f1'")
	is.NoErr(err)
	_, err = conn.ExecContext(ctx, "ROLLBACK")
	is.NoErr(err)
	is.NoErr(conn.Close())
	is.Equal(version(), v) // own rollback

	// Another connection's write transaction, open, then rolled back.
	host := hostDB(t, path)
	other, err := host.Conn(ctx)
	is.NoErr(err)
	defer other.Close()
	_, err = other.ExecContext(ctx, "BEGIN IMMEDIATE")
	is.NoErr(err)
	_, err = other.ExecContext(ctx, "UPDATE formsapi_forms SET title = 'y' WHERE id = 'f1'")
	is.NoErr(err)
	is.Equal(version(), v) // open, not committed
	_, err = other.ExecContext(ctx, "ROLLBACK")
	is.NoErr(err)
	is.Equal(version(), v) // rolled back

	// Another connection's commit.
	_, err = other.ExecContext(ctx, "UPDATE formsapi_forms SET title = 'z' WHERE id = 'f1'")
	is.NoErr(err)
	v2 := version()
	is.True(v2 != v)        // another connection committed
	is.Equal(version(), v2) // and nothing since

	// Another commit, then the store's own write before the next read:
	// the change stays seen.
	_, err = other.ExecContext(ctx, "UPDATE formsapi_forms SET title = 'w' WHERE id = 'f1'")
	is.NoErr(err)
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "f1", Data: []byte(`{"n":101}`), CreatedAt: t0}, formsapi.Metadata{}))
	v3 := version()
	is.True(v3 != v2) // the other commit, noticed by the store's write

	// Another process's commit.
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildWriter$")
	cmd.Env = append(os.Environ(), "FORMSAPI_CHILD_WRITE="+path, "FORMSAPI_CHILD_ARGS="+mustJSON([]string{"submission", "f2", "500"}))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	v4 := version()
	is.True(v4 != v3) // another process committed
	is.Equal(version(), v4)

	// A checkpoint by another connection commits nothing: whatever it
	// does to data_version, a change is only ever a reason to read again.
	var busy, logPages, copied int64
	is.NoErr(host.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &copied))
	t.Logf("after another connection's checkpoint: data_version %d (was %d)", version(), v4)
}
