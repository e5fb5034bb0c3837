package formsapi

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/formsapi/formsapi/internal/keyformat"
)

// KeyAuthorizer is a KeyResolver that can also say what a key may do:
// which forms it may read and until when. When the handler's KeyResolver
// also implements KeyAuthorizer, the handler calls Authorize instead of
// ResolveKey; resolvers with only ResolveKey keep working, with every key
// reading every form of its account. memstore, sqlitestore and pgstore
// implement it, and storetest.Run checks the contract below.
//
// The contract:
//
//   - Authorize returns the grant of key, or an error wrapping
//     [ErrInvalidKey] if the key is unknown, revoked or expired (its
//     ExpiresAt is not after the time of the call). Any other error means
//     the authorizer could not answer; the handler then answers 500,
//     never 401.
//   - The grant agrees with ResolveKey: the same AccountID, and
//     ErrInvalidKey for the same keys.
//   - Grant.Forms is nil for a key that may read every form of its
//     account, and otherwise exactly the form IDs it was scoped to, in
//     any order, without duplicates (a non-nil empty slice allows no form
//     at all). It never widens what the account may see: a form of
//     another account in the list grants nothing.
//   - Grant.ExpiresAt is the zero time for a key that never expires, and
//     otherwise the instant the key was given, to the microsecond.
//   - A canceled or expired ctx makes Authorize return an error wrapping
//     ctx.Err().
//   - It is safe for concurrent use, and the grant is the caller's: no
//     slice in it is shared with the authorizer or another grant.
//
// An implementation may note when each key was last used (see
// [KeyInfo]), but must not write to a database on every call. It may
// judge expiry by a clock of its own (the stores' WithClock options); the
// handler trusts its refusals, and also refuses a grant whose ExpiresAt
// is not after the wall clock's now, so such a clock can make a key
// expire earlier than the wall clock says, never later.
type KeyAuthorizer interface {
	KeyResolver
	Authorize(ctx context.Context, key string) (Grant, error)
}

// Grant is what an API key may do.
type Grant struct {
	// AccountID is the account that owns the key.
	AccountID string
	// Forms lists the only forms the key may read; nil means every form
	// of the account. A scoped key lists only these forms in GET
	// /v1/forms and gets the ordinary 404 for every other form.
	Forms []string
	// ExpiresAt is when the key stops working (401 from then on, like a
	// revoked key); the zero time means never.
	ExpiresAt time.Time
}

// Allows reports whether g lets its key read formID.
func (g Grant) Allows(formID string) bool {
	return g.Forms == nil || slices.Contains(g.Forms, formID)
}

// KeyOptions restricts a key added with AddKeyWith (see [KeyManager]).
// The zero value restricts nothing: the key reads every form of its
// account and never expires, exactly like one added with AddKey.
type KeyOptions struct {
	// Forms, when not nil, are the only forms the key may read: 1 to
	// [Limits].MaxKeyForms valid form IDs. They need not exist yet; a form of
	// another account grants nothing, since the account still bounds
	// what the key sees. A non-nil empty slice is refused, so that an
	// empty selection never becomes a key for every form by accident.
	Forms []string
	// ExpiresAt, when not zero, is when the key stops working. It is kept
	// to the microsecond and must be in the future.
	ExpiresAt time.Time
}

// PrepareKeyOptions checks a key and its options as AddKeyWith takes
// them, under the limits l, and readies o for storage: Forms sorted
// without duplicates, ExpiresAt in UTC truncated to the microsecond. It
// returns an error wrapping [ErrInvalidInput] naming the problem: a key
// that could never authenticate (empty, longer than 256 characters, a
// character outside the RFC 6750 token alphabet, or a "fapi_" key
// whose checksum is wrong, see [NewKey]), an accountID that is empty, longer than
// MaxAccountIDBytes, not valid UTF-8 or holds a control character, a
// non-nil empty Forms or one longer than MaxKeyForms, a malformed form
// ID, or an ExpiresAt that is not after now. Stores call it so that
// every store refuses the same input; [DefaultLimits].PrepareKeyOptions
// is the check under the defaults.
func (l Limits) PrepareKeyOptions(key, accountID string, o *KeyOptions) error {
	l = l.orDefaults()
	if err := checkKey(key); err != nil {
		return err
	}
	if err := l.checkAccountID(accountID); err != nil {
		return err
	}
	if o.Forms != nil {
		if len(o.Forms) == 0 {
			return fmt.Errorf("%w: forms is empty: give at least one form ID, or nil for every form", ErrInvalidInput)
		}
		if len(o.Forms) > l.MaxKeyForms {
			return fmt.Errorf("%w: %d forms, over the limit MaxKeyForms (%d)", ErrInvalidInput, len(o.Forms), l.MaxKeyForms)
		}
		for _, id := range o.Forms {
			if !ValidFormID(id) {
				return fmt.Errorf("%w: form ID %q is malformed", ErrInvalidInput, id)
			}
		}
		o.Forms = slices.Compact(slices.Sorted(slices.Values(o.Forms)))
	}
	if !o.ExpiresAt.IsZero() {
		o.ExpiresAt = o.ExpiresAt.UTC().Round(0).Truncate(time.Microsecond)
		if !o.ExpiresAt.After(time.Now()) {
			return fmt.Errorf("%w: expiresAt %s is not in the future", ErrInvalidInput, o.ExpiresAt.Format(time.RFC3339Nano))
		}
		if err := checkTime(o.ExpiresAt); err != nil {
			return err
		}
	}
	return nil
}

// KeyManager is the key side that memstore, sqlitestore and pgstore share
// beyond [Writer]: scoped and expiring keys, and what a host shows its
// customers about their keys.
type KeyManager interface {
	KeyAuthorizer

	// AddKeyWith registers key as an API key of accountID restricted by
	// o, after [Limits.PrepareKeyOptions] under the store's limits. It
	// returns an error wrapping ErrKeyExists if the key is already
	// registered or was ever revoked, and one wrapping ErrInvalidInput if
	// the key, accountID or o is malformed or accountID is beyond the
	// store's MaxAccountIDBytes (see PrepareKeyOptions); either way
	// nothing changes.
	AddKeyWith(ctx context.Context, key, accountID string, o KeyOptions) error

	// ListKeys returns every key of accountID, revoked and expired ones
	// included, oldest first; an account without keys gets an empty list.
	ListKeys(ctx context.Context, accountID string) ([]KeyInfo, error)
}

// KeyInfo describes an API key for its owner, without the key itself.
type KeyInfo struct {
	// ID is [KeyID] of the key: the host can compute it when it issues
	// the key and match it here.
	ID        string
	AccountID string
	Forms     []string  // nil: every form of the account
	CreatedAt time.Time // when the key was added
	ExpiresAt time.Time // zero: never expires
	RevokedAt time.Time // zero: not revoked
	// LastUsedAt is about when the key last authenticated a request, zero
	// if never. The stores of this module note it at most once a minute
	// per key (their WithLastUsedInterval changes that) and write it in
	// batches, so it may lag the last use by that much.
	LastUsedAt time.Time
}

// KeyID returns the public identifier of key: the SHA-256 of the key in
// lowercase hex, which is what stores keep. It reveals nothing usable
// about the key, so it may be shown, logged and used as a rate-limit key.
func KeyID(key string) string {
	h := keyformat.Hash(key)
	return hex.EncodeToString(h[:])
}
