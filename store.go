package formsapi

import (
	"context"
	"time"

	"github.com/formsapi/formsapi/internal/find"
)

// Store is where the handler reads forms and submissions. Every method is
// scoped to one account: there is deliberately no way to look a form up
// without saying whose it must be. storetest.Run checks each clause
// below, one subtest per clause (damaged data when the test says how to
// damage the store's storage: storetest.WithDamage); a host's own store
// runs it too.
//
// The contract:
//
//   - Isolation. ListForms returns only forms of accountID. ListSubmissions
//     returns an error wrapping [ErrFormNotFound] when formID is not a form
//     of accountID, the same whether the form does not exist or belongs to
//     another account, and nothing else about it.
//   - Fields. Items carry exactly what was stored: the form's or the
//     submission's public fields, Data byte for byte as one JSON object, and
//     CreatedAt at the same instant (in any location: the handler answers
//     in UTC). Nil and empty Attachments are the same. Internal [Metadata]
//     is never part of a result.
//   - Order. Items come in q.Order by CreatedAt. Items created at the same
//     instant are ordered by a tie-breaker of the store's choosing that
//     never changes for an item.
//   - Range. A page holds only items with q.Since <= CreatedAt < q.Until; a
//     zero bound is no bound. An account without forms, or a form without
//     submissions in the range, gives an empty page, not an error.
//   - Filters and search. A page of submissions holds only items whose
//     Data matches every clause of q.Filters and that contain q.Search
//     ([Query.Finds]), and walking the pages
//     returns every such item of the range. A store may bound the work of
//     one filtered or searched page: it may end the page before q.Limit
//     items, even with none, with a NextCursor after the last item it
//     examined. The handler also drops any item that does not match, so
//     a store that ignores Filters or Search serves correct (if short)
//     pages, but does not pass storetest.
//   - Sort. When q.Sort is set, items come in the order it names
//     ([Query.Sort]) rather than by CreatedAt, each item of the range
//     once across the pages, filters and search applied as above.
//   - Pages. A page holds at most q.Limit items. NextCursor is "" when no
//     item of the range follows the page; otherwise it is a non-empty string
//     that, passed back as q.Cursor with the same Order, Since, Until,
//     Filters and Search, yields the items right after this page's last one (or after
//     the last item a filtered page examined). A page that carries a
//     NextCursor holds exactly q.Limit items, unless the byte budget ended
//     it earlier or q.Filters or q.Search is set. Walking the pages
//     returns every item of the range exactly once, even when items are
//     added between two requests: an added item that sorts after the
//     cursor is returned later, one that sorts before it is not.
//   - Byte budget. When q.MaxBytes > 0, a method may end a page before
//     q.Limit items, with a NextCursor, where the next item would take the
//     page past q.MaxBytes; each item counts as the length of its JSON as
//     the API sends it ([AppendSubmissionJSON] makes a submission's). Then
//     the page's items total at most q.MaxBytes, or the page holds a
//     single item, however large: a page is never empty while items of
//     the range remain. A store that ignores MaxBytes stays correct: the
//     handler measures every page it serves, and asks again for one past
//     the budget, with the limit cut to the items that fit, so its cursor
//     follows the last of them. Honouring it saves that second call.
//   - Limit. The handler always sends 1 <= q.Limit <= its maximum page
//     size. A store returns an error for a Limit below 1 rather than guess.
//   - Cursors. q.Cursor is "" for the first page or a NextCursor this store
//     returned; the handler seals cursors, so a store sees only its own,
//     for the same list. A cursor it cannot read yields an error wrapping
//     [ErrInvalidCursor].
//   - Context. When ctx is canceled or its deadline passes, a method
//     returns an error wrapping ctx.Err().
//   - Errors. The handler answers an error wrapping ErrFormNotFound with
//     404, ErrInvalidCursor with 400, context.DeadlineExceeded with 503, and
//     any other error with 500 and a log line carrying the error's text: the
//     client never sees it, the host's logs do, so it may name the store and
//     the operation but never keys or submission data.
//   - Concurrency. Methods are safe for concurrent use, and results are the
//     caller's to modify: no slice in them is shared with the store or
//     with another result.
//   - Damaged data. A stored submission whose Data is not one JSON object
//     (a file edited by hand, say), or nests so deep that the response
//     would pass encoding/json's limit of 10,000 levels (data stored
//     before the write side had [Limits]), is left out of its page and logged by
//     the handler with its position, never its content; invalid UTF-8 in
//     its strings is sent as U+FFFD, as encoding/json would. The rest of
//     the page and the pages after it are served as usual.
type Store interface {
	// ListForms returns one page of the forms of accountID, as q asks.
	ListForms(ctx context.Context, accountID string, q Query) (Page[Form], error)
	// ListSubmissions returns one page of the submissions of formID, as q
	// asks, or ErrFormNotFound when formID is not a form of accountID.
	ListSubmissions(ctx context.Context, accountID, formID string, q Query) (Page[Submission], error)
}

// Order is the order of a list by creation time. Items created at the same
// instant are ordered by a tie-breaker of the store's choosing that never
// changes, so pages never skip or repeat an item.
type Order int

const (
	// Newest lists the most recently created items first (the default).
	Newest Order = iota
	// Oldest lists the earliest created items first.
	Oldest
)

// String returns the wire name of o: "desc" for Newest, "asc" for Oldest.
func (o Order) String() string {
	if o == Oldest {
		return "asc"
	}
	return "desc"
}

// Query selects one page of a list.
type Query struct {
	Limit        int       // page size: 1 to the handler's maximum
	Cursor       string    // opaque; "" for the first page
	Order        Order     // Newest (the zero value, default) or Oldest
	Since, Until time.Time // createdAt >= Since and < Until; zero means unbounded
	// MaxBytes is the page's byte budget (see the Store contract); the
	// handler sets it from WithPageBytes. Zero means none.
	MaxBytes int
	// Filters are clauses on top-level members of a submission's Data
	// (equalities, and the operators of [FilterOp]), all of which an
	// item must satisfy ([Query.Matches]); none means every item. The
	// handler sends them sorted by Field and then Op, each pair once, and
	// only for lists of submissions.
	Filters []Filter
	// Search, when not "", is a search term (q=) in its normal form
	// (see [Query.Finds]): a page of
	// submissions holds only items one of whose values contains it
	// ([Query.Finds]). The handler sends it for lists of submissions only,
	// 3 characters to 64 bytes long.
	Search string
	// Sort, when not "", orders a list of submissions by the top-level
	// member of Data it names instead of by CreatedAt alone: "<field>"
	// ascending, "-<field>" descending (sort=, docs/api.md, "Sort by a
	// submitted field"). Items with a sortable value of the member come
	// first, ordered by it (numbers < RFC 3339 instants < other text by
	// its normal form < false < true, reversed when descending), ties by
	// CreatedAt and the tie-breaker in the sort's direction (ascending:
	// oldest first); then the items without one (the member absent,
	// null, an object or an array), by CreatedAt in the same direction.
	// Order is then ignored; the handler sends Order's zero value. A
	// sorted page may end short, as a filtered one, with a NextCursor;
	// walking the pages returns every item of the range exactly once,
	// even when items are added or deleted between two requests.
	Sort string
	// Fields, when not nil, are the top-level members of Data that a
	// page of submissions carries (fields=), sorted; the handler drops the
	// others from the page a store gives it, so a store may ignore them.
	// A cursor and a page's tag carry them, and the read caches key pages
	// by them with the rest of the query.
	Fields []string
}

// Filter is one clause of Query.Filters: with Op FilterEq (the zero
// value), the top-level member Field of a submission's Data equals the
// JSON scalar Value; with another [FilterOp], what that operator says.
type Filter struct {
	// Field is the member's name, as the JSON object's key.
	Field string
	// Op is the clause's operator: FilterEq (""), equality, or one of
	// the others.
	Op FilterOp
	// Value is, for FilterEq, FilterNe and the ranges (FilterGt,
	// FilterGte, FilterLt, FilterLte), the canonical JSON text of a
	// string, a number, true, false or null: strings as encoding/json
	// writes them without HTML escaping, numbers as encoding/json writes
	// their float64 value (so 42, 42.0 and 4.2e1 are all 42). Data's
	// member equals it when its own canonical text is the same. For
	// FilterExists it is "true" or "false"; for FilterPrefix, the
	// prefix's normal form (as search normalizes text), not quoted.
	Value string
	// Values are, for FilterIn only, the canonical JSON texts of its
	// values, sorted, each once.
	Values []string
}

// FilterOp is the operator of a [Filter] (filter[<field>][<op>]=, see
// docs/api.md, "Filters on submitted fields"). Every operator looks at
// the top-level member of Data named by the clause (the last of its
// name), and Data that is not a JSON object satisfies no clause.
type FilterOp string

const (
	// FilterEq keeps a member equal to Value (filter[<field>]=).
	FilterEq FilterOp = ""
	// FilterNe keeps every item that FilterEq of the same Value does not:
	// a member absent, null, of another kind or another value.
	FilterNe FilterOp = "ne"
	// FilterGt keeps a member greater than Value: numbers compare as
	// numbers, strings that are RFC 3339 instants as instants, other
	// strings by their normal form; members of another kind than Value
	// (or absent) are not kept.
	FilterGt FilterOp = "gt"
	// FilterGte keeps a member greater than or equal to Value (as
	// FilterGt compares).
	FilterGte FilterOp = "gte"
	// FilterLt keeps a member less than Value (as FilterGt compares).
	FilterLt FilterOp = "lt"
	// FilterLte keeps a member less than or equal to Value (as FilterGt
	// compares).
	FilterLte FilterOp = "lte"
	// FilterIn keeps a member equal to one of Values.
	FilterIn FilterOp = "in"
	// FilterExists, with Value "true", keeps a member present and not
	// null; with "false", a member absent or null.
	FilterExists FilterOp = "exists"
	// FilterPrefix keeps a string member whose normal form starts with
	// Value.
	FilterPrefix FilterOp = "prefix"
)

// Matches reports whether data, a submission's Data, satisfies every
// clause of q.Filters: each names a top-level member of data (the last
// of its name, as encoding/json reads it) which its operator keeps (an
// equality: a scalar equal to the clause's). Data that is not a JSON
// object matches no clause. A
// store that does not filter may leave filtering to the handler, which
// drops the items of a page that do not match.
func (q Query) Matches(data []byte) bool {
	return find.Match(data, q.clauses())
}

// Finds reports whether s satisfies q's filters ([Query.Matches]) and
// its search: when q.Search is set, one of s's values contains it once
// normalized. The normal form is the compatibility decomposition (NFKD)
// without combining marks (Unicode category Mn), in lower case (ß as
// "ss"), so that "Zoë", "ZOE" and "zoe" are all "zoe". Its values are every string value of
// s.Data at any depth (not member names), the text of every number as
// Data writes it, and each attachment's file name (the last segment of
// its FileURL's path), each read as far as search reads it: the first 4
// KiB of each value and of its normal form, and 64 KiB of s's values and
// of their normal forms (docs/api.md, "Search: q"). A store that does not
// search may leave it to the handler, which drops the items of a page
// that it does not find.
func (q Query) Finds(s Submission) bool {
	if !q.Matches(s.Data) {
		return false
	}
	if q.Search == "" {
		return true
	}
	files := make([]string, len(s.Attachments))
	for i, a := range s.Attachments {
		files[i] = a.FileURL
	}
	return find.SearchMatch(s.Data, files, q.Search)
}

// clauses returns q.Filters as internal/find has them.
func (q Query) clauses() []find.Clause {
	if len(q.Filters) == 0 {
		return nil
	}
	cs := make([]find.Clause, len(q.Filters))
	for i, f := range q.Filters {
		cs[i] = find.Clause{Field: f.Field, Op: string(f.Op), Value: f.Value, Values: f.Values}
	}
	return find.Prepare(cs)
}

// Page is one page of a list.
type Page[T any] struct {
	Items      []T
	NextCursor string // "" when there is nothing after this page
}
