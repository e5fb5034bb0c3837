package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/stored"
)

// UpdateForm replaces the title, icon and notification e-mail of the form
// f.ID of accountID (see formsapi.Writer.UpdateForm); its ID, owner,
// creation time and submissions stay. It returns an error wrapping
// formsapi.ErrFormNotFound if f.ID is not a form of accountID, and one
// wrapping formsapi.ErrInvalidInput if f or accountID is malformed or
// beyond the store's limits, including text PostgreSQL cannot store;
// either way nothing changes.
func (s *Store) UpdateForm(ctx context.Context, accountID string, f formsapi.Form) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: update form: %w", err)
	}
	if err := stored.CheckDeletion(accountID, f.ID, false, ""); err != nil {
		return fmt.Errorf("pgstore: update form: %w", err)
	}
	// The form is measured against MaxFormBytes as it will be sent: with
	// the creation time it keeps.
	var at int64
	switch err := s.pool.QueryRow(ctx, s.sql.formCreatedAt, f.ID, accountID).Scan(&at); {
	case err == nil:
		f.CreatedAt = time.Unix(0, at)
	case errors.Is(err, pgx.ErrNoRows):
		f.CreatedAt = s.now() // checked for its other fields, then not found
	default:
		return fmt.Errorf("pgstore: update form %q: %w", f.ID, withCtx(ctx, err))
	}
	if err := s.limits.PrepareForm(accountID, &f); err != nil {
		return fmt.Errorf("pgstore: update form: %w", err)
	}
	for _, field := range []struct{ name, value string }{
		{"title", f.Title}, {"icon", f.Icon}, {"notification email", f.NotificationEmail},
	} {
		if !storableText(field.value) {
			return fmt.Errorf("pgstore: update form: %w: %s holds a NUL byte or invalid UTF-8", formsapi.ErrInvalidInput, field.name)
		}
	}
	tag, err := s.exec(ctx, s.sql.updateForm, f.ID, accountID, f.Title, f.Icon, f.NotificationEmail)
	if err != nil {
		return fmt.Errorf("pgstore: update form %q: %w", f.ID, withCtx(ctx, err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgstore: update form %q: %w", f.ID, formsapi.ErrFormNotFound)
	}
	return nil
}

// DeleteForm deletes the form formID of accountID with its submissions
// and their metadata, in one transaction (see formsapi.Writer.DeleteForm
// and, for what stays on disk, Erase). It returns an error wrapping
// formsapi.ErrFormNotFound if formID is not a form of accountID, and one
// wrapping formsapi.ErrInvalidInput if formID is malformed.
func (s *Store) DeleteForm(ctx context.Context, accountID, formID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: delete form: %w", err)
	}
	if err := stored.CheckDeletion(accountID, formID, false, ""); err != nil {
		return fmt.Errorf("pgstore: delete form: %w", err)
	}
	var seq int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.searchLockFirst); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, s.sql.lockForm, formID, accountID).Scan(&seq); errors.Is(err, pgx.ErrNoRows) {
			return formsapi.ErrFormNotFound
		} else if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.sql.deleteFormSubmissions, formID, accountID); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, s.sql.deleteForm, formID, accountID).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return formsapi.ErrFormNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: delete form %q: %w", formID, withCtx(ctx, err))
	}
	s.wait.WakeForm(formID)
	s.cache.Forget(seq)
	s.cache.ForgetForms(accountID) // the deleted form's fields are in its account's lists
	return nil
}

// DeleteSubmission deletes the submission of formID, a form of accountID,
// whose metadata ID is id, with its metadata (see
// formsapi.Writer.DeleteSubmission). It returns an error wrapping
// formsapi.ErrFormNotFound if formID is not a form of accountID, one
// wrapping formsapi.ErrSubmissionNotFound if no submission of the form
// has that ID, and one wrapping formsapi.ErrInvalidInput if id is empty.
func (s *Store) DeleteSubmission(ctx context.Context, accountID, formID, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: delete submission: %w", err)
	}
	if err := stored.CheckDeletion(accountID, formID, true, id); err != nil {
		return fmt.Errorf("pgstore: delete submission: %w", err)
	}
	var seq int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, s.sql.deleteSubmission, formID, accountID, id).Scan(&seq)
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// Nothing deleted: say whether the form or the submission is
		// what does not exist.
		var at int64
		if err := tx.QueryRow(ctx, s.sql.formCreatedAt, formID, accountID).Scan(&at); errors.Is(err, pgx.ErrNoRows) {
			return formsapi.ErrFormNotFound
		} else if err != nil {
			return err
		}
		return formsapi.ErrSubmissionNotFound
	})
	if err != nil {
		return fmt.Errorf("pgstore: delete submission %q of form %q: %w", id, formID, withCtx(ctx, err))
	}
	s.wait.WakeForm(formID)
	s.cache.Forget(seq)
	return nil
}

// Erase deletes every submission of accountID's forms whose data holds
// value in its top-level member field, with their metadata, in one
// transaction, and returns how many (see formsapi.Writer.Erase). It
// reads the data of every submission of the account to match it. It
// returns an error wrapping formsapi.ErrInvalidInput, and deletes
// nothing, if accountID, field or value is empty.
//
// What stays on disk: once the transaction commits, no row of the
// store's tables holds the data or metadata, and no query can return
// them. PostgreSQL does not overwrite a deleted row at once, though: its
// bytes stay in the table's pages (and TOAST pages, for large data) as a
// dead tuple until VACUUM (or autovacuum) marks the space free, and stay
// readable on disk until a later write reuses it; the write-ahead log
// holds them until its segments are recycled, and so do base backups, WAL
// archives and replicas' copies. A host whose erasure promise covers the
// disk runs VACUUM on formsapi_submissions after erasing (VACUUM FULL
// rewrites the table and drops the old file), and keeps its backups' and
// WAL archives' retention within the promised time.
func (s *Store) Erase(ctx context.Context, accountID, field, value string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("pgstore: erase: %w", err)
	}
	if err := stored.CheckErase(accountID, field, value); err != nil {
		return 0, fmt.Errorf("pgstore: %w", err)
	}
	var forms []int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		forms = forms[:0]
		// Through the index when it holds the value (a name and a value
		// within its bounds), else every submission of the account.
		query, args := s.sql.accountData, []any{accountID}
		if key, ok := find.StringKey(field, value); ok {
			query, args = s.sql.eraseCandidates, []any{accountID, key}
		}
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		var seqs []int64
		for rows.Next() {
			var seq int64
			var data []byte
			if err := rows.Scan(&seq, &data); err != nil {
				rows.Close()
				return err
			}
			if stored.Holds(data, field, value) {
				seqs = append(seqs, seq)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(seqs) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, s.sql.deleteBySeqs, seqs)
		if err != nil {
			return err
		}
		forms, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: erase: %w", withCtx(ctx, err))
	}
	if len(forms) > 0 {
		s.wait.WakeAll() // forms by their seq here: their waiters read again, some for nothing
	}
	s.cache.Forget(forms...)
	return len(forms), nil
}

// inTx runs the deletion fn in a transaction at read committed, again
// when a conflict aborted it (see exec), and in the same transaction
// stamps the tombstones the triggers made with the store's clock and
// forgets those past retention (see WithTombstoneRetention).
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	var err error
	for n := 0; n < conflictAttempts; n++ {
		if n > 0 && backoff(ctx, n) != nil {
			break
		}
		err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			now := s.now()
			cutoff := now.Add(-s.keep).UnixNano()
			for _, st := range []struct {
				sql string
				arg int64
			}{{s.sql.stampTombstones, now.UnixNano()}, {s.sql.purgedUpTo, cutoff}, {s.sql.purgeTombstones, cutoff}} {
				if _, err := tx.Exec(ctx, st.sql, st.arg); err != nil {
					return fmt.Errorf("tombstones: %w", err)
				}
			}
			return nil
		})
		if !conflict(err) {
			return err
		}
	}
	return err
}
