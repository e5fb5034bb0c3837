package formsapi

// Logs of a failing dependency are throttled. When the store or the rate
// limiter is down, every request fails the same way, and a line per
// request buries everything else in the log (a 10 s limiter outage once
// wrote about 28,000 ERROR lines). So each kind of failure writes at most
// one line per logInterval, per handler; a line that gets through after
// others were held back carries their number as the attribute
// "suppressed". Panics are not throttled: each one is a bug, with its
// own stack.

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"
)

// logInterval is the least time between two lines of one kind.
const logInterval = time.Second

// logKind is a kind of failure whose lines are throttled together.
type logKind int

const (
	logStoreFailed   logKind = iota // the store or the key resolver failed: 500
	logStoreTimedOut                // the store ran past its deadline: 503
	logClientGone                   // the client left before the answer
	logLimiterFailed                // the rate limiter could not decide
	logLimiterBusy                  // the rate limiter's queue in this node was too long: 429
	numLogKinds
)

// throttle lets one line through per logInterval and counts the others.
// It takes no lock: two atomics, and a compare-and-swap that one of many
// concurrent failures wins.
type throttle struct {
	next       atomic.Int64 // Unix nanoseconds from which a line may go
	suppressed atomic.Int64 // lines held back since the last that went
}

// allow reports whether a line may be written at now and, if so, how many
// were held back before it. A line held back while another goes may be
// counted on the line after that one; none is ever lost from the count.
func (t *throttle) allow(now time.Time) (suppressed int64, ok bool) {
	n := now.UnixNano()
	next := t.next.Load()
	if n < next || !t.next.CompareAndSwap(next, n+int64(logInterval)) {
		t.suppressed.Add(1)
		return 0, false
	}
	return t.suppressed.Swap(0), true
}

// logThrottled writes one line about r like log, unless a line of the same
// kind went less than logInterval ago; then it only counts it.
func (a *api) logThrottled(kind logKind, w http.ResponseWriter, r *http.Request, level slog.Level, msg string, attrs ...slog.Attr) {
	if !a.logger().Enabled(r.Context(), level) {
		return
	}
	n, ok := a.throttles[kind].allow(a.now())
	if !ok {
		return
	}
	if n > 0 {
		attrs = append(attrs, slog.Int64("suppressed", n))
	}
	a.log(w, r, level, msg, attrs...)
}
