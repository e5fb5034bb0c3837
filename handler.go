package formsapi

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/formsapi/formsapi/internal/wire"
)

// Defaults for the page size, changeable with [WithPageSize].
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

type config struct {
	logger       *slog.Logger
	defaultLimit int
	maxLimit     int
	cursorSecret []byte
	storeTimeout time.Duration
}

// Option configures the handler returned by NewHandler.
type Option func(*config)

// WithLogger sends the handler's logs (store failures, panics) to l instead
// of slog.Default(). Logs never contain API keys or submission data.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
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

// WithCursorSecret sets the secret that seals pagination cursors. Without
// it each handler draws a random one, so cursors stop working when the
// process restarts and are not accepted by another replica. Give every
// replica the same secret of at least 32 random bytes to share cursors.
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

type api struct {
	store   Store
	encoded encodedLister // store's fast path, if it has one
	keys    KeyResolver
	cfg     config
	cursor  cursorCodec

	idPrefix string        // random per handler, so IDs differ across restarts
	idSeq    atomic.Uint64 // makes generated request IDs unique and cheap
}

// NewHandler returns the read API over store, authenticating requests with
// keys. It serves /v1/forms and /v1/forms/{formId}/submissions, its
// OpenAPI 3.1 document at /v1/openapi.json (no key needed), and answers
// every other path and method itself, always in JSON. It panics if store
// or keys is nil.
func NewHandler(store Store, keys KeyResolver, opts ...Option) http.Handler {
	if store == nil || keys == nil {
		panic("formsapi: NewHandler needs a Store and a KeyResolver")
	}
	cfg := config{defaultLimit: DefaultPageSize, maxLimit: MaxPageSize}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.cursorSecret == nil {
		cfg.cursorSecret = make([]byte, 32)
		rand.Read(cfg.cursorSecret) // never fails (crypto/rand docs)
	}
	a := &api{store: store, keys: keys, cfg: cfg, cursor: newCursorCodec(cfg.cursorSecret), idPrefix: rand.Text()[:10]}
	a.encoded, _ = store.(encodedLister)

	// Method-less twins and "/" keep the mux's own plain-text 404 and 405
	// from ever reaching a client.
	mux := http.NewServeMux()
	mux.Handle("GET /v1/forms", a.handleListForms())
	mux.Handle("GET /v1/forms/{formId}/submissions", a.handleListSubmissions())
	mux.Handle("GET /v1/openapi.json", handleOpenAPI())
	mux.Handle("/v1/openapi.json", a.handleMethodNotAllowed())
	mux.Handle("/v1/forms", a.handleMethodNotAllowed())
	mux.Handle("/v1/forms/{formId}/submissions", a.handleMethodNotAllowed())
	mux.Handle("/", a.handleNotFound())
	return a.withRequestID(a.recoverPanics(rejectNonCanonical(a, mux)))
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

func (a *api) handleListForms() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, ok := a.begin(w, r, "")
		if !ok {
			return
		}
		defer req.cancel()
		page, err := a.store.ListForms(req.ctx, req.account, req.q)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		buf := getBuffer()
		defer putBuffer(buf)
		body, err := appendForms((*buf)[:0], page.Items, a.next(w, req, "forms", page.NextCursor))
		*buf = body[:0]
		a.respond(w, r, body, err)
	})
}

func (a *api) handleListSubmissions() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		formID := r.PathValue("formId")
		req, ok := a.begin(w, r, formID)
		if !ok {
			return
		}
		defer req.cancel()
		if a.encoded != nil {
			a.listEncoded(w, r, req, formID)
			return
		}
		page, err := a.store.ListSubmissions(req.ctx, req.account, formID, req.q)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		items := a.ownSubmissions(w, r, formID, page.Items)
		buf := getBuffer()
		defer putBuffer(buf)
		body, skipped := appendSubmissions((*buf)[:0], items, a.next(w, req, "submissions", page.NextCursor))
		*buf = body[:0]
		a.logSkipped(w, r, skipped, "item of the page")
		a.respond(w, r, body, nil)
	})
}

// encodedLister is the fast path of this module's own stores, which keep
// each submission's JSON as AppendSubmissionJSON made it and append it to
// the response straight from storage: no decoding, no encoding. They
// append only objects they made or checked (sqlitestore scans what it
// reads from the file). The parameter's type is internal, so a host's
// store cannot take this path.
type encodedLister interface {
	AppendSubmissions(ctx context.Context, accountID, formID string, q Query, p *wire.Page) error
}

func (a *api) listEncoded(w http.ResponseWriter, r *http.Request, req request, formID string) {
	buf := getBuffer()
	defer putBuffer(buf)
	p := wire.Page{Body: appendEnvelope((*buf)[:0], msgSubmissions, "submissions")}
	err := a.encoded.AppendSubmissions(req.ctx, req.account, formID, req.q, &p)
	*buf = p.Body[:0]
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.logSkipped(w, r, p.Skipped, "stored submission")
	body := appendNext(p.Body, a.next(w, req, "submissions", p.NextCursor))
	*buf = body[:0]
	a.respond(w, r, body, nil)
}

// logSkipped logs each damaged submission a page left out, by position
// and reason, never by content: the host's operators can repair the row,
// and clients still get the rest of the page and the pages after it.
func (a *api) logSkipped(w http.ResponseWriter, r *http.Request, skipped []wire.Skipped, what string) {
	for _, s := range skipped {
		a.log(w, r, slog.LevelError, "formsapi: left a damaged submission out of the page",
			slog.String("which", what), slog.Int64("position", s.Seq), slog.String("reason", s.Reason))
	}
}

// ownSubmissions drops any submission a faulty store returned for another
// form: the store's output is not trusted to uphold isolation on its own.
func (a *api) ownSubmissions(w http.ResponseWriter, r *http.Request, formID string, items []Submission) []Submission {
	foreign := func(s Submission) bool { return s.FormID != formID }
	if !slices.ContainsFunc(items, foreign) {
		return items
	}
	kept := slices.DeleteFunc(slices.Clone(items), foreign)
	a.log(w, r, slog.LevelError, "formsapi: store returned submissions of another form; dropped them",
		slog.Int("dropped", len(items)-len(kept)))
	return kept
}

// openAPI is the machine-readable contract, served without a key. It is
// the one body without the success/message envelope: OpenAPI allows no
// such top-level fields, and tools fetch the document as it is.
//
//go:embed openapi.json
var openAPI []byte

func handleOpenAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, openAPI)
	})
}

func (a *api) handleMethodNotAllowed() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, msgMethodNotAllowed)
	})
}

func (a *api) handleNotFound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, msgNoRoute)
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
			a.log(w, r, slog.LevelError, "formsapi: panic serving request",
				slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			writeError(w, http.StatusInternalServerError, msgInternal)
		}()
		next.ServeHTTP(w, r)
	})
}

// request is what begin established about an authenticated list request.
type request struct {
	ctx     context.Context
	cancel  context.CancelFunc
	account string
	list    listID
	q       Query
	limit   string // the limit parameter as given, "" if absent
}

// begin authenticates r and parses its query. formID is "" for the forms
// list. On failure it has already answered and returns false.
func (a *api) begin(w http.ResponseWriter, r *http.Request, formID string) (request, bool) {
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if a.cfg.storeTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, a.cfg.storeTimeout)
	}
	token, creds := parseAuthorization(r.Header.Values("Authorization"))
	if creds != tokenPresent {
		cancel()
		writeUnauthorized(w, creds == badToken)
		return request{}, false
	}
	account, err := a.keys.ResolveKey(ctx, token)
	if err != nil {
		cancel()
		if errors.Is(err, ErrInvalidKey) {
			writeUnauthorized(w, true)
		} else {
			a.fail(w, r, fmt.Errorf("resolve key: %w", err))
		}
		return request{}, false
	}
	if formID != "" && !ValidFormID(formID) {
		cancel()
		writeError(w, http.StatusNotFound, msgFormNotFound)
		return request{}, false
	}
	req := request{ctx: ctx, cancel: cancel, account: account, list: listID{account, formID}}
	if msg := a.parseQuery(r.URL.RawQuery, &req); msg != "" {
		cancel()
		writeError(w, http.StatusBadRequest, msg)
		return request{}, false
	}
	return req, true
}

// parseQuery fills req.q from the query string, or returns the message of
// a 400 that names the offending parameter.
func (a *api) parseQuery(raw string, req *request) string {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return "the query string is malformed: check its percent-encoding"
	}
	for _, name := range []string{"limit", "cursor", "order", "since", "until"} {
		if len(vals[name]) > 1 {
			return fmt.Sprintf("invalid %s: the parameter is given more than once", name)
		}
	}
	q := Query{Limit: a.cfg.defaultLimit}
	if v := vals.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > a.cfg.maxLimit {
			return fmt.Sprintf("invalid limit: must be a whole number from 1 to %d", a.cfg.maxLimit)
		}
		q.Limit, req.limit = n, v
	}
	orderSet := false
	switch v := vals.Get("order"); v {
	case "":
	case "desc":
		q.Order, orderSet = Newest, true
	case "asc":
		q.Order, orderSet = Oldest, true
	default:
		return `invalid order: must be "desc" (newest first) or "asc" (oldest first)`
	}
	for _, b := range []struct {
		name string
		t    *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		v := vals.Get(b.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return fmt.Sprintf("invalid %s: must be an RFC 3339 time such as 2024-05-01T12:00:00Z (percent-encode a + in the offset as %%2B)", b.name)
		}
		*b.t = t.UTC()
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return "invalid until: must be later than since"
	}
	if tok := vals.Get("cursor"); tok != "" {
		st, ok := a.cursor.open(req.list, tok)
		if !ok {
			return msgBadCursor
		}
		switch {
		case orderSet && q.Order != st.order:
			return "invalid cursor: it was issued for another order"
		case vals.Get("since") != "" && !q.Since.Equal(st.since):
			return "invalid cursor: it was issued for another since"
		case vals.Get("until") != "" && !q.Until.Equal(st.until):
			return "invalid cursor: it was issued for another until"
		}
		q.Order, q.Since, q.Until, q.Cursor = st.order, st.since, st.until, st.pos
	}
	req.q = q
	return ""
}

// next seals the store's cursor for the client and sets the Link header;
// it returns "" when the store says the list ends here.
func (a *api) next(w http.ResponseWriter, req request, name, storeNext string) string {
	if storeNext == "" {
		return ""
	}
	next := a.cursor.seal(req.list, pageState{order: req.q.Order, since: req.q.Since, until: req.q.Until, pos: storeNext})
	// A relative reference resolves against the URL the client used, so
	// it stays right under any mount prefix without configuration.
	v := url.Values{"cursor": {next}}
	if req.limit != "" {
		v.Set("limit", req.limit)
	}
	w.Header().Set("Link", "<"+name+"?"+v.Encode()+`>; rel="next"`)
	return next
}

// respond writes a fully encoded page, or a 500 if encoding failed: the
// status is decided only once the whole body exists.
func (a *api) respond(w http.ResponseWriter, r *http.Request, body []byte, err error) {
	if err != nil {
		w.Header().Del("Link")
		a.fail(w, r, fmt.Errorf("encode page: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// Messages of the error responses.
const (
	msgInvalidKey       = "invalid API key"
	msgFormNotFound     = "form not found"
	msgBadCursor        = "invalid cursor: use the nextCursor of a previous page of this same list"
	msgNoRoute          = "not found: the API serves GET /v1/forms and GET /v1/forms/{formId}/submissions"
	msgMethodNotAllowed = "method not allowed: use GET or HEAD"
	msgInternal         = "internal server error"
	msgUnavailable      = "service unavailable: the request took too long, try again"
)

// fail answers a store or resolver error. This is the one place that maps
// errors to statuses; causes go to the log, never to the client.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrFormNotFound):
		writeError(w, http.StatusNotFound, msgFormNotFound)
	case errors.Is(err, ErrInvalidCursor):
		writeError(w, http.StatusBadRequest, msgBadCursor)
	case r.Context().Err() != nil:
		// The client went away; nobody reads this answer and it is no fault.
		a.log(w, r, slog.LevelInfo, "formsapi: client gone before the answer", slog.Any("err", err))
		writeError(w, http.StatusServiceUnavailable, msgUnavailable)
	case errors.Is(err, context.DeadlineExceeded):
		a.log(w, r, slog.LevelWarn, "formsapi: store timed out", slog.Any("err", err))
		writeError(w, http.StatusServiceUnavailable, msgUnavailable)
	default:
		a.log(w, r, slog.LevelError, "formsapi: store failed", slog.Any("err", err))
		writeError(w, http.StatusInternalServerError, msgInternal)
	}
}

func writeUnauthorized(w http.ResponseWriter, tokenPresented bool) {
	// RFC 6750 §3.1: no error code when the request had no credentials.
	if tokenPresented {
		w.Header().Set("WWW-Authenticate", `Bearer realm="formsapi", error="invalid_token"`)
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="formsapi"`)
	}
	writeError(w, http.StatusUnauthorized, msgInvalidKey)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	buf := getBuffer()
	defer putBuffer(buf)
	*buf = appendError((*buf)[:0], msg)
	writeJSON(w, status, *buf)
}

// writeJSON writes a complete body with the headers every response carries.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
