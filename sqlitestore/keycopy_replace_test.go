package sqlitestore_test

import (
	"slices"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
)

// replaceCols are formsapi_submissions' columns, for a host's REPLACE.
const replaceCols = `seq, form_seq, created_at, data, attachments, json, client_ip, user_agent, geo, trace_id, feed_pos, json_version, host_id, find_keys, sort_keys`

// TestKeyCopyReplace: a host's INSERT OR REPLACE deletes the row it
// conflicts with without its delete triggers (SQLite fires them only
// with recursive_triggers on), so keys_gen must move for what the
// replaced row's deletion changed: a form given to another account or
// another seq, the newest submission rewritten in place.
func TestKeyCopyReplace(t *testing.T) {
	t.Parallel()
	path, s, key := newTenant(t)
	host := hostDB(t, path)
	truth := mustOpen(t, path, sqlitestore.WithKeyCopy(false), sqlitestore.WithCacheSize(0))
	same := func(step, target string) {
		t.Helper()
		code, got, _ := get(t, s, key, target)
		wantCode, want, _ := get(t, truth, key, target)
		if code != wantCode || !slices.Equal(got, want) {
			t.Errorf("%s: GET %s: %d %q, the file holds %d %q", step, target, code, got, wantCode, want)
		}
	}
	exec := func(q string) {
		t.Helper()
		if _, err := host.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}

	// The form, replaced with another account.
	served(t, s, key, "/v1/forms/f1/submissions?limit=2")
	exec(`INSERT OR REPLACE INTO formsapi_forms (seq, id, account_id, title, icon, notification_email, created_at)
SELECT seq, id, 'someone else', title, icon, notification_email, created_at FROM formsapi_forms WHERE id = 'f1'`)
	same("a form replaced with another account", "/v1/forms/f1/submissions?limit=2")

	// The form, replaced whole with another account, its incarnation
	// kept (as a host copies a row back from a backup).
	served(t, s, key, "/v1/forms/f3/submissions?limit=2")
	exec(`INSERT OR REPLACE INTO formsapi_forms (seq, id, account_id, title, icon, notification_email, created_at, version, feed_last, feed_purged, incarnation)
SELECT seq, id, 'someone else', title, icon, notification_email, created_at, version, feed_last, feed_purged, incarnation FROM formsapi_forms WHERE id = 'f3'`)
	same("a form replaced whole with another account", "/v1/forms/f3/submissions?limit=2")

	// The form, replaced as a host updates its title: a new seq (the
	// submissions stay with the old one), a new incarnation.
	served(t, s, key, "/v1/forms/f2/submissions?limit=2")
	exec(`INSERT OR REPLACE INTO formsapi_forms (id, account_id, title, icon, notification_email, created_at)
VALUES ('f2', 'acct', 'New title', '', '', 0)`)
	same("a form replaced with a new title", "/v1/forms/f2/submissions?limit=2")

	// The newest submission (f4's, the highest seq), rewritten in place.
	served(t, s, key, "/v1/forms/f4/submissions?limit=2")
	exec(`INSERT OR REPLACE INTO formsapi_submissions (` + replaceCols + `)
SELECT seq, form_seq, created_at, '{"n":999}', attachments, CAST(replace(CAST(json AS TEXT), '"n":29', '"n":999') AS BLOB),
    client_ip, user_agent, geo, trace_id, feed_pos, json_version, host_id, find_keys, sort_keys
FROM formsapi_submissions WHERE seq = (SELECT max(seq) FROM formsapi_submissions)`)
	same("the newest submission replaced", "/v1/forms/f4/submissions?limit=2")
}

// TestKeyCopyReplaceTriggersOnlyOnConflict: the triggers of
// TestKeyCopyReplace leave keys_gen where it was for inserts that
// replace nothing: a new submission of another store, a host's insert
// that names the next seq. (A new form moves it anyway: the trigger that
// gives it its incarnation updates the row.)
func TestKeyCopyReplaceTriggersOnlyOnConflict(t *testing.T) {
	t.Parallel()
	path, _, _ := newTenant(t)
	other := mustOpen(t, path)
	host := hostDB(t, path)
	gen := func() (g int64) {
		t.Helper()
		if err := host.QueryRowContext(ctx, `SELECT value FROM formsapi_settings WHERE name = 'keys_gen'`).Scan(&g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	if err := other.AddForm(ctx, "acct", formsapi.Form{ID: "new", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	was := gen()
	if err := other.AddSubmission(ctx, formsapi.Submission{FormID: "new", Data: []byte(`{"n":1}`), CreatedAt: t0.Add(time.Hour)}, formsapi.Metadata{}); err != nil {
		t.Fatal(err)
	}
	if _, err := host.ExecContext(ctx, `INSERT INTO formsapi_submissions (`+replaceCols+`)
SELECT seq + 1, form_seq, created_at + 1, '{"n":2}', attachments, json, client_ip, user_agent, geo, trace_id, feed_pos + 1, json_version, '', find_keys, sort_keys
FROM formsapi_submissions WHERE seq = (SELECT max(seq) FROM formsapi_submissions)`); err != nil {
		t.Fatal(err)
	}
	if now := gen(); now != was {
		t.Errorf("keys_gen moved from %d to %d, with nothing replaced", was, now)
	}
}

// TestReplaceMovesSubmission: a host's REPLACE that gives the newest
// submission's seq to a submission of another form takes it from its
// form; that form's version must move, or a read cache keeps its page.
// No key copy here.
func TestReplaceMovesSubmission(t *testing.T) {
	t.Parallel()
	path, _, key := newTenant(t)
	s := mustOpen(t, path, sqlitestore.WithKeyCopy(false))
	host := hostDB(t, path)
	truth := mustOpen(t, path, sqlitestore.WithKeyCopy(false), sqlitestore.WithCacheSize(0))
	list := "/v1/forms/f4/submissions?limit=2"
	get(t, s, key, list)
	get(t, s, key, list)
	if _, err := host.ExecContext(ctx, `INSERT OR REPLACE INTO formsapi_submissions (`+replaceCols+`)
SELECT seq, (SELECT seq FROM formsapi_forms WHERE id = 'f0'), created_at, '{"n":998}', attachments, CAST(replace(replace(CAST(json AS TEXT), '"n":29', '"n":998'), '"f4"', '"f0"') AS BLOB),
    client_ip, user_agent, geo, trace_id, (SELECT feed_last + 1 FROM formsapi_forms WHERE id = 'f0'), json_version, host_id, find_keys, sort_keys
FROM formsapi_submissions WHERE seq = (SELECT max(seq) FROM formsapi_submissions)`); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{list, "/v1/forms/f0/submissions?limit=2"} {
		_, got, _ := get(t, s, key, l)
		_, want, _ := get(t, truth, key, l)
		if !slices.Equal(got, want) {
			t.Errorf("GET %s: %q, the file holds %q", l, got, want)
		}
	}
}

// TestUpdateReplaceSeqTakesSubmission: a host's UPDATE OR REPLACE that
// gives a submission the seq of another form's submission deletes that
// one without its delete trigger; its form's version must move, or a
// read cache keeps its page. No key copy here.
func TestUpdateReplaceSeqTakesSubmission(t *testing.T) {
	t.Parallel()
	path, _, key := newTenant(t)
	s := mustOpen(t, path, sqlitestore.WithKeyCopy(false))
	host := hostDB(t, path)
	truth := mustOpen(t, path, sqlitestore.WithKeyCopy(false), sqlitestore.WithCacheSize(0))
	list := "/v1/forms/f4/submissions?limit=2"
	get(t, s, key, list)
	get(t, s, key, list)
	if _, err := host.ExecContext(ctx, `UPDATE OR REPLACE formsapi_submissions SET seq = (SELECT max(seq) FROM formsapi_submissions)
WHERE seq = (SELECT min(seq) FROM formsapi_submissions)`); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{list, "/v1/forms/f0/submissions?limit=2&order=asc"} {
		_, got, _ := get(t, s, key, l)
		_, want, _ := get(t, truth, key, l)
		if !slices.Equal(got, want) {
			t.Errorf("GET %s: %q, the file holds %q", l, got, want)
		}
	}
}
