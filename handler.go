package formsapi

import (
	"context"
	"crypto/rand"
	_ "embed"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/observe"
)

// Defaults for the page size, changeable with [WithPageSize].
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

type config struct {
	logger       *slog.Logger
	defaultLimit int
	maxLimit     int
	pageBytes    int
	cursorSecret []byte
	storeTimeout time.Duration
	baseURL      string                               // from WithBaseURL, checked; "" means from the request
	feed         FeedStore                            // from WithFeed
	now          func() time.Time                     // the clock; nil means time.Now (tests set it)
	deadlineNow  func() time.Time                     // the export's clock of write deadlines; nil means time.Now (tests set it)
	observer     observe.Observer                     // from WithObserver
	sleep        func(context.Context, time.Duration) // nil: a timer; tests set it
	access       accessConfig                         // keys' scopes and rate limits (access.go)
	cors         *corsPolicy                          // from WithCORS; nil: no CORS header
	signer       *urlSigner                           // from WithAttachmentURLs; nil: URLs as stored

	// Tests only (export_test.go): the timer of waits for room, and where
	// to put a function that reads the bytes held.
	roomTimer func(time.Duration) (<-chan time.Time, func() bool)
	// waitTimer is the clock of the feed's waits (wait.go): a channel
	// closed, or sent on, when a wait of d is over; nil: the ticks'
	// shared timers (tests set it).
	waitTimer func(d time.Duration) <-chan struct{}
	waitHook  func()      // called as a waiter blocks (tests)
	waitProbe *func() int // set to the count of waiters (tests)
	roomProbe *func() int64
}

// Option configures the handler returned by NewHandler.
type Option func(*config)

// WithLogger sends the handler's logs (store failures, panics) to l instead
// of slog.Default(). Logs never contain API keys or submission data. The
// lines of a failing dependency (the store, the key resolver, the rate
// limiter) are throttled to one per second for each kind of failure; the
// next line that gets through counts those held back in its "suppressed"
// attribute.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// DefaultPageBytes is the byte budget of a page of submissions unless
// WithPageBytes sets another.
const DefaultPageBytes = 4 << 20

// WithPageBytes sets the byte budget of every page the handler serves,
// of forms, of submissions and of the sync feed (DefaultPageBytes, 4 MiB,
// unless set): a page ends before the item that would take its items
// past n bytes, as sent, and says more follows, so one response holds
// about n bytes however large the limit; a single item larger than n is
// served alone. That bounds the memory a request takes to a few times n,
// whatever the data. 0 turns the budget off, leaving pages bounded by
// the limit alone. It panics if n is negative. A host's own store may
// ignore the budget; the handler then keeps it with a second call (see
// the Store contract).
func WithPageBytes(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("formsapi: WithPageBytes(%d): need n >= 0", n))
	}
	return func(c *config) { c.pageBytes = n }
}

// WithPageSize sets the page size used when a request has no limit
// parameter (default 100) and the largest one a request may ask for
// (default 1000). It panics unless 1 <= def <= max.
func WithPageSize(def, max int) Option {
	if def < 1 || def > max {
		panic(fmt.Sprintf("formsapi: WithPageSize(%d, %d): need 1 <= default <= max", def, max))
	}
	return func(c *config) { c.defaultLimit, c.maxLimit = def, max }
}

// WithCursorSecret sets the secret that keys everything the handler hands
// out for clients to bring back or compare: it seals pagination cursors
// and sync tokens, derives the sync feed's submission refs, and keys page
// ETags. Change it and every cursor and token issued before is refused
// (400), every ref changes (a consumer that keeps a copy by ref must read
// the feed again from sync=start into a fresh copy), and every ETag too.
//
// Without it the handler uses the secret its store keeps: memstore,
// sqlitestore and pgstore each make one once, from crypto/rand, and keep
// it with their data (in the database for sqlitestore and pgstore, shared
// by every process and node over it), so nothing changes on a restart or
// a deploy. It looks at the store, then WithFeed's store, then keys, and
// takes the first of them that is one of this module's stores or embeds
// one. A handler over none of them (a host's own store) has no secret
// kept anywhere: it draws a random one, logs a warning, and what it hands
// out ends with the process and is refused by every other replica. Give
// such a handler this option, with the same secret of at least 32 random
// bytes on every replica; give it too to rotate the secret or to keep one
// out of the database. It panics if secret is empty.
func WithCursorSecret(secret []byte) Option {
	if len(secret) == 0 {
		panic("formsapi: WithCursorSecret: empty secret")
	}
	s := append([]byte(nil), secret...)
	return func(c *config) { c.cursorSecret = s }
}

// WithStoreTimeout bounds the time one request may spend in the key
// resolver and the store together. A request that runs out gets 503, so
// set it below the server's WriteTimeout: then clients get an answer
// instead of a dropped connection. Zero, the default, means no bound
// beyond the request's own context.
func WithStoreTimeout(d time.Duration) Option {
	return func(c *config) { c.storeTimeout = d }
}

// WithFeed serves the sync feed (?sync=) from f. Without it the handler
// serves the feed of its Store if the Store is a [FeedStore] itself, and
// answers 501 otherwise. A Store that embeds one of this module's stores
// (to override some of its methods) has the embedded store's
// SyncSubmissions too, promoted, which would not see what the overrides
// hide; the handler never serves a feed through it unless WithFeed names
// it. It panics if f is nil.
func WithFeed(f FeedStore) Option {
	if f == nil {
		panic("formsapi: WithFeed(nil)")
	}
	return func(c *config) { c.feed = f }
}

type api struct {
	store        Store
	capabilities // what store, feed and keys are read through (storecontract.go)
	keys         KeyResolver
	gate         *keyGate     // bounds lookups of keys not seen before
	authFail     authThrottle // paces the answers to refused keys
	busyPace     busyThrottle // paces each key's 429s
	cfg          config
	tokens       tokenCodec   // cursors, sync tokens and refs, keyed by the cursor secret
	tags         *tagger      // computes page ETags, keyed by the cursor secret
	summaries    summaryCache // the summaries of forms kept, by their form's version (summary.go)

	idPrefix string        // random per handler, so IDs differ across restarts
	idSeq    atomic.Uint64 // makes generated request IDs unique and cheap

	// limiterAnswered is the handler's clock, in Unix nanoseconds, when
	// the rate limiter last returned a decision (access.go's allow); 0
	// before the first.
	limiterAnswered atomic.Int64

	throttles [numLogKinds]throttle // of the logs of failures (logthrottle.go)

	// Requests in flight per key (by the gate's hash) and per account
	// (concurrency.go).
	keysInFlight     *inFlight[uint64]
	accountsInFlight *inFlight[string]

	// The page bytes the handler holds, of every request (room.go).
	room *room

	waiters *waiters // the sync requests waiting (wait.go)

	// msgNoRoute is the message of the 404 of a path the API does not
	// serve, naming every route (noRouteMessage).
	msgNoRoute string
}

// NewHandler returns the read API over store, authenticating requests with
// keys. It serves /v1/forms, /v1/forms/{formId}/submissions, the
// streamed export /v1/forms/{formId}/export and the summary of a form
// /v1/forms/{formId}/summary (see docs/api.md), its OpenAPI 3.1 document at /v1/openapi.json (no key needed), and answers
// every other path and method itself, always in JSON. It panics if store
// or keys is nil.
func NewHandler(store Store, keys KeyResolver, opts ...Option) http.Handler {
	if store == nil || keys == nil {
		panic("formsapi: NewHandler needs a Store and a KeyResolver")
	}
	return newAPI(store, keys, opts...).handler()
}

// handler returns the http.Handler that serves a.
func (a *api) handler() http.Handler {
	// Method-less twins and "/" keep the mux's own plain-text 404 and 405
	// from ever reaching a client.
	// Every route comes from the one table (route.go).
	mux := http.NewServeMux()
	for _, rt := range routes {
		mux.Handle("GET "+rt.path, a.handle(rt))
		mux.Handle(rt.path, a.handleMethodNotAllowed())
	}
	mux.Handle("/", a.handleNotFound())
	h := a.recoverPanics(rejectNonCanonical(a, mux))
	if a.cfg.cors != nil {
		h = a.cfg.cors.handler(h) // preflights answered before anything else
	}
	h = a.withRequestID(h) // every answer, preflights included
	if o := a.cfg.observer; o != nil {
		h = observeRequests(o, func(r *http.Request) string {
			if _, pattern := mux.Handler(r); pattern != "/" {
				return pattern
			}
			return ""
		}, h)
	}
	return h
}

// newAPI applies opts and decides, once, how the handler reads store and
// authenticates with keys.
func newAPI(store Store, keys KeyResolver, opts ...Option) *api {
	cfg := config{defaultLimit: defaultPageSize, maxLimit: maxPageSize, pageBytes: DefaultPageBytes}
	cfg.access = defaultAccess()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.cursorSecret == nil {
		// The first of store, feed and keys that is one of this
		// module's stores, or embeds one (the secret belongs to the
		// data), as webhook's dispatcher takes it.
		cfg.cursorSecret = storecontract.KeptSecret(store, cfg.feed, keys)
	}
	warn := cfg.cursorSecret == nil
	if warn {
		cfg.cursorSecret = make([]byte, 32)
		rand.Read(cfg.cursorSecret) // never fails (crypto/rand docs)
	}
	a := &api{store: store, keys: keys, cfg: cfg, tokens: newTokenCodec(cfg.cursorSecret), tags: newTagger(cfg.cursorSecret), idPrefix: rand.Text()[:10]}
	a.capabilities = capabilitiesOf(store, cfg.feed, keys)
	a.gate = newKeyGate()
	a.msgNoRoute = noRouteMessage()
	a.keysInFlight, a.accountsInFlight = newInFlight[uint64](cfg.access.perKey), newInFlight[string](cfg.access.perAccount)
	a.room = newRoom(cfg.access.bytes)
	a.waiters = newWaiters()
	if cfg.waitProbe != nil {
		*cfg.waitProbe = func() int { return int(a.waiters.n.Load()) }
	}
	if cfg.roomTimer != nil {
		a.room.timer = cfg.roomTimer
	}
	if cfg.roomProbe != nil {
		*cfg.roomProbe = a.room.inUse
	}
	if cfg.observer != nil {
		a.observe(cfg.observer)
	}
	if warn {
		a.logger().Warn("formsapi: no cursor secret: neither WithCursorSecret nor a store of this module gives one, " +
			"so cursors, sync tokens, feed refs and ETags end with this process and differ on every other")
	}
	return a
}

// withRequestID gives every response an X-Request-Id: the client's own if
// it sent one well-formed ID, otherwise a new one. Log lines carry it too,
// so a user's report can be matched to the log.
func (a *api) withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids := r.Header.Values("X-Request-Id")
		id := ""
		if len(ids) == 1 && validRequestID(ids[0]) {
			id = ids[0]
		} else {
			id = a.idPrefix + "-" + strconv.FormatUint(a.idSeq.Add(1), 36)
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r)
	})
}

// maxRequestIDLen bounds an incoming X-Request-Id; longer ones are replaced.
const maxRequestIDLen = 128

func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !isUnreserved(id[i]) && id[i] != ':' {
			return false
		}
	}
	return true
}

// log writes one line about r with its route and request ID.
func (a *api) log(w http.ResponseWriter, r *http.Request, level slog.Level, msg string, attrs ...slog.Attr) {
	l := a.logger()
	if !l.Enabled(r.Context(), level) {
		return
	}
	attrs = append(attrs, slog.String("request_id", w.Header().Get("X-Request-Id")), slog.String("route", r.Pattern))
	l.LogAttrs(r.Context(), level, msg, attrs...)
}

func (a *api) logger() *slog.Logger {
	if a.cfg.logger != nil {
		return a.cfg.logger
	}
	return slog.Default()
}

// openAPI is the machine-readable contract, served without a key. It is
// the one body without the success/message envelope: OpenAPI allows no
// such top-level fields, and tools fetch the document as it is.
//
//go:embed openapi.json
var openAPI []byte

// openAPICoded is the document's ETag and gzip coding, made once per
// process: the document never changes, and compressing it at
// gzip.BestCompression for every NewHandler cost a process that makes
// many handlers (the root package's tests: 8% of their CPU under -race)
// far more than serving it.
var openAPICoded = sync.OnceValues(func() (tag string, gz []byte) {
	return staticTag(openAPI), gzipped(openAPI)
})

func handleOpenAPI() http.Handler {
	tag, gz := openAPICoded()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		respondDocument(w, r, openAPI, gz, tag)
	})
}

func (a *api) handleMethodNotAllowed() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, errMethod)
	})
}

func (a *api) handleNotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, errNoRoute)
	})
}

// rejectNonCanonical answers paths such as /v1//forms or /v1/forms/ with a
// JSON 404 itself. ServeMux would redirect them to the cleaned path, and
// under http.StripPrefix that redirect loses the mount prefix. It looks at
// the path as sent: an escaped slash or dot inside a form ID is part of
// the ID, which then gets the form 404 like any other malformed ID.
func rejectNonCanonical(a *api, next http.Handler) http.Handler {
	notFound := a.handleNotFound()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		if p == "" || p[0] != '/' || (p != "/" && path.Clean(p) != p) {
			notFound.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// recoverPanics turns a panic in the store or the handler into a JSON 500
// and a log line with the stack, instead of a dropped connection.
func (a *api) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			a.fail(w, r, panicked{value: v, stack: debug.Stack()})
		}()
		next.ServeHTTP(w, r)
	})
}
