package sqlitestore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
	"github.com/formsapi/formsapi/internal/stored"
)

// AddForm stores f as a form of accountID. A zero f.CreatedAt becomes the
// current time (see WithClock). It returns an error wrapping
// formsapi.ErrFormExists if any account already has a form with f.ID, and
// one wrapping formsapi.ErrInvalidInput if f or accountID is malformed or
// beyond the store's limits (see WithLimits and
// formsapi.Limits.PrepareForm); either way nothing changes.
func (s *Store) AddForm(ctx context.Context, accountID string, f formsapi.Form) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: add form: %w", err)
	}
	if f.CreatedAt.IsZero() {
		f.CreatedAt = s.now()
	}
	if err := s.limits.PrepareForm(accountID, &f); err != nil {
		return fmt.Errorf("sqlitestore: add form: %w", err)
	}
	done, err := s.writing(ctx)
	if err != nil {
		return fmt.Errorf("sqlitestore: add form %q: %w", f.ID, err)
	}
	_, err = s.addForm.ExecContext(ctx, f.ID, accountID, f.Title, f.Icon, f.NotificationEmail, f.CreatedAt.UnixNano())
	done()
	if isUniqueViolation(err) {
		return fmt.Errorf("sqlitestore: add form %q: %w", f.ID, formsapi.ErrFormExists)
	}
	if err != nil {
		return fmt.Errorf("sqlitestore: add form %q: %w", f.ID, err)
	}
	return nil
}

// AddSubmission stores sub with its internal metadata m, which the read
// side never returns. A zero sub.CreatedAt becomes the current time (see
// WithClock). It returns an error wrapping formsapi.ErrFormNotFound if
// sub.FormID is not a stored form, and one wrapping
// formsapi.ErrInvalidInput if sub or m is malformed or beyond the store's
// limits (see WithLimits); either way nothing changes.
func (s *Store) AddSubmission(ctx context.Context, sub formsapi.Submission, m formsapi.Metadata) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: add submission: %w", err)
	}
	r, err := s.prepareSubmission(sub, m)
	if err != nil {
		return fmt.Errorf("sqlitestore: add submission: %w", err)
	}
	// The trigram keys of search are computed only once the search index
	// is on (RELIABILITY case 104): an index that is off would not store
	// them. The statement inserts nothing when they are left out while the
	// setting is on (turned on by another process since this store last
	// looked), and the write is made again with them.
	for {
		on := s.searchOn.Load()
		args := r.args(on)
		done, err := s.writing(ctx)
		if err != nil {
			return fmt.Errorf("sqlitestore: add submission to form %q: %w", r.formID, err)
		}
		res, err := s.addSubmission.ExecContext(ctx, args...)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err == nil && n == 0 && !on {
			err = s.write.QueryRowContext(ctx, sqlSearchIndexed).Scan(&on)
		}
		done()
		if err != nil {
			return fmt.Errorf("sqlitestore: add submission to form %q: %w", r.formID, r.insertError(err))
		}
		switch {
		case n > 0:
			return nil
		case on && !s.searchOn.Load():
			s.searchOn.Store(true)
			continue
		}
		return fmt.Errorf("sqlitestore: add submission to form %q: %w", r.formID, formsapi.ErrFormNotFound)
	}
}

// newSubmission is a submission made ready for sqlAddSubmission, once
// checked against the store's limits: its data compacted, its JSON as the
// API sends it encoded.
type newSubmission struct {
	formID      string
	at          int64
	data        []byte // compacted
	attachments string
	urls        []string // of the attachments, which search looks in
	encoded     []byte
	geo         any // NULL when absent
	m           formsapi.Metadata
}

// prepareSubmission does for AddSubmission and AddSubmissions what
// needs no database: a zero CreatedAt becomes the current time, the
// store's limits are checked and the columns made.
func (s *Store) prepareSubmission(sub formsapi.Submission, m formsapi.Metadata) (newSubmission, error) {
	if sub.CreatedAt.IsZero() {
		sub.CreatedAt = s.now()
	}
	if err := s.limits.PrepareSubmission(&sub, &m); err != nil {
		return newSubmission{}, err
	}
	data, err := compact(sub.Data)
	if err != nil {
		return newSubmission{}, err
	}
	attachments := "[]"
	if len(sub.Attachments) > 0 {
		b, err := json.Marshal(sub.Attachments)
		if err != nil {
			return newSubmission{}, err
		}
		attachments = string(b)
	}
	// The JSON the API sends is made once here, from the compacted data,
	// so that reads copy it out without decoding or encoding anything.
	sub.Data = []byte(data)
	encoded, err := formsapi.AppendSubmissionJSON(nil, sub)
	if err != nil {
		return newSubmission{}, err
	}
	var geo any // NULL when absent
	if len(m.Geo) > 0 {
		if geo, err = compact(m.Geo); err != nil {
			return newSubmission{}, err
		}
	}
	return newSubmission{formID: sub.FormID, at: sub.CreatedAt.UnixNano(), data: sub.Data, attachments: attachments,
		urls: stored.URLs(sub.Attachments), encoded: encoded, geo: geo, m: m}, nil
}

// args returns sqlAddSubmission's arguments, with search's trigram keys
// when the search index is on.
func (r *newSubmission) args(on bool) []any {
	return []any{r.at, string(r.data), r.attachments, r.encoded, stored.Version,
		r.m.ClientIP, r.m.UserAgent, r.geo, r.m.TraceID, r.m.ID, r.formID, findKeys(r.data, r.urls, on), on}
}

// insertError is the error of sqlAddSubmission's failed insert of r: a
// metadata ID the form already has is invalid input.
func (r *newSubmission) insertError(err error) error {
	if isUniqueViolation(err) {
		return fmt.Errorf("%w: metadata ID %q is already a submission of the form", formsapi.ErrInvalidInput, r.m.ID)
	}
	return err
}

// compact returns JSON without insignificant space, as text: the column
// holds exactly what the read side returns, without decoding it again.
func compact(v []byte) (string, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

// AddKey registers key as an API key of accountID. Only its SHA-256 is
// stored: the key never reaches the database file or a log. A fast hash is
// enough because keys from formsapi.NewKey carry 190 random bits, which no
// one can guess or brute-force from the hash; slow password hashes exist
// for guessable secrets and would only add latency to every request.
//
// It returns an error wrapping formsapi.ErrKeyExists if the key is already
// registered or was ever revoked, and one wrapping formsapi.ErrInvalidInput
// if the key could never authenticate (see formsapi.Limits.PrepareKeyOptions) or accountID
// is malformed or beyond the store's limits (see WithLimits and
// formsapi.Limits.PrepareKeyOptions).
func (s *Store) AddKey(ctx context.Context, key, accountID string) error {
	return s.AddKeyWith(ctx, key, accountID, formsapi.KeyOptions{})
}

// RevokeKey revokes key; the next request that presents it gets 401. The
// key's hash stays stored as revoked, so the key can never be added again.
// It returns an error wrapping formsapi.ErrInvalidKey if the key is not
// registered or already revoked.
func (s *Store) RevokeKey(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: revoke key: %w", err)
	}
	h := keyformat.Hash(key)
	done, err := s.writing(ctx)
	if err != nil {
		return fmt.Errorf("sqlitestore: revoke key: %w", err)
	}
	res, err := s.revokeKey.ExecContext(ctx, s.now().UnixNano(), h[:])
	done()
	if err != nil {
		return fmt.Errorf("sqlitestore: revoke key: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlitestore: revoke key: %w", err)
	} else if n == 0 {
		return fmt.Errorf("sqlitestore: revoke key: %w", formsapi.ErrInvalidKey)
	}
	return nil
}
