package ratelimit

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Options are what formsapi.WithRateLimit sets: how many requests one key
// and one account may have in flight at once, how many bytes of pages the
// whole handler may hold at once and how long it waits for a client that
// stops reading, and with a Limiter how many requests a key and an
// account may make per window. The zero value is the handler's default:
// the in-flight bounds below and no rate limit.
//
//	formsapi.WithRateLimit(ratelimit.Options{
//		Limiter: ratelimit.NewMemory(),
//		Policy:  ratelimit.Policy{Name: "default", Quota: 600, Window: time.Minute},
//	})
type Options struct {
	// Limiter decides whether each authenticated request fits its
	// account's budget, Policy, and a scoped key's own, Policy.PerKey().
	// nil: nothing is rate limited (the in-flight bounds still hold).
	Limiter Limiter
	// Policy is the account's budget. It must be valid (see
	// [Policy.Validate]) with a Limiter, and zero without one.
	Policy Policy
	// Timeout is the time the Limiter's dependency (its database, Redis)
	// has to answer one call once the call is sent; 0 means
	// DefaultTimeout. The handler gives each call a deadline of twice
	// Timeout: a limiter that keeps calls waiting in the node before it
	// sends them may spend half of it there, and past that refuses with
	// [ErrOverloaded] (see [Limiter]), which the handler answers 429. A
	// limiter that hangs thus costs a request at most 2*Timeout, whatever
	// the store's timeout. Choose it well above the limiter's usual
	// latency (a round trip) and well below the store timeout. Only with
	// a Limiter.
	Timeout time.Duration
	// FailClosed makes a failed Limiter (an error other than
	// ErrOverloaded: its dependency down, or no answer within Timeout
	// while it answered no other call for a second) answer 503 with
	// Retry-After: 1 instead of serving the request unlimited. Either way
	// the error is logged at level Error, at most once a second. A call
	// that timed out while the Limiter answered others is slow, not
	// failed: its request gets 429 with Retry-After: 1 either way (see
	// [Limiter]). Only with a Limiter.
	FailClosed bool
	// InFlightPerKey is the most requests of one API key the handler
	// serves at once; past it a request is answered 429 with
	// Retry-After: 1 at once. 0 means DefaultInFlightPerKey; a negative
	// value, no bound.
	InFlightPerKey int
	// InFlightPerAccount is the same bound for all the keys of one
	// account together. 0 means DefaultInFlightPerAccount; a negative
	// value, no bound.
	InFlightPerAccount int
	// BytesInFlight bounds the memory of the pages the whole handler
	// holds at once, every key and account together: a request reserves
	// its page's byte budget before the store reads the page, keeps what
	// the page and its gzip coding take once built, and gives it back
	// when the answer is written (or its client is cut off). A request
	// that finds no room waits for it at most a second, then is answered
	// 503 Service Unavailable with Retry-After: 1, having cost the store
	// nothing. One account holds at most half of it (or one page, when
	// half holds none), so that one account's stalled clients leave the
	// other half to every other account. 0 means DefaultBytesInFlight();
	// a negative value, no bound. A value below one page's budget lets
	// one page at a time be built.
	BytesInFlight int
	// StallTimeout is how long the handler waits for a client that takes
	// nothing of its answer: a body is written in pieces of 64 KiB, and
	// each must be taken by the client (into the connection's buffers)
	// within StallTimeout, or the connection is closed and the page's
	// memory freed. A client that reads holds a page only as long as it
	// takes to read it; one that stops reading, at most StallTimeout
	// past the last piece it took. The server's own WriteTimeout, if
	// any, still bounds the whole answer. 0 means DefaultStallTimeout; a
	// negative value, none (only the server's WriteTimeout).
	StallTimeout time.Duration
}

// The defaults of [Options]. A key with 32 requests in flight, each under
// the default page budget, already holds more than any integration
// needs (a sync job pages one request at a time; a browser opens six
// connections to a host); an account has room for four such keys at
// their bound. A flood of one key, however many connections it opens,
// has at most that many requests past the bound, and those reach the
// limiter and the store; the rest are answered at once, without either.
const (
	DefaultTimeout            = 250 * time.Millisecond
	DefaultInFlightPerKey     = 32
	DefaultInFlightPerAccount = 128
)

// DefaultStallTimeout is the StallTimeout of [Options] unless set: 64 KiB
// in 5 s is about 100 kbit/s, slower than any link a client of the API
// pages over, and a client that reads nothing is cut off within seconds.
const DefaultStallTimeout = 5 * time.Second

// DefaultBytesInFlight returns the BytesInFlight of [Options] unless set:
// 16 MiB for each CPU the process may use (runtime.GOMAXPROCS), at least
// 32 MiB. A page under the default budget of 4 MiB reserves about
// 4.6 MiB while it is read, so this lets three or more pages per CPU be
// built at once, more than the CPUs can encode, and bounds what slow or
// stalled clients can pin to a few tens of MiB (about twice that in
// resident memory, with the garbage collector's headroom).
func DefaultBytesInFlight() int {
	return max(32<<20, 16<<20*runtime.GOMAXPROCS(0))
}

// Validate returns an error if o cannot be applied: a Limiter with an
// invalid Policy, a Policy, Timeout or FailClosed without a Limiter, or a
// negative Timeout.
func (o Options) Validate() error {
	if o.Timeout < 0 {
		return fmt.Errorf("ratelimit: options: timeout %s, want 0 (the default) or more", o.Timeout)
	}
	if o.Limiter == nil {
		if o.Policy != (Policy{}) || o.Timeout != 0 || o.FailClosed {
			return errors.New("ratelimit: options: a Policy, Timeout or FailClosed without a Limiter")
		}
		return nil
	}
	return o.Policy.Validate()
}
