package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/keyformat"
	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/jackc/pgx/v5/pgconn"
)

// AddForm stores f as a form of accountID. A zero f.CreatedAt becomes the
// current time (see WithClock). It returns an error wrapping
// formsapi.ErrFormExists if any account already has a form with f.ID, and
// one wrapping formsapi.ErrInvalidInput if f or accountID is malformed or
// beyond the store's limits (see WithLimits and
// formsapi.Limits.PrepareForm), including text that PostgreSQL cannot
// store (a NUL byte or invalid UTF-8); either way nothing changes.
func (s *Store) AddForm(ctx context.Context, accountID string, f formsapi.Form) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: add form: %w", err)
	}
	if f.CreatedAt.IsZero() {
		f.CreatedAt = s.now()
	}
	if err := s.limits.PrepareForm(accountID, &f); err != nil {
		return fmt.Errorf("pgstore: add form: %w", err)
	}
	for _, field := range []struct{ name, value string }{
		{"account ID", accountID}, {"title", f.Title}, {"icon", f.Icon}, {"notification email", f.NotificationEmail},
	} {
		if !storableText(field.value) {
			return fmt.Errorf("pgstore: add form: %w: %s holds a NUL byte or invalid UTF-8", formsapi.ErrInvalidInput, field.name)
		}
	}
	_, err := s.exec(ctx, s.sql.addForm, f.ID, accountID, f.Title, f.Icon, f.NotificationEmail, f.CreatedAt.UnixNano())
	if isUniqueViolation(err) {
		return fmt.Errorf("pgstore: add form %q: %w", f.ID, formsapi.ErrFormExists)
	}
	if err != nil {
		return fmt.Errorf("pgstore: add form %q: %w", f.ID, withCtx(ctx, err))
	}
	return nil
}

// AddSubmission stores sub with its internal metadata m, which the read
// side never returns. A zero sub.CreatedAt becomes the current time (see
// WithClock). It returns an error wrapping formsapi.ErrFormNotFound if
// sub.FormID is not a stored form, and one wrapping
// formsapi.ErrInvalidInput if sub or m is malformed or beyond the store's
// limits (see WithLimits); either way nothing changes. Metadata must be valid UTF-8, as in every store (see
// formsapi.Limits.MaxMetadataBytes); it is kept as bytes.
//
// Each submission also takes the next position in its form's feed, an
// insertion sequence in commit order: submissions to one form are written
// one at a time, which bounds one form's write rate by the database's
// commit latency, while different forms do not wait for each other.
func (s *Store) AddSubmission(ctx context.Context, sub formsapi.Submission, m formsapi.Metadata) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: add submission: %w", err)
	}
	r, err := s.prepareSubmission(sub, m)
	if err != nil {
		return fmt.Errorf("pgstore: add submission: %w", err)
	}
	// The trigram keys of search are computed only once the search index
	// is on (RELIABILITY case 104): an index that is off would not store
	// them. The statement writes nothing when they are left out while the
	// setting is on (turned on by another node since this store last
	// looked), and the write is made again with them.
	// So are the sort keys, once the sort index is on.
	for {
		on, sorted := s.searchOn.Load(), s.sortOn.Load()
		// At read committed while the search index is on, so that its
		// fold runs (see execCommitted).
		tag, err := s.execAt(ctx, on && s.strictDefault, s.sql.addSubmission, r.args(on, sorted)...)
		if err == nil && tag.RowsAffected() == 0 && !on {
			err = s.pool.QueryRow(ctx, s.sql.searchIndexed).Scan(&on)
		}
		if err == nil && tag.RowsAffected() == 0 && !sorted {
			err = s.pool.QueryRow(ctx, s.sql.sortIndexed).Scan(&sorted)
		}
		if err != nil {
			return fmt.Errorf("pgstore: add submission to form %q: %w", r.FormID, r.insertError(ctx, err))
		}
		switch {
		case tag.RowsAffected() > 0:
			s.wait.WakeForm(r.FormID) // committed: its waiters on this node read it
			return nil
		case on && !s.searchOn.Load() || sorted && !s.sortOn.Load():
			s.searchOn.Store(on || s.searchOn.Load())
			s.sortOn.Store(sorted || s.sortOn.Load())
			continue
		}
		return fmt.Errorf("pgstore: add submission to form %q: %w", r.FormID, formsapi.ErrFormNotFound)
	}
}

// newSubmission is a submission made ready for sqlAddSubmission
// (stored.Prepare).
type newSubmission struct{ stored.Prepared }

// prepareSubmission does for AddSubmission and AddSubmissions what
// needs no database (stored.Prepare).
func (s *Store) prepareSubmission(sub formsapi.Submission, m formsapi.Metadata) (newSubmission, error) {
	p, err := stored.Prepare(sub, m, s.limits, s.now)
	return newSubmission{p}, err
}

// args returns sqlAddSubmission's arguments, with search's trigram keys
// when the search index is on.
//
// data and attachments go to text columns: PrepareSubmission checked
// that data is UTF-8 JSON, which has no raw NUL, and json.Marshal
// writes valid UTF-8.
//
// With sorted (the sort index is on) they carry the sort keys, else
// NULL.
func (r *newSubmission) args(on, sorted bool) []any {
	keys := find.Keys(r.Data)
	if on {
		keys = find.IndexKeys(r.Data, r.URLs)
	}
	return []any{r.FormID, r.At, string(r.Data), string(r.Attachments), r.Encoded,
		[]byte(r.Meta.ClientIP), []byte(r.Meta.UserAgent), r.Geo, []byte(r.Meta.TraceID), stored.Version, r.Meta.ID, fieldNames(r.Data), int8ArrayText(keys), on, sortKeysIf(r.Data, sorted), sorted}
}

// int8ArrayText returns a as the text form of a PostgreSQL bigint[]
// ("{1,-2}"), or nil (NULL) for a nil a. pgx sends a string argument in
// the text format, where it encodes an []int64 an element at a time
// through an interface value, an allocation for each: 77 a write with
// the search index on, of its 247.
func int8ArrayText(a []int64) any {
	if a == nil {
		return nil
	}
	var b strings.Builder
	b.Grow(2 + 21*len(a)) // an int64 and its comma at most: one allocation
	var buf [20]byte
	b.WriteByte('{')
	for i, v := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(strconv.AppendInt(buf[:0], v, 10))
	}
	b.WriteByte('}')
	return b.String()
}

// insertError is the error of sqlAddSubmission's failed insert of r: a
// metadata ID the form already has is invalid input. Only the metadata
// ID's unique index (migration 0007) says so: any other unique violation
// of the statement (its triggers', a host's constraint) is the store's
// failure, not the client's input (TestInsertErrorOtherUniqueViolation).
func (r *newSubmission) insertError(ctx context.Context, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "formsapi_submissions_host_id" {
		return fmt.Errorf("%w: metadata ID %q is already a submission of the form", formsapi.ErrInvalidInput, r.Meta.ID)
	}
	return withCtx(ctx, err)
}

// fieldNames returns the names of data's top-level members, in order,
// each once, as the field table (formsapi_fields, a bytea column) keeps
// them.
func fieldNames(data []byte) [][]byte {
	names := wire.FieldNames(data)
	b := make([][]byte, len(names))
	for i, n := range names {
		b[i] = []byte(n)
	}
	return b
}

// AddKey registers key as an API key of accountID. Only its SHA-256 is
// stored: the key never reaches the database or a log. A fast hash is
// enough because keys from formsapi.NewKey carry 190 random bits, which no
// one can guess or brute-force from the hash; slow password hashes exist
// for guessable secrets and would only add latency to every request.
//
// It returns an error wrapping formsapi.ErrKeyExists if the key is already
// registered or was ever revoked, and one wrapping formsapi.ErrInvalidInput
// if the key could never authenticate (see formsapi.Limits.PrepareKeyOptions) or accountID
// is malformed or beyond the store's limits (see WithLimits and
// formsapi.Limits.PrepareKeyOptions), including text PostgreSQL cannot
// store (a NUL byte or invalid UTF-8).
func (s *Store) AddKey(ctx context.Context, key, accountID string) error {
	return s.AddKeyWith(ctx, key, accountID, formsapi.KeyOptions{})
}

// RevokeKey revokes key; the next request that presents it gets 401, on
// every store over the same schema. The key's hash stays stored as
// revoked, so the key can never be added again. It returns an error
// wrapping formsapi.ErrInvalidKey if the key is not registered or already
// revoked.
func (s *Store) RevokeKey(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: revoke key: %w", err)
	}
	h := keyformat.Hash(key)
	tag, err := s.exec(ctx, s.sql.revokeKey, s.now().UnixNano(), h[:])
	if err != nil {
		return fmt.Errorf("pgstore: revoke key: %w", withCtx(ctx, err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgstore: revoke key: %w", formsapi.ErrInvalidKey)
	}
	s.wait.WakeKey(h)
	return nil
}

// storableText reports whether a PostgreSQL text column can hold s
// exactly: valid UTF-8 without NUL bytes.
func storableText(s string) bool {
	return utf8.ValidString(s) && !strings.Contains(s, "\x00")
}
