// Package storecontract is the module-private contract between the read
// API and this module's own stores (memstore, sqlitestore, pgstore): the
// methods a store of this module has beyond the public interfaces, by
// which the handler reads pages as the store encoded them, looks up a key
// and a form in one statement, and learns a form's incarnation, and the
// one handshake (FastPath, Of) by which the handler, storetest and
// webhook tell such a store from a host's type that embeds one.
//
// It is the one place these methods are declared. A host cannot implement
// them (their types are internal), so a host's store always goes through
// the public, checked interfaces of package formsapi. The package sits
// below the root (see docs/architecture.md, "The tiers of internal/"), so
// it cannot name the root's types: the interfaces take them as type
// parameters, and the root instantiates them once, in storecontract.go
// (formsapi.Query for Q, formsapi.Grant for G, formsapi.Page[formsapi.Form]
// for FP); storetest uses the same instantiation of Store, and webhook
// needs only Head, which takes none of them.
//
// A new store read is a method here, its implementation in each store,
// and the handler's use of it: see docs/architecture.md, "Adding a store
// read".
package storecontract

import (
	"context"

	"github.com/formsapi/formsapi/internal/feedwait"
	"github.com/formsapi/formsapi/internal/wire"
)

// Reader reads pages of submissions into a response body, as the API
// sends them: the handler's fast path over this module's stores, and the
// shape the handler reads a host's store in too (formsapi's checkedReader
// implements it over the public interfaces). Both Append methods end a
// page before a submission that would take the page's submissions past
// its byte budget, unless it would be the page's first, each counted as
// the length of its JSON as sent, and leave damaged submissions out,
// recorded in p.Skipped.
type Reader[Q any] interface {
	// AppendSubmissions appends one page of a list, as q asks (its
	// MaxBytes is the budget), and sets p.NextCursor to the store's cursor
	// after it, "" at the end. It sets p.Incarnation when it can tell.
	AppendSubmissions(ctx context.Context, accountID, formID string, q Q, p *wire.Page) error
	// AppendFeed appends at most q.Limit entries of the form's feed after
	// position q.After, within q.MaxBytes, and returns the position of the
	// last one read (q.After itself when none) and whether more can be
	// read at once.
	AppendFeed(ctx context.Context, accountID, formID string, q wire.FeedQuery, p *wire.Page) (next int64, more bool, err error)
	// FeedHead returns the position of the last entry of the form's feed
	// as visible now (every entry at or below it is visible to the reads
	// that follow) and the form's incarnation (see wire.Page.Incarnation;
	// 0 when the store cannot tell). It returns an error wrapping
	// formsapi.ErrFormNotFound as AppendFeed does. form is the combined
	// lookup's (see wire.Page.Form), or nil.
	FeedHead(ctx context.Context, accountID, formID string, form *wire.Form) (head int64, incarnation uint64, err error)
	// FormVersion returns the form's lookup as the store's read cache
	// keys pages by it (wire.Form: Found, Seq, Version, Incarnation),
	// read now, or *form when form is the combined lookup's (see
	// wire.Page.Form), which was read before the call. It returns an
	// error wrapping formsapi.ErrFormNotFound as AppendSubmissions does.
	// Version changes, to a value the form (of that incarnation) never
	// had before, in the same transaction as any change to its
	// submissions (an addition, a deletion, an erasure), whoever commits
	// it; so what the handler derives from reads made after the call
	// (the summary of a form) may be kept under Version, and served again
	// only while the form still has it. Version 0 (with Found false and
	// no error, for a store that does not look) means the store cannot
	// tell: nothing is kept.
	FormVersion(ctx context.Context, accountID, formID string, form *wire.Form) (wire.Form, error)
}

// Store is a store of this module: its own Reader, appending the JSON it
// stored for each submission (made by formsapi.AppendSubmissionJSON when
// it was written), and the handshake.
type Store[Q any] interface {
	Reader[Q]
	Handshake
}

// Handshake is the one method every store of this module has, by which
// the handler, storetest and webhook find the store itself and its secret
// (see Self, Of).
type Handshake interface {
	FastPath() Self
}

// Self is what a store of this module returns from FastPath: the store
// itself. A host's type that embeds one of these stores has the method
// too, promoted, and it returns the embedded store, not the host's value.
// Of compares the two and answers only for the store itself, so that a
// host's overrides are never bypassed.
//
// Secret is the store's cursor secret: key material the store keeps with
// its data (in its database, for sqlitestore and pgstore; per store value
// for memstore, whose data ends with the process), made once from
// crypto/rand and the same for every process over that data. The handler
// keys cursors, sync tokens, feed refs and page ETags with it unless
// formsapi.WithCursorSecret gives another, so that they outlive a restart
// and hold on every node; unlike the fast path, KeptSecret takes it from
// a type that embeds a store too, since the secret belongs to the data.
type Self struct {
	Store  any
	Secret []byte
}

// FormAuthorizer is a store of this module that answers a key lookup with
// the requested form's lookup, in one round trip to its database: the
// form's ownership and its version, which the store's read cache checks
// its pages against. The handler then gives the form back to the same
// store with the page (wire.Page.Form), and the store reads nothing more
// for a page it holds. Its formsapi.KeyAuthorizer contract is
// Authorize's: the key's row is read on every call. G is formsapi.Grant.
type FormAuthorizer[G any] interface {
	AuthorizeForm(ctx context.Context, key, formID string) (G, wire.Form, error)
}

// FormsAuthorizer is a store of this module that answers the key lookup
// of a request for the forms list with the version of the account's
// forms list, read in the same statement, and reads pages of forms at
// that version (ListFormsAt), serving those its read cache holds at it
// without a statement. The handler hands the version it got with the key
// to every ListFormsAt of the request, and to that store only. Its
// formsapi.KeyAuthorizer contract is Authorize's, and ListFormsAt's is
// formsapi.Store.ListForms'. G is formsapi.Grant, Q formsapi.Query and
// FP formsapi.Page[formsapi.Form].
type FormsAuthorizer[G, Q, FP any] interface {
	AuthorizeForms(ctx context.Context, key string) (G, wire.Forms, error)
	ListFormsAt(ctx context.Context, accountID string, q Q, at *wire.Forms) (FP, error)
}

// Waiter is a store of this module that wakes the sync feed's waiting
// requests (wait=, the root's wait.go) when a form's feed may have moved
// on or a key may have changed, through its internal/feedwait hub.
// Every Store is one.
//
//   - WatchFeed registers a waiter of formID, holding the key whose
//     hash (internal/keyformat) is key, that has read the form's feed to
//     after (it may not have read it yet: it registers before it reads).
//     The Watch's Form channel is closed once an entry past after may be
//     visible to a read, its Key channel once the key may have been
//     revoked, expired or changed, and Done once the store is closing.
//     A change the store commits itself wakes its waiters directly;
//     one committed by another process or node, within the store's
//     documented check interval.
//   - Spurious wake-ups are allowed (the waiter reads again); lost ones
//     are not: a change that commits after WatchFeed returns and is not
//     seen by the waiter's next read must close a channel it holds.
type Waiter interface {
	Handshake
	WatchFeed(formID string, key [32]byte, after int64) *feedwait.Watch
}

// Head is a store of this module that tells where a form's feed ends and
// the form's incarnation: the handler's export reads both, and webhook's
// dispatcher reads the incarnation to know which form a stream's cursor
// is a position of. Every Store is one.
type Head interface {
	Handshake
	FeedHead(ctx context.Context, accountID, formID string, form *wire.Form) (head int64, incarnation uint64, err error)
}

// Of returns v as an S (one of the interfaces above, or one built of
// them) if v is one of this module's stores itself, and false for any
// other v: one that lacks S's methods, or a host's type that embeds one
// of this module's stores, which has their methods promoted but whose
// own methods may override any of them, so only the public interfaces it
// was given may be called on it. It is the one handshake: the handler,
// storetest and webhook take every part of this contract through it.
func Of[S any](v any) (S, bool) {
	s, ok := v.(S)
	if !ok || !IsStore(v) {
		var zero S
		return zero, false
	}
	return s, true
}

// IsStore reports whether v is one of this module's stores itself.
func IsStore(v any) bool {
	h, ok := v.(Handshake)
	return ok && h.FastPath().Store == v
}

// Embeds reports whether v is a type that embeds one of this module's
// stores rather than the store itself (see Of).
func Embeds(v any) bool {
	h, ok := v.(Handshake)
	return ok && h.FastPath().Store != v
}

// Same reports whether a and b are one and the same store of this
// module, itself.
func Same(a, b any) bool {
	return IsStore(a) && IsStore(b) && a.(Handshake).FastPath().Store == b.(Handshake).FastPath().Store
}

// KeptSecret returns the cursor secret that the first of vs that is one
// of this module's stores, or embeds one, keeps (its Self's Secret), and
// nil when none of them is. The handler without
// formsapi.WithCursorSecret, and webhook's Dispatcher and Endpoints given
// no secret, all take theirs here, so that over one store every token
// and ref is sealed with one secret, obtained the same way (RELIABILITY
// case 102).
func KeptSecret(vs ...any) []byte {
	for _, v := range vs {
		if h, ok := v.(Handshake); ok && len(h.FastPath().Secret) > 0 {
			return h.FastPath().Secret
		}
	}
	return nil
}
