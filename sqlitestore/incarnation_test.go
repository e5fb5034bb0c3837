package sqlitestore_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/token"
	"github.com/formsapi/formsapi/sqlitestore"
)

// TestRefIncarnationsMigration upgrades a file written before refs
// carried incarnations (migration 0016): its form keeps its incarnation
// and so the refs its consumers hold (those of account, form and
// position alone); a form made after, by the store or by a host's own
// insert, gets an incarnation with token.RefIncarnation set, and refs of
// it; an endpoint's stream written before reads back with incarnation 0
// (not known), and one saved after keeps all 64 bits.
func TestRefIncarnationsMigration(t *testing.T) {
	is := is.New(t)
	db := hostDB(t, dbPath(t))
	is.NoErr(sqlitestore.MigrateBefore(ctx, db, "ref_incarnations"))
	_, err := db.ExecContext(ctx, `INSERT INTO formsapi_forms (id, account_id, title, icon, notification_email, created_at) VALUES ('old', 'acct', '', '', '', 0)`)
	is.NoErr(err) // add a form as the old version did
	_, err = db.ExecContext(ctx, `INSERT INTO formsapi_endpoints (id, account_id, url, forms, secrets, disabled, disabled_reason, disabled_at, created_at)
VALUES ('ep_old', 'acct', 'https://hooks.example.com/', '[]', '[]', 0, '', 0, 0)`)
	is.NoErr(err) // an endpoint
	_, err = db.ExecContext(ctx, `INSERT INTO formsapi_endpoint_streams (endpoint_id, form_id, cursor, floor, attempts, next_at, failing_since, last_success, resync)
VALUES ('ep_old', 'old', 1, 0, 0, 0, 0, 0, 0)`)
	is.NoErr(err) // and its stream, as the old version wrote them

	s := mustNew(t, db) // migrates
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "new"}))
	_, err = db.ExecContext(ctx, `INSERT INTO formsapi_forms (id, account_id, title, icon, notification_email, created_at) VALUES ('host', 'acct', '', '', '', 0)`)
	is.NoErr(err) // a host's own insert
	incarnation := func(form string) uint64 {
		var inc int64
		is.NoErr(db.QueryRowContext(ctx, `SELECT incarnation FROM formsapi_forms WHERE id = ?`, form).Scan(&inc))
		return uint64(inc)
	}
	is.True(incarnation("old") != 0 && incarnation("old")&token.RefIncarnation == 0) // kept
	is.True(incarnation("new")&token.RefIncarnation != 0)                            // marked
	is.True(incarnation("host")&token.RefIncarnation != 0)                           // marked, whoever inserts it
	is.True(incarnation("new") != incarnation("host"))

	key, err := formsapi.NewKey()
	is.NoErr(err)
	is.NoErr(s.AddKey(ctx, key, "acct"))
	h := formsapi.NewHandler(s, s)
	codec := token.New(s.FastPath().Secret)
	for _, f := range []struct {
		form string
		inc  uint64 // the incarnation its refs carry
	}{{"old", 0}, {"new", incarnation("new")}} {
		for i := 0; i < 2; i++ {
			is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: f.form, Data: []byte(`{}`)}, formsapi.Metadata{}))
		}
		r := httptest.NewRequest("GET", "/v1/forms/"+f.form+"/submissions?sync=start", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var page struct{ Refs []string }
		is.NoErr(json.Unmarshal(w.Body.Bytes(), &page))
		l := token.List{Account: "acct", FormID: f.form}
		is.Equal(page.Refs, []string{string(codec.AppendRef(nil, l, f.inc, 1)), string(codec.AppendRef(nil, l, f.inc, 2))}) // the refs of its incarnation
		if f.inc != 0 {
			is.True(page.Refs[0] != string(codec.AppendRef(nil, l, 0, 1))) // not those of a form of no incarnation
		}
	}

	_, streams, err := s.Endpoint(ctx, "acct", "ep_old")
	is.NoErr(err)
	is.Equal(len(streams), 1)
	is.Equal(streams[0].Incarnation, uint64(0)) // not known
	is.Equal(streams[0].Cursor, int64(1))
	streams[0].Incarnation = incarnation("new")
	is.NoErr(s.ResetStream(ctx, "acct", "ep_old", streams[0]))
	_, streams, err = s.Endpoint(ctx, "acct", "ep_old")
	is.NoErr(err)
	is.Equal(streams[0].Incarnation, incarnation("new")) // all 64 bits
}
