package main

import (
	"bytes"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
	_ "modernc.org/sqlite" // the driver sqlitestore registers, named here for the direct read

	"github.com/formsapi/formsapi/internal/stored"
)

// searchIndexSetting reads the search index setting that the store keeps
// in the file's formsapi_settings row, past the store.
func searchIndexSetting(t *testing.T, db string) int {
	t.Helper()
	h, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var v int
	if err := h.QueryRow(`SELECT value FROM formsapi_settings WHERE name = ?`, stored.SearchIndexSetting).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSearchIndexFlag: -search-index=false leaves a fresh database without
// the index, and a search still finds the demo's referee (by walking the
// form); the default turns it on, and a later -search-index=false does
// not turn it off, since the setting belongs to the database.
func TestSearchIndexFlag(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "forms.db")

	off := start(t, db, "-search-index=false")
	code, body := off.get(t, "/v1/forms/job-application/submissions?q=zoe", off.key)
	is.Equal(code, 200)
	is.True(bytes.Contains(body, []byte("Zo\u00eb \u00dcnal"))) // found without the index
	is.NoErr(off.stop())
	is.Equal(searchIndexSetting(t, db), 0) // a fresh database stays without it

	on := start(t, db)
	code, body = on.get(t, "/v1/forms/job-application/submissions?q=zoe", on.key)
	is.Equal(code, 200)
	is.True(bytes.Contains(body, []byte("Zo\u00eb \u00dcnal"))) // found through the index
	is.NoErr(on.stop())
	is.Equal(searchIndexSetting(t, db), 1) // the default turns it on

	again := start(t, db, "-search-index=false")
	is.NoErr(again.stop())
	is.Equal(searchIndexSetting(t, db), 1) // false does not turn it off
}
