package sqlitestore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// TestFeedMigrationNumbersExistingRows upgrades a file written before the
// feed existed: its submissions take positions per form in the order
// they were inserted (whatever their createdAt), and the next submission
// continues from there, whoever inserts it.
func TestFeedMigrationNumbersExistingRows(t *testing.T) {
	is := is.New(t)
	path := dbPath(t)
	db := hostDB(t, path)
	is.NoErr(sqlitestore.MigrateBefore(ctx, db, "feed")) // the schema before the feed
	for _, id := range []string{"one", "two", "none"} {
		_, err := db.ExecContext(ctx, `INSERT INTO formsapi_forms (id, account_id, title, icon, notification_email, created_at) VALUES (?, 'acct', '', '', '', 0)`, id)
		is.NoErr(err) // add form as the old version did
	}
	// Interleaved across two forms, each inserted later than the last but
	// created earlier.
	order := []string{"one", "two", "one", "one", "two"}
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, form := range order {
		sub := formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"i":%d}`, i)), CreatedAt: t0.Add(-time.Duration(i) * time.Hour)}
		encoded, err := formsapi.AppendSubmissionJSON(nil, sub)
		is.NoErr(err) // encode
		_, err = db.ExecContext(ctx, `INSERT INTO formsapi_submissions (form_seq, created_at, data, json)
SELECT seq, ?, ?, ? FROM formsapi_forms WHERE id = ?`, sub.CreatedAt.UnixNano(), string(sub.Data), encoded, form)
		is.NoErr(err) // add submission as the old version did
	}

	s := mustNew(t, db) // migrates
	feed := func(form string, after int64) ([]string, int64) {
		p, err := s.SyncSubmissions(ctx, "acct", form, after, 100)
		is.NoErr(err) // sync
		var got []string
		for _, sub := range p.Items {
			got = append(got, string(sub.Data))
		}
		return got, p.Next
	}
	got, next := feed("one", 0)
	is.Equal(got, []string{`{"i":0}`, `{"i":2}`, `{"i":3}`}) // form one in insertion order
	is.Equal(next, int64(3))                                 // positions 1, 2, 3
	got, next = feed("two", 0)
	is.Equal(got, []string{`{"i":1}`, `{"i":4}`}) // form two in insertion order
	is.Equal(next, int64(2))                      // positions 1, 2
	got, next = feed("none", 0)
	is.Equal(len(got), 0)    // a form without submissions
	is.Equal(next, int64(0)) // stays at the start

	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "one", Data: []byte(`{"i":5}`), CreatedAt: t0.Add(-time.Hour * 24 * 365)}, formsapi.Metadata{}))
	got, next = feed("one", 3)
	is.Equal(got, []string{`{"i":5}`}) // the next submission follows the migrated ones
	is.Equal(next, int64(4))
	// A writer that knows nothing of the feed (the host's own connection,
	// an older version of the package still running) is numbered too.
	_, err := db.ExecContext(ctx, `INSERT INTO formsapi_submissions (form_seq, created_at, data, json)
SELECT seq, 0, '{"i":6}', '{"formId":"one","data":{"i":6},"attachments":[],"createdAt":"1970-01-01T00:00:00Z"}' FROM formsapi_forms WHERE id = 'one'`)
	is.NoErr(err) // insert as the old version did
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "one", Data: []byte(`{"i":7}`)}, formsapi.Metadata{}))
	got, next = feed("one", 4)
	is.Equal(got, []string{`{"i":6}`, `{"i":7}`}) // numbered 5, then 6
	is.Equal(next, int64(6))

	_, err = db.ExecContext(ctx, `INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, json)
SELECT seq, 2, 0, '{}', '{}' FROM formsapi_forms WHERE id = 'two'`)
	is.True(err != nil) // two submissions of a form can never share a position
}

// TestFeedQueryPlans checks that a feed page is one seek into the feed
// index and one into the tombstones' key, each bounded by the position,
// merged in order with the form's row, with no scan and no sort.
func TestFeedQueryPlans(t *testing.T) {
	s := load(t, mustOpen(t, dbPath(t)), storetest.DefaultSeed())
	for _, query := range sqlitestore.FeedSQL {
		details := plan(t, sqlitestore.ReadDB(s), query, int64(1), int64(5))
		checkPlan(t, details, "formsapi_submissions_feed")
		tombstones := false
		for _, d := range details {
			if strings.HasPrefix(d, "SEARCH formsapi_forms USING INTEGER PRIMARY KEY") {
				continue // the form's own row, for its feed_purged
			}
			if strings.HasPrefix(d, "SEARCH") && !strings.Contains(d, "feed_pos>?") {
				t.Errorf("plan %q does not seek to the position", d)
			}
			tombstones = tombstones || strings.HasPrefix(d, "SEARCH formsapi_tombstones USING PRIMARY KEY")
		}
		if !tombstones {
			t.Errorf("plan %q does not seek into the tombstones' key", details)
		}
	}
}
