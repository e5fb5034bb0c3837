package sqlitestore_test

import (
	"testing"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
)

// TestFieldsMigrationFillsTheTable upgrades a file written before the
// field table existed: its submissions' fields are there after the
// migration, each at the first position that had it, and the table
// follows every insert after it, this package's and those of a writer
// that knows nothing of the table (the host's own connection, an older
// version still running), but not deletions.
func TestFieldsMigrationFillsTheTable(t *testing.T) {
	is := is.New(t)
	db := hostDB(t, dbPath(t))
	is.NoErr(sqlitestore.MigrateBefore(ctx, db, "fields")) // the schema before the field table
	for _, id := range []string{"one", "two"} {
		_, err := db.ExecContext(ctx, `INSERT INTO formsapi_forms (id, account_id, title, icon, notification_email, created_at) VALUES (?, 'acct', '', '', '', 0)`, id)
		is.NoErr(err) // add form as the old version did
	}
	insert := func(form, data string) {
		t.Helper()
		_, err := db.ExecContext(ctx, `INSERT INTO formsapi_submissions (form_seq, created_at, data, json)
SELECT seq, 0, ?, '{}' FROM formsapi_forms WHERE id = ?`, data, form)
		is.NoErr(err) // insert as a writer without the field table does
	}
	insert("one", `{"b":1,"a":2}`)
	insert("two", `{"x":1}`)
	insert("one", `{"a":1,"c":{"d":1},"b":2}`)
	insert("one", `[1,2]`) // damaged: no fields
	insert("one", `{"caf\u00e9":1,"dup":1,"dup":2}`)

	s := mustNew(t, db) // migrates
	fields := func(form string, upTo int64) ([]string, []int64) {
		t.Helper()
		names, first, err := s.DataFields(ctx, "acct", form, upTo, 100)
		is.NoErr(err) // DataFields
		return names, first
	}
	names, first := fields("one", 100)
	is.Equal(names, []string{"b", "a", "c", "café", "dup"}) // in first position order, then data order
	is.Equal(first, []int64{1, 1, 2, 4, 4})
	names, _ = fields("one", 1)
	is.Equal(names, []string{"b", "a"}) // up to position 1
	names, _ = fields("two", 100)
	is.Equal(names, []string{"x"}) // the other form's

	insert("one", `{"e":1,"a":1}`) // numbered by the trigger: position 5
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "one", Data: []byte(`{"f":1}`)}, formsapi.Metadata{ID: "six"}))
	names, first = fields("one", 100)
	is.Equal(names[5:], []string{"e", "f"}) // both writers add fields
	is.Equal(first[5:], []int64{5, 6})
	is.NoErr(s.DeleteSubmission(ctx, "acct", "one", "six"))
	names, _ = fields("one", 100)
	is.Equal(len(names), 7) // a deletion leaves the fields
}
