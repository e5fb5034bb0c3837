package formsclient

// What a caller branches on: the predicates over the errors of every
// call, each naming the answers it covers.

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/formsapi/formsapi"
)

// ErrNotModified is matched (errors.Is) by the [*Error] of a 304 Not
// Modified: the page asked for with [IfNoneMatch] is still the one its
// tag names. Keep using that page, its cursor included.
var ErrNotModified = errors.New("formsclient: not modified")

// ErrRateLimited is matched (errors.Is) by the [*Error] of a 429 Too
// Many Requests that the client did not retry its way past
// ([WithRetries]). [RateLimited] says how long to wait.
var ErrRateLimited = errors.New("formsclient: rate limited")

// IsRetryable reports whether the request that failed with err may
// succeed if made again later, unchanged: an [*Error] of status 429 (rate
// limited: wait as [RateLimited] says), 500 (the server or its store
// failed), 502, 503 (the store too slow, the server busy) or 504; or a
// failure to reach the server or read its whole answer (a refused or
// broken connection, a timeout, a deadline that passed, a cut body).
// Not retryable: a canceled context, the other statuses (a 4xx will be
// refused again; a 200 that is not a page of the API comes from
// something else than the API), errors wrapping [ErrPaging], a redirect
// to another origin the client refused (see [WithHTTPClient]), a
// certificate the client does not trust, and the errors a call reports
// before any request. The client itself retries
// 429 and 503 (see [WithRetries]) before it returns them.
func IsRetryable(err error) bool {
	var re *redirectError
	var cert *tls.CertificateVerificationError
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrPaging) || errors.As(err, &re) || errors.As(err, &cert) {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		switch e.StatusCode {
		case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded)
}

// RateLimited reports whether err is a 429 Too Many Requests (the key or
// its account is over its rate limit, or has too many requests in flight
// at once), and how long the server asked to wait before the next
// request: its Retry-After, or else the t of its RateLimit field; 0 when
// it said neither, and then a backoff of your own applies. It matches
// what errors.Is(err, [ErrRateLimited]) does.
func RateLimited(err error) (wait time.Duration, ok bool) {
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	if e.RetryAfter > 0 {
		return e.RetryAfter, true
	}
	return e.reset, true
}

// IsNotModified reports whether err is a 304 Not Modified, the answer to
// a page call with [IfNoneMatch] whose page is unchanged: errors.Is(err,
// [ErrNotModified]).
func IsNotModified(err error) bool { return errors.Is(err, ErrNotModified) }

// NeedsResync reports whether the server will not continue from where
// the caller was: errors.Is(err, [ErrResync]). It covers a 410 Gone (a
// sync token older than the deletions the server keeps, or a sync token
// or list cursor of a form deleted and created again since) and the 400
// the server gives [Client.Sync] or [Client.SyncPage] for a token other
// than SyncStart that it does not accept (its cursor secret changed).
// Read the feed again from SyncStart into an empty copy, or a list again
// from its first page.
func NeedsResync(err error) bool { return errors.Is(err, ErrResync) }

// IsUnauthorized reports whether err is a 401 Unauthorized: the key is
// unknown, revoked or expired (the server does not say which), or New's
// error for a malformed key: errors.Is(err, [formsapi.ErrInvalidKey]).
func IsUnauthorized(err error) bool { return errors.Is(err, formsapi.ErrInvalidKey) }

// IsNotFound reports whether err says the form does not exist for the
// key: the API's 404 for a form's submissions, its feed or its export
// (the form does not exist, belongs to another account or is outside the
// key's scope: the server does not say which), or a form ID no server
// could have ("", ".", ".."), refused before any request:
// errors.Is(err, [formsapi.ErrFormNotFound]). A 404 that is not the
// API's (a wrong base URL) is not.
func IsNotFound(err error) bool { return errors.Is(err, formsapi.ErrFormNotFound) }

// RequestID returns the request ID (X-Request-Id) of the answer err came
// from, to quote to the server's operators: that of an [*Error], or of
// the page whose items broke the paging rules ([ErrPaging]); "" when err
// came from no answer, or one without an ID.
func RequestID(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.RequestID
	}
	var w *requestIDError
	if errors.As(err, &w) {
		return w.id
	}
	return ""
}

// requestIDError is an error about an answer that was no error answer
// (a page breaking the paging rules), with the answer's request ID.
type requestIDError struct {
	err error
	id  string
}

// withRequestID is err with the request ID id; err itself when id is "".
func withRequestID(err error, id string) error {
	if id == "" {
		return err
	}
	return &requestIDError{err, id}
}

// Error returns err's message and the request ID.
func (e *requestIDError) Error() string { return e.err.Error() + " (request ID " + e.id + ")" }

// Unwrap returns the error with the request ID.
func (e *requestIDError) Unwrap() error { return e.err }
