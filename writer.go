package formsapi

import "context"

// Writer is the write side that memstore, sqlitestore and pgstore share,
// so a host can swap one store for another behind this interface: the
// collection side adds forms and submissions, the host's account pages
// issue and revoke keys. The read API never calls it.
//
// Every method refuses bad input with an error wrapping [ErrInvalidInput]
// that says which field and why, and every refused call changes nothing.
// Input beyond the store's [Limits] (DefaultLimits unless set with the
// store's WithLimits) is bad input, and the error names the limit: a
// submission's data, attachments, metadata and whole encoded size, a
// form's encoded size, and the length of an account ID.
//
// A canceled or expired ctx makes a method return an error wrapping
// ctx.Err() before anything is written. Implementations are safe for
// concurrent use; what a method returned nil for is visible to the very
// next read, from any goroutine.
type Writer interface {
	// AddForm stores f as a form of accountID, after [Limits.PrepareForm]
	// under the store's limits: a zero f.CreatedAt becomes the current
	// time. It returns an error wrapping ErrFormExists if any account
	// already has a form with f.ID (form IDs are unique across accounts,
	// so give forms IDs from [NewFormID], not IDs a customer chose), and
	// one wrapping ErrInvalidInput if accountID or f is malformed or
	// beyond the store's limits: among others, an account ID longer than
	// MaxAccountIDBytes, or a form whose JSON as the API sends it, escapes
	// included, is longer than MaxFormBytes.
	AddForm(ctx context.Context, accountID string, f Form) error

	// AddSubmission stores s with its internal metadata m, which the read
	// side never returns, after [Limits.PrepareSubmission] under the
	// store's limits: a zero s.CreatedAt becomes the current time. It
	// returns an error wrapping ErrFormNotFound if s.FormID is not a
	// stored form, and one wrapping ErrInvalidInput if s or m is malformed
	// or beyond the store's limits: among others, metadata longer than
	// MaxMetadataBytes, or a submission whose JSON as the API sends it,
	// escapes included, is longer than MaxSubmissionBytes.
	AddSubmission(ctx context.Context, s Submission, m Metadata) error

	// AddKey registers key as an API key of accountID, after
	// [Limits.PrepareKeyOptions] under the store's limits; only a hash of
	// the key is kept. It returns an error wrapping ErrKeyExists if the
	// key is already registered or was ever revoked (a leaked key stays
	// dead), and one wrapping ErrInvalidInput if the key could never
	// authenticate (see [Limits.PrepareKeyOptions]) or accountID is empty, longer than the
	// store's MaxAccountIDBytes, not valid UTF-8 or holds a control
	// character.
	AddKey(ctx context.Context, key, accountID string) error

	// RevokeKey revokes key: the next request that presents it gets 401,
	// on every handler over the same data. It returns an error wrapping
	// ErrInvalidKey if the key is not registered or already revoked.
	RevokeKey(ctx context.Context, key string) error
}
