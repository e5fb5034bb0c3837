package stored

import (
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Migration is one schema version of a store: the file
// migrations/NNNN_name.sql of its embedded files.
type Migration struct {
	Version int
	Name    string // the file's base name
	SQL     string
}

// Migrations returns the files migrations/*.sql of fsys in version order.
// Their names must start with a version number and "_", counting up from
// 1 without gaps, so that two changes that took the same number fail
// every test instead of one migration being skipped.
func Migrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, name := range names { // fs.Glob sorts by name
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: the name must start with a version number and _", base)
		}
		if v != len(ms)+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d: versions count up from 1", base, v, len(ms)+1)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	return ms, nil
}
