package memstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/stored"
)

// UpdateForm replaces the title, icon and notification e-mail of the form
// f.ID of accountID (see formsapi.Writer.UpdateForm). It returns an error
// wrapping formsapi.ErrFormNotFound if f.ID is not a form of accountID,
// and one wrapping formsapi.ErrInvalidInput if f or accountID is
// malformed or beyond the store's limits; either way nothing changes.
func (s *Store) UpdateForm(ctx context.Context, accountID string, f formsapi.Form) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: update form: %w", err)
	}
	if err := stored.CheckDeletion(accountID, f.ID, false, ""); err != nil {
		return fmt.Errorf("memstore: update form: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fm, ok := s.forms[f.ID]
	if ok && fm.account == accountID {
		f.CreatedAt = fm.form.CreatedAt // kept, and measured as sent
	}
	if err := s.limits.PrepareForm(accountID, &f); err != nil {
		return fmt.Errorf("memstore: update form: %w", err)
	}
	if !ok || fm.account != accountID {
		return fmt.Errorf("memstore: update form %q: %w", f.ID, formsapi.ErrFormNotFound)
	}
	fm.form.Title, fm.form.Icon, fm.form.NotificationEmail = f.Title, f.Icon, f.NotificationEmail
	return nil
}

// DeleteForm deletes the form formID of accountID with its submissions
// (see formsapi.Writer.DeleteForm). It returns an error wrapping
// formsapi.ErrFormNotFound if formID is not a form of accountID, and one
// wrapping formsapi.ErrInvalidInput if formID is malformed.
func (s *Store) DeleteForm(ctx context.Context, accountID, formID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: delete form: %w", err)
	}
	if err := stored.CheckDeletion(accountID, formID, false, ""); err != nil {
		return fmt.Errorf("memstore: delete form: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fm, ok := s.forms[formID]
	if !ok || fm.account != accountID {
		return fmt.Errorf("memstore: delete form %q: %w", formID, formsapi.ErrFormNotFound)
	}
	delete(s.forms, formID)
	s.wait.WakeForm(formID) // its waiters read again, and are told it is gone
	list := s.accounts[accountID]
	i := slices.Index(list, fm)
	list = slices.Delete(list, i, i+1)
	if len(list) == 0 {
		delete(s.accounts, accountID)
	} else {
		s.accounts[accountID] = list
	}
	// Readers hold the form only under the read lock: dropping the
	// references here leaves its submissions to the garbage collector.
	*fm = form{}
	return nil
}

// DeleteSubmission deletes the submission of formID, a form of accountID,
// whose metadata ID is id (see formsapi.Writer.DeleteSubmission). It
// returns an error wrapping formsapi.ErrFormNotFound if formID is not a
// form of accountID, one wrapping formsapi.ErrSubmissionNotFound if no
// submission of the form has that ID, and one wrapping
// formsapi.ErrInvalidInput if id is empty.
func (s *Store) DeleteSubmission(ctx context.Context, accountID, formID, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: delete submission: %w", err)
	}
	if err := stored.CheckDeletion(accountID, formID, true, id); err != nil {
		return fmt.Errorf("memstore: delete submission: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fm, ok := s.forms[formID]
	if !ok || fm.account != accountID {
		return fmt.Errorf("memstore: delete submission of form %q: %w", formID, formsapi.ErrFormNotFound)
	}
	r, ok := fm.ids[id]
	if !ok {
		return fmt.Errorf("memstore: delete submission %q of form %q: %w", id, formID, formsapi.ErrSubmissionNotFound)
	}
	now := s.now()
	s.remove(fm, r, now)
	s.purge(fm, now)
	return nil
}

// Erase deletes every submission of accountID's forms whose data holds
// value in its top-level member field, and returns how many (see
// formsapi.Writer.Erase). It returns an error wrapping
// formsapi.ErrInvalidInput, and deletes nothing, if accountID, field or
// value is empty. Nothing of an erased submission stays referenced by the
// store: its data, JSON and metadata go to the garbage collector.
func (s *Store) Erase(ctx context.Context, accountID, field, value string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memstore: erase: %w", err)
	}
	if err := stored.CheckErase(accountID, field, value); err != nil {
		return 0, fmt.Errorf("memstore: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, now := 0, s.now()
	for _, fm := range s.accounts[accountID] {
		m := n
		for _, r := range slices.Clone(fm.subs) {
			if stored.Holds(r.sub.Data, field, value) {
				s.remove(fm, r, now)
				n++
			}
		}
		if n > m {
			s.purge(fm, now)
		}
	}
	return n, nil
}

// remove deletes r from fm under the write lock, and records the
// deletion in the form's feed at the next position. A reader never holds
// a submission past the read lock, so the record can be cleared for the
// garbage collector at once.
func (s *Store) remove(fm *form, r *submission, now time.Time) {
	i := slices.Index(fm.subs, r)
	fm.subs = slices.Delete(fm.subs, i, i+1)
	fm.feed[r.feedPos-1] = feedEntry{}
	fm.feed = append(fm.feed, feedEntry{of: r.feedPos, at: now})
	s.wait.WakeForm(fm.form.ID)
	if r.meta.ID != "" {
		delete(fm.ids, r.meta.ID)
	}
	*r = submission{}
}

// purge forgets fm's deletions that are at least the retention old.
func (s *Store) purge(fm *form, now time.Time) {
	for i, e := range fm.feed {
		if e.of > 0 && !e.at.Add(s.keep).After(now) {
			fm.feed[i] = feedEntry{}
			fm.purged = max(fm.purged, int64(i+1))
		}
	}
}
