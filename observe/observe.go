// Package observe is how the forms API tells a host what it does, for
// metrics and traces, without the library depending on any telemetry
// library: the handler of package formsapi calls an [Observer] given with
// formsapi.WithObserver, and an adapter outside the core turns the calls
// into the host's metrics and spans (package formsotel does it for
// OpenTelemetry). This package imports nothing but the standard library.
//
// What an Observer learns is deliberately free of secrets: never an API
// key, a cursor or submission data. It does learn the account and form
// of a request, so that a host may choose to use them; an adapter should
// keep them out of metric labels unless its host opts in, since every
// account and form would make a series of its own, and an account ID may
// be personal data.
package observe

import (
	"context"
	"time"
)

// Observer receives what the handler does. Its methods are called from
// many goroutines at once and must be safe for concurrent use; they
// should return quickly, since they run on the request's path.
//
// The contract:
//
//   - Call is called before every call the handler makes to one of its
//     dependencies: the key resolver, the rate limiter and the store. The
//     context it returns is the one the call is made with, so that a span
//     it starts is the parent of the dependency's own (a pgx tracer's,
//     say) and the child of the request's (an otelhttp handler's). done
//     is called exactly once, when the call returns, with its error (nil
//     on success; an error wrapping formsapi.ErrInvalidKey when the key
//     was refused; formsapi.ErrFormNotFound; a context error; a failure).
//   - Request is called exactly once per request the handler answers,
//     after the answer is written, with what it was.
type Observer interface {
	Call(ctx context.Context, c Call) (context.Context, func(err error))
	Request(ctx context.Context, r Request)
}

// Call describes one call to a dependency.
type Call struct {
	// Op names the operation: one of the Op constants.
	Op string
	// AccountID is the account the call is for; "" for a key lookup.
	AccountID string
	// FormID is the form the call reads, "" for none.
	FormID string
}

// The operations a Call may name.
const (
	OpAuthorize       = "authorize"         // the key resolver: Authorize or ResolveKey, or a store's lookup of the key with the form
	OpRateLimit       = "rate_limit"        // the rate limiter's Allow, or its Charge of a request's work
	OpListForms       = "list_forms"        // Store.ListForms
	OpListSubmissions = "list_submissions"  // a page of submissions
	OpSyncSubmissions = "sync_submissions"  // a page of the sync feed
	OpFeedHead        = "feed_head"         // an export's read of where the form's feed ends, before its first page
	OpDataFields      = "data_fields"       // a CSV export's read of the form's fields (formsapi.FieldStore), its columns
	OpCount           = "count_submissions" // a total's count of a list (total=exact or estimate)
	OpFormVersion     = "form_version"      // a summary's read of the form's version, before it looks for a summary kept at it
)

// Request describes a request the handler answered.
type Request struct {
	// Method is the request's method.
	Method string
	// Route is the pattern of the route that answered: "GET /v1/forms",
	// "GET /v1/forms/{formId}/submissions", "GET /v1/openapi.json", or ""
	// for a path the API does not serve (its 404) or a method it does not
	// allow (405) on a known path, where Route is the path's pattern
	// without the method.
	Route string
	// Status is the status code of the answer.
	Status int
	// Duration is the time from the request reaching the handler to its
	// answer written.
	Duration time.Duration
	// BodyBytes is the length of the body written, as sent (compressed,
	// when it was).
	BodyBytes int64
	// Feed is true for a page of the sync feed.
	Feed bool
	// FeedHasMore is true for a page of the sync feed that ended before
	// the feed's end (the page's hasMore): its client is behind.
	FeedHasMore bool
	// RateLimit is what the rate limiter decided, if it was asked.
	RateLimit RateLimit
	// KeyRefused is true when the request presented a key that was
	// refused: malformed, unknown, revoked or expired.
	KeyRefused bool
	// AccountID and FormID name what the request read, once known; ""
	// before authentication and for the forms list's form.
	AccountID, FormID string
	// Cache is what the store's read cache did for the request's page of
	// submissions, or of forms (pgstore caches the forms list; a page of
	// forms for a scoped key may take several reads of the store, and is
	// a hit when the cache served them all, partial when it served some):
	// CacheNone for any other request (the sync feed), for the forms list
	// of a store that does not cache it, and over a store without a cache
	// (memstore, a host's own) or with it turned off. For a summary of a
	// form it is whether the handler's kept summary answered (CacheHit)
	// or the summary was read (CacheMiss), over any store of this module;
	// CacheNone over a host's own store, whose summaries are not kept.
	Cache Cache
	// Aborted is true when the answer was broken off after its status
	// line, as a streamed answer is when it cannot finish (an export
	// whose client went, whose store failed, or that the rate limiter
	// stopped): Status is the status line sent, BodyBytes what was
	// written before, and the client got an incomplete body.
	Aborted bool
}

// Cache is what a store's read cache (sqlitestore's and pgstore's) did
// for a page of submissions, or pgstore's for a page of forms.
type Cache int

const (
	CacheNone    Cache = iota // no cache was asked: not a page the store caches, or no cache
	CacheHit                  // the cache held the whole page; the database was not read for it
	CachePartial              // the cache held the start of the page; only the rest was read
	CacheMiss                 // the page was read from the database
	CacheSpliced              // the cache held the page at an older version; only the submissions added since were read
)

// String returns the outcome's name: "none", "hit", "partial", "miss" or
// "spliced".
func (c Cache) String() string {
	switch c {
	case CacheHit:
		return "hit"
	case CachePartial:
		return "partial"
	case CacheMiss:
		return "miss"
	case CacheSpliced:
		return "spliced"
	}
	return "none"
}

// RateLimit is what the rate limiter decided about a request.
type RateLimit int

const (
	RateLimitNone    RateLimit = iota // no limiter, or the request was refused before it
	RateLimitAllowed                  // allowed
	RateLimitRefused                  // refused: 429
	RateLimitFailed                   // the limiter failed; the request was served or refused as configured
)

// String returns the decision's name: "none", "allowed", "refused" or
// "failed".
func (r RateLimit) String() string {
	switch r {
	case RateLimitAllowed:
		return "allowed"
	case RateLimitRefused:
		return "refused"
	case RateLimitFailed:
		return "failed"
	}
	return "none"
}
