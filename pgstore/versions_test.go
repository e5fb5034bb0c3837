package pgstore_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/pgstore"
)

// TestVersionsChangeWithEveryWrite writes in every way a host can, through
// the store and in plain SQL on a connection of its own whose search_path
// names another schema holding formsapi tables too, and checks after each
// write which forms got a new version (migration 0006): exactly those whose
// pages could have changed, each with a value no form ever had, and none in
// the other schema.
func TestVersionsChangeWithEveryWrite(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s, d, host := withDecoy(t)
	for _, st := range []*pgstore.Store{s, d} {
		for _, id := range []string{"f1", "f2", "f3"} {
			is.NoErr(st.AddForm(ctx, "acct", formsapi.Form{ID: id})) // add form
		}
	}
	q := quote(s.Schema())

	versions := func(st *pgstore.Store) map[string]int64 {
		t.Helper()
		rows, err := pgstore.Pool(st).Query(ctx, "SELECT id, version FROM "+quote(st.Schema())+".formsapi_forms")
		if err != nil {
			t.Fatal(err)
		}
		m, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
			id string
			v  int64
		}, error) {
			var x struct {
				id string
				v  int64
			}
			return x, r.Scan(&x.id, &x.v)
		})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, x := range m {
			out[x.id] = x.v
		}
		return out
	}
	seen := map[int64]bool{}
	before := versions(s)
	for _, v := range before {
		is.True(!seen[v]) // every form has a version of its own
		seen[v] = true
	}
	decoyBefore := versions(d)

	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	insert := "INSERT INTO " + q + `.formsapi_submissions (form_seq, feed_pos, created_at, data, json)
SELECT seq, 1000 + feed_last, $2, '{}', '\x7b7d' FROM ` + q + ".formsapi_forms WHERE id = $1"
	for _, step := range []struct {
		name    string
		write   func() error
		changed []string
	}{
		{"AddSubmission", func() error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: "f1", Data: []byte(`{"a":1}`)}, formsapi.Metadata{})
		}, []string{"f1"}},
		{"INSERT", exec(host, insert, "f2", at), []string{"f2"}},
		{"INSERT of two forms in one statement", exec(host, "INSERT INTO "+q+`.formsapi_submissions (form_seq, feed_pos, created_at, data, json)
SELECT seq, 2000 + g, $1, '{}', '\x7b7d' FROM `+q+".formsapi_forms, generate_series(1, 3) g WHERE id IN ('f1', 'f3')", at), []string{"f1", "f3"}},
		{"UPDATE of the JSON", exec(host, "UPDATE "+q+`.formsapi_submissions SET data = '{"b":2}', json = '\x7b2262223a327d' WHERE form_seq = (SELECT seq FROM `+q+".formsapi_forms WHERE id = 'f2')"), []string{"f2"}},
		{"UPDATE of metadata only", exec(host, "UPDATE "+q+".formsapi_submissions SET client_ip = '\\x00' WHERE form_seq = (SELECT seq FROM "+q+".formsapi_forms WHERE id = 'f3')"), []string{"f3"}},
		{"UPDATE that touches no row", exec(host, "UPDATE "+q+".formsapi_submissions SET client_ip = '\\x00' WHERE false"), nil},
		{"UPDATE moving a submission to another form", exec(host, "UPDATE "+q+".formsapi_submissions SET form_seq = (SELECT seq FROM "+q+".formsapi_forms WHERE id = 'f3'), feed_pos = 9999 WHERE seq = (SELECT max(s.seq) FROM "+q+".formsapi_submissions s JOIN "+q+".formsapi_forms f ON f.seq = s.form_seq WHERE f.id = 'f1')"), []string{"f1", "f3"}},
		{"DELETE", exec(host, "DELETE FROM "+q+".formsapi_submissions WHERE form_seq = (SELECT seq FROM "+q+".formsapi_forms WHERE id = 'f2')"), []string{"f2"}},
		{"rolled back", func() error {
			tx, err := host.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, insert, "f1", at); err != nil {
				return err
			}
			return tx.Rollback(ctx)
		}, nil},
		{"UPDATE of a form's title", exec(host, "UPDATE "+q+".formsapi_forms SET title = 'renamed' WHERE id = 'f1'"), nil},
		{"UPDATE of a form's account", exec(host, "UPDATE "+q+".formsapi_forms SET account_id = 'other' WHERE id = 'f2'"), []string{"f2"}},
		{"UPDATE of a form's ID", exec(host, "UPDATE "+q+".formsapi_forms SET id = 'f3b' WHERE id = 'f3'"), []string{"f3b"}},
		{"INSERT of a form naming its version", func() error {
			return exec(host, "INSERT INTO "+q+".formsapi_forms (id, account_id, title, icon, notification_email, created_at, version) VALUES ('f4', 'acct', '', '', '', 0, $1)", before["f1"])()
		}, []string{"f4"}},
		{"AddForm", func() error { return s.AddForm(ctx, "acct", formsapi.Form{ID: "f5"}) }, []string{"f5"}},
		{"TRUNCATE", exec(host, "TRUNCATE "+q+".formsapi_submissions"), []string{"f1", "f2", "f3b", "f4", "f5"}},
	} {
		if err := step.write(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after := versions(s)
		var changed []string
		for id, v := range after {
			if old, ok := before[id]; ok && old == v {
				continue
			}
			changed = append(changed, id)
			if seen[v] {
				t.Errorf("%s: form %s got version %d, which a form had before", step.name, id, v)
			}
			seen[v] = true
		}
		slices.Sort(changed)
		if !slices.Equal(changed, step.changed) {
			t.Errorf("%s: the versions of %v changed, want those of %v", step.name, changed, step.changed)
		}
		before = after
	}
	is.Equal(versions(d), decoyBefore) // the schema on the host's search_path was never touched
}

// exec returns a write of sql on conn.
func exec(conn *pgx.Conn, sql string, args ...any) func() error {
	return func() error {
		_, err := conn.Exec(ctx, sql, args...)
		if err != nil {
			return fmt.Errorf("%s: %w", firstLine(sql), err)
		}
		return nil
	}
}
