package sqlitestore_test

import (
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// A fresh database in these tests is a copy of a template file, not a
// database migrated (and seeded) on its own: under -race a migration costs
// about a second of CPU and loading DefaultSeed a few tenths, the copy a
// millisecond, and the contract suite alone opens some two hundred stores.
// Templates are made once per test process, on first use, in templateDir,
// which TestMain removes. A template holds no cursor secret, so each copy
// makes its own when opened, as a new database does.
var (
	templateDir  string
	templateErr  error
	templateOnce sync.Once
	templates    sync.Map // name → *template
)

type template struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if templateDir != "" {
		os.RemoveAll(templateDir)
	}
	os.Exit(code)
}

// templateFile returns the template named name, made by make into a path
// of templateDir the first time it is asked for.
func templateFile(t *testing.T, name string, make func(path string) error) string {
	t.Helper()
	templateOnce.Do(func() { templateDir, templateErr = os.MkdirTemp("", "formsapi-sqlitestore-templates-") })
	if templateErr != nil {
		t.Fatalf("template directory: %v", templateErr)
	}
	v, _ := templates.LoadOrStore(name, &template{})
	tp := v.(*template)
	tp.once.Do(func() {
		tp.path = filepath.Join(templateDir, fmt.Sprintf("%x.db", sha256.Sum256([]byte(name))))
		tp.err = make(tp.path)
		for _, side := range []string{"-wal", "-shm"} {
			if _, err := os.Stat(tp.path + side); err == nil {
				tp.err = errors.Join(tp.err, fmt.Errorf("template %s left a %s file: it was not closed", name, side))
			}
		}
	})
	if tp.err != nil {
		t.Fatalf("template %s: %v", name, tp.err)
	}
	return tp.path
}

// migrated copies a database migrated as Open with opts would migrate it
// to path, which must not exist.
func migrated(t *testing.T, path string, opts ...sqlitestore.Option) {
	t.Helper()
	index := sqlitestore.SearchIndexOn(opts...)
	copyFile(t, templateFile(t, fmt.Sprintf("migrated index=%v sort=%v", index, sqlitestore.SortIndexOn(opts...)), func(p string) error {
		return sqlitestore.MigrateFile(p, opts...)
	}), path)
}

// seeded copies to path, which must not exist, a database migrated as
// Open with opts would and loaded with seed. The seed must have no Clock:
// the template is loaded by the wall clock, and a clause that gives a
// Clock checks the times read from it.
func seeded(t *testing.T, path string, seed storetest.Seed, opts ...sqlitestore.Option) {
	t.Helper()
	if seed.Clock != nil {
		t.Fatal("seeded: a seed with a Clock is loaded by it, not copied")
	}
	index := sqlitestore.SearchIndexOn(opts...)
	name := fmt.Sprintf("seeded index=%v sort=%v %v", index, sqlitestore.SortIndexOn(opts...), fmt.Sprint(seed.Forms, seed.Submissions, seed.Keys))
	copyFile(t, templateFile(t, name, func(p string) error {
		migrated(t, p, opts...)
		s, err := sqlitestore.Open(p, opts...)
		if err != nil {
			return err
		}
		err = storetest.Load(ctx, s, seed)
		if err := errors.Join(err, s.Close()); err != nil {
			return err
		}
		// The copies make their own secret, as a new database does.
		db, err := sql.Open("sqlite", "file:"+p+"?_pragma=busy_timeout(5000)")
		if err != nil {
			return err
		}
		_, err = db.Exec(`DELETE FROM formsapi_secrets`)
		return errors.Join(err, db.Close())
	}), path)
}
