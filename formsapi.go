// Package formsapi serves a read-only JSON API over collected form
// submissions. A host application supplies a [Store] and a [KeyResolver],
// and mounts the [http.Handler] returned by [NewHandler] anywhere in its own
// router:
//
//	GET /v1/forms                          the forms of the key's account
//	GET /v1/forms/{formId}/submissions     the submissions of one of them
//	GET /v1/forms/{formId}/export          all of them as one streamed file
//	GET /v1/forms/{formId}/summary         their count, per day, and each field's top values
//	GET /v1/openapi.json                   the OpenAPI 3.1 document of the API
//
// Requests authenticate with "Authorization: Bearer <key>", but for the
// document, which needs none. A form that does not exist and a form of
// another account get the same 404, byte for byte, and internal
// [Metadata] recorded with a submission is never returned.
//
// The handler serves paths that begin with /v1, and answers every method
// and path itself. To serve it under a prefix in front of any router,
// package mount does it in one line:
//
//	srv := &http.Server{Handler: mount.Prefix("/api", formsapi.NewHandler(store, keys), mux)}
//
// Inside a ServeMux, mount it without a method and strip the prefix:
//
//	mux.Handle("/api/", http.StripPrefix("/api", formsapi.NewHandler(store, keys)))
//
// which conflicts with a method pattern for every path such as "GET /"
// (serve a home page at "GET /{$}"). Routers that do not rewrite
// r.URL.Path when mounting (chi's Mount, for one) need the same
// http.StripPrefix wrapper. docs/embedding.md says what each router does.
//
// Three stores ship with the library: memstore (in memory, for tests and
// small hosts), sqlitestore (SQLite through modernc.org/sqlite, no cgo)
// and pgstore (PostgreSQL through pgx, for several nodes over one
// database). Package storetest checks any Store against the contract all
// three meet.
package formsapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Form is a form of an account, exactly as the API returns it.
type Form struct {
	ID                string    `json:"formId"`
	Title             string    `json:"title"`
	Icon              string    `json:"icon"`
	NotificationEmail string    `json:"notificationEmail"`
	CreatedAt         time.Time `json:"createdAt"`
}

// Attachment describes a file uploaded with a submission.
type Attachment struct {
	FieldName string `json:"fieldName"`
	FileURL   string `json:"fileUrl"`
	FileSize  int64  `json:"fileSize"`
	MIMEType  string `json:"mimeType"`
}

// Submission is exactly what the API returns: nothing internal can ride along.
type Submission struct {
	FormID      string          `json:"formId"`
	Data        json.RawMessage `json:"data"`        // a JSON object
	Attachments []Attachment    `json:"attachments"` // [] when none, never null
	CreatedAt   time.Time       `json:"createdAt"`
}

// Metadata is what the collection side records about a submission and the
// read API never returns.
type Metadata struct {
	ClientIP  string
	UserAgent string
	Geo       json.RawMessage
	TraceID   string
	// ID is the host's own name for the submission (its row in the
	// collection side's database, say), by which [Writer.DeleteSubmission]
	// finds it again; "" for none. When set it is unique within its form:
	// AddSubmission refuses a second submission with the same ID in the
	// same form (ErrInvalidInput), so a retried write cannot store a
	// submission twice. It must be valid UTF-8 without control
	// characters, at most 256 bytes, and counts towards MaxMetadataBytes.
	ID string
}

// Errors of the Store and KeyResolver contracts. Implementations return them
// (wrapped or not) and callers check them with errors.Is.
var (
	// ErrInvalidKey means the API key is unknown, revoked or malformed.
	ErrInvalidKey = errors.New("formsapi: invalid API key")
	// ErrFormNotFound means the form does not exist or belongs to another
	// account; the two cases are deliberately indistinguishable.
	ErrFormNotFound = errors.New("formsapi: form not found")
	// ErrInvalidCursor means a cursor was not issued for this list.
	ErrInvalidCursor = errors.New("formsapi: invalid cursor")
)

// Errors of the write side shared by memstore and sqlitestore.
var (
	// ErrFormExists means a form with that ID is already stored, in any
	// account: form IDs are unique across accounts. Never pass it on to a
	// customer who chose the ID: it would tell them another tenant's form
	// exists. Make IDs with [NewFormID] instead.
	ErrFormExists = errors.New("formsapi: form already exists")
	// ErrKeyExists means the API key is already registered.
	ErrKeyExists = errors.New("formsapi: API key already exists")
	// ErrInvalidInput means a write was refused because its input is
	// malformed; the wrapping error says which field and why.
	ErrInvalidInput = errors.New("formsapi: invalid input")
	// ErrSubmissionNotFound means no submission of the form has the
	// [Metadata.ID] a deletion named (see [Writer.DeleteSubmission]).
	ErrSubmissionNotFound = errors.New("formsapi: submission not found")
)

// maxFormIDLen is the longest form ID the library accepts.
const maxFormIDLen = 128

// ValidFormID reports whether id can name a form: 1 to 128
// characters from A–Z, a–z, 0–9 and "-", "_", "." and "~" (the characters
// that never need escaping in a URL path), and not "." or "..". The handler
// answers 404 for any other ID without asking the store.
func ValidFormID(id string) bool {
	if id == "" || len(id) > maxFormIDLen || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !isUnreserved(id[i]) {
			return false
		}
	}
	return true
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '~'
}

// storedTime is t as stores keep it: the current time for a zero t, in
// UTC and without a monotonic clock reading.
func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Round(0)
}

// checkTime refuses times that do not survive a round trip through Unix
// nanoseconds (years before 1678 or after 2261), which stores may use as a
// sort key. Callers replace a zero time with the current time first.
func checkTime(t time.Time) error {
	if !time.Unix(0, t.UnixNano()).Equal(t) {
		return fmt.Errorf("%w: createdAt %s is outside the years 1678 to 2261", ErrInvalidInput, t.Format(time.RFC3339))
	}
	return nil
}
