package sqlitestore_test

import (
	"os"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// TestFilesArePrivate checks that a database Open creates, and its WAL
// and shared-memory files, are readable by their owner only: they hold
// respondents' IP addresses, user agents and geo data.
func TestFilesArePrivate(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	s, err := sqlitestore.Open(path) // Open creates the file (mustOpen would copy one in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// A write and a read make sure both side files exist.
	if err := s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "f"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListForms(ctx, storetest.AccountA, formsapi.Query{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("stat: %v", err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", p[len(path)-len("forms.db"):], mode)
		}
	}
}

// TestExistingFileModeKept checks that Open leaves the mode of a file
// the host created alone, and gives the side files the same mode.
func TestExistingFileModeKept(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	if err := os.WriteFile(path, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil { // whatever the umask
		t.Fatal(err)
	}
	mustOpen(t, path)
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("stat: %v", err)
		}
		if mode := fi.Mode().Perm(); mode != 0o640 {
			t.Errorf("%s has mode %04o, want the host's 0640", p[len(path)-len("forms.db"):], mode)
		}
	}
}

// TestSideFilesNarrowed checks that -wal and -shm files left more open
// than the database file, by another program say, are narrowed to its
// mode when the store opens.
func TestSideFilesNarrowed(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	s, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	mustOpen(t, path)
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("stat: %v", err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", p[len(path)-len("forms.db"):], mode)
		}
	}
}
