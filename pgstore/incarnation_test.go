package pgstore_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/token"
	"github.com/formsapi/formsapi/pgstore"
)

// TestRefIncarnations: a form the store makes, or a host's own insert,
// gets an incarnation with token.RefIncarnation set (migration 0022), and
// the feed's refs of it carry it; a form made before (its incarnation
// from 0013, below 2^62) keeps the refs of its account, form and
// position alone; a stream inserted as an earlier version did reads back
// with incarnation 0 (not known), and one saved keeps all 64 bits.
func TestRefIncarnations(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	pool := pgstore.Pool(s)
	table := func(name string) string { return pgx.Identifier{s.Schema(), name}.Sanitize() }
	for _, f := range []string{"old", "new"} {
		if err := s.AddForm(ctx, "acct", formsapi.Form{ID: f}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE `+table("formsapi_forms")+` SET incarnation = 4611686018427387903 WHERE id = 'old'`); err != nil {
		t.Fatal(err) // as 0013 gave it, at its largest
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+table("formsapi_forms")+` (id, account_id, title, icon, notification_email, created_at) VALUES ('host', 'acct', '', '', '', 0)`); err != nil {
		t.Fatal(err) // a host's own insert
	}
	incarnation := func(form string) uint64 {
		var inc int64
		if err := pool.QueryRow(ctx, `SELECT incarnation FROM `+table("formsapi_forms")+` WHERE id = $1`, form).Scan(&inc); err != nil {
			t.Fatal(err)
		}
		return uint64(inc)
	}
	if inc := incarnation("new"); inc&token.RefIncarnation == 0 {
		t.Errorf("a new form's incarnation %#x is not marked", inc)
	}
	if inc := incarnation("host"); inc&token.RefIncarnation == 0 || inc == incarnation("new") {
		t.Errorf("a host's form's incarnation %#x is not marked, or is another form's", inc)
	}

	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddKey(ctx, key, "acct"); err != nil {
		t.Fatal(err)
	}
	h := formsapi.NewHandler(s, s)
	codec := token.New(s.FastPath().Secret)
	for _, f := range []struct {
		form string
		inc  uint64 // the incarnation its refs carry
	}{{"old", 0}, {"new", incarnation("new")}} {
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: f.form, Data: []byte(`{}`)}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/v1/forms/"+f.form+"/submissions?sync=start", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var page struct{ Refs []string }
		if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		l := token.List{Account: "acct", FormID: f.form}
		if want := string(codec.AppendRef(nil, l, f.inc, 1)); len(page.Refs) != 1 || page.Refs[0] != want {
			t.Errorf("the refs of form %s: %v, want [%s]", f.form, page.Refs, want)
		}
	}

	if _, err := pool.Exec(ctx, `INSERT INTO `+table("formsapi_endpoints")+` (id, account_id, url, forms, secrets, disabled, disabled_reason, disabled_at, created_at)
VALUES ('ep_old', 'acct', 'https://hooks.example.com/', '[]', '[]', false, '', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+table("formsapi_endpoint_streams")+` (endpoint_id, form_id, cursor, floor, attempts, next_at, failing_since, last_success, resync)
VALUES ('ep_old', 'old', 1, 0, 0, 0, 0, 0, false)`); err != nil {
		t.Fatal(err) // as an earlier version wrote it
	}
	_, streams, err := s.Endpoint(ctx, "acct", "ep_old")
	if err != nil || len(streams) != 1 || streams[0].Incarnation != 0 || streams[0].Cursor != 1 {
		t.Fatalf("a stream of an earlier version: %+v, %v; want cursor 1, incarnation 0", streams, err)
	}
	streams[0].Incarnation = incarnation("new")
	if err := s.ResetStream(ctx, "acct", "ep_old", streams[0]); err != nil {
		t.Fatal(err)
	}
	if _, streams, err = s.Endpoint(ctx, "acct", "ep_old"); err != nil || streams[0].Incarnation != incarnation("new") {
		t.Errorf("a stream saved with incarnation %#x reads back %+v, %v", incarnation("new"), streams, err)
	}
}
