package formsapi_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/formsapi/formsapi/sqlitestore"
)

// A fresh SQLite store in this package's tests is opened on a copy of a
// file migrated once per test process, one for the search index off and
// one for on, as sqlitestore's own tests do (sqlitestore/template_test.go):
// under -race a migration costs about a second of CPU, the copy a
// millisecond, and the property test, everyStore and the tests beside
// them opened some sixty. The templates hold no cursor secret, so each
// copy makes its own when opened, as a new database does. TestMain
// removes the directory.
var (
	sqliteTemplateOnce [2]sync.Once
	sqliteTemplatePath [2]string
	sqliteTemplateErr  [2]error
	sqliteTemplateDir  = sync.OnceValues(func() (string, error) {
		return os.MkdirTemp("", "formsapi-root-templates-")
	})
)

// openSQLite opens a sqlitestore on a new file in t's temporary
// directory, with its search index on if searchIndex, and closes it when
// the test ends.
func openSQLite(t testing.TB, searchIndex bool) *sqlitestore.Store {
	t.Helper()
	opts := []sqlitestore.Option{sqlitestore.WithSortIndex()}
	i := 0
	if searchIndex {
		opts, i = append(opts, sqlitestore.WithSearchIndex()), 1
	}
	sqliteTemplateOnce[i].Do(func() {
		dir, err := sqliteTemplateDir()
		if err != nil {
			sqliteTemplateErr[i] = err
			return
		}
		sqliteTemplatePath[i] = filepath.Join(dir, fmt.Sprintf("index-%v.db", searchIndex))
		sqliteTemplateErr[i] = makeSQLiteTemplate(sqliteTemplatePath[i], opts)
	})
	if sqliteTemplateErr[i] != nil {
		t.Fatalf("SQLite template: %v", sqliteTemplateErr[i])
	}
	path := filepath.Join(t.TempDir(), "forms.db")
	if err := copyFileTo(sqliteTemplatePath[i], path); err != nil {
		t.Fatalf("copy the SQLite template: %v", err)
	}
	s, err := sqlitestore.Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// removeSQLiteTemplates removes the templates' directory, if one was made.
func removeSQLiteTemplates() {
	if dir, err := sqliteTemplateDir(); err == nil {
		os.RemoveAll(dir)
	}
}

// makeSQLiteTemplate migrates a database at path as Open with opts does,
// closes it, and deletes the cursor secret its first Open made.
func makeSQLiteTemplate(path string, opts []sqlitestore.Option) error {
	s, err := sqlitestore.Open(path, opts...)
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	_, err = db.Exec(`DELETE FROM formsapi_secrets`)
	if err := errors.Join(err, db.Close()); err != nil {
		return err
	}
	for _, side := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + side); err == nil {
			return fmt.Errorf("the template left a %s file: it was not closed", side)
		}
	}
	return nil
}

// copyFileTo copies the file from to a new file to.
func copyFileTo(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	return errors.Join(err, dst.Close())
}
