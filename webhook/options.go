package webhook

import (
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/observe"
)

// Feed is where events come from: the host's store, read as the API
// reads it (memstore, sqlitestore and pgstore are each one). Endpoints
// following every form of an account list them with ListForms.
type Feed interface {
	formsapi.Store
	formsapi.FeedStore
}

// Defaults of a Dispatcher, each changed by an Option.
const (
	// DefaultLease is how long a claim lasts unless renewed: each pass
	// over an endpoint, and each cursor write, renews it. A node that
	// dies loses its endpoints to another node within it.
	DefaultLease = 30 * time.Second
	// DefaultPollInterval is how often a dispatcher looks for new feed
	// entries of the endpoints it holds, and for endpoints to claim. It
	// is also the longest a pass over an endpoint starts attempts with
	// the settings it read: Disable and RotateSecret apply within it.
	DefaultPollInterval = time.Second
	// DefaultPerEndpoint is how many attempts to one endpoint may be in
	// flight at once (each on another form: a form has one at a time).
	DefaultPerEndpoint = 4
	// DefaultPerAccount is the share of the attempt slots the endpoints
	// of one account are sure of, all of them together: a quarter of
	// DefaultTotal. An account goes past it only while a share stays free
	// (see WithAccountConcurrency), so the endpoints of accounts that never
	// answer always leave a share to every other account.
	DefaultPerAccount = 16
	// DefaultTotal is how many attempts a dispatcher makes at once, to
	// all endpoints.
	DefaultTotal = 64
	// DefaultMaxEndpoints is how many endpoints one dispatcher holds at
	// most; others are left to other nodes.
	DefaultMaxEndpoints = 256
	// DefaultBatch is how many feed entries a dispatcher reads at once
	// for one form.
	DefaultBatch = 100
)

// config is what Options set, for a Dispatcher and for Endpoints.
type config struct {
	now          func() time.Time
	rnd          func() float64
	log          *slog.Logger
	obs          observe.DeliveryObserver
	egress       Egress
	apiBase      string
	lease, poll  time.Duration
	perEndpoint  int
	perAccount   int
	total        int
	maxEndpoints int
	batch        int
	retryScale   float64
	signer       formsapi.AttachmentSigner                      // from WithAttachmentURLs; nil: URLs as stored
	ticker       func(time.Duration) (<-chan time.Time, func()) // Run's polls; a test's own through export_test.go
	passDone     func()                                         // tests only: called by Run when it learns a pass ended
}

func newConfig(opts []Option) config {
	c := config{
		now: time.Now, rnd: rand.Float64, log: slog.New(slog.DiscardHandler),
		lease: DefaultLease, poll: DefaultPollInterval,
		perEndpoint: DefaultPerEndpoint, perAccount: DefaultPerAccount, total: DefaultTotal, maxEndpoints: DefaultMaxEndpoints, batch: DefaultBatch, retryScale: 1,
		ticker: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		},
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Option configures a Dispatcher or Endpoints.
type Option func(*config)

// WithClock sets the notion of now: attempts' timestamps, retry times,
// leases, the five days of FailingLimit, rotations' overlaps and
// endpoints' CreatedAt. time.Now unless set; tests move a clock of their
// own instead of waiting. Leases are compared across nodes, so nodes'
// clocks must agree (NTP), as the feed's retention already asks. It
// panics if now is nil.
func WithClock(now func() time.Time) Option {
	if now == nil {
		panic("webhook: WithClock with a nil clock")
	}
	return func(c *config) { c.now = now }
}

// WithAttachmentURLs has the dispatcher send, as the fileUrl of each
// attachment of a submission.created event, the URL sign makes of the
// stored attachment, as the handler's formsapi.WithAttachmentURLs does
// for pages: give both the same signer. An event is signed afresh for
// every attempt, as of the attempt's time, so a retry hours later
// carries URLs valid from then for the signer's whole lifetime; only the
// URLs differ between attempts (the webhook-id, and the rest of the
// body, do not). A thin event carries no submission: its URL leads to a
// feed page, which the handler signs. A signer's error holds the event
// back, logged without the URL, and the stream tries again on its next
// pass; it counts as no attempt. It panics if sign is nil.
func WithAttachmentURLs(sign formsapi.AttachmentSigner) Option {
	if sign == nil {
		panic("webhook: WithAttachmentURLs with a nil signer")
	}
	return func(c *config) { c.signer = sign }
}

// WithLogger sets where the dispatcher logs failures of its store and
// feed (never a URL, a secret or a body); nothing unless set.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

// WithObserver sets who learns of every attempt and every endpoint the
// dispatcher disables (formsotel.Observer is one).
func WithObserver(o observe.DeliveryObserver) Option {
	return func(c *config) { c.obs = o }
}

// WithAPIBase sets the public URL of the read API (such as
// https://api.example.com/api) that thin events' URLs start with;
// without it they are relative (/v1/forms/…).
func WithAPIBase(base string) Option {
	return func(c *config) { c.apiBase = base }
}

// WithEgress sets where deliveries may go, checked when an endpoint is
// added and at every attempt (see Egress): the zero Egress, https to
// public addresses, unless set. Its Timeout bounds each attempt
// (DefaultAttemptTimeout unless set): an endpoint that never answers (a
// black hole) holds one of its attempt slots that long.
func WithEgress(e Egress) Option {
	return func(c *config) { c.egress = e }
}

// WithLease sets how long a claim lasts unless renewed (DefaultLease). It
// must be well above the attempt timeout: a pass renews it between
// attempts.
func WithLease(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.lease = d
		}
	}
}

// WithPollInterval sets how often Run looks for new entries and
// endpoints (DefaultPollInterval), and so how long a pass over an
// endpoint starts attempts with the settings it read: Disable and
// RotateSecret apply within it.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.poll = d
		}
	}
}

// WithConcurrency sets how many attempts may be in flight to one endpoint
// and in all (DefaultPerEndpoint and DefaultTotal); a value below 1 keeps
// its default.
func WithConcurrency(perEndpoint, total int) Option {
	return func(c *config) {
		if perEndpoint > 0 {
			c.perEndpoint = perEndpoint
		}
		if total > 0 {
			c.total = total
		}
	}
}

// WithAccountConcurrency sets the share of the attempt slots that the
// endpoints of one account are sure of, all its endpoints together
// (DefaultPerAccount). An account goes past its share only while a
// share's worth of slots stays free after it, so that its endpoints that
// never answer or answer slowly keep no other account waiting, and one
// busy account still uses all but one share of the total (48 of 64 by
// default). A value below 1 keeps the default; one above the total is the
// total (a host with one account gives it every slot so). Slots that free
// go first to the account with the fewest attempts in flight.
func WithAccountConcurrency(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.perAccount = n
		}
	}
}

// WithMaxEndpoints sets how many endpoints a dispatcher holds at most
// (DefaultMaxEndpoints).
func WithMaxEndpoints(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxEndpoints = n
		}
	}
}

// WithRetryScale multiplies every wait between attempts (the Schedule,
// ThrottledMin, a Retry-After) by f, for load runs and tests that must
// see retries come in seconds rather than hours; f must be above 0, and
// a host never sets it. FailingLimit is not scaled.
func WithRetryScale(f float64) Option {
	return func(c *config) {
		if f > 0 {
			c.retryScale = f
		}
	}
}
