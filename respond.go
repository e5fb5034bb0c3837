package formsapi

// Responses: the one file that decides statuses and writes answers.
// Every refusal anywhere in the handler is an error value that fail maps
// to its status, message and headers; every page and document is written
// by respondPage, respondFeed or respondDocument, which also decide the
// 304s. Causes go to the log, never to the client.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/token"
)

// Messages of the error responses.
const (
	msgInvalidKey        = "invalid API key"
	msgFormNotFound      = "form not found"
	msgBadCursor         = "invalid cursor: use the nextCursor of a previous page of this same list"
	msgMethodNotAllowed  = "method not allowed: use GET or HEAD"
	msgInternal          = "internal server error"
	msgNoFeed            = "not implemented: this server's store has no sync feed; page with cursor, order, since and until instead"
	msgNoCount           = "not implemented: this server's store cannot count submissions; leave total out"
	msgNoSortIndex       = "not implemented: this server's store keeps no sort index; leave sort out"
	msgNotSorted         = "not implemented: this server's sort index does not keep the field %q; sort by a field it keeps, or leave sort out"
	msgSyncExpired       = "sync token expired: deletions after it are no longer kept; read the feed again from sync=start and replace your copy"
	msgCursorOfGone      = "cursor expired: the form it was made for was deleted and a form with the same ID created since; read the list again without a cursor"
	msgSyncOfGone        = "sync token expired: the form it was made for was deleted and a form with the same ID created since; read the feed again from sync=start and replace your copy"
	msgUnavailable       = "service unavailable: the request took too long, try again"
	msgRateLimited       = "rate limit exceeded: retry after the number of seconds in Retry-After"
	msgLimiterNotWorking = "service unavailable: the rate limiter is not answering, try again"
	msgBusy              = "too many requests at once: retry after the number of seconds in Retry-After"
	msgNoRoom            = "service unavailable: the server is busy sending other answers, retry after the number of seconds in Retry-After"
)

// Refusals the handler decides itself, before or instead of a store call.
// fail answers each; the store's own errors (ErrFormNotFound,
// ErrInvalidCursor, a deadline, anything else) are answered there too.
var (
	errNoCredentials  = errors.New("no bearer credentials")               // 401 without an error code
	errNoRoute        = errors.New("no such route")                       // 404
	errMethod         = errors.New("method not allowed")                  // 405
	errNoFeed         = errors.New("the store has no sync feed")          // 501
	errSyncExpired    = errors.New("the sync token is past retention")    // 410
	errCursorOfGone   = errors.New("the cursor is of a deleted form")     // 410
	errSyncOfGone     = errors.New("the sync token is of a deleted form") // 410
	errRateLimited    = errors.New("rate limited")                        // 429
	errLimiterRefused = errors.New("the rate limiter is not working")     // 503, failing closed
	errBusy           = errors.New("too many requests at once")           // 429, Retry-After: 1
)

// badRequest is a 400 whose message names the parameter and what is wrong.
type badRequest string

func (b badRequest) Error() string { return string(b) }

// panicked is a panic recovered while serving: 500, logged with its stack.
type panicked struct {
	value any
	stack []byte
}

func (p panicked) Error() string { return fmt.Sprint("panic: ", p.value) }

// fail answers err: this is the one place that maps errors to statuses.
// Failures of a dependency are logged at most one line a second for each
// kind (logthrottle.go).
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	var bad badRequest
	var pan panicked
	var notSorted *find.NotSortedError
	switch {
	case errors.As(err, &bad):
		writeError(w, http.StatusBadRequest, string(bad))
	case errors.Is(err, errNoCredentials):
		// RFC 6750 §3.1: no error code when the request had no credentials.
		w.Header().Set("WWW-Authenticate", `Bearer realm="formsapi"`)
		writeError(w, http.StatusUnauthorized, msgInvalidKey)
	case errors.Is(err, ErrInvalidKey):
		if !a.waitRefused(r.Context()) { // at a bounded rate (authfail.go)
			w.Header().Set("Connection", "close") // past the cap of waiting refusals
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="formsapi", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, msgInvalidKey)
	case errors.Is(err, ErrFormNotFound):
		writeError(w, http.StatusNotFound, msgFormNotFound)
	case errors.Is(err, ErrInvalidCursor):
		writeError(w, http.StatusBadRequest, msgBadCursor)
	case errors.Is(err, errNoRoute):
		writeError(w, http.StatusNotFound, a.msgNoRoute)
	case errors.Is(err, errMethod):
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, msgMethodNotAllowed)
	case errors.Is(err, errSyncExpired):
		// The token is good, and what it would resume needs deletions the
		// store no longer keeps: the client must start over, not retry.
		writeError(w, http.StatusGone, msgSyncExpired)
	case errors.Is(err, errCursorOfGone):
		// The form the cursor was made for was deleted, and one with the
		// same ID made since: its list is another, to read from the start.
		writeError(w, http.StatusGone, msgCursorOfGone)
	case errors.Is(err, errSyncOfGone):
		writeError(w, http.StatusGone, msgSyncOfGone)
	case errors.Is(err, errNoFeed):
		// The request is good and this server cannot serve it.
		writeError(w, http.StatusNotImplemented, msgNoFeed)
	case errors.Is(err, errNoCount):
		writeError(w, http.StatusNotImplemented, msgNoCount)
	case errors.Is(err, find.ErrNoSortIndex):
		// The request is good and this server's store keeps no sort
		// index.
		writeError(w, http.StatusNotImplemented, msgNoSortIndex)
	case errors.As(err, &notSorted):
		// The request is good and this server's sort index keeps other
		// fields only: the field is the request's own (at most 64 bytes
		// of UTF-8, find.ParseSort).
		writeError(w, http.StatusNotImplemented, fmt.Sprintf(msgNotSorted, notSorted.Field))
	case errors.Is(err, errRateLimited):
		// The RateLimit fields and Retry-After are set already (access.go).
		writeError(w, http.StatusTooManyRequests, msgRateLimited)
	case errors.Is(err, errBusy):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, msgBusy)
	case errors.Is(err, errNoRoom):
		// Not this client's fault, nor the store's: the pages of other
		// requests fill the room (room.go). Not logged: a client may
		// cause it at will, and the bound is doing its work.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, msgNoRoom)
	case errors.As(err, &pan):
		a.log(w, r, slog.LevelError, "formsapi: panic serving request",
			slog.String("panic", fmt.Sprint(pan.value)), slog.String("stack", string(pan.stack)))
		writeError(w, http.StatusInternalServerError, msgInternal)
	case r.Context().Err() != nil:
		// The client went away; nobody reads this answer and it is no fault.
		a.logThrottled(logClientGone, w, r, slog.LevelInfo, "formsapi: client gone before the answer", slog.Any("err", err))
		writeError(w, http.StatusServiceUnavailable, msgUnavailable)
	case errors.Is(err, errLimiterRefused):
		a.logThrottled(logLimiterFailed, w, r, slog.LevelError, "formsapi: rate limiter failed; request refused", slog.Any("err", err))
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, msgLimiterNotWorking)
	case errors.Is(err, context.DeadlineExceeded):
		a.logThrottled(logStoreTimedOut, w, r, slog.LevelWarn, "formsapi: store timed out", slog.Any("err", err))
		writeError(w, http.StatusServiceUnavailable, msgUnavailable)
	default:
		a.logThrottled(logStoreFailed, w, r, slog.LevelError, "formsapi: store failed", slog.Any("err", err))
		writeError(w, http.StatusInternalServerError, msgInternal)
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	withBuffer(func(b []byte) []byte {
		b = appendError(b, msg)
		h := w.Header()
		h.Del("Link") // a page's Link, ETag and Vary, set before the error, go
		h.Del("ETag")
		h.Del("Vary")
		setJSONHeaders(h, cacheError)
		h.Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(status)
		w.Write(b)
		return b
	})
}

// Caching headers. Pages depend on the API key and change as submissions
// arrive: "private" keeps them out of shared caches, "no-cache" lets the
// key holder's client keep a page but makes it ask (If-None-Match) before
// every reuse, and Vary names what else the answer depends on. Errors
// are not worth keeping: "no-store".
const (
	cachePage     = "private, no-cache"
	varyPage      = "Authorization, Accept-Encoding"
	cacheDocument = "no-cache"
	varyDocument  = "Accept-Encoding"
	cacheError    = "no-store"
)

// respondPage finishes a page of a list whose body holds everything up to
// its last item: a 304 if the request's If-None-Match names the page's
// tag, otherwise the whole page with its cursor (from the store's
// storeNext), Link and tag. tagNext is what the tag says of where the
// next page begins, and items where the page's items are (see pageTag).
// It returns the body's buffer for reuse.
func (a *api) respondPage(w http.ResponseWriter, r *http.Request, req listRequest, body []byte, storeNext, tagNext string, items pageItems) []byte {
	signer := a.cfg.signer
	if !items.sign {
		signer = nil
	}
	var at time.Time
	if signer != nil {
		// The tag covers the stored page and the signing window, never
		// the signatures (attachments.go).
		at = signer.windowAt(a.now())
		items.window = at.UnixNano()
	}
	tag := a.pageTag(req, tagNext, body, items)
	if notModified(w, r, tag, cachePage, varyPage) {
		return body
	}
	if signer != nil {
		signed, err := signer.signPage(req.ctx, req.account, req.list.FormID, tag, at, body, items.start, len(body))
		if err != nil {
			a.fail(w, r, err)
			return body
		}
		body = signed
	}
	body = appendNext(body, req.totalJSON, a.next(w, r, req, storeNext))
	a.writePage(w, r, req.request, tag, body)
	return body
}

// respondFeed finishes a page of the sync feed whose body holds its
// items, read up to position next, more saying whether more can be read
// at once: a 304 as for a list, otherwise the page with the sealed token
// to resume from. The tag covers the items and where the page ends, not
// the token, which is sealed afresh on every answer.
//
// The page's items are body[start:end]: their attachments' URLs are
// signed after the tag, when WithAttachmentURLs asks for it.
func (a *api) respondFeed(w http.ResponseWriter, r *http.Request, req listRequest, body []byte, start, end int, next int64, more bool) []byte {
	tagNext := "sync:" + strconv.FormatInt(next, 10) + ":" + strconv.FormatBool(more)
	signer := a.cfg.signer
	var at time.Time
	var items pageItems
	if signer != nil {
		at = signer.windowAt(a.now())
		items.window = at.UnixNano()
	}
	tag := a.pageTag(req, tagNext, body, items)
	if notModified(w, r, tag, cachePage, varyPage) {
		return body
	}
	if signer != nil {
		signed, err := signer.signPage(req.ctx, req.account, req.list.FormID, tag, at, body, start, end)
		if err != nil {
			a.fail(w, r, err)
			return body
		}
		body = signed
	}
	body = appendFeedEnd(body, a.tokens.SealSync(req.list, token.Sync{Pos: next, Floor: req.floor, Incarnation: req.inc}), more)
	a.writePage(w, r, req.request, tag, body)
	return body
}

// respondDocument writes a body that never changes, with its tag and its
// gzip coding made once, or a 304.
func respondDocument(w http.ResponseWriter, r *http.Request, body, gz []byte, tag string) {
	if notModified(w, r, tag, cacheDocument, varyDocument) {
		return
	}
	h := w.Header()
	setJSONHeaders(h, cacheDocument)
	h.Set("ETag", tag)
	h.Set("Vary", varyDocument)
	writeStatic(w, body, gz, acceptsGzip(r.Header.Values("Accept-Encoding")))
}

// notModified answers 304, and reports true, when the request's
// If-None-Match names tag: the status, the tag, and the caching headers
// the 200 would have carried (RFC 9110 §15.4.5), with no body and no
// Content-Type or Content-Length. The request counts against a rate
// limit like any other: it cost the store a full page read.
func notModified(w http.ResponseWriter, r *http.Request, tag, cacheControl, vary string) bool {
	if !noneMatch(r.Header.Values("If-None-Match"), tag) {
		return false
	}
	h := w.Header()
	h.Del("Link")
	h.Set("ETag", tag)
	h.Set("Cache-Control", cacheControl)
	h.Set("Vary", vary)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNotModified)
	return true
}

// writePage writes a finished page with its tag and the page headers.
// The page's share of the room becomes what its buffer takes, and the
// body goes out in pieces under the stall timeout (room.go).
func (a *api) writePage(w http.ResponseWriter, r *http.Request, req request, tag string, body []byte) {
	req.room.resize(cap(body))
	h := w.Header()
	setJSONHeaders(h, cachePage)
	h.Set("ETag", tag)
	h.Set("Vary", varyPage)
	a.writeBody(w, r, req, body, acceptsGzip(r.Header.Values("Accept-Encoding")))
}

// setJSONHeaders sets the headers every JSON answer carries.
func setJSONHeaders(h http.Header, cacheControl string) {
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", cacheControl)
	h.Set("X-Content-Type-Options", "nosniff")
}

// writeBody writes a complete 200 body of req with its length,
// gzip-coded when gz is true and the body is large enough (compress.go),
// in pieces under the stall timeout; the coding's buffer joins the
// page's share of the room while it is written. The caller has set every
// other header; Vary must already name Accept-Encoding when gz could be
// true.
func (a *api) writeBody(w http.ResponseWriter, r *http.Request, req request, body []byte, gz bool) {
	if gz && len(body) >= gzipMinSize {
		coded, release := compress(body)
		defer release()
		req.room.grow(cap(coded))
		w.Header().Set("Content-Encoding", "gzip")
		body = coded
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	a.writeChunked(w, r, req.start, body)
}

// writeStatic writes a complete 200 body that never changes: gz, its
// gzip coding from gzipped, when the request allows it. The caller has
// set every other header, Vary naming Accept-Encoding among them.
func writeStatic(w http.ResponseWriter, body, gz []byte, acceptsGzip bool) {
	if acceptsGzip && len(body) >= gzipMinSize {
		w.Header().Set("Content-Encoding", "gzip")
		body = gz
	}
	write200(w, body)
}

func write200(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}
