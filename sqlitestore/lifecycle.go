package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/stored"
)

// UpdateForm replaces the title, icon and notification e-mail of the form
// f.ID of accountID (see formsapi.Writer.UpdateForm); its ID, owner,
// creation time and submissions stay. It returns an error wrapping
// formsapi.ErrFormNotFound if f.ID is not a form of accountID, and one
// wrapping formsapi.ErrInvalidInput if f or accountID is malformed or
// beyond the store's limits; either way nothing changes.
func (s *Store) UpdateForm(ctx context.Context, accountID string, f formsapi.Form) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: update form: %w", err)
	}
	if err := stored.CheckDeletion(accountID, f.ID, false, ""); err != nil {
		return fmt.Errorf("sqlitestore: update form: %w", err)
	}
	// The form is measured against MaxFormBytes as it will be sent: with
	// the creation time it keeps.
	done, err := s.writing(ctx)
	if err != nil {
		return fmt.Errorf("sqlitestore: update form %q: %w", f.ID, err)
	}
	defer done()
	ch := s.keys.change()
	ch.everything() // before the commit: see keyCopy
	defer ch.end()
	var at int64
	switch err := s.write.QueryRowContext(ctx, sqlFormCreatedAt, f.ID, accountID).Scan(&at); {
	case err == nil:
		f.CreatedAt = time.Unix(0, at)
	case errors.Is(err, sql.ErrNoRows):
		f.CreatedAt = s.now() // checked for its other fields, then not found
	default:
		return fmt.Errorf("sqlitestore: update form %q: %w", f.ID, err)
	}
	if err := s.limits.PrepareForm(accountID, &f); err != nil {
		return fmt.Errorf("sqlitestore: update form: %w", err)
	}
	res, err := s.write.ExecContext(ctx, sqlUpdateForm, f.Title, f.Icon, f.NotificationEmail, f.ID, accountID)
	if err != nil {
		return fmt.Errorf("sqlitestore: update form %q: %w", f.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlitestore: update form %q: %w", f.ID, err)
	} else if n == 0 {
		return fmt.Errorf("sqlitestore: update form %q: %w", f.ID, formsapi.ErrFormNotFound)
	}
	return nil
}

// DeleteForm deletes the form formID of accountID with its submissions
// and their metadata, in one transaction, and checkpoints (see
// formsapi.Writer.DeleteForm and, for what stays on disk, Erase). It returns an error wrapping
// formsapi.ErrFormNotFound if formID is not a form of accountID, and one
// wrapping formsapi.ErrInvalidInput if formID is malformed.
func (s *Store) DeleteForm(ctx context.Context, accountID, formID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: delete form: %w", err)
	}
	if err := stored.CheckDeletion(accountID, formID, false, ""); err != nil {
		return fmt.Errorf("sqlitestore: delete form: %w", err)
	}
	var seq int64
	ch := s.keys.change()
	err := s.deleting(ctx, func(tx execer) error {
		ch.everything() // before the commit: see keyCopy
		// The form's runs and posting blocks go first, so its rows'
		// deletions list no entries to take out of them (migration
		// 0031) and edit no block.
		for _, q := range []string{sqlDeleteFormRuns, sqlDeleteFormBlocks} {
			if _, err := tx.ExecContext(ctx, q, formID, accountID); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, sqlDeleteFormSubmissions, formID, accountID); err != nil {
			return err
		}
		err := tx.QueryRowContext(ctx, sqlDeleteForm, formID, accountID).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			return formsapi.ErrFormNotFound
		}
		return err
	})
	ch.end()
	if err != nil {
		return fmt.Errorf("sqlitestore: delete form %q: %w", formID, err)
	}
	s.wait.WakeForm(formID)
	s.cache.Forget(seq)
	return nil
}

// DeleteSubmission deletes the submission of formID, a form of accountID,
// whose metadata ID is id, with its metadata, and checkpoints (see
// formsapi.Writer.DeleteSubmission and, for what stays on disk, Erase). It returns an error wrapping
// formsapi.ErrFormNotFound if formID is not a form of accountID, one
// wrapping formsapi.ErrSubmissionNotFound if no submission of the form
// has that ID, and one wrapping formsapi.ErrInvalidInput if id is empty.
func (s *Store) DeleteSubmission(ctx context.Context, accountID, formID, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: delete submission: %w", err)
	}
	if err := stored.CheckDeletion(accountID, formID, true, id); err != nil {
		return fmt.Errorf("sqlitestore: delete submission: %w", err)
	}
	var seq int64
	ch := s.keys.change()
	err := s.deleting(ctx, func(tx execer) error {
		ch.form(formID) // before the commit: see keyCopy
		err := tx.QueryRowContext(ctx, sqlDeleteSubmission, formID, accountID, id).Scan(&seq)
		if err == nil {
			// Its filter entries go before the commit (migration 0031).
			return purgeGone(ctx, tx, seq)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// Nothing deleted: say whether the form or the submission is
		// what does not exist.
		var at int64
		if err := tx.QueryRowContext(ctx, sqlFormCreatedAt, formID, accountID).Scan(&at); errors.Is(err, sql.ErrNoRows) {
			return formsapi.ErrFormNotFound
		} else if err != nil {
			return err
		}
		return formsapi.ErrSubmissionNotFound
	})
	ch.end()
	if err != nil {
		return fmt.Errorf("sqlitestore: delete submission %q of form %q: %w", id, formID, err)
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
// What stays on disk, for Erase, DeleteSubmission and DeleteForm alike:
// the rows are deleted with SQLite's secure_delete on, so the pages they
// were on are rewritten with their bytes zeroed, not left in free pages.
// In WAL mode those rewritten pages go to the write-ahead log (the -wal
// file) first: until a checkpoint copies them back, the database file
// still holds the old pages, and the log may hold older copies too. Each
// deletion therefore ends with PRAGMA wal_checkpoint(TRUNCATE), whether it
// deleted anything or not (a retry after a crash between a commit and its
// checkpoint finds nothing to delete, and still checkpoints), which copies
// the log into the file and truncates the log to zero bytes. While a
// reader still uses the log it waits at most 100 ms for it, then copies
// what it can without waiting and leaves the log alone: the deleted bytes
// then stay in the -wal, and in the file if the reader's snapshot is older
// than the deletion, until a later checkpoint (the next deletion's, or
// SQLite's own passive ones every 1000 pages of log, which copy but never
// truncate, so the log's old frames stay until writes overwrite them). A
// host that must be sure runs PRAGMA wal_checkpoint(TRUNCATE) itself until
// its first column, busy, is 0. VACUUM is not needed for erasure:
// secure_delete already zeroed the freed space; VACUUM only gives it back
// to the filesystem. Copies outside the file (backups, a Litestream
// replica, filesystem snapshots) are the host's to erase.
func (s *Store) Erase(ctx context.Context, accountID, field, value string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("sqlitestore: erase: %w", err)
	}
	if err := stored.CheckErase(accountID, field, value); err != nil {
		return 0, fmt.Errorf("sqlitestore: %w", err)
	}
	var forms []int64
	n := 0
	ch := s.keys.change()
	err := s.deleting(ctx, func(tx execer) error {
		// The forms are known by their seq only, once read: every form's
		// entries go, before the commit (see keyCopy).
		ch.everything()
		// Through the index when it holds the value (a name and a value
		// within its bounds), else every submission of the account.
		var seqs []int64
		seen := map[int64]bool{}
		holds := func(rows *sql.Rows) error {
			for rows.Next() {
				var seq, form int64
				var data []byte
				if err := rows.Scan(&seq, &form, &data); err != nil {
					rows.Close()
					return err
				}
				if !seen[seq] && stored.Holds(data, field, value) {
					seen[seq] = true
					seqs = append(seqs, seq)
					forms = append(forms, form)
				}
			}
			return errors.Join(rows.Err(), rows.Close())
		}
		if key, ok := find.StringKey(field, value); ok {
			if err := eraseCandidates(ctx, tx, accountID, key, holds); err != nil {
				return err
			}
		} else {
			rows, err := tx.QueryContext(ctx, sqlAccountData, accountID)
			if err != nil {
				return err
			}
			if err := holds(rows); err != nil {
				return err
			}
		}
		for _, seq := range seqs {
			if _, err := tx.ExecContext(ctx, sqlDeleteBySeq, seq); err != nil {
				return err
			}
		}
		n = len(seqs)
		// The deleted rows' filter entries go before the commit.
		return purgeAllGone(ctx, tx)
	})
	ch.end()
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: erase: %w", err)
	}
	if n > 0 {
		s.wait.WakeAll() // forms by their seq here: their waiters read again, some for nothing
	}
	s.cache.Forget(forms...)
	return n, nil
}

// execer is what a deletion runs its statements on: the connection
// deleting holds, inside its transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// eraseCandidates calls holds with the rows (seq, form_seq, data) of
// the account's submissions the index of submitted values gives for key
// (the runs' entries and each form's tail: migration 0031), and those
// not indexed yet, which Erase matches in Go as sqlAccountData's, a
// chunk at a time, in the transaction of tx.
func eraseCandidates(ctx context.Context, tx execer, accountID string, key int64, holds func(*sql.Rows) error) error {
	forms, err := queryInts(ctx, tx, sqlAccountForms, accountID)
	if err != nil {
		return err
	}
	for _, form := range forms {
		es, err := keyEntries(ctx, tx, form, key)
		if err != nil {
			return err
		}
		for len(es) > 0 {
			chunk := es[:min(len(es), 512)]
			es = es[len(chunk):]
			list := make([]byte, 0, 2+len(chunk)*42)
			list = append(list, '[')
			for i, e := range chunk {
				if i > 0 {
					list = append(list, ',')
				}
				list = fmt.Appendf(list, "[%d,%d]", e.seq, e.at)
			}
			list = append(list, ']')
			rows, err := tx.QueryContext(ctx, sqlEraseChunk, string(list), form)
			if err != nil {
				return err
			}
			if err := holds(rows); err != nil {
				return err
			}
		}
		rows, err := tx.QueryContext(ctx, sqlEraseUnindexed, form)
		if err != nil {
			return err
		}
		if err := holds(rows); err != nil {
			return err
		}
	}
	return nil
}

// deleting runs fn in a write transaction on one connection with
// secure_delete on, so deleted rows are overwritten in the file, not left
// in free pages, and then checkpoints (see checkpoint), whether fn
// deleted anything or not: a deletion retried after a crash between its
// commit and its checkpoint finds nothing left to delete, and still
// checkpoints. Open's connection has it on already; on a host's handle
// (New) it is turned on for the transaction and restored after. The
// transaction is BEGIN IMMEDIATE whatever the handle's DSN says: a
// deletion reads before it writes (Erase reads the account's data), and a
// deferred transaction that must upgrade its lock while another writer
// holds it fails at once with SQLITE_BUSY, busy_timeout or not.
func (s *Store) deleting(ctx context.Context, fn func(tx execer) error) (err error) {
	done, err := s.writing(ctx)
	if err != nil {
		return err
	}
	defer done()              // after the checkpoint, which waits for readers as a writer
	defer s.keys.holdLong()() // the checkpoint may wait: see keyCopy.acquire
	conn, err := s.write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Deferred before secure_delete's restore, so it runs after it; the
	// checkpoint copies pages, it deletes nothing.
	defer checkpoint(context.WithoutCancel(ctx), conn)
	if !s.owned {
		var was int
		if err := conn.QueryRowContext(ctx, "PRAGMA secure_delete").Scan(&was); err != nil {
			return err
		}
		if was == 0 {
			if _, err := conn.ExecContext(ctx, "PRAGMA secure_delete = 1"); err != nil {
				return err
			}
			defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA secure_delete = 0") }()
		}
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, rollback(ctx, conn, err))
		}
	}()
	if err := fn(conn); err != nil {
		return err
	}
	if err := s.purge(ctx, conn); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}

// purge stamps the tombstones the triggers made since the store's last
// deletion with its clock, and forgets those past retention, in the
// deleting transaction.
func (s *Store) purge(ctx context.Context, tx execer) error {
	now := s.now()
	cutoff := now.Add(-s.keep).UnixNano()
	for _, st := range []struct {
		sql string
		arg int64
	}{{sqlStampTombstones, now.UnixNano()}, {sqlPurgedUpTo, cutoff}, {sqlPurgeTombstones, cutoff}} {
		if _, err := tx.ExecContext(ctx, st.sql, st.arg); err != nil {
			return fmt.Errorf("tombstones: %w", err)
		}
	}
	return nil
}

// checkpointWait bounds how long a deletion's checkpoint waits for
// readers to leave the write-ahead log. The store's own readers hold the
// log for one page's read, milliseconds; the write connection is held
// while the checkpoint waits, so every other write waits too.
const checkpointWait = 100 * time.Millisecond

// checkpoint runs PRAGMA wal_checkpoint(TRUNCATE) on conn, the deleting
// connection, once its transaction has ended: it copies the log's pages
// (among them the zeroed pages of the deleted rows) into the database
// file, overwriting the deleted bytes there, and truncates the log to
// zero bytes, so that neither file holds what was deleted. It is best
// effort and bounded: while a reader still uses the log it waits at most
// checkpointWait (by a busy_timeout set for it and restored after), then
// copies what it can without waiting and leaves the log as it is; the
// deletion is committed either way, and a later checkpoint finishes the
// job (see docs/lifecycle.md).
func checkpoint(ctx context.Context, conn *sql.Conn) {
	var was int64
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&was); err != nil {
		return
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(checkpointWait.Milliseconds(), 10)); err != nil {
		return
	}
	defer func() { _, _ = conn.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(was, 10)) }()
	var busy, logPages, copied int64
	_ = conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &copied)
}

// rollback rolls back conn's transaction after err and returns what
// that failed with, but for the failure that says no transaction is
// active after err interrupted a statement (its context's end): SQLite
// rolled the whole transaction back itself, and the caller's error
// already says why.
func rollback(ctx context.Context, conn execer, err error) error {
	_, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	if rerr != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil
	}
	return rerr
}
