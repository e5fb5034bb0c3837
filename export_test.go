package formsapi

import (
	"context"
	"time"
)

// WithClock sets the handler's clock (of grant expiry and log
// throttling), for tests.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}

// WithDeadlineClock sets the clock the export's write deadlines are
// computed from (its chunks'), for tests: a real connection's deadlines
// are real time's, so only a test's writer can take another.
func WithDeadlineClock(now func() time.Time) Option {
	return func(c *config) { c.deadlineNow = now }
}

// LogInterval is the least time between two log lines of one kind of
// failure.
const LogInterval = logInterval

// WithoutRefusalPacing answers refused keys without waiting for their
// turn (authfail.go), for fuzz targets that send thousands of refused
// keys a second through one handler.
func WithoutRefusalPacing() Option {
	return func(c *config) { c.sleep = func(context.Context, time.Duration) {} }
}

// WithRoomTimer sets the timer of a request's wait for room for its page
// (room.go), for tests: it returns a channel that fires when the wait
// ends, and a function that stops it.
func WithRoomTimer(timer func(time.Duration) (<-chan time.Time, func() bool)) Option {
	return func(c *config) { c.roomTimer = timer }
}

// WithRoomProbe sets *held, when the handler is made, to a function that
// returns the bytes of pages the handler holds now.
func WithRoomProbe(held *func() int64) Option {
	return func(c *config) { c.roomProbe = held }
}

// RoomReservation is what a page reserves before it is read under a
// page budget of pageBytes.
func RoomReservation(pageBytes int) int {
	return (&api{cfg: config{pageBytes: pageBytes}}).pageReservation()
}

// RoutePaths returns the path of every route of the table (route.go), in
// the order the mux registers them.
func RoutePaths() []string {
	var paths []string
	for _, rt := range routes {
		paths = append(paths, rt.path)
	}
	return paths
}

// WithWaitTimer sets the timer of a sync request's wait (wait.go), for
// tests: it returns a channel closed, or sent on, when the wait's time
// is up.
func WithWaitTimer(timer func(time.Duration) <-chan struct{}) Option {
	return func(c *config) { c.waitTimer = timer }
}

// WithWaitHook sets a function a waiting sync request calls once it has
// read nothing, left flight and its room, and is about to block.
func WithWaitHook(f func()) Option {
	return func(c *config) { c.waitHook = f }
}

// MaxWait is the longest wait= a sync request may ask for, in seconds.
const MaxWait = maxWait

// WithWaitProbe sets *waiting, when the handler is made, to a function
// that returns how many sync requests wait in it now.
func WithWaitProbe(waiting *func() int) Option {
	return func(c *config) { c.waitProbe = waiting }
}
