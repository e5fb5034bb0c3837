package main

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	_ "modernc.org/sqlite" // the driver sqlitestore registers, named here for the direct read

	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/internal/stored"
)

// TestSearchIndexFlag: -search-index=false leaves a fresh database without
// the index, and a search still finds the demo's referee (by walking the
// form); the default turns it on, and a later -search-index=false does
// not turn it off, since the setting belongs to the database. The
// setting is read from the formsapi_settings row, past the store.
func TestSearchIndexFlag(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "forms.db")
		checkSearchIndexFlag(t, []string{"-db", db}, func() int {
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
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn, schema := pgtest.Name(t)
		args := []string{"-postgres", dsn, "-schema", schema, "-demo-key-file", filepath.Join(t.TempDir(), "demo-key")}
		checkSearchIndexFlag(t, args, func() int {
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var v int
			q := `SELECT value FROM ` + pgx.Identifier{schema, "formsapi_settings"}.Sanitize() + ` WHERE name = $1`
			if err := conn.QueryRow(ctx, q, stored.SearchIndexSetting).Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		})
	})
}

// checkSearchIndexFlag runs the server with args three times: with
// -search-index=false on a fresh database, with the default, and with
// false again, reading the setting after each.
func checkSearchIndexFlag(t *testing.T, args []string, setting func() int) {
	is := is.New(t)
	with := func(extra ...string) []string { return append(append([]string{}, args...), extra...) }

	off := startArgs(t, with("-search-index=false")...)
	code, body := off.get(t, "/v1/forms/job-application/submissions?q=zoe", off.key)
	is.Equal(code, 200)
	is.True(bytes.Contains(body, []byte("Zo\u00eb \u00dcnal"))) // found without the index
	is.NoErr(off.stop())
	is.Equal(setting(), 0) // a fresh database stays without it

	on := startArgs(t, args...)
	code, body = on.get(t, "/v1/forms/job-application/submissions?q=zoe", on.key)
	is.Equal(code, 200)
	is.True(bytes.Contains(body, []byte("Zo\u00eb \u00dcnal"))) // found through the index
	is.NoErr(on.stop())
	is.Equal(setting(), 1) // the default turns it on

	again := startArgs(t, with("-search-index=false")...)
	is.NoErr(again.stop())
	is.Equal(setting(), 1) // false does not turn it off
}
