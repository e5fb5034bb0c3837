package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/storetest"
)

// TestAddSubmissionUpdatesTheFormOnce: a submission written by
// AddSubmission updates its form's row once (migration 0018), not once
// for the feed position and again in the insert's trigger for the
// version, and the form's version still changes with every write; a
// host's own insert, which AddSubmission's note does not cover, still
// changes the version and base through the trigger.
func TestAddSubmissionUpdatesTheFormOnce(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	dsn, schema := pooledSchema(t)
	s := load(t, mustOpenIn(t, dsn, schema), storetest.DefaultSeed())
	q := quote(schema)
	// Every row version written to formsapi_forms, counted by a trigger.
	pgtest.Exec(t, dsn, fmt.Sprintf(`CREATE TABLE %[1]s.updates (n bigint NOT NULL);
INSERT INTO %[1]s.updates VALUES (0);
CREATE FUNCTION %[1]s.count_update() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN UPDATE %[1]s.updates SET n = n + 1; RETURN NULL; END';
CREATE TRIGGER count_update AFTER UPDATE ON %[1]s.formsapi_forms FOR EACH ROW EXECUTE FUNCTION %[1]s.count_update();`, q))
	conn, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	type state struct{ updates, version, base int64 }
	read := func() (st state) {
		t.Helper()
		is.NoErr(conn.QueryRow(ctx, fmt.Sprintf(`SELECT u.n, f.version, f.base FROM %[1]s.updates u, %[1]s.formsapi_forms f WHERE f.id = $1`, q),
			storetest.FormSmall).Scan(&st.updates, &st.version, &st.base))
		return st
	}
	before := read()
	for i := range 3 {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(fmt.Sprintf(`{"i":%d}`, i))}, formsapi.Metadata{}))
		after := read()
		is.Equal(after.updates-before.updates, int64(1)) // one update of the form's row per write
		is.True(after.version != before.version)         // a new version with each write
		is.Equal(after.base, before.base)                // an addition keeps base
		before = after
	}
	// A host's insert at a position of its own: the trigger's update.
	pgtest.Exec(t, dsn, fmt.Sprintf(`INSERT INTO %[1]s.formsapi_submissions (form_seq, feed_pos, created_at, data, attachments, json, json_version)
SELECT s.form_seq, 0, s.created_at, s.data, s.attachments, s.json, s.json_version
FROM %[1]s.formsapi_submissions s JOIN %[1]s.formsapi_forms f ON f.seq = s.form_seq WHERE f.id = '%[2]s' LIMIT 1`, q, storetest.FormSmall))
	after := read()
	is.Equal(after.updates-before.updates, int64(1))
	is.True(after.version != before.version)
	is.True(after.base != before.base) // not an addition
}
