package stored

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultProgressEvery is how often a store logs a long start-up step's
// progress unless Progress.Every says otherwise.
const DefaultProgressEvery = 5 * time.Second

// Progress logs how far the long steps of a store's start have got (its
// migrations, re-encoding, indexing, the search index's build), so that
// a start that takes minutes says what it is doing: a step that ends
// within Every logs nothing, one that runs longer logs a line at least
// every Every while it runs (the step, rows done of total when it counts
// them, the rate and the time so far) and one when it ends. A line never
// holds an error's text or anything stored (nothing internal reaches the
// logs): the caller returns the error.
//
// Two things make a line: rows counted with Step.Add once Every has
// passed on Now's clock since the last line, and a tick of Tick's
// ticker, every Every, for a step that is one long statement and counts
// nothing while it runs. Tests give Now a clock they move, and Tick a
// channel they send on.
type Progress struct {
	Logger *slog.Logger                                                // nil: log nothing
	Every  time.Duration                                               // 0: DefaultProgressEvery
	Now    func() time.Time                                            // nil: time.Now
	Tick   func(every time.Duration) (c <-chan time.Time, stop func()) // nil: a time.Ticker
	Attrs  []slog.Attr                                                 // on every line: the store's, its schema's
}

// The steps of a start that may take long, as the log names them: the
// stores' Begin calls name them with these (StepMigration followed by the
// migration's name).
const (
	StepLock        = "wait for another node's migration"
	StepMigration   = "migration "
	StepFields      = "fill the field table"
	StepReencode    = "re-encode stored submissions"
	StepIndex       = "index submitted values"
	StepSortIndex   = "index sort keys"
	StepSortFields  = "index the sort index's added fields"
	StepSortDrop    = "drop the sort index's removed fields"
	StepSearchIndex = "build the search index"
	StepFoldTails   = "fold the index's unfolded tails"
)

// ForStore returns a copy of p for the start of the store named store
// (its name on every line): its Logger slog.Default() when p has none,
// unless quiet (the host turned the logs off).
func (p Progress) ForStore(store string, quiet bool) *Progress {
	if p.Logger == nil && !quiet {
		p.Logger = slog.Default()
	}
	p.Attrs = append(slices.Clip(p.Attrs), slog.String("store", store))
	return &p
}

// Step is one step under way; its methods are safe for concurrent use.
type Step struct {
	p       *Progress
	name    string
	total   int64 // -1: not counted
	done    atomic.Int64
	start   time.Time
	mu      sync.Mutex
	last    time.Time // of the last line, or the start
	logged  bool      // a line of the step has been logged
	stop    func()
	stopped chan struct{}
}

// Begin starts the step name, which has total rows to go through (-1
// when it does not count them), and its ticker. End must follow.
func (p *Progress) Begin(name string, total int64) *Step {
	s := &Step{p: p, name: name, total: total}
	if p == nil || p.Logger == nil {
		return s
	}
	s.start = p.now()
	s.last = s.start
	every := p.every()
	var c <-chan time.Time
	if p.Tick != nil {
		c, s.stop = p.Tick(every)
	} else {
		t := time.NewTicker(every)
		c, s.stop = t.C, t.Stop
	}
	s.stopped = make(chan struct{})
	done := make(chan struct{})
	stop := s.stop
	s.stop = func() { stop(); close(done); <-s.stopped }
	go func() {
		defer close(s.stopped)
		for {
			select {
			case <-done:
				return
			case <-c:
				s.mu.Lock()
				s.line(p.now())
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// Add counts n more rows done, and logs a line if Every has passed since
// the last one.
func (s *Step) Add(n int64) {
	s.done.Add(n)
	if s.p == nil || s.p.Logger == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.p.now(); now.Sub(s.last) >= s.p.every() {
		s.line(now)
	}
}

// End ends the step, failed when err is not nil, and logs its last line
// if it logged any before.
func (s *Step) End(err error) {
	if s.p == nil || s.p.Logger == nil {
		return
	}
	s.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.logged {
		return
	}
	now := s.p.now()
	attrs := append(s.attrs(now), slog.Bool("failed", err != nil))
	s.p.Logger.LogAttrs(context.Background(), slog.LevelInfo, "start: step ended", attrs...)
}

// line logs where the step is. It needs s.mu.
func (s *Step) line(now time.Time) {
	s.last, s.logged = now, true
	s.p.Logger.LogAttrs(context.Background(), slog.LevelInfo, "start: step under way", s.attrs(now)...)
}

func (s *Step) attrs(now time.Time) []slog.Attr {
	elapsed := now.Sub(s.start)
	done := s.done.Load()
	attrs := append([]slog.Attr{}, s.p.Attrs...)
	attrs = append(attrs, slog.String("step", s.name))
	if s.total >= 0 {
		attrs = append(attrs, slog.Int64("rows_done", done), slog.Int64("rows_total", s.total))
		if elapsed > 0 {
			attrs = append(attrs, slog.Int64("rows_per_s", int64(float64(done)/elapsed.Seconds())))
		}
	}
	return append(attrs, slog.Float64("elapsed_s", float64(elapsed.Milliseconds())/1000))
}

func (p *Progress) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Progress) every() time.Duration {
	if p.Every > 0 {
		return p.Every
	}
	return DefaultProgressEvery
}
