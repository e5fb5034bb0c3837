package formsapi

// Request parsing: authentication, a step of its own for every keyed
// route (authenticate), then each route's own parameters (its parse).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/formsapi/formsapi/internal/token"
	"github.com/formsapi/formsapi/internal/wire"
)

// request is what authenticate established about an authenticated
// request: what every keyed route has. A route's parse makes the route's
// own request from it (listRequest, exportRequest), which embeds it.
type request struct {
	route   *route          // what is asked for
	key     string          // the API key, for the limiter's later decisions (export)
	httpCtx context.Context // the request's own, without the store timeout
	ctx     context.Context
	cancel  context.CancelFunc // ends the request: its store context and its count in flight
	// cancelStore cancels ctx alone; leave ends the count in flight
	// alone (a waiter leaves it while it blocks: wait.go).
	cancelStore context.CancelFunc
	leave       *leaver
	account     string
	grant       Grant      // what the key may read
	form        *wire.Form // the form, from the combined lookup (authorize.go), or nil
	// forms is the version of the account's forms list, from the combined
	// lookup of a request for the forms list, or nil: every page of forms
	// the request reads is read at it (appendForms).
	forms *wire.Forms
	list  token.List // the account and form the route reads

	start time.Time // when authenticate began: the server's WriteTimeout runs from about then
	room  *roomHold // the page's share of the handler's room (room.go), once reserved
}

// listRequest is a request of one of the lists (the forms, a form's
// submissions or its sync feed), with what parseQuery read.
type listRequest struct {
	request
	q     Query
	limit string // the limit parameter as given, "" if absent
	total string // the total parameter: "", TotalExact or TotalEstimate
	// totalJSON is the page's "total" member, once counted, or nil.
	totalJSON []byte
	sync      bool // a feed request: ?sync=start or ?sync=<token>
	// wait is how long a feed request may wait for entries when its
	// page is empty (wait=, wait.go); 0: it answers at once.
	wait  time.Duration
	after int64 // the feed position it reads after
	floor int64 // the token's floor (see listFeed)
	// inc is the incarnation of the form that the request's cursor or
	// sync token was sealed for (0: none, or not known); once the store
	// has read the page, the form's own, which the next token carries.
	inc uint64
}

// authenticate checks r's key for route rt, counts the request in flight
// and with the rate limiter, and checks that the key's scope holds formID
// ("" for a route without a form): everything a keyed route needs before
// it parses a parameter of its own. On failure it has already answered
// and returns false; on success the caller must defer req.cancel.
func (a *api) authenticate(w http.ResponseWriter, r *http.Request, rt *route, formID string) (req request, ok bool) {
	start := time.Now()
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if a.cfg.storeTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, a.cfg.storeTimeout)
	}
	defer func() {
		if !ok { // on success the caller defers req.cancel
			cancel()
		}
	}()
	fail := func(err error) (request, bool) {
		a.fail(w, r, err)
		return request{}, false
	}
	key, creds := parseAuthorization(r.Header.Values("Authorization"))
	switch creds {
	case noCredentials:
		return fail(errNoCredentials)
	case badToken:
		return fail(ErrInvalidKey)
	}
	// A 429 of a key waits for the key's turn (busypace.go), out of
	// flight and past the store's deadline.
	paced := func(err error) (request, bool) {
		cancel()
		cancel = func() {}
		if !a.waitBusy(r.Context(), a.gate.hash(key)) {
			w.Header().Set("Connection", "close") // past the caps of waiting 429s
		}
		return fail(err)
	}
	grant, fd, done, err := a.authorize(ctx, key, formID, rt.exact)
	if errors.Is(err, errBusy) {
		return paced(err)
	}
	if err != nil {
		return fail(fmt.Errorf("resolve key: %w", err))
	}
	if age, ok := fd.stale(); ok {
		w.Header().Set("Data-Age", strconv.FormatFloat(age.Seconds(), 'f', 3, 64))
	}
	stop, lv := cancel, &leaver{f: done}
	cancel = func() { stop(); lv.end() } // the request is out of flight
	if err := a.rateLimit(w, r, key, grant); err != nil {
		if errors.Is(err, errBusy) || errors.Is(err, errRateLimited) {
			return paced(err)
		}
		return fail(err)
	}
	// A form outside the key's scope gets the very answer of a form that
	// does not exist, without a store call.
	if formID != "" && (!ValidFormID(formID) || !grant.Allows(formID)) {
		return fail(ErrFormNotFound)
	}
	account := grant.AccountID
	// The form found with the key is used only by the route's read, after
	// its own parameters are checked: a form that is not found is
	// answered by the store, after the query's own checks.
	return request{route: rt, key: key, httpCtx: r.Context(), ctx: ctx, cancel: cancel, cancelStore: stop, leave: lv, account: account, grant: grant, form: fd.form, forms: fd.forms, list: token.List{Account: account, FormID: formID}, start: start}, true
}

// cursorKind is the kind of the cursors of req's route (internal/token):
// a cursor of another route, or a token of another kind, opens as no
// cursor of it.
func (req request) cursorKind() token.Kind {
	return req.route.kind("cursor")
}

// parseQuery is the parse of the two lists: it makes the list's request
// from base and the query string, or returns the message of a 400 that
// names the offending parameter.
func (a *api) parseQuery(raw string, base request) (req listRequest, msg string) {
	req.request = base
	return req, a.readQuery(raw, &req)
}

// readQuery reads the query string into req (parseQuery).
func (a *api) readQuery(raw string, req *listRequest) string {
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return "the query string is malformed: check its percent-encoding"
	}
	for _, name := range onceParams { // sync too on the forms list, which refuses it

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
	// Unlike other parameters, an empty sync is not absent: it is a
	// poller's empty token, and a list page would not say so.
	if vals.Has("sync") {
		req.q = q
		return a.parseSync(vals, req)
	}
	if vals.Get("wait") != "" && slices.Contains(req.route.params, "wait") {
		return "invalid wait: it waits for a sync feed's next entries, and needs sync"
	}
	if msg := parseListParams(vals, req.route.params, &q); msg != "" {
		return msg
	}
	if slices.Contains(req.route.params, "total") {
		var msg string
		if req.total, msg = parseTotal(vals.Get("total")); msg != "" {
			return msg
		}
	}
	if tok := vals.Get("cursor"); tok != "" {
		c, inc, ok := a.tokens.open(req.cursorKind(), req.list, tok)
		if !ok {
			return msgBadCursor
		}
		req.inc = inc
		if msg := fromCursor(vals, &q, c); msg != "" {
			return msg
		}
	}
	req.q = q
	return ""
}

// parseSync reads the sync parameter of a feed request: "start" for the
// beginning of the form's feed, or a syncToken of an earlier page of the
// same feed. Only limit may stand beside it; the feed has its own order.
func (a *api) parseSync(vals url.Values, req *listRequest) string {
	if req.list.FormID == "" {
		return "invalid sync: the feed is per form, at /v1/forms/{formId}/submissions?sync=start"
	}
	if vals.Get("cursor") != "" {
		return "invalid cursor: it cannot be combined with sync, which reads in commit order"
	}
	if vals.Get("total") != "" {
		return "invalid total: it cannot be combined with sync, which reads in commit order"
	}
	for _, p := range listParams {
		if p.isGiven(vals) {
			return fmt.Sprintf("invalid %s: it cannot be combined with sync, which reads in commit order", p.name)
		}
	}
	req.sync = true
	switch tok := vals.Get("sync"); tok {
	case "start":
		req.after = 0
	case "":
		return `invalid sync: use "start" or the syncToken of a previous page of this form's feed`
	default:
		s, ok := a.tokens.OpenSync(req.list, tok)
		if !ok || req.route.kind("sync") != token.SyncToken {
			return `invalid sync: use "start" or the syncToken of a previous page of this form's feed`
		}
		req.after, req.floor, req.inc = s.Pos, s.Floor, s.Incarnation
	}
	return parseWait(vals, req)
}

// parseWait reads the wait parameter of a feed request: whole seconds
// from 0 to maxWait.
func parseWait(vals url.Values, req *listRequest) string {
	v := vals.Get("wait")
	if v == "" {
		return ""
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxWait {
		return fmt.Sprintf("invalid wait: must be a whole number of seconds from 0 to %d", maxWait)
	}
	req.wait = time.Duration(n) * time.Second
	return ""
}
