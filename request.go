package formsapi

// Request parsing: authentication, then the query string.

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// request is what begin established about an authenticated list request.
type request struct {
	ctx     context.Context
	cancel  context.CancelFunc
	account string
	grant   Grant // what the key may read
	list    listID
	q       Query
	limit   string // the limit parameter as given, "" if absent
	sync    bool   // a feed request: ?sync=start or ?sync=<token>
	after   int64  // the feed position it reads after
}

// begin authenticates r and parses its query. formID is "" for the forms
// list. On failure it has already answered and returns false.
func (a *api) begin(w http.ResponseWriter, r *http.Request, formID string) (req request, ok bool) {
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if a.cfg.storeTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, a.cfg.storeTimeout)
	}
	defer func() {
		if !ok { // on success the caller defers req.cancel
			cancel()
		}
	}()
	token, creds := parseAuthorization(r.Header.Values("Authorization"))
	if creds != tokenPresent {
		writeUnauthorized(w, creds == badToken)
		return request{}, false
	}
	grant, err := a.authorize(ctx, token)
	if err != nil {
		if errors.Is(err, ErrInvalidKey) {
			writeUnauthorized(w, true)
		} else {
			a.fail(w, r, fmt.Errorf("resolve key: %w", err))
		}
		return request{}, false
	}
	if !a.rateLimit(w, r, token, grant) {
		return request{}, false
	}
	// A form outside the key's scope gets the very answer of a form that
	// does not exist, without a store call.
	if formID != "" && (!ValidFormID(formID) || !grant.Allows(formID)) {
		writeError(w, http.StatusNotFound, msgFormNotFound)
		return request{}, false
	}
	account := grant.AccountID
	req = request{ctx: ctx, cancel: cancel, account: account, grant: grant, list: listID{account, formID}}
	if msg := a.parseQuery(r.URL.RawQuery, &req); msg != "" {
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
	for _, name := range []string{"limit", "cursor", "order", "since", "until", "sync"} {
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

// parseSync reads the sync parameter of a feed request: "start" for the
// beginning of the form's feed, or a syncToken of an earlier page of the
// same feed. Only limit may stand beside it; the feed has its own order.
func (a *api) parseSync(vals url.Values, req *request) string {
	if req.list.formID == "" {
		return "invalid sync: the feed is per form, at /v1/forms/{formId}/submissions?sync=start"
	}
	for _, name := range []string{"cursor", "order", "since", "until"} {
		if vals.Get(name) != "" {
			return fmt.Sprintf("invalid %s: it cannot be combined with sync, which reads in commit order", name)
		}
	}
	req.sync = true
	switch tok := vals.Get("sync"); tok {
	case "start":
		req.after = 0
	case "":
		return `invalid sync: use "start" or the syncToken of a previous page of this form's feed`
	default:
		pos, ok := a.cursor.openSync(req.list, tok)
		if !ok {
			return `invalid sync: use "start" or the syncToken of a previous page of this form's feed`
		}
		req.after = pos
	}
	return ""
}
