package pgstore_test

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
)

// TestFormListVersionsChangeWithEveryWrite writes in every way a host can,
// through the store and in plain SQL on a connection whose search_path
// names another schema holding formsapi tables too, and checks after each
// write which accounts' forms lists got a new version (migration 0009):
// exactly those whose list could have changed, each with a value no list
// or form ever had, none for the writes of submissions (the hot path),
// and none in the other schema. An account whose row is gone gets one
// back, with a fresh value, at the next change of its list.
func TestFormListVersionsChangeWithEveryWrite(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	is.NoErr(err)
	t.Cleanup(func() { s.Close() })
	_, decoy := pgtest.Schema(t)
	d, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(decoy))
	is.NoErr(err)
	t.Cleanup(func() { d.Close() })
	for _, st := range []*pgstore.Store{s, d} {
		for _, f := range []struct{ account, id string }{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"c", "c1"}} {
			is.NoErr(st.AddForm(ctx, f.account, formsapi.Form{ID: f.id, Title: f.id})) // add form
		}
		is.NoErr(st.AddSubmission(ctx, formsapi.Submission{FormID: "a1", Data: []byte(`{"n":1}`)}, formsapi.Metadata{ID: "s1"}))
		is.NoErr(st.AddSubmission(ctx, formsapi.Submission{FormID: "a1", Data: []byte(`{"n":2}`)}, formsapi.Metadata{ID: "s2"}))
	}
	host, err := pgx.Connect(ctx, withParam(dsn, "search_path", decoy))
	is.NoErr(err) // the host's connection, its search_path on the decoy schema
	t.Cleanup(func() { host.Close(ctx) })
	q := quote(schema)

	// versions returns every account's list version, and every version a
	// form or a list of st has.
	versions := func(st *pgstore.Store) (map[string]int64, []int64) {
		t.Helper()
		lists := map[string]int64{}
		var all []int64
		rows, err := pgstore.Pool(st).Query(ctx, "SELECT account_id, version FROM "+quote(st.Schema())+".formsapi_form_lists")
		is.NoErr(err)
		for rows.Next() {
			var a string
			var v int64
			is.NoErr(rows.Scan(&a, &v))
			lists[a] = v
			all = append(all, v)
		}
		is.NoErr(rows.Err())
		rows, err = pgstore.Pool(st).Query(ctx, "SELECT version FROM "+quote(st.Schema())+".formsapi_forms")
		is.NoErr(err)
		for rows.Next() {
			var v int64
			is.NoErr(rows.Scan(&v))
			all = append(all, v)
		}
		is.NoErr(rows.Err())
		return lists, all
	}
	seen := map[int64]bool{}
	before, all := versions(s)
	for _, v := range all {
		seen[v] = true
	}
	is.Equal(len(before), 3) // a row for each account with forms
	decoyBefore, _ := versions(d)

	forms := q + ".formsapi_forms"
	insert := "INSERT INTO " + q + `.formsapi_submissions (form_seq, feed_pos, created_at, data, json)
SELECT seq, 1000 + feed_last, 0, '{}', '\x7b7d' FROM ` + forms + " WHERE id = $1"
	for _, step := range []struct {
		name    string
		write   func() error
		changed []string
	}{
		// Submissions change no list.
		{"AddSubmission", func() error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: "a2", Data: []byte(`{"email":"gone@example.com"}`)}, formsapi.Metadata{})
		}, nil},
		{"Erase", func() error {
			n, err := s.Erase(ctx, "a", "email", "gone@example.com")
			if err == nil && n != 1 {
				t.Errorf("Erase erased %d submissions, want 1", n)
			}
			return err
		}, nil},
		{"INSERT of a submission", exec(host, insert, "b1"), nil},
		{"UPDATE of submissions", exec(host, "UPDATE "+q+`.formsapi_submissions SET data = '{"x":1}'`), nil},
		{"DeleteSubmission", func() error { return s.DeleteSubmission(ctx, "a", "a1", "s1") }, nil},
		{"DELETE of a submission", exec(host, "DELETE FROM "+q+".formsapi_submissions WHERE host_id = 's2'"), nil},
		{"TRUNCATE of the submissions", exec(host, "TRUNCATE "+q+".formsapi_submissions"), nil},
		{"UPDATE of what the list does not show", exec(host, "UPDATE "+forms+" SET feed_last = feed_last + 1, feed_purged = feed_purged + 1, version = version + 1"), nil},
		{"UPDATE of a title to what it was", exec(host, "UPDATE "+forms+" SET title = title WHERE id = 'a1'"), nil},
		{"UPDATE that touches no row", exec(host, "UPDATE "+forms+" SET title = 'x' WHERE false"), nil},
		{"rolled back", func() error {
			tx, err := host.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "UPDATE "+forms+" SET title = 'never' WHERE id = 'a1'"); err != nil {
				return err
			}
			return tx.Rollback(ctx)
		}, nil},
		{"AddKey of an account with forms", func() error { return s.AddKey(ctx, mustKey(t), "a") }, nil},

		// Everything the list shows, orders by or selects by.
		{"AddForm", func() error { return s.AddForm(ctx, "a", formsapi.Form{ID: "a3"}) }, []string{"a"}},
		{"UpdateForm", func() error { return s.UpdateForm(ctx, "a", formsapi.Form{ID: "a3", Title: "renamed"}) }, []string{"a"}},
		{"UPDATE of a title", exec(host, "UPDATE "+forms+" SET title = 'plain' WHERE id = 'a1'"), []string{"a"}},
		{"UPDATE of an icon", exec(host, "UPDATE "+forms+" SET icon = 'i' WHERE id = 'b1'"), []string{"b"}},
		{"UPDATE of a notification email", exec(host, "UPDATE "+forms+" SET notification_email = 'e' WHERE id = 'c1'"), []string{"c"}},
		{"UPDATE of a creation time", exec(host, "UPDATE "+forms+" SET created_at = created_at + 1 WHERE id = 'a2'"), []string{"a"}},
		{"UPDATE of a form's ID", exec(host, "UPDATE "+forms+" SET id = 'a2b' WHERE id = 'a2'"), []string{"a"}},
		{"UPDATE of a seq", exec(host, "UPDATE "+forms+" SET seq = DEFAULT WHERE id = 'c1'"), []string{"c"}},
		{"UPDATE moving a form to another account", exec(host, "UPDATE "+forms+" SET account_id = 'b' WHERE id = 'a1'"), []string{"a", "b"}},
		{"UPDATE moving a form to a new account", exec(host, "UPDATE "+forms+" SET account_id = 'd' WHERE id = 'a1'"), []string{"b", "d"}},
		{"UPDATE of two accounts' forms in one statement", exec(host, "UPDATE "+forms+" SET title = title || '!' WHERE id IN ('b1', 'c1')"), []string{"b", "c"}},
		{"INSERT of forms of two accounts in one statement", exec(host, "INSERT INTO "+forms+" (id, account_id, title, icon, notification_email, created_at) VALUES ('x1', 'c', '', '', '', 0), ('x2', 'e', '', '', '', 0), ('x3', 'e', '', '', '', 0)"), []string{"c", "e"}},
		{"DeleteForm", func() error { return s.DeleteForm(ctx, "a", "a3") }, []string{"a"}},
		{"DELETE of forms of two accounts", exec(host, "DELETE FROM "+forms+" WHERE id IN ('x1', 'x2')"), []string{"c", "e"}},
		{"AddKey of an account without forms", func() error { return s.AddKey(ctx, mustKey(t), "f") }, []string{"f"}},
		{"a row deleted by hand", exec(host, "DELETE FROM "+q+".formsapi_form_lists WHERE account_id = 'c'"), []string{"c"}},
		{"AddForm after that", func() error { return s.AddForm(ctx, "c", formsapi.Form{ID: "c2"}) }, []string{"c"}},
		{"TRUNCATE of the forms", exec(host, "TRUNCATE "+forms+" CASCADE"), []string{"a", "b", "c", "d", "e", "f"}},
	} {
		if err := step.write(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after, _ := versions(s)
		var changed []string
		for a, v := range after {
			if old, ok := before[a]; ok && old == v {
				continue
			}
			changed = append(changed, a)
			if seen[v] {
				t.Errorf("%s: account %s got version %d, which a list or form had before", step.name, a, v)
			}
			seen[v] = true
		}
		for a := range before {
			if _, ok := after[a]; !ok {
				changed = append(changed, a) // its row is gone
			}
		}
		slices.Sort(changed)
		if !slices.Equal(changed, step.changed) {
			t.Errorf("%s: the lists of %v changed, want those of %v", step.name, changed, step.changed)
		}
		_, all := versions(s)
		for _, v := range all {
			seen[v] = true
		}
		before = after
	}
	after, _ := versions(d)
	is.Equal(after, decoyBefore) // the schema on the host's search_path was never touched
}

func mustKey(t *testing.T) string {
	t.Helper()
	k, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
