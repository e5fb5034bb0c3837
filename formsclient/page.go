package formsclient

// The page calls: one page of a list or of the sync feed, with what the
// server said about it. The iterators, Sync and Count are built on them.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/formsapi/formsapi"
)

// Response is what the server said about one page besides its items: how
// to go on from it, how to ask for it again cheaply, and how much more
// the key may ask. A page call returns it whenever the server answered,
// an error answer included (its fields are then those the answer
// carried); it is nil only when no answer came (the call refused its
// arguments, the connection failed, the context ended first). After
// retries (see [WithRetries]) it describes the last answer.
type Response struct {
	// StatusCode is the HTTP status of the answer: 200 for a page, 304
	// for a page not modified since the ETag given with [IfNoneMatch].
	StatusCode int
	// Header holds the answer's header fields as received.
	Header http.Header
	// RequestID is the answer's X-Request-Id, to quote to the server's
	// operators; "" if it had none.
	RequestID string
	// ETag is the page's entity tag (a weak one, W/"…"), to send back with
	// [IfNoneMatch] when asking for the same page again; "" if none.
	ETag string
	// NotModified reports a 304: the page is the one whose tag was sent,
	// and the call returned no items and an error matching
	// [ErrNotModified]. Keep using the page you have, its cursor included.
	NotModified bool
	// NextCursor is the list page's nextCursor, to give to [Cursor] for
	// the next page; "" when no page follows. A page may be short or
	// empty and still have one (a filtered or searched page ends once it
	// has examined a bounded number of entries): only NextCursor == ""
	// ends a list.
	NextCursor string
	// SyncToken is the feed page's syncToken, the token to store and to
	// read the feed from next ([Client.SyncPage]); "" on a list page.
	SyncToken string
	// HasMore is the feed page's hasMore: more changes can be read at
	// once from SyncToken. False on a list page.
	HasMore bool
	// Total is the list's size with its kind ("exact", "at_least",
	// "estimate"), when asked for with [ExactTotal] or [EstimatedTotal];
	// nil otherwise.
	Total *formsapi.Total
	// RateLimit is what the RateLimit and RateLimit-Policy fields of the
	// answer say about the key's budget; nil when the server sent none
	// (it has no rate limiter, or the answer came before it decided).
	RateLimit *RateLimit
	// RetryAfter is the answer's Retry-After (seconds or an HTTP date) as
	// a wait from when it arrived; 0 if none.
	RetryAfter time.Duration
	// PageSize is the limit of the request that answered: the one asked
	// for with [PageSize], 0 for the server's default, or less when a
	// page over [WithMaxResponseSize] was asked for again with fewer
	// items. Ask for the next page with it, to not repeat that.
	PageSize int
}

// RateLimit is the key's rate-limit budget as an answer's RateLimit and
// RateLimit-Policy fields state it (draft-ietf-httpapi-ratelimit-headers;
// see docs/rate-limits.md). When the RateLimit field lists several
// policies, it is the one with the fewest requests left.
type RateLimit struct {
	// Policy is the policy's name: "default" for an account's bucket,
	// for example, or "default-key" for a scoped key's own.
	Policy string
	// Remaining (r) is the number of requests the key may still make at
	// once; 0 while its bucket is empty or in debt.
	Remaining int
	// Reset (t) is how long until the full quota is back; on a 429 it is
	// the Retry-After.
	Reset time.Duration
	// Quota (q) is the policy's number of requests per Window; 0 when the
	// answer had no RateLimit-Policy item for the policy.
	Quota int
	// Window (w) is the policy's window; 0 when unknown, like Quota.
	Window time.Duration
}

// Cursor makes a page call ask for the page that starts at cursor, a
// [Response.NextCursor] the server returned for the same list (a saved
// one included, while the server keeps its cursor secret); "" asks for
// the first page. The cursor carries the order, the range, the filters
// and the projection: repeat the options of the first page or leave
// them out, but never give others (the server answers 400). Only the
// page calls take it; the iterators refuse it.
func Cursor(cursor string) ListOption {
	return func(q *listQuery) { q.note("Cursor"); q.cursor = cursor }
}

// IfNoneMatch makes a page call send etag (a [Response.ETag]) as
// If-None-Match: if the page is still the one it tagged, the server
// answers 304 with no body, and the call returns no items, a Response
// whose NotModified is true, and an error matching [ErrNotModified]
// ([IsNotModified]). A 304 counts against a rate limit like a page. An
// empty etag, or one with a control character (a line break kept with
// it, say), is an error before any request. Only the page calls take
// it.
func IfNoneMatch(etag string) ListOption {
	return func(q *listQuery) {
		q.note("IfNoneMatch")
		switch {
		case q.err != nil:
		case etag == "":
			q.err = errors.New("formsclient: IfNoneMatch: the tag is empty")
		case strings.ContainsFunc(etag, func(r rune) bool { return r < ' ' || r == 0x7f }):
			q.err = fmt.Errorf("formsclient: IfNoneMatch(%q): a tag holds no control characters", etag)
		}
		q.ifNoneMatch = etag
	}
}

// ExactTotal makes [Client.SubmissionsPage] ask for the list's size
// (total=exact), counted up to the server's bounds: [Response.Total]'s
// Kind is "exact", or "at_least" where the count stopped. The count
// costs the server work, which its rate limit may charge. Only
// SubmissionsPage takes it ([Client.Count] asks for a total alone).
func ExactTotal() ListOption {
	return func(q *listQuery) { q.note("ExactTotal"); q.total = "exact" }
}

// EstimatedTotal is [ExactTotal] with total=estimate: for a filtered
// list an unchecked count of the index entries, of Kind "estimate"; for
// an unfiltered one the same count as ExactTotal.
func EstimatedTotal() ListOption {
	return func(q *listQuery) { q.note("EstimatedTotal"); q.total = "estimate" }
}

// FormsPage returns one page of the forms of the key's account, the
// first unless [Cursor] is given, and what the server said about it
// ([Response]): the cursor of the next page, its ETag, the rate limit.
// It takes [Cursor], [IfNoneMatch], [PageSize], [Since], [Until],
// [Oldest] and [Newest]; the options of submissions are an error. A
// page may hold fewer forms than PageSize. Errors are those of
// [Client.Forms], and a 304 for IfNoneMatch; the Response comes with an
// error answer too.
func (c *Client) FormsPage(ctx context.Context, opts ...ListOption) ([]formsapi.Form, *Response, error) {
	return pageOf(ctx, c, formsList(), opts)
}

// SubmissionsPage returns one page of the submissions of the form
// formID, the first unless [Cursor] is given, and what the server said
// about it ([Response]): the cursor of the next page, its ETag, the rate
// limit, the total when asked for. It takes every list option: [Cursor],
// [IfNoneMatch], [PageSize], [Since], [Until], [Oldest], [Newest],
// [Filter], [Search], [Fields], [ExactTotal] and [EstimatedTotal].
//
// A page may hold fewer submissions than PageSize, or none, and still
// have a NextCursor: a filtered or searched page ends once it has
// examined a bounded number of entries. Such a page is a page like any
// other (no error); go on from its NextCursor until it is "". A loop of
// your own should stop on a cursor it has seen before, as the iterators
// do. Errors are those of [Client.Submissions], and a 304 for
// IfNoneMatch; the Response comes with an error answer too.
func (c *Client) SubmissionsPage(ctx context.Context, formID string, opts ...ListOption) ([]formsapi.Submission, *Response, error) {
	return pageOf(ctx, c, submissionsList(fmt.Sprintf("list submissions of form %q", formID), formID), opts)
}

// pageOf is the page call of l (FormsPage, SubmissionsPage): the page
// that opts ask for, once they are checked.
func pageOf[T any](ctx context.Context, c *Client, l list[T], opts []ListOption) ([]T, *Response, error) {
	if err := c.ready(); err != nil {
		return nil, nil, err
	}
	q := listOptions(opts)
	if err := l.refuse(q, false); err != nil {
		return nil, nil, err
	}
	return page(ctx, c, l, q)
}

// page gets the page of l that q asks for, and checks that its items
// are in q's range and, where q's order is known (a first page, or an
// order given), in that order.
func page[T any](ctx context.Context, c *Client, l list[T], q listQuery) ([]T, *Response, error) {
	items, _, resp, err := listPage(ctx, c, l, q.params(), q.limit, q.ifNoneMatch, nil)
	if err != nil {
		return nil, resp, err
	}
	ordered := q.cursor == "" || slices.Contains(q.given, "Oldest") || slices.Contains(q.given, "Newest")
	var last time.Time
	for i, it := range items {
		t := l.createdAt(it)
		if err := q.check(t, last, ordered && i > 0); err != nil {
			return nil, resp, withRequestID(fmt.Errorf("%w: %s: %s", ErrPaging, l.op, err), resp.RequestID)
		}
		last = t
	}
	return items, resp, nil
}

// SyncPage reads one page of formID's sync feed, the changes committed
// after token (SyncStart for the beginning): each submission added, then
// each deletion, as [Client.Sync] hands them over, and what the server
// said about the page ([Response]): SyncToken, the token to store once
// the changes are applied and to read from next, and HasMore, whether
// more can be read at once. A page may hold no change and still carry
// HasMore; it is a page like any other. It takes [PageSize] and
// [IfNoneMatch] (a 304 while nothing was committed since the page it
// tagged); the other options are an error. An error matching
// [ErrResync] means the server will not continue from token: empty the
// copy and read again from SyncStart.
func (c *Client) SyncPage(ctx context.Context, formID, token string, opts ...ListOption) ([]Change, *Response, error) {
	l := submissionsList(fmt.Sprintf("sync submissions of form %q", formID), formID)
	if err := c.ready(); err != nil {
		return nil, nil, err
	}
	q := listOptions(opts)
	if q.err != nil {
		return nil, nil, q.err
	}
	for _, name := range q.given {
		if name != "PageSize" && name != "IfNoneMatch" && name != "Wait" {
			return nil, nil, fmt.Errorf("formsclient: %s: %s cannot be used with SyncPage: the feed comes in commit order and cannot be filtered or reordered (of the list options only PageSize, IfNoneMatch and Wait apply)", l.op, name)
		}
	}
	if l.err != nil {
		return nil, nil, l.err
	}
	if token == "" {
		return nil, nil, fmt.Errorf("formsclient: %s: an empty token: pass SyncStart the first time", l.op)
	}
	return syncPage(ctx, c, l, token, q.limit, q.wait, q.ifNoneMatch, nil)
}

// Wait makes [Client.SyncPage] and [Client.Sync] wait on the server, up
// to d, when nothing was committed after the token: the server answers as
// soon as the form's next changes reach it (the request's wait=, rounded
// up to whole seconds), or with the empty page when d passes. d is from 0
// (no wait) to 30 seconds, the server's bound; another d is an error
// before any request. A WithHTTPClient client's Timeout must leave room
// for d. The other calls refuse it.
func Wait(d time.Duration) ListOption {
	return func(q *listQuery) {
		q.note("Wait")
		if q.err == nil && (d < 0 || d > maxWait) {
			q.err = fmt.Errorf("formsclient: Wait(%s): from 0 to %s, the server's bound", d, maxWait)
		}
		q.wait = int((d + time.Second - 1) / time.Second)
	}
}

// maxWait is the server's bound on a sync request's wait.
const maxWait = 30 * time.Second

// syncPage gets the feed page of l after token, through listPage, and
// checks it: a syncToken and hasMore, and one ref per submission. With
// wait above 0 the server may wait that many seconds for changes.
func syncPage(ctx context.Context, c *Client, l list[formsapi.Submission], token string, limit, wait int, inm string, sc *scratch) ([]Change, *Response, error) {
	params := url.Values{"sync": {token}}
	if wait > 0 {
		params.Set("wait", strconv.Itoa(wait))
	}
	items, env, resp, err := listPage(ctx, c, l, params, limit, inm, sc)
	if e, ok := err.(*Error); ok && e.StatusCode == http.StatusBadRequest && token != SyncStart && strings.HasPrefix(e.Message, msgBadSyncPrefix) {
		e.badToken = true // ErrResync: the only parameters sent are the token and a limit the client checked
	}
	if err != nil {
		return nil, resp, err
	}
	if env.SyncToken == nil || *env.SyncToken == "" || env.HasMore == nil {
		return nil, resp, withRequestID(fmt.Errorf("formsclient: %s: %w: a feed page without syncToken and hasMore", l.op, ErrPaging), resp.RequestID)
	}
	if env.Refs != nil && len(env.Refs) != len(items) {
		return nil, resp, withRequestID(fmt.Errorf("formsclient: %s: %w: a feed page with %d refs for %d submissions", l.op, ErrPaging, len(env.Refs), len(items)), resp.RequestID)
	}
	// A submission is deleted after it was added, so additions first,
	// then deletions, leave the copy as the page's order would.
	changes := make([]Change, 0, len(items)+len(env.Deleted))
	for i, s := range items {
		ch := Change{Submission: s}
		if env.Refs != nil {
			ch.Ref = env.Refs[i]
		}
		changes = append(changes, ch)
	}
	for _, ref := range env.Deleted {
		changes = append(changes, Change{Ref: ref, Deleted: true})
	}
	return changes, resp, nil
}

// tokenSet remembers the cursors or tokens a call has followed, by hash.
type tokenSet map[[sha256.Size]byte]bool

// add records t and reports whether it was new.
func (s tokenSet) add(t string) bool {
	h := sha256.Sum256([]byte(t))
	if s[h] {
		return false
	}
	s[h] = true
	return true
}

// newResponse is the Response of the answer r to a request with limit
// (0 for none); nil when no answer came.
func newResponse(r *response, limit int) *Response {
	if r == nil {
		return nil
	}
	return &Response{
		StatusCode:  r.status,
		Header:      r.header,
		RequestID:   r.requestID,
		ETag:        r.header.Get("ETag"),
		NotModified: r.status == http.StatusNotModified,
		RateLimit:   parseRateLimit(r.header),
		RetryAfter:  retryAfter(r.header.Get("Retry-After"), time.Now()),
		PageSize:    limit,
	}
}

// parseRateLimit reads the RateLimit and RateLimit-Policy fields of h:
// the RateLimit item with the fewest requests left (r) and, of those,
// the longest t, with the q and w of the policy of the same name. Items
// without both r and t are passed over; nil when none is left.
func parseRateLimit(h http.Header) *RateLimit {
	var best *RateLimit
	for _, it := range sfList(fieldHead(h.Values("RateLimit"))) {
		r, rok := it.int("r")
		t, tok := it.int("t")
		if !rok || !tok || r < 0 || t < 0 {
			continue
		}
		rl := &RateLimit{Policy: it.value, Remaining: int(min(r, 1<<31-1)), Reset: seconds(t)}
		if best == nil || rl.Remaining < best.Remaining || rl.Remaining == best.Remaining && rl.Reset > best.Reset {
			best = rl
		}
	}
	if best == nil {
		return nil
	}
	for _, it := range sfList(fieldHead(h.Values("RateLimit-Policy"))) {
		if it.value != best.Policy {
			continue
		}
		if q, ok := it.int("q"); ok && q >= 0 {
			best.Quota = int(min(q, 1<<31-1))
		}
		if w, ok := it.int("w"); ok && w >= 0 {
			best.Window = seconds(w)
		}
		break
	}
	return best
}

// Bounds on what is read of a RateLimit or RateLimit-Policy field: the
// API sends a policy or two, and a server's field of megabytes (the
// transport takes 10 MiB of headers) must not cost the client hundreds
// of megabytes and seconds to read.
const (
	maxFieldBytes = 4 << 10
	maxFieldItems = 16
)

// fieldHead is the field of the lines vals, joined, up to the last
// member that ends within maxFieldBytes (a member cut short could read
// as another value: r=1 of r=12).
func fieldHead(vals []string) string {
	var b strings.Builder
	for i, v := range vals {
		if b.Len()+len(v)+1 > maxFieldBytes {
			if i > 0 {
				b.WriteByte(',')
			}
			rest := v[:max(0, min(len(v), maxFieldBytes-b.Len()))]
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				b.WriteString(rest[:j])
			}
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(v)
	}
	return b.String()
}

// seconds is n seconds, at most about 292 years.
func seconds(n int64) time.Duration {
	return time.Duration(min(n, int64(1<<63-1)/int64(time.Second))) * time.Second
}

// sfItem is one member of a structured-field list (RFC 8941): its bare
// item (a string unquoted, a token as it is) and its parameters, raw.
type sfItem struct {
	value  string
	params map[string]string
}

// int returns the parameter key as an integer.
func (it sfItem) int(key string) (int64, bool) {
	v, ok := it.params[key]
	if !ok || v == "" || strings.Trim(v, "-0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// sfList splits a structured-field list into its members, leniently: a
// member that cannot be read is left out, and a malformed field gives
// what could be read before the fault. It reads maxFieldItems members at
// most.
func sfList(v string) []sfItem {
	var items []sfItem
	for _, member := range splitOutsideQuotes(v, ',') {
		if len(items) == maxFieldItems {
			break
		}
		parts := splitOutsideQuotes(member, ';')
		value := strings.TrimSpace(parts[0])
		if strings.HasPrefix(value, `"`) {
			s, err := strconv.Unquote(value)
			if err != nil {
				continue
			}
			value = s
		}
		if value == "" {
			continue
		}
		it := sfItem{value: value, params: map[string]string{}}
		for _, p := range parts[1:] {
			k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
			if _, dup := it.params[k]; !dup { // the first of a repeated key
				it.params[k] = val
			}
		}
		items = append(items, it)
	}
	return items
}

// splitOutsideQuotes splits s at each sep that is not inside a quoted
// string (with \" and \\ escapes).
func splitOutsideQuotes(s string, sep byte) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}
