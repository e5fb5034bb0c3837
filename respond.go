package formsapi

// Responses: the one place that maps errors to statuses, and the
// headers every response carries.

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
)

// Messages of the error responses.
const (
	msgInvalidKey       = "invalid API key"
	msgFormNotFound     = "form not found"
	msgBadCursor        = "invalid cursor: use the nextCursor of a previous page of this same list"
	msgNoRoute          = "not found: the API serves GET /v1/forms and GET /v1/forms/{formId}/submissions"
	msgMethodNotAllowed = "method not allowed: use GET or HEAD"
	msgInternal         = "internal server error"
	msgNoFeed           = "not implemented: this server's store has no sync feed; page with cursor, order, since and until instead"
	msgUnavailable      = "service unavailable: the request took too long, try again"
)

// fail answers a store or resolver error. This is the one place that maps
// errors to statuses; causes go to the log, never to the client, at most
// one line a second for each kind of failure (logthrottle.go).
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrFormNotFound):
		writeError(w, http.StatusNotFound, msgFormNotFound)
	case errors.Is(err, ErrInvalidCursor):
		writeError(w, http.StatusBadRequest, msgBadCursor)
	case r.Context().Err() != nil:
		// The client went away; nobody reads this answer and it is no fault.
		a.logThrottled(logClientGone, w, r, slog.LevelInfo, "formsapi: client gone before the answer", slog.Any("err", err))
		writeError(w, http.StatusServiceUnavailable, msgUnavailable)
	case errors.Is(err, context.DeadlineExceeded):
		a.logThrottled(logStoreTimedOut, w, r, slog.LevelWarn, "formsapi: store timed out", slog.Any("err", err))
		writeError(w, http.StatusServiceUnavailable, msgUnavailable)
	default:
		a.logThrottled(logStoreFailed, w, r, slog.LevelError, "formsapi: store failed", slog.Any("err", err))
		writeError(w, http.StatusInternalServerError, msgInternal)
	}
}

func writeUnauthorized(w http.ResponseWriter, tokenPresented bool) {
	// RFC 6750 §3.1: no error code when the request had no credentials.
	if tokenPresented {
		w.Header().Set("WWW-Authenticate", `Bearer realm="formsapi", error="invalid_token"`)
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="formsapi"`)
	}
	writeError(w, http.StatusUnauthorized, msgInvalidKey)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	withBuffer(func(b []byte) []byte {
		b = appendError(b, msg)
		writeJSON(w, status, b)
		return b
	})
}

// writeJSON writes a complete error body with the headers every response
// carries; a page's Link, ETag and Vary, set before the error, go.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Del("Link")
	h.Del("ETag")
	h.Del("Vary")
	setJSONHeaders(h, cacheError)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
