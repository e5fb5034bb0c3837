package sqlitestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// jumpingClock returns a clock that moves on by step at each reading,
// and a ticker that never ticks: each row a start's step counts makes a
// line, with no time waited for.
func jumpingClock(step time.Duration) (func() time.Time, func(time.Duration) (<-chan time.Time, func())) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			now = now.Add(step)
			return now
		}, func(time.Duration) (<-chan time.Time, func()) {
			return nil, func() {}
		}
}

// logLines decodes a JSON log.
func logLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// TestStartLogsProgress: building the search index of a file of
// SearchSeed's submissions (Open with WithSearchIndex) logs the step under way, rows
// done of total and the rate, as the rows go (on a clock that moves 6 s
// a reading, past the 5 s between lines), and its end with every row
// done; an open with nothing to do logs nothing, and no line names the
// file.
func TestStartLogsProgress(t *testing.T) {
	path, _ := seededPath(t, storetest.SearchSeed()) // loaded, the index off
	is := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	var log bytes.Buffer
	now, tick := jumpingClock(6 * time.Second)
	on, err := sqlitestore.Open(path, sqlitestore.WithSearchIndex(), sqlitestore.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))),
		sqlitestore.WithProgressClock(now, tick))
	is(err)
	is(on.Close())
	lines := logLines(t, &log)
	total := len(storetest.SearchSeed().Submissions)
	var under, ended int
	var last float64
	for _, l := range lines {
		if strings.Contains(fmt.Sprint(l), path) {
			t.Errorf("a log line names the file: %v", l)
		}
		if l["step"] != "build the search index" || l["store"] != "sqlitestore" || l["rows_total"] != float64(total) {
			t.Errorf("line %v: want the search index's build of %d rows", l, total)
			continue
		}
		done, _ := l["rows_done"].(float64)
		if done < last {
			t.Errorf("rows done went back from %v to %v", last, done)
		}
		last = done
		if _, ok := l["rows_per_s"]; !ok {
			t.Errorf("line %v has no rate", l)
		}
		switch l["msg"] {
		case "start: step under way":
			under++
		case "start: step ended":
			ended++
			if done != float64(total) || l["failed"] != false {
				t.Errorf("end line %v: want %d rows done, not failed", l, total)
			}
		}
	}
	if under < 2 || ended != 1 {
		t.Fatalf("%d lines under way and %d ended, want at least 2 and 1:\n%s", under, ended, log.String())
	}

	log.Reset()
	again, err := sqlitestore.Open(path, sqlitestore.WithSearchIndex(), sqlitestore.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))),
		sqlitestore.WithProgressClock(now, tick))
	is(err)
	is(again.Close())
	if log.Len() != 0 {
		t.Errorf("an open with nothing to do logged:\n%s", log.String())
	}
}

// TestMigrateAhead: Migrate brings a file to the current schema and
// builds the search index with WithSearchIndex, so that a later Open,
// without the option, finds it on and has nothing left to do; a Migrate
// whose ctx has ended does nothing.
func TestMigrateAhead(t *testing.T) {
	path := dbPath(t)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := sqlitestore.Migrate(canceled, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("Migrate with an ended ctx: %v, want context.Canceled", err)
	}
	if err := sqlitestore.Migrate(ctx, path, sqlitestore.WithSearchIndex(), sqlitestore.WithLogger(nil)); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	now, tick := jumpingClock(6 * time.Second)
	s, err := sqlitestore.Open(path, sqlitestore.WithLogger(slog.New(slog.NewJSONHandler(&log, nil))), sqlitestore.WithProgressClock(now, tick))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if log.Len() != 0 {
		t.Errorf("Open after Migrate logged steps:\n%s", log.String())
	}
	if err := s.AddForm(ctx, "a", formsapi.Form{ID: "f"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(`{"name":"Zoë"}`)}, formsapi.Metadata{}); err != nil {
		t.Fatal(err)
	}
	// With the search index on, a write's keys hold its trigrams, which
	// a fold enters into the index; off, none.
	var n int
	if err := sqlitestore.ReadDB(s).QueryRow(`SELECT count(*) FROM formsapi_submissions s, json_each(s.find_keys) j WHERE j.value < 0`).Scan(&n); err != nil || n == 0 {
		t.Errorf("%d trigram keys after a write (%v): the search index is not on", n, err)
	}
}
