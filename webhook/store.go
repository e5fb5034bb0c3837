package webhook

import "github.com/formsapi/formsapi/webhook/hookstore"

// The store's contract lives in package hookstore, which has no outbound
// client, so that the stores that implement it link none of this
// package's delivery code; these are its names here.

// Endpoint is a URL that an account registered to receive the events of
// its forms, as a [Store] keeps it: see [hookstore.Endpoint].
type Endpoint = hookstore.Endpoint

// EndpointSecret is a signing secret of an endpoint and how long it
// signs: see [hookstore.EndpointSecret].
type EndpointSecret = hookstore.EndpointSecret

// Stream is the delivery state of one form of an endpoint, its durable
// cursor over the form's feed and the retries of the entry after it: see
// [hookstore.Stream].
type Stream = hookstore.Stream

// Lease is an endpoint that a dispatcher holds: see [hookstore.Lease].
type Lease = hookstore.Lease

// Store keeps endpoints and their delivery state; memstore, sqlitestore
// and pgstore implement it, and storetest.Run checks every clause of its
// contract: see [hookstore.Store].
type Store = hookstore.Store

// Errors of a Store, checked with errors.Is: see [hookstore.ErrEndpointNotFound],
// [hookstore.ErrEndpointExists] and [hookstore.ErrLeaseLost].
var (
	// ErrEndpointNotFound: no endpoint of the account has the ID.
	ErrEndpointNotFound = hookstore.ErrEndpointNotFound
	// ErrEndpointExists: an endpoint already has the ID.
	ErrEndpointExists = hookstore.ErrEndpointExists
	// ErrLeaseLost: the lease's generation is no longer the endpoint's:
	// the write was refused.
	ErrLeaseLost = hookstore.ErrLeaseLost
)
