package formsapi

import (
	"context"
	"iter"
)

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

	// UpdateForm replaces the Title, Icon and NotificationEmail of the
	// form f.ID of accountID with f's, under the same limits as AddForm;
	// the form keeps its ID, account, creation time and submissions
	// (f.CreatedAt is ignored). The next forms list shows the new fields.
	// It returns an error wrapping ErrFormNotFound if f.ID is not a form
	// of accountID (whether it does not exist or is another account's),
	// and one wrapping ErrInvalidInput if accountID or f is malformed or
	// beyond the store's limits.
	UpdateForm(ctx context.Context, accountID string, f Form) error

	// DeleteForm deletes the form formID of accountID with all its
	// submissions and their metadata. Lists, feeds and cached pages of
	// the form answer 404 from the next request on. It returns an error
	// wrapping ErrFormNotFound if formID is not a form of accountID, and
	// one wrapping ErrInvalidInput if formID is malformed.
	DeleteForm(ctx context.Context, accountID, formID string) error

	// DeleteSubmission deletes the submission of formID, a form of
	// accountID, whose [Metadata.ID] is id, with its metadata. It is
	// gone from the next list page and from cached pages; a cursor or
	// sync token issued before still continues with the submissions after
	// it; a store with a sync feed records the deletion there (see
	// [FeedStore]). It returns an error wrapping ErrFormNotFound if formID
	// is not a form of accountID, one wrapping ErrSubmissionNotFound if no
	// submission of the form has that ID (never a silent success: a typo
	// must not pass for a deletion), and one wrapping ErrInvalidInput if
	// id is empty or formID malformed.
	DeleteSubmission(ctx context.Context, accountID, formID, id string) error

	// Erase deletes, with their metadata, every submission of every form
	// of accountID whose data has a member named field, at the top level
	// of its object, holding the JSON string value (compared exactly,
	// byte for byte after JSON unescaping, as for a respondent's e-mail
	// address), and returns how many it deleted; 0 and no error when none
	// matched. Each deletion is recorded as DeleteSubmission records it.
	// Submissions committed while it runs may not be seen. It returns an
	// error wrapping ErrInvalidInput, and deletes nothing, if accountID,
	// field or value is empty.
	//
	// The data is deleted from the store, not hidden; what that means on
	// disk (free pages, a write-ahead log, backups) is each store's to say.
	Erase(ctx context.Context, accountID, field, value string) (int, error)
}

// BatchWriter is a [Writer] that also writes many submissions in one
// transaction: the way to import, migrate or seed a store, at a fraction
// of the cost of one AddSubmission a submission. memstore, sqlitestore
// and pgstore implement it, and storetest checks it. It is an interface
// of its own, beside Writer rather than in it, so that a host's own
// Writer stays a Writer: a caller that has a Writer asks for a
// BatchWriter with a type assertion, and falls back to AddSubmission one
// at a time when the store has none.
type BatchWriter interface {
	Writer

	// AddSubmissions stores every submission batch yields, with its
	// metadata, in order, as that many AddSubmission calls would (each
	// under the same rules and limits, a zero CreatedAt the current
	// time), but in one transaction: the lists, filters, searches, feed
	// positions, fields and counts it leaves are those the same
	// submissions written one at a time leave, and a read sees either
	// none of the batch or all of it.
	//
	// If any submission is refused, nothing of the batch is written, and
	// the error says which one (its index, from 0, in the order batch
	// yields them) and wraps what AddSubmission would have returned for
	// it: ErrFormNotFound, ErrInvalidInput naming the field, and so on; a
	// [Metadata.ID] already stored in the form, or given to an earlier
	// submission of the batch to the same form, is ErrInvalidInput. A
	// canceled or expired ctx, before or while the batch is written,
	// writes nothing either. A batch that yields nothing writes nothing
	// and returns nil.
	//
	// The transaction holds the whole batch until it commits: other
	// writers to its forms wait for it (on SQLite, every other writer).
	// Batches of a few thousand submissions keep those waits short; the
	// store's documentation says what a batch costs.
	AddSubmissions(ctx context.Context, batch iter.Seq2[Submission, Metadata]) error
}
