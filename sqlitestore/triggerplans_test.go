package sqlitestore_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/formsapi/formsapi/sqlitestore"
)

// TestTriggerLookupsSeek: every lookup of the triggers ("SELECT 1 FROM
// formsapi_submissions WHERE form_seq = NEW.form_seq AND …") and the
// delete of a submission by its metadata ID seek an index by every
// column they compare for equality, and walk no table. 0029's check of a
// metadata ID named the column but not the partial index's condition
// that host_id is not empty, so SQLite walked every submission of the
// form on each write that gave an ID (migration 0030); so did the
// delete.
func TestTriggerLookupsSeek(t *testing.T) {
	t.Parallel()
	s := mustOpen(t, dbPath(t), sqlitestore.WithSearchIndex(), sqlitestore.WithSortIndex())
	db := sqlitestore.ReadDB(s)
	rows, err := db.QueryContext(ctx, `SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'formsapi%'`)
	if err != nil {
		t.Fatal(err)
	}
	triggers := map[string]string{}
	for rows.Next() {
		var name, sql string
		if err := rows.Scan(&name, &sql); err != nil {
			t.Fatal(err)
		}
		triggers[name] = sql
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	// A lookup of one table by a condition without parentheses, its
	// references to the row (NEW.x, OLD.x) made parameters.
	lookup := regexp.MustCompile(`\(SELECT (?:1|\w+) FROM (formsapi_\w+) WHERE ([^()]*?)\)`)
	row := regexp.MustCompile(`\b(?:NEW|OLD)\.\w+\b`)
	equal := regexp.MustCompile(`\b(\w+) = \?`)
	checked, hostID := 0, false
	check := func(where, query string) {
		t.Helper()
		args := make([]any, strings.Count(query, "?"))
		for i := range args {
			args[i] = int64(1)
		}
		details := plan(t, db, query, args...)
		for _, d := range details {
			if strings.HasPrefix(d, "SCAN formsapi_") {
				t.Errorf("%s: %s walks a table: %q", where, query, details)
			}
		}
		for _, m := range equal.FindAllStringSubmatch(query, -1) {
			col := m[1] + "=?"
			if m[1] == "seq" {
				col = "rowid=?" // the tables' INTEGER PRIMARY KEY
			}
			if !strings.Contains(strings.Join(details, "\n"), col) {
				t.Errorf("%s: %s does not seek %s: %q", where, query, m[1], details)
			}
		}
		checked++
	}
	for name, sql := range triggers {
		for _, m := range lookup.FindAllStringSubmatch(sql, -1) {
			query := "SELECT 1 FROM " + m[1] + " WHERE " + row.ReplaceAllString(m[2], "?")
			hostID = hostID || strings.Contains(query, "host_id = ?")
			check("trigger "+name, query)
		}
	}
	if checked < 20 || !hostID {
		t.Fatalf("%d lookups found in the triggers, the metadata ID's among them: %t; the extraction is broken", checked, hostID)
	}
	// The delete by metadata ID: its form by its ID, then the one row.
	details := plan(t, db, sqlitestore.DeleteSubmissionSQL, "f", "a", "id")
	if !strings.Contains(strings.Join(details, "\n"), "formsapi_submissions_host_id (form_seq=? AND host_id=?)") {
		t.Errorf("the delete by metadata ID does not seek it: %q", details)
	}
}
