package sqlitestore_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/matryer/is"
	"modernc.org/sqlite"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
)

// restorer is the connection of modernc.org/sqlite that can restore a
// backup into its database (SQLite's online backup API).
type restorer interface {
	NewRestore(srcURI string) (*sqlite.Backup, error)
}

// TestRestoreUnderRunningStore restores a backup of the file, taken
// before the last write, into the file while a store keeps it open with
// that write's pages in its read cache (SQLite's backup API, on a host's
// connection: what sqlite3's .restore does); then one new write, and the
// store must serve what the file holds, not the pages of the history the
// restore undid. The restore takes formsapi_clock back, so the clock
// moves from the same count as for the undone write: migration 0010's
// random step makes the two versions differ (the test fails by chance
// once in 65,536 runs). Then the other way a store learns of a restore: a
// read that sees a version lower than one its cache holds drops the
// form's pages.
func TestRestoreUnderRunningStore(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path, s, key := newTenant(t)
	truth := mustOpen(t, path, sqlitestore.WithCacheSize(0))
	at := t0.Add(time.Hour)
	write := func(name string) {
		t.Helper()
		at = at.Add(time.Hour)
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "f0", Data: []byte(`{"n":"` + name + `"}`), CreatedAt: at}, formsapi.Metadata{}))
	}
	backup := func() string {
		t.Helper()
		file := filepath.Join(t.TempDir(), fmt.Sprintf("backup-%d.db", at.Unix()))
		_, err := sqlitestore.WriteDB(s).ExecContext(ctx, "VACUUM INTO ?", file)
		is.NoErr(err)
		return file
	}
	restore := func(file string) {
		t.Helper()
		conn, err := hostDB(t, path).Conn(ctx)
		is.NoErr(err)
		defer conn.Close()
		is.NoErr(conn.Raw(func(dc any) error {
			b, err := dc.(restorer).NewRestore("file:" + file)
			if err != nil {
				return err
			}
			for more := true; more; {
				if more, err = b.Step(-1); err != nil {
					b.Finish()
					return err
				}
			}
			return b.Finish()
		}))
	}
	lists := []string{"/v1/forms/f0/submissions?limit=5", "/v1/forms/f0/submissions?limit=40&order=asc"}
	same := func(step, want, gone string) {
		t.Helper()
		for _, l := range lists {
			_, got, _ := get(t, s, key, l)
			if _, db, _ := get(t, truth, key, l); !slices.Equal(got, db) {
				t.Errorf("%s: the store answered GET %s with %q, the file holds %q", step, l, got, db)
			}
			if !slices.Contains(got, want) || slices.Contains(got, gone) {
				t.Errorf("%s: GET %s: %q, want %q in it and not %q", step, l, got, want, gone)
			}
		}
	}

	write("a")
	file := backup()
	write("c")
	for range 2 { // the second time from the cache
		same("before the restore", "c", "d")
	}
	restore(file)
	write("d")
	same("after the restore and one write", "d", "c")

	file = backup()
	write("e")
	for range 2 {
		same("before the second restore", "e", "f")
	}
	wentBack := sqlitestore.CacheWentBack(s)
	restore(file)
	same("after the second restore", "d", "e")
	is.True(sqlitestore.CacheWentBack(s) > wentBack) // the read saw the form's version go back
	write("f")
	same("after the second restore and one write", "f", "e")
}
