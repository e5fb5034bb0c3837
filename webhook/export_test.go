package webhook

import (
	"context"
	"time"
)

// WithRand sets where the retry schedule's jitter comes from (rand.Float64
// unless set), so that a test knows each wait exactly.
func WithRand(rnd func() float64) Option {
	return func(c *config) { c.rnd = rnd }
}

// WithTicks makes Run poll when ticks delivers, not every poll interval.
func WithTicks(ticks <-chan time.Time) Option {
	return func(c *config) {
		c.ticker = func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }
	}
}

// WithPassDone has Run call f each time it learns that a pass ended,
// before it goes on.
func WithPassDone(f func()) Option {
	return func(c *config) { c.passDone = f }
}

// RefOf returns the feed's ref of the submission at position pos of
// form, of incarnation inc, as the handler with cursorSecret gives it:
// tests map refs back to positions with it.
func RefOf(cursorSecret []byte, account, form string, inc uint64, pos int64) string {
	return newTokens(cursorSecret).ref(account, form, inc, pos)
}

// IncarnationOf returns the incarnation of form that feed's pages give
// (0: none), and panics if it cannot be read.
func IncarnationOf(feed Feed, account, form string) uint64 {
	p, err := feed.SyncSubmissions(context.Background(), account, form, 0, 1)
	if err != nil {
		panic(err)
	}
	return p.Incarnation
}
