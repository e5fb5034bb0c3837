package pgstore_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/ratelimit"
)

// strictLevels are the isolation levels a host may make its database's
// default, under which PostgreSQL aborts a transaction that conflicts
// with a concurrent one (SQLSTATE 40001) where read committed would wait
// and go on.
var strictLevels = []string{"repeatable read", "serializable"}

// openAt opens a store on schema whose connections run at level
// by default, as a DSN parameter (a runtime parameter pgx sends at
// connect) sets it, and checks that they do.
func openAt(t *testing.T, dsn, schema, level string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(ctx, withParam(dsn, "default_transaction_isolation", url.PathEscape(level)), pgstore.WithSchema(schema))
	if err != nil {
		t.Fatalf("open at %s: %v", level, err)
	}
	t.Cleanup(func() { s.Close() })
	var got string
	if err := pgstore.Pool(s).QueryRow(ctx, "SHOW transaction_isolation").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != level {
		t.Fatalf("the store's connections run at %q, want %q", got, level)
	}
	return s
}

// TestConcurrentWritesAtStrictIsolation adds submissions to one form
// from eight goroutines while two readers follow the form's feed, with
// the database's default isolation at repeatable read and at
// serializable. Writers to one form queue on the form's row lock, and at
// these levels each one the lock lets through finds the row changed since
// its snapshot and fails with 40001: the store must retry, so that every
// write succeeds, the feed and the list read each submission exactly
// once, and no feed read fails.
func TestConcurrentWritesAtStrictIsolation(t *testing.T) {
	t.Parallel()
	for _, level := range strictLevels {
		t.Run(strings.ReplaceAll(level, " ", "_"), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			dsn, schema := pooledSchema(t)
			s := openAt(t, dsn, schema, level)
			is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "busy"})) // add form

			const writers, each = 8, 100
			var done atomic.Bool
			var readers sync.WaitGroup
			for range 2 {
				readers.Add(1)
				go func() {
					defer readers.Done()
					var after int64
					for !done.Load() {
						p, err := s.SyncSubmissions(ctx, "acct", "busy", after, 50)
						if err != nil {
							t.Errorf("feed read at %s: %v", level, err)
							return
						}
						if len(p.Items) > 0 && p.Next != after+int64(len(p.Items)) {
							t.Errorf("feed after %d: %d items up to %d, a gap", after, len(p.Items), p.Next)
							return
						}
						after = p.Next
					}
				}()
			}
			var writes sync.WaitGroup
			for w := range writers {
				writes.Add(1)
				go func() {
					defer writes.Done()
					for i := range each {
						sub := formsapi.Submission{FormID: "busy", Data: []byte(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))}
						if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
							t.Errorf("write %d of writer %d at %s: %v", i, w, level, err)
							return
						}
					}
				}()
			}
			writes.Wait()
			done.Store(true)
			readers.Wait()

			// The feed, from the start: positions 1..n, each write once.
			seen := map[string]int{}
			var after int64
			for {
				p, err := s.SyncSubmissions(ctx, "acct", "busy", after, 100)
				is.NoErr(err) // read the feed
				for _, sub := range p.Items {
					seen[string(sub.Data)]++
				}
				if p.Next != after+int64(len(p.Items)) {
					t.Fatalf("feed after %d: %d items up to %d, a gap", after, len(p.Items), p.Next)
				}
				after = p.Next
				if !p.More {
					break
				}
			}
			checkOnce(t, "feed", seen, writers, each)

			// The list, newest first, page by page.
			seen = map[string]int{}
			q := formsapi.Query{Limit: 75}
			for {
				p, err := s.ListSubmissions(ctx, "acct", "busy", q)
				is.NoErr(err) // list a page
				for _, sub := range p.Items {
					seen[string(sub.Data)]++
				}
				if p.NextCursor == "" {
					break
				}
				q.Cursor = p.NextCursor
			}
			checkOnce(t, "list", seen, writers, each)
		})
	}
}

// checkOnce fails unless seen holds each writer's each writes once.
func checkOnce(t *testing.T, what string, seen map[string]int, writers, each int) {
	t.Helper()
	if len(seen) != writers*each {
		t.Errorf("the %s holds %d distinct submissions, want %d", what, len(seen), writers*each)
	}
	for data, n := range seen {
		var v struct{ W, I int }
		if err := json.Unmarshal([]byte(data), &v); err != nil || v.W >= writers || v.I >= each {
			t.Errorf("the %s holds %s, which no writer wrote", what, data)
		}
		if n != 1 {
			t.Errorf("the %s holds %s %d times", what, data, n)
		}
	}
}

// TestWriteRetriedAfterSerializationFailure makes the failure happen
// for sure: at repeatable read, AddSubmission waits on the form's row,
// which another transaction has updated; when that commits, PostgreSQL
// aborts AddSubmission's statement with 40001. The store runs it again,
// and the submission is stored once, at the next feed position.
func TestWriteRetriedAfterSerializationFailure(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pooledSchema(t)
	app := "formsapi_iso_" + strings.ToLower(rand.Text()[:10])
	s := openAt(t, withParam(dsn, "application_name", app), schema, "repeatable read")
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "f"})) // add form

	conn, err := pgx.Connect(ctx, dsn) // read committed, the server's default
	is.NoErr(err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, fmt.Sprintf("UPDATE %s.formsapi_forms SET feed_last = feed_last WHERE id = 'f'", quote(schema)))
	is.NoErr(err) // hold the form's row, changed

	added := make(chan error, 1)
	go func() {
		added <- s.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(`{"n":1}`)}, formsapi.Metadata{})
	}()
	pgtest.WaitForLock(t, dsn, "application_name = $1", app) // AddSubmission took its snapshot and waits on the row
	is.NoErr(tx.Commit(ctx))
	select {
	case err := <-added:
		is.NoErr(err) // retried after the 40001
	case <-time.After(30 * time.Second):
		t.Fatal("AddSubmission still waits after the row was released")
	}
	p, err := s.SyncSubmissions(ctx, "acct", "f", 0, 10)
	is.NoErr(err)
	is.Equal(len(p.Items), 1)  // stored once
	is.Equal(p.Next, int64(1)) // at the first position: the failed try took none
	is.Equal(string(p.Items[0].Data), `{"n":1}`)
}

// TestConcurrentFirstOpenAtStrictIsolation opens four stores at once on
// a schema that does not exist yet, at each strict level. A migration
// transaction at repeatable read would take its snapshot before it gets
// the migration lock, and then not see what the node before it created:
// the store migrates at read committed whatever the default.
func TestConcurrentFirstOpenAtStrictIsolation(t *testing.T) {
	t.Parallel()
	for _, level := range strictLevels {
		t.Run(strings.ReplaceAll(level, " ", "_"), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			dsn, schema := pgtest.Name(t)
			dsn = withParam(dsn, "default_transaction_isolation", url.PathEscape(level))
			stores := openAtOnce(t, dsn, schema, 4)
			is.Equal(migrationVersions(t, stores[0]), allVersions()) // each migration recorded once
		})
	}
}

// TestRateLimiterAtStrictIsolation: concurrent decisions on one key, whose
// upserts conflict at repeatable read and serializable, are retried, so
// none fails and none is counted twice.
func TestRateLimiterAtStrictIsolation(t *testing.T) {
	t.Parallel()
	for _, level := range strictLevels {
		t.Run(strings.ReplaceAll(level, " ", "_"), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			dsn, schema := pooledSchema(t)
			s := openAt(t, dsn, schema, level)
			l := s.RateLimiter()
			const goroutines, each = 8, 25
			p := ratelimit.Policy{Name: "strict", Quota: goroutines * each, Window: time.Hour}
			var wg sync.WaitGroup
			var allowed atomic.Int64
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range each {
						d, err := l.Allow(ctx, "account:busy", p)
						if err != nil {
							t.Errorf("allow at %s: %v", level, err)
							return
						}
						if d.Allowed {
							allowed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			is.Equal(allowed.Load(), int64(goroutines*each)) // every one decided, within the quota
			d, err := l.Allow(ctx, "account:busy", p)
			is.NoErr(err)
			is.True(!d.Allowed) // and each counted once: the quota is spent
		})
	}
}
