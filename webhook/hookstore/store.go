// Package hookstore is the contract between package webhook and the
// stores that keep its endpoints (memstore, sqlitestore, pgstore, or a
// host's own): the Store interface, the rows it keeps and its errors,
// and the signing Secret they hold. It has no outbound HTTP client, so a
// program that links a store links none of webhook's delivery code (its
// SSRF-guarded transport, the dispatcher); package webhook names every
// type here under the same name (webhook.Store is hookstore.Store).
package hookstore

import (
	"context"
	"errors"
	"time"
)

// Endpoint is a URL that an account registered to receive the events of
// its forms, as a [Store] keeps it.
type Endpoint struct {
	// ID names the endpoint: "ep_" and 22 characters from crypto/rand,
	// given by webhook.Endpoints.Add.
	ID string
	// AccountID is the account whose forms the endpoint follows.
	AccountID string
	// URL is where events are sent (checked when the endpoint is added,
	// and again at every send).
	URL string
	// Forms are the forms the endpoint follows; empty follows every form
	// of the account, those created later included.
	Forms []string
	// Filter narrows the additions the endpoint receives to the
	// submissions it matches: the filter parameters and q of the
	// submissions list, as a query string in the canonical form
	// webhook.ParseFilter gives ("filter[rating][gte]=4&q=zoe"); "" for
	// none, every addition. A store keeps it as given: webhook.Endpoints
	// checks it before it reaches the store.
	Filter string
	// Secrets sign every delivery, each one until its Until: the first
	// is the current one; a rotation puts the new secret first and keeps
	// the old one until the overlap ends.
	Secrets []EndpointSecret
	// Disabled stops deliveries to the endpoint, with DisabledReason
	// saying why (the host's own reason, or the dispatcher's: a 410 from
	// the endpoint, five days without a success) and DisabledAt when.
	Disabled       bool
	DisabledReason string
	DisabledAt     time.Time
	// CreatedAt is when the endpoint was added, by the clock of
	// webhook.Endpoints.
	CreatedAt time.Time
}

// EndpointSecret is a signing secret of an endpoint and how long it signs.
type EndpointSecret struct {
	Secret Secret
	// Until is when the secret stops signing; zero for the current one,
	// which signs until it is rotated away.
	Until time.Time
}

// Stream is the delivery state of one form of an endpoint: the durable
// cursor over the form's feed and the retries of the entry after it.
type Stream struct {
	FormID string
	// Incarnation is the incarnation of the form whose feed Cursor and
	// Floor are positions of: a value a form keeps for its life, which a
	// form created again with a deleted form's ID does not have (see
	// formsapi's docs/lifecycle.md). A dispatcher that finds the form of
	// another incarnation starts the stream over at the new form's first
	// entry. 0 is an incarnation not known: a stream written before
	// streams kept one, or of a feed that tells none.
	Incarnation uint64
	// Cursor is the feed position of the last entry that got a 2xx (or
	// where the stream started): the next entry sent is the first after
	// it.
	Cursor int64
	// Floor is the feed's Purged when the stream started or was last
	// rewound: deletions forgotten at or below it cannot concern what
	// the endpoint was sent (see formsapi.FeedStore, Retention).
	Floor int64
	// Attempts counts the failed attempts of the entry after Cursor; 0
	// when it was never tried or Cursor just moved.
	Attempts int
	// NextAt is when the entry after Cursor may be tried again; zero for
	// at once.
	NextAt time.Time
	// FailingSince is the time of the first failure since the last
	// success (zero when the last attempt succeeded), LastSuccess that of
	// the last 2xx.
	FailingSince, LastSuccess time.Time
	// Judging reports that the stream records which additions the
	// endpoint was sent, so that it is sent the deletions of those and
	// of no others (docs/webhooks.md, "Filtered endpoints"): a
	// dispatcher starts it on a stream of an endpoint with a filter, over
	// a store that is a PassedStore. The additions at or below Judged
	// and above Unsent that are in none of the stream's passed spans
	// (PassedStore) were sent; the others were not. A stream that is not
	// judging (every stream of an endpoint that never had a filter) is
	// sent every deletion.
	Judging bool
	// Unsent is the position up to which the form's additions were never
	// sent: the form's end when the endpoint was added (0 for a form
	// created later, or a stream added before streams kept it). A replay
	// from before it leaves it above the cursor, until the dispatcher's
	// next move of the cursor turns the positions between them into a
	// passed span and lowers it to the cursor.
	Unsent int64
	// Judged is the furthest position the stream's cursor reached while
	// judging: the positions above it have no verdict yet.
	Judged int64
	// Resync reports that the endpoint's cursor fell behind the feed's
	// tombstone retention: deletions it was never sent are forgotten, so
	// the stream is stopped until the host replays the form from the
	// start (webhook.Endpoints.Replay with position 0).
	Resync bool
}

// Span is the feed positions From to To, both included.
type Span struct{ From, To int64 }

// Verdicts is a change to a stream's passed spans (PassedStore).
type Verdicts struct {
	// Clear removes every span of the stream first.
	Clear bool
	// Pass adds these spans, ascending and disjoint: each is merged with
	// a stored span that ends just before it.
	Pass []Span
	// Unpass removes these positions from the spans that hold them
	// (splitting a span in two when one is inside it); a position in
	// none is no change.
	Unpass []int64
}

// PassedStore is a Store that keeps, for each stream of a judging
// endpoint, the spans of feed positions whose additions the endpoint was
// not sent (its filter did not keep them, or they were deleted before
// the dispatcher reached them; a span may cover deletions too, whose own
// positions are never asked about), so that it is sent the deletions of
// the submissions it was sent and of no others. memstore, sqlitestore
// and pgstore implement it, and storetest.Run checks it on any store
// that does; over a store that does not, a filtered endpoint is sent
// every deletion.
//
// The contract, on top of Store's:
//
//   - Atomic. SaveVerdicts writes s as SaveStream does, under the same
//     fencing (ErrLeaseLost changes nothing), and applies v to the
//     stream's spans in the same transaction: both or neither.
//   - Passed. Passed returns, ascending, those of positions that are in a
//     span of the stream of formID of endpoint id (none: an empty
//     result); of an endpoint that is not there, none.
//   - Merged. A span passed right after a stored span (its From one past
//     the stored To) extends it, so that a run of passed additions saved
//     in many writes is one span.
//   - Reset and delete. ResetStream with a stream that is not Judging,
//     and DeleteEndpoint, remove the spans of the streams they reset or
//     delete.
type PassedStore interface {
	Store
	SaveVerdicts(ctx context.Context, id string, gen int64, s Stream, v Verdicts, now time.Time, d time.Duration) error
	Passed(ctx context.Context, id, formID string, positions []int64) ([]int64, error)
}

// Lease is an endpoint that a dispatcher holds: only it sends the
// endpoint's events, until the lease ends or is taken over.
type Lease struct {
	Endpoint Endpoint
	// Gen is the lease's generation, a fencing token: every claim of the
	// endpoint gives a greater one, and a store refuses any write made
	// under an older one.
	Gen int64
	// Until is when the lease ends unless renewed.
	Until time.Time
	// Streams are the endpoint's streams, one per form that has one, in
	// no particular order.
	Streams []Stream
}

// Errors of a Store, checked with errors.Is.
var (
	// ErrEndpointNotFound: no endpoint of the account has the ID.
	ErrEndpointNotFound = errors.New("webhook: endpoint not found")
	// ErrEndpointExists: an endpoint already has the ID.
	ErrEndpointExists = errors.New("webhook: an endpoint with this ID exists")
	// ErrLeaseLost: the lease's generation is no longer the endpoint's
	// (another dispatcher claimed it, the host rewound or deleted it, or
	// the lease ran out and was claimed): the write was refused.
	ErrLeaseLost = errors.New("webhook: lease lost")
)

// Store keeps endpoints and their delivery state. memstore, sqlitestore
// and pgstore implement it (each in the database it already uses), and
// storetest.Run checks every clause below, one subtest per clause, on any
// store that implements it, a host's own included.
//
// The contract:
//
//   - Isolation. Every method that takes an accountID finds only
//     endpoints of that account: another account's endpoint is
//     ErrEndpointNotFound, exactly like one that does not exist.
//   - Fields. An endpoint reads back exactly as added or last updated:
//     every field, Forms and Secrets in their order, times at the same
//     instant (in any location). Nil and empty Forms are the same. A
//     stream reads back as added, saved or reset: every field, all 64
//     bits of Incarnation.
//     Results are the caller's: no slice in them is shared with the store
//     or another result.
//   - Add. AddEndpoint stores e with the given streams (the cursor each
//     followed form starts at) and no lease; an ID already stored, for
//     any account, is ErrEndpointExists and changes nothing.
//   - List. Endpoints returns the account's endpoints ordered by
//     CreatedAt, then ID; none is an empty result, not an error.
//   - Get. Endpoint returns one endpoint with its streams, ordered by
//     FormID.
//   - Update. UpdateEndpoint calls update with the stored endpoint, once,
//     and stores what it leaves, atomically: two concurrent updates never
//     lose either's change. ID, AccountID and CreatedAt keep their stored
//     values whatever update does. An error from update is returned
//     (wrapped or as is) and changes nothing. It neither ends a lease nor
//     changes a stream.
//   - Delete. DeleteEndpoint removes the endpoint, its streams and its
//     lease: later calls about it are ErrEndpointNotFound, and writes
//     under its lease are ErrLeaseLost.
//   - Claim. ClaimEndpoints leases, until now+d, at most max endpoints
//     that are not Disabled and whose lease is free (never claimed,
//     released, or with Until <= now), each with a Gen greater than any
//     it had, and returns them with their streams. Two claims, from any
//     number of processes sharing the store, never both get one endpoint
//     for overlapping leases.
//   - Renew. RenewLease extends the lease to now+d and returns the
//     endpoint and its streams as stored, if gen is still the endpoint's
//     generation; otherwise ErrLeaseLost (ErrEndpointNotFound may wrap it
//     when the endpoint is gone). A lease that ran out but was not yet
//     claimed again renews.
//   - Fencing. SaveStream writes s as the stream of s.FormID (creating
//     it) and extends the lease as Renew does, only if gen is still the
//     endpoint's generation: otherwise it returns ErrLeaseLost and
//     changes nothing. A dispatcher paused past its lease therefore moves
//     no cursor once another has claimed the endpoint.
//   - Release. ReleaseLease frees the lease held under gen at once (so
//     another dispatcher may claim the endpoint without waiting for it
//     to run out); under a gen that is not the endpoint's it changes
//     nothing and returns nil.
//   - Reset. ResetStream writes s as the stream of s.FormID of the
//     account's endpoint, and ends any lease on the endpoint by giving it
//     a new generation: the holder's next write is ErrLeaseLost, so a
//     replay the host asked for is never overwritten by a cursor a
//     dispatcher was about to save.
//   - Context. When ctx is canceled or its deadline passes, a method
//     returns an error wrapping ctx.Err().
//   - Concurrency. Methods are safe for concurrent use.
//
// Secrets are kept as given: signing needs the secret itself, so it
// cannot be hashed as API keys are, and the database that would hold a
// key to encrypt it already holds the submissions the events carry.
type Store interface {
	AddEndpoint(ctx context.Context, e Endpoint, streams []Stream) error
	Endpoints(ctx context.Context, accountID string) ([]Endpoint, error)
	Endpoint(ctx context.Context, accountID, id string) (Endpoint, []Stream, error)
	UpdateEndpoint(ctx context.Context, accountID, id string, update func(*Endpoint) error) (Endpoint, error)
	DeleteEndpoint(ctx context.Context, accountID, id string) error
	ClaimEndpoints(ctx context.Context, now time.Time, d time.Duration, max int) ([]Lease, error)
	RenewLease(ctx context.Context, id string, gen int64, now time.Time, d time.Duration) (Lease, error)
	SaveStream(ctx context.Context, id string, gen int64, s Stream, now time.Time, d time.Duration) error
	ReleaseLease(ctx context.Context, id string, gen int64) error
	ResetStream(ctx context.Context, accountID, id string, s Stream) error
}
