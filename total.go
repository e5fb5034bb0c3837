package formsapi

// Totals: total=exact or total=estimate asks a page of submissions to say
// how many items its list holds (its range and filters, whatever the
// cursor), as "total": {"value": N, "kind": K}. Only a request that asks
// is counted, and the count is bounded: see Counter.

import (
	"context"
	"errors"
	"strconv"
)

// TotalKind says how far a Total can be trusted.
type TotalKind string

const (
	// TotalExact: the list holds exactly Value items.
	TotalExact TotalKind = "exact"
	// TotalAtLeast: the count stopped at its bound; the list holds at
	// least Value items.
	TotalAtLeast TotalKind = "at_least"
	// TotalEstimate: Value was counted without checking every item (index
	// entries rather than matches); the list may hold fewer or more.
	TotalEstimate TotalKind = "estimate"
)

// Total is the size of a list as a store counted it.
type Total struct {
	Value int64
	Kind  TotalKind
}

// Counting bounds. A count reads at most this many index entries or rows.
const (
	// MaxExactCount bounds the index entries an exact count of a filtered
	// list checks against its filters (each a read of the submission's
	// data): past it the count is TotalAtLeast the matches found.
	MaxExactCount = 10_000
	// MaxCount bounds the rows or index entries any other count reads
	// (index entries only, no data): past it the count is TotalAtLeast
	// MaxCount (or TotalEstimate, for an estimate of a filtered list).
	MaxCount = 100_000
)

// Counter is a Store that can count a list of submissions: the handler
// answers total=exact and total=estimate through it, and 501 over a store
// without it. The contract (storetest's Find/Total clauses):
//
//   - CountSubmissions counts the submissions of formID, a form of
//     accountID, within q's Since, Until and Filters; q's Cursor, Limit,
//     Order, MaxBytes and Fields are ignored. A form that is not
//     accountID's is ErrFormNotFound, as for ListSubmissions.
//   - Without filters, it counts at most MaxCount rows: the exact number
//     of items, or MaxCount TotalAtLeast. exact makes no difference.
//   - With filters and exact, it checks at most MaxExactCount candidates
//     against every clause: the exact number of matches when it checked
//     every candidate, else the matches it found, TotalAtLeast.
//   - With filters and not exact, it may count candidates without
//     checking them (TotalEstimate), at most MaxCount of them; a store
//     that checks them may answer as for exact.
//   - Nothing is counted unless the handler calls it, which it does only
//     for a request that asks.
type Counter interface {
	CountSubmissions(ctx context.Context, accountID, formID string, q Query, exact bool) (Total, error)
}

// errNoCount: total was asked of a store that cannot count (501).
var errNoCount = errors.New("the store cannot count submissions")

// parseTotal reads the total parameter: "" (absent), "exact" or
// "estimate".
func parseTotal(v string) (mode string, msg string) {
	switch v {
	case "", "exact", "estimate":
		return v, ""
	}
	return "", `invalid total: must be "exact" (counted, within a bound) or "estimate" (cheaper, may be off)`
}

// appendTotal appends the "total" member of a page.
func appendTotal(b []byte, t Total) []byte {
	b = append(b, `,"total":{"value":`...)
	b = strconv.AppendInt(b, t.Value, 10)
	b = append(b, `,"kind":`...)
	b = appendString(b, string(t.Kind))
	return append(b, '}')
}
