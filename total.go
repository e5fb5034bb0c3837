package formsapi

// Totals: total=exact or total=estimate asks a page of submissions to say
// how many items its list holds (its range and filters, whatever the
// cursor), as "total": {"value": N, "kind": K}. Only a request that asks
// is counted, and the count is bounded: see Total.

import (
	"context"
)

// Counter is a store that counts the lists of submissions it serves,
// which the handler needs to answer total=exact and total=estimate: it
// answers 501 to either over a store that is not a Counter. memstore,
// sqlitestore and pgstore are Counters; a host's type that embeds one of
// them is not taken as one (its count would be the embedded store's,
// past the host's own ListSubmissions) unless it is given as a store of
// its own. storetest's Find/Total clauses check this contract.
type Counter interface {
	// CountSubmissions counts the submissions of formID, a form of
	// accountID, within q's Since, Until, Filters and Search (filters
	// below are both); q's Cursor, Limit, Order, MaxBytes and Fields are
	// ignored. A form that is not accountID's is ErrFormNotFound, as for
	// ListSubmissions. Its work is bounded, and the Total's Kind says how
	// far its Value can be trusted:
	//
	//   - Without filters, it counts at most 100,000 rows: the exact
	//     number of items (TotalExact), or 100,000 TotalAtLeast. exact
	//     makes no difference.
	//   - With filters and exact, it checks at most 10,000 candidates
	//     against every clause, and none past the one that finds those
	//     checked holding 32 MiB of data and attachments as the store
	//     keeps them: the exact number of matches when it checked every
	//     candidate, else the matches it found, TotalAtLeast.
	//   - With filters and not exact, it may count candidates without
	//     checking them (TotalEstimate), at most 100,000 of them; a store
	//     that checks them may answer as for exact.
	//
	// The handler calls it only for a request that asks for a total.
	CountSubmissions(ctx context.Context, accountID, formID string, q Query, exact bool) (Total, error)
}

// Total is the size of a list of submissions as a [Counter] counted it,
// and how far it can be trusted. A page answers it as
// "total": {"value": Value, "kind": Kind}.
type Total struct {
	Value int64
	// Kind is TotalExact, TotalAtLeast or TotalEstimate.
	Kind string
}

// The kinds of a [Total].
const (
	// TotalExact: the list holds exactly Value items.
	TotalExact = "exact"
	// TotalAtLeast: the count stopped at its bound; the list holds at
	// least Value items.
	TotalAtLeast = "at_least"
	// TotalEstimate: counted without checking every item (index entries
	// rather than matches); the list may hold fewer or more.
	TotalEstimate = "estimate"
)
