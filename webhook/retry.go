package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Schedule is the wait after each failed attempt of an event before the
// next: after the first failure 5 s, then 5 min, 30 min, 2 h, 5 h, 10 h,
// and 10 h after every later one, as Svix retries, each with ±20% jitter.
// An event is never given up while the endpoint is enabled: its stream
// keeps its place in commit order, and the endpoint is disabled instead
// once it has had no success for [FailingLimit].
var Schedule = [...]time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// Jitter is the part of a scheduled wait by which it is moved at random,
// either way: a wait of 5 min is 4 to 6 min.
const Jitter = 0.2

// ThrottledMin is the shortest wait after a 429 or an attempt that timed
// out, whatever the schedule says: a receiver that is overloaded gets a
// minute.
const ThrottledMin = 60 * time.Second

// FailingLimit is how long an endpoint may fail without one success
// before the dispatcher disables it; the host sees why and may enable it
// again.
const FailingLimit = 5 * 24 * time.Hour

// Outcome is the class of an attempt's result, as metrics count them.
type Outcome string

// The outcomes of an attempt.
const (
	OutcomeSuccess     Outcome = "success"      // 2xx: the event is delivered, the cursor moves
	OutcomeRedirect    Outcome = "redirect"     // 3xx: a failure, never followed
	OutcomeClientError Outcome = "client_error" // 4xx other than 410 and 429
	OutcomeGone        Outcome = "gone"         // 410: the endpoint is disabled at once
	OutcomeThrottled   Outcome = "throttled"    // 429: at least ThrottledMin before the next
	OutcomeServerError Outcome = "server_error" // 5xx, or a status outside 200-599
	OutcomeTimeout     Outcome = "timeout"      // no answer within the attempt's timeout: at least ThrottledMin
	OutcomeNetwork     Outcome = "network"      // no connection, TLS failure, a refused address, a cut answer
)

// classify returns the outcome of an attempt that got status (0 when it
// got no answer) or err.
func classify(status int, err error) Outcome {
	switch {
	case err != nil && isTimeout(err):
		return OutcomeTimeout
	case err != nil:
		return OutcomeNetwork
	case status >= 200 && status < 300:
		return OutcomeSuccess
	case status >= 300 && status < 400:
		return OutcomeRedirect
	case status == http.StatusGone:
		return OutcomeGone
	case status == http.StatusTooManyRequests:
		return OutcomeThrottled
	case status >= 400 && status < 500:
		return OutcomeClientError
	}
	return OutcomeServerError
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// retryDelay returns the wait after the failed-th failed attempt of an
// event (from 1) whose outcome was o: the schedule's step, moved by
// jitter (rnd in [0, 1) picks where in ±Jitter), at least ThrottledMin
// after a 429 or a timeout, and then, when the answer carried a
// Retry-After of ra (hasRA), ra held within [that wait, twice it].
func retryDelay(failed int, o Outcome, ra time.Duration, hasRA bool, rnd float64) time.Duration {
	step := Schedule[min(max(failed, 1), len(Schedule))-1]
	d := time.Duration(float64(step) * (1 - Jitter + 2*Jitter*rnd))
	if o == OutcomeThrottled || o == OutcomeTimeout {
		d = max(d, ThrottledMin)
	}
	if hasRA {
		d = min(max(ra, d), 2*d)
	}
	return d
}

// retryAfter reads a Retry-After header, in seconds or as an HTTP date
// (relative to now); ok is false when there is none or it is malformed.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 || n > int64(365*24*time.Hour/time.Second) {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
