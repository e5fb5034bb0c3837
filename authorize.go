package formsapi

// Authentication: what a presented key may do, and the gate that keeps
// lookups of keys nobody has used from crowding out those of keys in use.

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"time"

	"github.com/formsapi/formsapi/internal/wire"
)

// authorize returns the grant of token: from the resolver's Authorize
// when it is a KeyAuthorizer, else every form of the account ResolveKey
// names. A resolver that embeds one of this module's stores is asked
// both, since either may be the host's override (a ResolveKey that
// suspends an account, say) and the other the store's promoted method:
// the key must pass both, for the same account, and the grant is
// Authorize's.
//
// Expiry is the authorizer's to judge, on its own clock (the stores'
// WithClock): the handler trusts its refusal. A grant the authorizer
// returns is refused here too once the handler's clock reaches its
// ExpiresAt, whatever the authorizer said, and that clock is the wall
// clock (time.Now; tests may set another with the unexported cfg.now).
// So a key stops working at the earlier of the two: a store whose clock
// runs ahead expires keys early, while one whose clock lags, or a buggy
// authorizer, cannot keep a key alive past its ExpiresAt by the wall
// clock. Tests that move a store's clock forward give keys an ExpiresAt
// after the wall clock's now (AddKeyWith requires that anyway) and then
// move the store's clock past it: the store refuses, and the handler's
// check never disagrees. Why not one clock shared with the store: an
// option for it would add a name to the package, and the store is
// where a host that keeps time by another clock already says so.
//
// For a list of formID over one of this module's stores that is also the
// key resolver, the store looks the form up in the same statement as the
// key (formAuthorizer), and the form is returned for the page's read;
// for the forms list over such a store, the version of the account's
// forms list, read in the same statement too (formsAuthorizer);
// otherwise what it returns is empty.
//
// A key this handler has not seen authenticate recently waits for one of
// a few lookup slots first (see keyGate).
//
// The request is counted in flight for its key and its account
// (concurrency.go), and refused with errBusy past either bound: a key the
// gate knows before its lookup, so that such a refusal costs no store
// call, and otherwise once it is authenticated. On success authorize
// returns the function that ends the request's count, which the caller
// must call when the request is done.
//
// With exact, the key is never taken from a following node's bounded
// copy (see lookup).
func (a *api) authorize(ctx context.Context, token, formID string, exact bool) (Grant, found, func(), error) {
	h := a.gate.hash(token)
	known := a.gate.known(h)
	if !known {
		release, err := a.gate.enter(ctx)
		if err != nil {
			return Grant{}, found{}, nil, err
		}
		defer release()
		known = a.gate.known(h) // authenticated while this request waited
	}
	if known && !a.keysInFlight.enter(h) {
		return Grant{}, found{}, nil, fmt.Errorf("%w: for one key", errBusy)
	}
	g, f, err := a.lookup(ctx, token, formID, exact)
	switch {
	case err == nil:
		a.gate.remember(h)
	case errors.Is(err, ErrInvalidKey):
		a.gate.forget(h)
	}
	switch {
	case err != nil:
		if known {
			a.keysInFlight.leave(h)
		}
		return Grant{}, found{}, nil, err
	case !known && !a.keysInFlight.enter(h):
		return Grant{}, found{}, nil, fmt.Errorf("%w: for one key", errBusy)
	case !a.accountsInFlight.enter(g.AccountID):
		a.keysInFlight.leave(h)
		return Grant{}, found{}, nil, fmt.Errorf("%w: for one account", errBusy)
	}
	return g, f, func() {
		a.accountsInFlight.leave(g.AccountID)
		a.keysInFlight.leave(h)
	}, nil
}

// found is what a combined lookup found with the key, for the store to
// read the request's pages by: the requested form, or the version of the
// account's forms list. Both are nil without a combined lookup.
type found struct {
	form  *wire.Form
	forms *wire.Forms
}

// stale reports whether the combined lookup was answered from a
// following node's copy without waiting for a round (pgstore's
// WithStaleness), and how old that copy was: the Data-Age header
// (docs/api.md). A lookup that waited for its round is as new as the
// request and has no age.
func (fd found) stale() (time.Duration, bool) {
	switch {
	case fd.form != nil && fd.form.Stale:
		return fd.form.Age, true
	case fd.forms != nil && fd.forms.Stale:
		return fd.forms.Age, true
	}
	return 0, false
}

// lookup authenticates token, with the combined lookup of formID (or of
// the forms list when formID is "") where the key resolver offers one.
// With exact (the routes that are not lists: route.exact), a combined
// lookup that a following node answered from its copy without a round
// (pgstore's WithStaleness) is not taken: the key is looked up again by
// Authorize, which waits for its round, and nothing found is returned,
// so a revocation holds for them at once (docs/fleet.md, "Bounded
// staleness").
func (a *api) lookup(ctx context.Context, token, formID string, exact bool) (Grant, found, error) {
	if a.authz == nil {
		account, err := a.keys.ResolveKey(ctx, token)
		return Grant{AccountID: account}, found{}, err
	}
	var (
		g   Grant
		fd  found
		err error
	)
	switch {
	case a.formAuthz != nil && formID != "" && ValidFormID(formID):
		var f wire.Form
		g, f, err = a.formAuthz.AuthorizeForm(ctx, token, formID)
		fd.form = &f
	case a.formsAuthz != nil && formID == "":
		var at wire.Forms
		g, at, err = a.formsAuthz.AuthorizeForms(ctx, token)
		fd.forms = &at
	default:
		g, err = a.authz.Authorize(ctx, token)
	}
	if err != nil {
		return Grant{}, found{}, err
	}
	if _, stale := fd.stale(); exact && stale {
		fd = found{}
		if g, err = a.authz.Authorize(ctx, token); err != nil {
			return Grant{}, found{}, err
		}
	}
	if a.both {
		account, err := a.keys.ResolveKey(ctx, token)
		if err != nil {
			return Grant{}, found{}, err
		}
		if account != g.AccountID {
			return Grant{}, found{}, fmt.Errorf("the key resolver's ResolveKey and Authorize name different accounts for one key")
		}
	}
	if !g.ExpiresAt.IsZero() && !a.now().Before(g.ExpiresAt) {
		return Grant{}, found{}, ErrInvalidKey
	}
	return g, fd, nil
}

// keyGate bounds the key lookups in flight for keys that have not
// authenticated through this handler recently: a flood of well-formed
// keys that are not registered (their checksum is public, so anyone can
// make them) costs a store lookup each, and unbounded it would take the
// store's connections and CPU from every real user. Keys seen to work go
// straight to their lookup; the others take one of a few slots, waiting
// their turn in order within the request's deadline. A key that works is
// remembered (by a keyed hash of it, in memory, bounded), so a user
// waits at most once per handler. Every lookup still happens, so
// revocation and expiry are seen on the next request as before.
//
// Why not the alternatives: a negative cache of unknown keys does nothing
// against a flood of fresh random keys, and a limit per client address
// would need the address, which proxies hide from a library.
type keyGate struct {
	seed  maphash.Seed
	slots chan struct{}

	mu   sync.RWMutex
	seen map[uint64]struct{}
}

// maxKnownKeys bounds the keys a gate remembers; past it the gate
// forgets them all, and each key waits for a slot once more.
const maxKnownKeys = 1 << 16

func newKeyGate() *keyGate {
	return &keyGate{
		seed:  maphash.MakeSeed(),
		slots: make(chan struct{}, max(2, runtime.GOMAXPROCS(0)/2)),
		seen:  map[uint64]struct{}{},
	}
}

// hash is a keyed hash of token: the gate never keeps a key.
func (g *keyGate) hash(token string) uint64 { return maphash.String(g.seed, token) }

func (g *keyGate) known(h uint64) bool {
	g.mu.RLock()
	_, ok := g.seen[h]
	g.mu.RUnlock()
	return ok
}

func (g *keyGate) remember(h uint64) {
	if g.known(h) {
		return
	}
	g.mu.Lock()
	if len(g.seen) >= maxKnownKeys {
		clear(g.seen)
	}
	g.seen[h] = struct{}{}
	g.mu.Unlock()
}

func (g *keyGate) forget(h uint64) {
	if !g.known(h) {
		return
	}
	g.mu.Lock()
	delete(g.seen, h)
	g.mu.Unlock()
}

// enter waits for a slot until ctx is done, and returns its release.
func (g *keyGate) enter(ctx context.Context) (func(), error) {
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots }, nil
	default:
	}
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting to look up a key not seen before: %w", ctx.Err())
	}
}

// now is the handler's clock: time.Now unless a test set another.
func (a *api) now() time.Time {
	if a.cfg.now != nil {
		return a.cfg.now()
	}
	return time.Now()
}
