package formsapi

import "context"

// Writer is the write side that memstore, sqlitestore and pgstore share,
// so a host can swap one store for another behind this interface: the
// collection side adds forms and submissions, the host's account pages
// issue and revoke keys. The read API never calls it.
//
// Every method refuses bad input with an error wrapping [ErrInvalidInput]
// that says which field and why, and every refused call changes nothing.
// A canceled or expired ctx makes a method return an error wrapping
// ctx.Err() before anything is written. Implementations are safe for
// concurrent use; what a method returned nil for is visible to the very
// next read, from any goroutine.
type Writer interface {
	// AddForm stores f as a form of accountID, after [PrepareForm]: a zero
	// f.CreatedAt becomes the current time. It returns an error wrapping
	// ErrFormExists if any account already has a form with f.ID (form IDs
	// are unique across accounts, so give forms IDs from [NewFormID], not
	// IDs a customer chose), and one wrapping ErrInvalidInput if accountID
	// is empty or f is malformed.
	AddForm(ctx context.Context, accountID string, f Form) error

	// AddSubmission stores s with its internal metadata m, which the read
	// side never returns, after [PrepareSubmission]: a zero s.CreatedAt
	// becomes the current time. It returns an error wrapping
	// ErrFormNotFound if s.FormID is not a stored form, and one wrapping
	// ErrInvalidInput if s or m is malformed.
	AddSubmission(ctx context.Context, s Submission, m Metadata) error

	// AddKey registers key as an API key of accountID; only a hash of it is
	// kept. It returns an error wrapping ErrKeyExists if the key is already
	// registered or was ever revoked (a leaked key stays dead), and one
	// wrapping ErrInvalidInput if accountID is empty or the key could
	// never authenticate (see [CheckKey]).
	AddKey(ctx context.Context, key, accountID string) error

	// RevokeKey revokes key: the next request that presents it gets 401,
	// on every handler over the same data. It returns an error wrapping
	// ErrInvalidKey if the key is not registered or already revoked.
	RevokeKey(ctx context.Context, key string) error
}
