package formsapi

// Totals: total=exact or total=estimate asks a page of submissions to say
// how many items its list holds (its range and filters, whatever the
// cursor), as "total": {"value": N, "kind": K}. Only a request that asks
// is counted, and the count is bounded: see Total.

import (
	"context"
	"errors"
	"strconv"
)

// Total is the size of a list of submissions as a store counted it, and
// how far it can be trusted. The handler answers total=exact and
// total=estimate through the store's method
//
//	CountSubmissions(ctx context.Context, accountID, formID string, q Query, exact bool) (Total, error)
//
// (memstore, sqlitestore and pgstore have it), and 501 over a store
// without it. Its contract (storetest's Find/Total clause):
//
//   - It counts the submissions of formID, a form of accountID, within
//     q's Since, Until, Filters and Search (filters below are both);
//     q's Cursor, Limit, Order, MaxBytes and
//     Fields are ignored. A form that is not accountID's is
//     ErrFormNotFound, as for ListSubmissions.
//   - Without filters, it counts at most 100,000 rows: the exact number
//     of items ("exact"), or 100,000 "at_least". exact makes no
//     difference.
//   - With filters and exact, it checks at most 10,000 candidates against
//     every clause, and none past the one that finds those checked
//     holding 32 MiB of data and attachments as the store keeps them: the
//     exact number of matches when it checked every candidate, else the
//     matches it found, "at_least".
//   - With filters and not exact, it may count candidates without
//     checking them ("estimate"), at most 100,000 of them; a store that
//     checks them may answer as for exact.
//   - Nothing is counted unless the handler calls it, which it does only
//     for a request that asks.
type Total struct {
	Value int64
	// Kind is "exact" (the list holds exactly Value items), "at_least"
	// (the count stopped at its bound: the list holds at least Value) or
	// "estimate" (counted without checking every item, index entries
	// rather than matches: the list may hold fewer or more).
	Kind string
}

// counter is a store with CountSubmissions (see Total).
type counter interface {
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
