package sqlitestore

import (
	"context"
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
	ch := s.keys.change()
	ch.everything() // before the commit: see keyCopy
	_, err = s.addForm.ExecContext(ctx, f.ID, accountID, f.Title, f.Icon, f.NotificationEmail, f.CreatedAt.UnixNano())
	ch.end()
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
	// So are the sort keys, once the sort index is on.
	for {
		on, sorted := s.searchOn.Load(), s.sortOn.Load()
		args := r.args(on, sorted)
		done, err := s.writing(ctx)
		if err != nil {
			return fmt.Errorf("sqlitestore: add submission to form %q: %w", r.FormID, err)
		}
		ch := s.keys.change()
		ch.form(r.FormID) // before the commit: see keyCopy
		res, err := s.addSubmission.ExecContext(ctx, args...)
		ch.end()
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		if err == nil && n == 0 && !on {
			err = s.write.QueryRowContext(ctx, sqlSearchIndexed).Scan(&on)
		}
		if err == nil && n == 0 && !sorted {
			err = s.write.QueryRowContext(ctx, sqlSortIndexed).Scan(&sorted)
		}
		done()
		if err != nil {
			return fmt.Errorf("sqlitestore: add submission to form %q: %w", r.FormID, r.insertError(err))
		}
		switch {
		case n > 0:
			s.wait.WakeForm(r.FormID) // committed: its waiters read it
			// The submission is committed: a fold that fails (the file
			// busy past the timeout) does not make the write fail, and
			// the next write folds the tail instead (noteFold logs it).
			// Nor does the request's cancellation stop it halfway
			// (foldIfFull).
			s.noteFold(s.foldIfFull(ctx, r.FormID))
			return nil
		case on && !s.searchOn.Load() || sorted && !s.sortOn.Load():
			s.searchOn.Store(on || s.searchOn.Load())
			s.sortOn.Store(sorted || s.sortOn.Load())
			continue
		}
		return fmt.Errorf("sqlitestore: add submission to form %q: %w", r.FormID, formsapi.ErrFormNotFound)
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
// when the search index is on, and the sort keys when sorted is (the
// sort index).
func (r *newSubmission) args(on, sorted bool) []any {
	var geo any // NULL when absent; text, as data and attachments are
	if r.Geo != nil {
		geo = string(r.Geo)
	}
	return []any{r.At, string(r.Data), string(r.Attachments), r.Encoded, stored.Version,
		r.Meta.ClientIP, r.Meta.UserAgent, geo, r.Meta.TraceID, r.Meta.ID, r.FormID, findKeys(r.Data, r.URLs, on), on, sortKeysIf(r.Data, sorted), sorted}
}

// insertError is the error of sqlAddSubmission's failed insert of r: a
// metadata ID the form already has is invalid input.
func (r *newSubmission) insertError(err error) error {
	if isUniqueViolation(err) {
		return fmt.Errorf("%w: metadata ID %q is already a submission of the form", formsapi.ErrInvalidInput, r.Meta.ID)
	}
	return err
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
	ch := s.keys.change()
	ch.everything() // before the commit: see keyCopy
	res, err := s.revokeKey.ExecContext(ctx, s.now().UnixNano(), h[:])
	ch.end()
	done()
	s.wait.WakeKey(h) // its waiters look it up again (a spurious wake-up if nothing was revoked)
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
