package stored

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// records is a slog.Handler that keeps every record, and sends each on
// got if it is not nil.
type records struct {
	mu  sync.Mutex
	all []slog.Record
	got chan slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.all = append(r.all, rec)
	r.mu.Unlock()
	if r.got != nil {
		r.got <- rec
	}
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) lines() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Record(nil), r.all...)
}

func attrsOf(rec slog.Record) map[string]any {
	m := map[string]any{}
	rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Any(); return true })
	return m
}

// noTicks is a Tick that never ticks.
func noTicks(time.Duration) (<-chan time.Time, func()) { return nil, func() {} }

// TestProgressQuietWhenQuick: a step that ends within Every logs nothing.
func TestProgressQuietWhenQuick(t *testing.T) {
	t.Parallel()
	h := &records{}
	now := time.Unix(0, 0)
	p := &Progress{Logger: slog.New(h), Now: func() time.Time { return now }, Tick: noTicks}
	s := p.Begin("index", 1000)
	now = now.Add(4 * time.Second)
	s.Add(1000)
	s.End(nil)
	if n := len(h.lines()); n != 0 {
		t.Errorf("a step of 4 s logged %d lines, want none", n)
	}
	var quiet *Progress
	quiet.Begin("x", 1).End(nil) // a nil Progress logs nothing and does not fail
	(&Progress{}).Begin("x", 1).End(errors.New("x"))
}

// TestProgressLinesAsRowsGo: once Every has passed since the last line,
// the rows counted make a line with the step, rows done of total, the
// rate and the time so far; the end makes a last one.
func TestProgressLinesAsRowsGo(t *testing.T) {
	t.Parallel()
	h := &records{}
	now := time.Unix(0, 0)
	p := &Progress{Logger: slog.New(h), Now: func() time.Time { return now }, Tick: noTicks, Attrs: []slog.Attr{slog.String("store", "test")}}
	s := p.Begin("search index", 2000)
	now = now.Add(3 * time.Second)
	s.Add(500) // 3 s: no line yet
	now = now.Add(3 * time.Second)
	s.Add(500) // 6 s: a line
	now = now.Add(time.Second)
	s.Add(500) // 1 s after it: none
	now = now.Add(5 * time.Second)
	s.Add(500) // 6 s after it: a line
	now = now.Add(time.Second)
	s.End(nil)
	lines := h.lines()
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want 3: two under way and the end", len(lines))
	}
	want := []map[string]any{
		{"store": "test", "step": "search index", "rows_done": int64(1000), "rows_total": int64(2000), "rows_per_s": int64(166), "elapsed_s": 6.0},
		{"store": "test", "step": "search index", "rows_done": int64(2000), "rows_total": int64(2000), "rows_per_s": int64(166), "elapsed_s": 12.0},
		{"store": "test", "step": "search index", "rows_done": int64(2000), "rows_total": int64(2000), "rows_per_s": int64(153), "elapsed_s": 13.0, "failed": false},
	}
	for i, rec := range lines {
		got := attrsOf(rec)
		for k, v := range want[i] {
			if got[k] != v {
				t.Errorf("line %d (%s): %s = %v, want %v", i, rec.Message, k, got[k], v)
			}
		}
	}
	if lines[2].Message != "start: step ended" {
		t.Errorf("last line %q, want the end", lines[2].Message)
	}
}

// TestProgressTicksWhileAStatementRuns: a step that counts nothing
// (one long statement) logs a line on every tick of its ticker, and
// stops the ticker when it ends.
func TestProgressTicksWhileAStatementRuns(t *testing.T) {
	t.Parallel()
	h := &records{got: make(chan slog.Record)}
	now := time.Unix(0, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ticks := make(chan time.Time)
	stopped := false
	p := &Progress{Logger: slog.New(h), Now: clock, Tick: func(every time.Duration) (<-chan time.Time, func()) {
		if every != DefaultProgressEvery {
			t.Errorf("ticker every %s, want %s", every, DefaultProgressEvery)
		}
		return ticks, func() { stopped = true }
	}}
	s := p.Begin("migration 0017_find.sql", -1)
	for i := 1; i <= 2; i++ {
		mu.Lock()
		now = now.Add(5 * time.Second)
		mu.Unlock()
		ticks <- now
		rec := <-h.got
		if a := attrsOf(rec); a["step"] != "migration 0017_find.sql" || a["elapsed_s"] != float64(5*i) || a["rows_done"] != nil {
			t.Errorf("tick %d: %s %v, want the step at %d s without rows", i, rec.Message, a, 5*i)
		}
	}
	go func() { <-h.got }() // the end's line
	s.End(errors.New("a failure"))
	if !stopped {
		t.Error("the ticker was not stopped")
	}
	lines := h.lines()
	if a := attrsOf(lines[len(lines)-1]); a["failed"] != true {
		t.Errorf("end line %v, want failed", a)
	}
}
