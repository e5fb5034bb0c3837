package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/pgstore"
)

// TestFeedPositionsCommitInOrder adds submissions to one form from eight
// goroutines while a reader looks at the form's feed positions again and
// again: every snapshot must show exactly 1..n, never a gap that a later
// commit would fill, and at the end the positions are 1..total. That is
// what the sync feed needs from feed_pos: a reader that has seen position
// n has seen every position before it.
func TestFeedPositionsCommitInOrder(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "fed"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "other"}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 40
	check := fmt.Sprintf(`SELECT count(*), COALESCE(MIN(feed_pos), 1), COALESCE(MAX(feed_pos), 0)
FROM %[1]s.formsapi_submissions WHERE form_seq = (SELECT seq FROM %[1]s.formsapi_forms WHERE id = $1)`, quote(s.Schema()))
	var done atomic.Bool
	var snapshots int
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for !done.Load() {
			var n, lo, hi int64
			if err := pgstore.Pool(s).QueryRow(ctx, check, "fed").Scan(&n, &lo, &hi); err != nil {
				t.Error(err)
				return
			}
			if lo != 1 || n != hi {
				t.Errorf("a snapshot shows %d positions from %d to %d: a gap", n, lo, hi)
				return
			}
			snapshots++
		}
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				form := "fed"
				if i%5 == 4 {
					form = "other" // another form's counter does not disturb this one
				}
				sub := formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))}
				if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	done.Store(true)
	<-readerDone
	for form, want := range map[string]int64{"fed": writers * each * 4 / 5, "other": writers * each / 5} {
		var n, lo, hi int64
		if err := pgstore.Pool(s).QueryRow(ctx, check, form).Scan(&n, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		if n != want || lo != 1 || hi != want {
			t.Errorf("form %s: %d positions from %d to %d, want 1 to %d", form, n, lo, hi, want)
		}
	}
	t.Logf("%d snapshots, none with a gap", snapshots)
}

// TestFeedCommitOrder drives the interleaving a sequence gets wrong, with
// transactions held open by hand around the statement AddSubmission runs:
//
//   - tx A inserts into form f and stays open;
//   - tx C inserts into form g, takes a higher seq than A, and commits
//     first: other forms never wait for f;
//   - tx B inserts into form f: it waits on f's row until A ends;
//   - tx D inserts into f after A and B, then rolls back;
//   - A commits, then B commits.
//
// A poller that stores its position between reads gets A at position 1,
// B at 2 and the next submission at 3: nothing visible before a lower
// position, no gap left by the rollback, none missed, none repeated.
func TestFeedCommitOrder(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t)
	pool := pgstore.Pool(s)
	for _, id := range []string{"f", "g"} {
		is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: id})) // add form
	}
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	insert := func(tx pgx.Tx, form, name string, at time.Time) error {
		sub := formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"tx":%q}`, name)), CreatedAt: at}
		encoded, err := formsapi.AppendSubmissionJSON(nil, sub)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, pgstore.AddSubmissionSQL(s), form, at.UnixNano(), string(sub.Data), "[]", encoded,
			[]byte{}, []byte{}, nil, []byte{}, stored.Version, "", [][]byte{[]byte("tx")}, find.Keys(sub.Data), false, nil, false)
		return err
	}
	begin := func() pgx.Tx {
		tx, err := pool.Begin(ctx)
		is.NoErr(err) // begin
		t.Cleanup(func() { tx.Rollback(context.Background()) })
		return tx
	}
	var after int64
	poll := func(form string) []string {
		p, err := s.SyncSubmissions(ctx, "acct", form, after, 10)
		is.NoErr(err) // poll
		var got []string
		for _, sub := range p.Items {
			got = append(got, string(sub.Data))
		}
		after = p.Next
		return got
	}

	a := begin()
	is.NoErr(insert(a, "f", "A", t0))  // A inserts and stays open
	is.Equal(poll("f"), []string(nil)) // nothing committed yet

	c := begin()
	is.NoErr(insert(c, "g", "C", t0.Add(time.Hour))) // another form does not wait for A
	is.NoErr(c.Commit(ctx))
	p, err := s.SyncSubmissions(ctx, "acct", "g", 0, 10)
	is.NoErr(err)
	is.Equal(len(p.Items), 1) // C is visible while A, with a lower seq, is not
	is.Equal(p.Next, int64(1))

	b := begin()
	bDone := make(chan error, 1)
	go func() { bDone <- insert(b, "f", "B", t0.Add(-time.Hour)) }() // created earlier than A
	pgtest.WaitForLock(t, pgtest.DSN(t), "pid = $1", int64(b.Conn().PgConn().PID()))
	select {
	case err := <-bDone:
		t.Fatalf("B inserted into f while A held it open (err %v)", err)
	default:
	}
	is.Equal(poll("f"), []string(nil)) // still nothing

	is.NoErr(a.Commit(ctx))
	select {
	case err := <-bDone:
		is.NoErr(err) // B goes on once A has committed
	case <-time.After(30 * time.Second):
		t.Fatal("B still waits after A committed")
	}
	is.Equal(poll("f"), []string{`{"tx":"A"}`}) // A, not yet B
	is.Equal(after, int64(1))

	is.NoErr(b.Commit(ctx))
	is.Equal(poll("f"), []string{`{"tx":"B"}`}) // B next, from the stored position
	is.Equal(after, int64(2))

	d := begin()
	is.NoErr(insert(d, "f", "D", t0))
	is.NoErr(d.Rollback(ctx)) // a rolled-back insert leaves no gap and no trace
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(`{"tx":"E"}`), CreatedAt: t0.Add(-48 * time.Hour)}, formsapi.Metadata{}))
	is.Equal(poll("f"), []string{`{"tx":"E"}`})
	is.Equal(after, int64(3))
	is.Equal(poll("f"), []string(nil)) // and nothing twice
	is.Equal(after, int64(3))
}

// TestExplainFeed checks the plan of the feed statements on a table big
// enough (40,000 submissions, half of them one form's, analyzed) that the
// planner would sort or scan if it could: one scan of the feed index
// starting at the position, reading no more rows than the page, from the
// start and 99% deep, custom and generic plans alike, merged with the
// form's tombstones (migration 0008); what is sorted is at most those
// rows, the page's candidates, never the form's submissions.
func TestExplainFeed(t *testing.T) {
	t.Parallel()
	s := mustOpenFresh(t)
	pool := pgstore.Pool(s)
	schema := quote(s.Schema())
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %s.formsapi_forms (id, account_id, title, icon, notification_email, created_at)
SELECT 'form-' || g, 'big', 't', 'i', 'e', 0 FROM generate_series(1, 1000) g`, schema),
		// With the table's triggers off, as TestExplain fills it: the
		// plans read the tables as they are, not how they were filled.
		fmt.Sprintf(`ALTER TABLE %s.formsapi_submissions DISABLE TRIGGER USER`, schema),
		fmt.Sprintf(`INSERT INTO %[1]s.formsapi_submissions (form_seq, feed_pos, created_at, data, json)
SELECT CASE WHEN g <= 20000 THEN (SELECT seq FROM %[1]s.formsapi_forms WHERE id = 'form-1') ELSE 2 + g %% 999 END,
       g, g, '{}', '\x7b7d'::bytea
FROM generate_series(1, 40000) g`, schema),
		fmt.Sprintf(`ALTER TABLE %s.formsapi_submissions ENABLE TRIGGER USER`, schema),
		fmt.Sprintf(`ANALYZE %[1]s.formsapi_forms, %[1]s.formsapi_submissions`, schema),
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", firstLine(q), err)
		}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	const fetch = 51
	for i, sql := range pgstore.FeedSQL(s) {
		for _, after := range []int64{0, 19_800} {
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				name := fmt.Sprintf("feed %d/after %d/%s", i, after, mode)
				args := fmt.Sprintf("'form-1', 'big', %d, %d", after, fetch)
				if i >= 1 {
					args += ", 4194304" // the fast path's byte room
				}
				if i == 2 {
					args += ", ARRAY[1, 2]::bigint[]" // the keys
				}
				plan := explain(t, conn.Conn(), sql, args, mode, mode == "force_custom_plan")
				scans := 0
				for _, n := range nodes(plan) {
					if slices.Contains([]string{"Seq Scan", "Bitmap Heap Scan"}, n.NodeType) && n.Relation == "formsapi_submissions" {
						t.Errorf("%s: %s node on the submissions", name, n.NodeType)
					}
					if (n.NodeType == "Sort" || n.NodeType == "Incremental Sort") && n.ActualRows != nil && *n.ActualRows > 2*fetch+1 {
						t.Errorf("%s: a sort of %d rows for a page of %d", name, *n.ActualRows, fetch)
					}
					if n.Index != "formsapi_submissions_feed" {
						continue
					}
					scans++
					if !strings.Contains(n.IndexCond, "feed_pos >") {
						t.Errorf("%s: index condition %q does not start at the position", name, n.IndexCond)
					}
					if n.ActualRows != nil && (*n.ActualRows > fetch || n.RowsFiltered > 0) {
						t.Errorf("%s: the scan read %d rows and filtered %d for a page of %d", name, *n.ActualRows, n.RowsFiltered, fetch)
					}
				}
				if scans != 1 {
					t.Errorf("%s: %d scans of formsapi_submissions_feed, want 1", name, scans)
				}
			}
		}
	}
}
