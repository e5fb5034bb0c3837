package formsclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/formsapi/formsapi"
)

// ListOption narrows or orders a list: [Since], [Until], [Oldest],
// [Newest], [PageSize], for submissions [Filter], [Search], [SortBy] and [Fields],
// and for the page calls ([Client.SubmissionsPage] and the others)
// [Cursor], [IfNoneMatch], [ExactTotal] and [EstimatedTotal]. A call
// given a ListOption it cannot honour (a nil one, PageSize(0), a Filter
// or Fields on the forms list, a page call's option given to an
// iterator, or any but PageSize for [Client.Sync]) reports an error
// before any request.
type ListOption func(*listQuery)

// listQuery is what the options of one call asked for.
type listQuery struct {
	order        formsapi.Order
	since, until time.Time
	limit        int        // 0: the server's default
	filters      url.Values // filter[<field>], q and fields, as sent
	cursor       string     // Cursor: where the page starts; "" for the first
	ifNoneMatch  string     // IfNoneMatch: the tag to send
	total        string     // ExactTotal, EstimatedTotal: "exact" or "estimate"
	wait         int        // Wait: the seconds a sync request may wait; 0: none
	given        []string   // the options given, by name, in order
	err          error      // the first option that cannot be used
}

// note records that the option name was given.
func (q *listQuery) note(name string) { q.given = append(q.given, name) }

// listOptions applies opts; a nil option is an error.
func listOptions(opts []ListOption) listQuery {
	var q listQuery
	for i, o := range opts {
		if o == nil {
			if q.err == nil {
				q.err = fmt.Errorf("formsclient: list option %d is nil", i+1)
			}
			continue
		}
		o(&q)
	}
	return q
}

// Since keeps the items created at t or later. A zero t is no bound.
// [Client.Sync] refuses it: the feed cannot filter.
func Since(t time.Time) ListOption {
	return func(q *listQuery) { q.note("Since"); q.since = t }
}

// Until keeps the items created before t. A zero t is no bound. With
// [Since], t must be later than the since time, or the server answers 400.
// [Client.Sync] refuses it: the feed cannot filter.
func Until(t time.Time) ListOption {
	return func(q *listQuery) { q.note("Until"); q.until = t }
}

// Oldest lists the earliest created items first. [Client.Sync] refuses
// it: the feed comes in commit order.
func Oldest() ListOption {
	return func(q *listQuery) { q.note("Oldest"); q.order = formsapi.Oldest }
}

// Newest lists the most recently created items first, which is the
// default. [Client.Sync] refuses it: the feed comes in commit order.
func Newest() ListOption {
	return func(q *listQuery) { q.note("Newest"); q.order = formsapi.Newest }
}

// PageSize sets how many items each request asks for (the server's default,
// 100 unless its host changed it, otherwise), for the lists and for
// [Client.Sync]. It changes only how many requests a call takes, never
// which items it yields. n must be at least 1 and at most the server's
// maximum (1000 unless its host changed it): below 1 the call reports an
// error without a request, above the maximum the server answers 400,
// which the call reports.
func PageSize(n int) ListOption {
	return func(q *listQuery) {
		q.note("PageSize")
		if n < 1 {
			if q.err == nil {
				q.err = fmt.Errorf("formsclient: PageSize(%d): must be at least 1", n)
			}
			return
		}
		q.limit = n
	}
}

// Filter keeps the submissions whose data has the top-level member field
// equal to value: a string, a bool, nil (JSON null) or a number of any Go
// numeric type (compared by value: 42 finds 42.0). Several Filters, on
// different fields, must all hold. Filtered pages may be short or empty
// and still lead on; the iterator follows them. A value of another type,
// an empty field, or a Filter on the forms list is an error before any
// request; the server's limits (8 filters, 64-byte fields, 256-byte
// values) are 400s, which the call reports.
func Filter(field string, value any) ListOption {
	return func(q *listQuery) {
		q.note("Filter")
		lit, err := filterLiteral(value)
		if err == nil && field == "" {
			err = errors.New("the field is empty")
		}
		if err != nil {
			if q.err == nil {
				q.err = fmt.Errorf("formsclient: Filter(%q): %w", field, err)
			}
			return
		}
		if q.filters == nil {
			q.filters = url.Values{}
		}
		q.filters.Set("filter["+field+"]", lit)
	}
}

// Op is an operator of [Where] (filter[<field>][<op>]; see docs/api.md,
// "Operators").
type Op string

// The operators of [Where]. For a list, use [WhereIn]; for presence,
// [WhereExists].
const (
	// Ne keeps every submission [Filter] of the same value does not:
	// absent and null members included.
	Ne Op = "ne"
	// Gt keeps members greater than the value: numbers as numbers,
	// RFC 3339 instants (a time.Time) as instants, other strings by their
	// normal form (case and accents aside). A member of another kind than
	// the value, or none, is not kept.
	Gt Op = "gt"
	// Gte keeps members greater than or equal to the value (as Gt).
	Gte Op = "gte"
	// Lt keeps members less than the value (as Gt).
	Lt Op = "lt"
	// Lte keeps members less than or equal to the value (as Gt).
	Lte Op = "lte"
	// Prefix keeps string members whose normal form (case and accents
	// aside) starts with the value's, which must be a string.
	Prefix Op = "prefix"
)

// Where keeps the submissions whose data's top-level member field
// satisfies op with value: a string, a number of any Go numeric type, a
// time.Time (sent as an RFC 3339 instant, which compares as one), or
// for Ne a bool or nil too. Several clauses must all hold; two on one
// field make a range: Where("n", Gte, 5), Where("n", Lt, 10). Pages may
// be short or empty and still lead on; the iterator follows them. A
// value of another type, an empty field or an unknown operator is an
// error before any request; the server's limits are 400s, which the
// call reports.
func Where(field string, op Op, value any) ListOption {
	return func(q *listQuery) {
		q.note("Where")
		var err error
		var lit string
		switch op {
		case Ne, Gt, Gte, Lt, Lte, Prefix:
			if t, ok := value.(time.Time); ok {
				value = t.Format(time.RFC3339Nano)
			}
			lit, err = filterLiteral(value)
			if err == nil && op != Ne && (value == nil || isBool(value)) {
				err = fmt.Errorf("%s takes a number, a string or a time.Time", op)
			}
			if _, ok := value.(string); !ok && err == nil && op == Prefix {
				err = errors.New("prefix takes a string")
			}
		default:
			err = fmt.Errorf("unknown operator %q: use Ne, Gt, Gte, Lt, Lte or Prefix, WhereIn or WhereExists", string(op))
		}
		q.setFilter("Where", field, string(op), lit, err)
	}
}

func isBool(v any) bool {
	_, ok := v.(bool)
	return ok
}

// WhereIn keeps the submissions whose data's top-level member field
// equals one of values (each as [Filter] takes it); at most 32 values.
// No values is an error before any request.
func WhereIn(field string, values ...any) ListOption {
	return func(q *listQuery) {
		q.note("WhereIn")
		var err error
		lits := make([]string, 0, len(values))
		for _, v := range values {
			var lit string
			if lit, err = filterLiteral(v); err != nil {
				break
			}
			lits = append(lits, lit)
		}
		if err == nil && len(values) == 0 {
			err = errors.New("no values")
		}
		q.setFilter("WhereIn", field, "in", strings.Join(lits, ","), err)
	}
}

// WhereExists keeps the submissions whose data has the top-level member
// field present and not null (present true), or absent or null (present
// false).
func WhereExists(field string, present bool) ListOption {
	return func(q *listQuery) {
		q.note("WhereExists")
		q.setFilter("WhereExists", field, "exists", strconv.FormatBool(present), nil)
	}
}

// setFilter sets filter[field][op] (filter[field] for op "") to lit, or
// records err as the option's error.
func (q *listQuery) setFilter(option, field, op, lit string, err error) {
	if err == nil && field == "" {
		err = errors.New("the field is empty")
	}
	if err != nil {
		if q.err == nil {
			q.err = fmt.Errorf("formsclient: %s(%q): %w", option, field, err)
		}
		return
	}
	if q.filters == nil {
		q.filters = url.Values{}
	}
	name := "filter[" + field + "]"
	if op != "" {
		name += "[" + op + "]"
	}
	q.filters.Set(name, lit)
}

// filterLiteral is value as the filter parameter takes it: a JSON
// literal, strings always quoted (so "42" stays a string).
func filterLiteral(value any) (string, error) {
	switch v := value.(type) {
	case nil, string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64, json.Number:
		b, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
	return "", fmt.Errorf("a %T: the value must be a string, a bool, nil or a number", value)
}

// Search keeps the submissions one of whose values contains term, case
// and accents set aside ("zoe" finds "Zoë"): any string in data at any
// depth, a number's text, an attachment's file name (the q parameter).
// It combines with Filter, Fields and the rest. Searched pages may be
// short or empty and still lead on; the iterator follows them. An empty
// term, or Search on the forms list, is an error before any request; a
// term shorter than 3 characters or longer than 64 bytes (once case and
// accents are set aside) is the server's 400, which the call reports.
func Search(term string) ListOption {
	return func(q *listQuery) {
		q.note("Search")
		if term == "" {
			if q.err == nil {
				q.err = errors.New("formsclient: Search: the term is empty")
			}
			return
		}
		if q.filters == nil {
			q.filters = url.Values{}
		}
		q.filters.Set("q", term)
	}
}

// SortBy lists the submissions by the value of their top-level member
// field (the sort parameter): ascending, or descending when descending
// is true. Numbers order as numbers, RFC 3339 instants as instants,
// other text case and accents aside, then false and true; submissions
// without a value (the member absent, null, an object or an array) come
// last either way, and ties by creation time in the same direction. It
// takes the place of [Oldest] and [Newest], which it refuses beside it.
// Sorted pages may be short or empty and still lead on; the iterator
// follows them. An empty field, or SortBy on the forms list, is an error
// before any request; a field longer than 64 bytes is the server's 400.
func SortBy(field string, descending bool) ListOption {
	return func(q *listQuery) {
		q.note("SortBy")
		if field == "" {
			if q.err == nil {
				q.err = errors.New("formsclient: SortBy: the field is empty")
			}
			return
		}
		if q.filters == nil {
			q.filters = url.Values{}
		}
		v := field
		if descending {
			v = "-" + field
		}
		q.filters.Set("sort", v)
	}
}

// Fields keeps only the named top-level members in each submission's
// data (the projection of the fields parameter): a wide form's pages then
// move a fraction of the bytes. No names, an empty name, a name with a
// comma, or Fields on the forms list is an error before any request.
func Fields(names ...string) ListOption {
	return func(q *listQuery) {
		q.note("Fields")
		var err error
		switch {
		case len(names) == 0:
			err = errors.New("no names")
		case slices.ContainsFunc(names, func(n string) bool { return n == "" || strings.Contains(n, ",") }):
			err = errors.New("a name is empty or holds a comma")
		}
		if err != nil {
			if q.err == nil {
				q.err = fmt.Errorf("formsclient: Fields: %w", err)
			}
			return
		}
		if q.filters == nil {
			q.filters = url.Values{}
		}
		q.filters.Set("fields", strings.Join(names, ","))
	}
}

// Forms yields the forms of the key's account, newest first unless
// [Oldest] is given, fetching pages as the loop goes. On an error it
// yields the error with a zero Form and stops. [Client.FormsPage] reads
// one page and what the server said about it.
func (c *Client) Forms(ctx context.Context, opts ...ListOption) iter.Seq2[formsapi.Form, error] {
	return walk(ctx, c, formsList(), opts)
}

// Submissions yields the submissions of the form formID, newest first
// unless [Oldest] is given, fetching pages as the loop goes. On an error
// it yields the error with a zero Submission and stops; a form that does
// not exist or belongs to another account is an [*Error] matching
// [formsapi.ErrFormNotFound]. formID is sent percent-escaped.
// [Client.SubmissionsPage] reads one page and what the server said about
// it.
func (c *Client) Submissions(ctx context.Context, formID string, opts ...ListOption) iter.Seq2[formsapi.Submission, error] {
	return walk(ctx, c, submissionsList(fmt.Sprintf("list submissions of form %q", formID), formID), opts)
}

// formsList is the forms list.
func formsList() list[formsapi.Form] {
	return list[formsapi.Form]{
		op:        "list forms",
		path:      "/v1/forms",
		field:     "forms",
		pageCall:  "FormsPage",
		createdAt: func(f formsapi.Form) time.Time { return f.CreatedAt },
	}
}

// submissionsList is the list of formID's submissions (or its feed),
// named op in errors.
func submissionsList(op, formID string) list[formsapi.Submission] {
	l := list[formsapi.Submission]{
		op:        op,
		path:      "/v1/forms/" + url.PathEscape(formID) + "/submissions",
		field:     "submissions",
		pageCall:  "SubmissionsPage",
		createdAt: func(s formsapi.Submission) time.Time { return s.CreatedAt },
		form:      true,
	}
	if formID == "" || formID == "." || formID == ".." {
		// Not a path segment at all: no server could have such a form.
		l.err = fmt.Errorf("formsclient: %s: %w", l.op, formsapi.ErrFormNotFound)
	}
	return l
}

// list describes one of the API's lists to walk.
type list[T any] struct {
	op        string // for error messages
	path      string // below the base URL, segments escaped
	field     string // the envelope field that holds the items
	pageCall  string // the Client's method that reads one page of it
	createdAt func(T) time.Time
	form      bool  // a form's list: its 404 is ErrFormNotFound
	err       error // a problem found before any request
}

// pageOptions are the options that concern one page, which the
// iterators cannot honour.
var pageOptions = []string{"Cursor", "IfNoneMatch", "ExactTotal", "EstimatedTotal"}

// refuse returns the error of a call of l that cannot honour q: a
// problem of its arguments or options found before any request, nil if
// none. iterator says whether the call walks the whole list.
func (l list[T]) refuse(q listQuery, iterator bool) error {
	if q.err != nil {
		return q.err
	}
	if slices.Contains(q.given, "Wait") {
		return fmt.Errorf("formsclient: %s: Wait applies to the sync feed only (Sync and SyncPage)", l.op)
	}
	if l.field == "forms" && (q.filters != nil || q.total != "") {
		return fmt.Errorf("formsclient: %s: Filter, Where, WhereIn, WhereExists, Search, Fields, SortBy, ExactTotal and EstimatedTotal apply to submissions only", l.op)
	}
	if q.filters.Has("sort") && (slices.Contains(q.given, "Oldest") || slices.Contains(q.given, "Newest")) {
		return fmt.Errorf("formsclient: %s: SortBy orders the list, ties included: Oldest and Newest do not combine with it", l.op)
	}
	if iterator {
		for _, name := range q.given {
			if slices.Contains(pageOptions, name) {
				return fmt.Errorf("formsclient: %s: %s applies to one page: read pages with %s", l.op, name, l.pageCall)
			}
		}
	}
	return l.err
}

// Bounds on pages that make no progress. The API sends an empty page
// with a nextCursor only for a filtered or searched list, whose pages
// each examine a bounded number of entries (and otherwise only where it
// left out every stored item the page read as damaged), and never the
// same items on two pages in a row, unless distinct submissions are
// identical to the nanosecond; a server that does either forever (one
// behind a proxy that drops the query string, say, answers the first
// page again and again, each time with a freshly sealed cursor) must not
// keep the client busy forever.
const (
	maxEmptyPages    = 5
	maxRepeatedPages = 10
	// maxFilteredEmptyPages: a filtered page examines at most 1,000 index
	// entries, so a form of 100 million submissions gives at most this
	// many empty pages in a row.
	maxFilteredEmptyPages = 100_000
)

// defaultPageSize is the API's page size when a request has no limit.
// A host may change it; the client assumes it only to halve it.
const defaultPageSize = 100

// params are the query parameters of a page that q asks for, without
// its limit: q's cursor, if any, and every other parameter q's options
// set. The order is sent when given, or for a first page (the API's
// default order is the client's too); a cursor carries its order, and
// repeating it is fine, contradicting it a 400.
func (q *listQuery) params() url.Values {
	p := url.Values{}
	if q.cursor != "" {
		p.Set("cursor", q.cursor)
	}
	if (q.cursor == "" || slices.Contains(q.given, "Oldest") || slices.Contains(q.given, "Newest")) && !q.filters.Has("sort") {
		p.Set("order", q.order.String())
	}
	q.setSelection(p)
	if q.total != "" {
		p.Set("total", q.total)
	}
	return p
}

// filtered reports whether q's pages do bounded work and may be empty
// while they lead on: a Filter or a Search.
func (q *listQuery) filtered() bool {
	return q.filters.Has("fields") && len(q.filters) > 1 || !q.filters.Has("fields") && len(q.filters) > 0
}

// walk yields the items of l page by page, through listPage. The first
// request carries the options; later ones carry only the cursor and the
// same limit, since the cursor carries the order, the range and the
// filters. A page over the response size limit is asked for again with
// half the limit (listPage), and the walk goes on with the smaller limit.
func walk[T any](ctx context.Context, c *Client, l list[T], opts []ListOption) iter.Seq2[T, error] {
	q := listOptions(opts)
	return func(yield func(T, error) bool) {
		var zero T
		fail := func(err error) { yield(zero, err) }
		for _, err := range []error{c.ready(), l.refuse(q, true)} {
			if err != nil {
				fail(err)
				return
			}
		}
		limit := q.limit // 0 until a page is too large for the server's default
		params := q.params()
		// A filtered list may give many empty pages in a row, each after
		// a bounded walk of the server's index: the cursors, never seen
		// twice, still guard against a loop.
		emptyBound := maxEmptyPages
		if q.filtered() {
			emptyBound = maxFilteredEmptyPages
		}
		var (
			seen    = tokenSet{} // cursors already followed
			last    time.Time    // createdAt of the last item yielded
			yielded bool
			empty   int     // consecutive empty pages with a next cursor
			repeats int     // consecutive pages with the same items as the one before
			prev    []T     // the previous page's items
			sc      scratch // the memory of a page too large, for the smaller request after it
		)
		for page := 1; ; page++ {
			items, _, resp, err := listPage(ctx, c, l, params, limit, "", &sc)
			if err != nil {
				fail(err)
				return
			}
			limit = resp.PageSize
			// Usually the first items differ and the comparison stops there.
			if len(items) > 0 && reflect.DeepEqual(items, prev) {
				repeats++
			} else {
				repeats = 0
			}
			prev = items
			if repeats >= maxRepeatedPages {
				fail(withRequestID(fmt.Errorf("%w: %s: %d pages in a row repeat the items of the page before; stopping so as not to loop", ErrPaging, l.op, repeats+1), resp.RequestID))
				return
			}
			for _, it := range items {
				if err := ctx.Err(); err != nil {
					fail(fmt.Errorf("formsclient: %s: %w", l.op, err))
					return
				}
				t := l.createdAt(it)
				if err := q.check(t, last, yielded); err != nil {
					fail(withRequestID(fmt.Errorf("%w: %s: page %d: %s", ErrPaging, l.op, page, err), resp.RequestID))
					return
				}
				last, yielded = t, true
				if !yield(it, nil) {
					return
				}
			}
			next := resp.NextCursor
			if next == "" {
				return
			}
			if !seen.add(next) {
				fail(withRequestID(fmt.Errorf("%w: %s: page %d: the server returned a nextCursor it had returned before; stopping so as not to loop", ErrPaging, l.op, page), resp.RequestID))
				return
			}
			if len(items) == 0 {
				empty++
			} else {
				empty = 0
			}
			if empty >= emptyBound {
				fail(withRequestID(fmt.Errorf("%w: %s: %d empty pages in a row each point to a next page; stopping so as not to loop", ErrPaging, l.op, empty), resp.RequestID))
				return
			}
			params = url.Values{"cursor": {next}}
		}
	}
}

// check says what is wrong, if anything, with an item created at t that
// follows one created at last (if yielded): the API returns a range in
// order, so an item out of order or out of range means the pages skip or
// repeat items. A sorted list (SortBy) is in the field's order, not by
// creation time: only its range is checked.
func (q *listQuery) check(t, last time.Time, yielded bool) error {
	yielded = yielded && !q.filters.Has("sort")
	switch {
	case !q.since.IsZero() && t.Before(q.since):
		return fmt.Errorf("an item created at %s is before since %s", t.Format(time.RFC3339Nano), q.since.Format(time.RFC3339Nano))
	case !q.until.IsZero() && !t.Before(q.until):
		return fmt.Errorf("an item created at %s is not before until %s", t.Format(time.RFC3339Nano), q.until.Format(time.RFC3339Nano))
	case yielded && q.order == formsapi.Oldest && t.Before(last):
		return fmt.Errorf("an item created at %s follows one created at %s in oldest-first order", t.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
	case yielded && q.order == formsapi.Newest && t.After(last):
		return fmt.Errorf("an item created at %s follows one created at %s in newest-first order", t.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
	}
	return nil
}

// envelope is a list page as the API sends it. Only the field of the
// list being read is used.
type envelope[T any] struct {
	Success     *bool    `json:"success"`
	Message     *string  `json:"message"`
	NextCursor  *string  `json:"nextCursor"`
	SyncToken   *string  `json:"syncToken"`
	HasMore     *bool    `json:"hasMore"`
	Refs        []string `json:"refs"`
	Deleted     []string `json:"deleted"`
	Forms       *[]T     `json:"forms"`
	Submissions *[]T     `json:"submissions"`
	Total       *struct {
		Value int64  `json:"value"`
		Kind  string `json:"kind"`
	} `json:"total"`
}

// listPage gets one page of l, the one code path of every call that
// reads pages: params as given, limit when above 0, and inm as
// If-None-Match when not empty. It checks that the answer is a
// successful page of the API with its items array and decodes it. A page
// over the response size limit is asked for again with half the limit
// (from the server's default when limit is 0), down to one item; the
// Response's PageSize says the limit of the request that answered. The
// Response is the last answer's, with or without an error; nil when none
// came. sc is the memory of an earlier response that was over the size
// limit, reused for this one.
func listPage[T any](ctx context.Context, c *Client, l list[T], params url.Values, limit int, inm string, sc *scratch) ([]T, envelope[T], *Response, error) {
	var env envelope[T]
	for {
		p := params
		if limit > 0 {
			p = maps.Clone(params)
			p.Set("limit", strconv.Itoa(limit))
		}
		res, err := c.get(ctx, c.endpoint(l.path, p), l.form, inm, sc)
		resp := newResponse(res, limit)
		if e, ok := err.(*Error); ok && e.tooLarge && limit != 1 {
			// Ask again from the same place for fewer items: the
			// answer is the first half of the page that did not fit.
			if limit == 0 {
				limit = defaultPageSize
			}
			limit /= 2
			continue
		}
		if e, ok := err.(*Error); ok {
			e.op = l.op
			return nil, env, resp, e
		}
		if err != nil {
			return nil, env, resp, fmt.Errorf("formsclient: %s: %w", l.op, err)
		}
		fail := func(msg string) ([]T, envelope[T], *Response, error) {
			return nil, env, resp, &Error{StatusCode: res.status, Message: msg, RequestID: res.requestID, op: l.op}
		}
		if err := json.Unmarshal(res.body, &env); err != nil {
			var syntaxErr *json.SyntaxError
			var typeErr *json.UnmarshalTypeError
			switch {
			case errors.As(err, &syntaxErr):
				return fail("the response is not a page of the API: its body is not JSON")
			case errors.As(err, &typeErr) && typeErr.Field == "":
				return fail("the response is not a page of the API: its body is not a JSON object")
			case errors.As(err, &typeErr):
				return fail(fmt.Sprintf("the response is not a page of the API: %q is a JSON %s where the API sends %s", typeErr.Field, typeErr.Value, jsonKind(typeErr.Type)))
			}
			return fail("the response is not a page of the API: " + err.Error())
		}
		if env.Success == nil || !*env.Success {
			if env.Success != nil && env.Message != nil && *env.Message != "" {
				return fail(*env.Message)
			}
			return fail(`the response is not a page of the API: "success" is not true`)
		}
		items := env.Submissions
		if l.field == "forms" {
			items = env.Forms
		}
		if items == nil {
			return fail(fmt.Sprintf("the response is not a page of the API: %q is not an array", l.field))
		}
		if env.NextCursor != nil {
			resp.NextCursor = *env.NextCursor
		}
		if env.SyncToken != nil {
			resp.SyncToken = *env.SyncToken
		}
		if env.HasMore != nil {
			resp.HasMore = *env.HasMore
		}
		if env.Total != nil {
			resp.Total = &formsapi.Total{Value: env.Total.Value, Kind: env.Total.Kind}
		}
		return *items, env, resp, nil
	}
}

// jsonKind names the JSON type that decodes into t, for error messages.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch k := t.Kind(); {
	case k == reflect.String:
		return "a string"
	case k == reflect.Bool:
		return "a boolean"
	case k == reflect.Slice || k == reflect.Array:
		return "an array"
	case k == reflect.Struct || k == reflect.Map:
		return "an object"
	case reflect.Int <= k && k <= reflect.Float64:
		return "a number"
	}
	return "another type"
}

// Count returns how many submissions of the form formID the options
// select ([Since], [Until], [Filter], [Search]; Fields, the order and
// PageSize do not change a count), as the server counts them in one
// request (total=exact when exact is true, else total=estimate): the
// Total's Kind ("exact", "at_least" or "estimate") says how far to trust
// its Value (see docs/api.md). It is [Client.SubmissionsPage] with
// PageSize(1) and [ExactTotal] or [EstimatedTotal], the Total of its
// Response; the options of a page call are an error here. A server whose
// store cannot count answers 501, an [*Error].
func (c *Client) Count(ctx context.Context, formID string, exact bool, opts ...ListOption) (formsapi.Total, error) {
	l := submissionsList(fmt.Sprintf("count submissions of form %q", formID), formID)
	if err := c.ready(); err != nil {
		return formsapi.Total{}, err
	}
	q := listOptions(opts)
	if err := l.refuse(q, true); err != nil {
		return formsapi.Total{}, err
	}
	// One item, in the server's default order, with the range and the
	// filters: what the count needs and nothing else.
	count := listQuery{since: q.since, until: q.until, limit: 1, total: "estimate"}
	if exact {
		count.total = "exact"
	}
	for k, v := range q.filters {
		if k != "fields" && k != "sort" { // the count is the same sorted or not
			if count.filters == nil {
				count.filters = url.Values{}
			}
			count.filters[k] = v
		}
	}
	_, resp, err := page(ctx, c, l, count)
	if err != nil {
		return formsapi.Total{}, err
	}
	if resp.Total == nil {
		return formsapi.Total{}, withRequestID(fmt.Errorf("%w: %s: the page has no total", ErrPaging, l.op), resp.RequestID)
	}
	return *resp.Total, nil
}

// setSelection sets in p the parameters that select the list's items:
// since, until, the filters, q and fields as the options gave them.
func (q *listQuery) setSelection(p url.Values) {
	if !q.since.IsZero() {
		p.Set("since", q.since.UTC().Format(time.RFC3339Nano))
	}
	if !q.until.IsZero() {
		p.Set("until", q.until.UTC().Format(time.RFC3339Nano))
	}
	for k, v := range q.filters {
		p[k] = v
	}
}
