package pgstore_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// records is a slog.Handler that keeps every record's attributes and
// message, and sends each on got.
type records struct {
	mu  sync.Mutex
	all []map[string]any
	got chan map[string]any
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	m := map[string]any{"msg": rec.Message}
	rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Any(); return true })
	r.mu.Lock()
	r.all = append(r.all, m)
	r.mu.Unlock()
	r.got <- m
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// TestStartLogsProgress: a node that starts while another migrates the
// schema (holds its migration lock) says it waits, on each tick of its
// ticker; once the lock is free, building the search index of
// SearchSeed's submissions logs rows done of total and the rate as the
// rows go (on a clock that moves 6 s a reading, past the 5 s between
// lines), and its end with every row done.
func TestStartLogsProgress(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
	load(t, mustOpenIn(t, dsn, schema), storetest.SearchSeed())
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", pgstore.LockKey(schema)); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(6 * time.Second); return now }
	ticks := make(chan time.Time)
	h := &records{got: make(chan map[string]any, 1000)}
	opened := make(chan error, 1)
	go func() {
		s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema), pgstore.WithSearchIndex(), pgstore.WithLogger(slog.New(h)),
			pgstore.WithProgressClock(clock, func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }))
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	pgtest.WaitForLock(t, dsn, "query = $1", "SELECT pg_advisory_xact_lock($1)")
	ticks <- time.Time{}
	if l := <-h.got; l["msg"] != "start: step under way" || l["step"] != "wait for another node's migration" || l["store"] != "pgstore" {
		t.Fatalf("on a tick while the lock is held: %v, want the wait under way", l)
	}
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock($1)", pgstore.LockKey(schema)); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	total := float64(len(storetest.SearchSeed().Submissions))
	var waitEnded, under, ended bool
	for _, l := range h.all[1:] {
		switch {
		case l["step"] == "wait for another node's migration" && l["msg"] == "start: step ended":
			waitEnded = true
		case l["step"] == "build the search index" && l["rows_total"] == int64(total):
			if _, ok := l["rows_per_s"]; !ok {
				t.Errorf("line %v has no rate", l)
			}
			if l["msg"] == "start: step ended" {
				ended = l["rows_done"] == int64(total) && l["failed"] == false
			} else {
				under = true
			}
		default:
			t.Errorf("line %v", l)
		}
	}
	if !waitEnded || !under || !ended {
		t.Errorf("the wait's end %v, the build under way %v and ended with every row %v, want all; lines: %v", waitEnded, under, ended, h.all)
	}
}

// TestMigrateAhead: Migrate brings a new schema to the current version
// with the search index on, so that a store opened later without
// WithSearchIndex finds it on; a Migrate whose ctx has ended does
// nothing.
func TestMigrateAhead(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Name(t)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := pgstore.Migrate(canceled, dsn, pgstore.WithSchema(schema)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Migrate with an ended ctx: %v, want context.Canceled", err)
	}
	if err := pgstore.Migrate(ctx, dsn, pgstore.WithSchema(schema), pgstore.WithSearchIndex(), pgstore.WithLogger(nil)); err != nil {
		t.Fatal(err)
	}
	s := mustOpenIn(t, dsn, schema)
	var on bool
	if err := pgstore.Pool(s).QueryRow(ctx, `SELECT value = 1 FROM `+quote(schema)+`.formsapi_settings WHERE name = 'search_index'`).Scan(&on); err != nil || !on {
		t.Errorf("after Migrate with WithSearchIndex: search index on %v (%v), want on", on, err)
	}
}
