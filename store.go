package formsapi

import (
	"context"
	"time"
)

// Store is where the handler reads forms and submissions. Every method is
// scoped to one account: there is deliberately no way to look a form up
// without saying whose it must be.
//
// Implementations must be safe for concurrent use and return results the
// caller may modify. Package storetest checks an implementation against
// this whole contract.
type Store interface {
	// ListForms returns one page of the forms of accountID in the order and
	// range q asks for. An account with no forms gets an empty page, not an
	// error. A q.Cursor this store did not issue yields ErrInvalidCursor.
	ListForms(ctx context.Context, accountID string, q Query) (Page[Form], error)
	// ListSubmissions returns ErrFormNotFound when formID is not a form of accountID.
	// Otherwise it returns one page of the form's submissions in the order
	// and range q asks for, and ErrInvalidCursor for a cursor it did not
	// issue. Metadata is never part of the result.
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
	Limit        int       // page size, already validated by the handler
	Cursor       string    // opaque; "" for the first page
	Order        Order     // Newest (the zero value, default) or Oldest
	Since, Until time.Time // createdAt >= Since and < Until; zero means unbounded
}

// Contains reports whether t lies within q's Since and Until bounds.
func (q Query) Contains(t time.Time) bool {
	return (q.Since.IsZero() || !t.Before(q.Since)) && (q.Until.IsZero() || t.Before(q.Until))
}

// Page is one page of a list.
type Page[T any] struct {
	Items      []T
	NextCursor string // "" when there is nothing after this page
}
