package memstore

import (
	"context"
	"fmt"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/wire"
)

// SyncSubmissions implements formsapi.FeedStore: the submissions of
// formID after position after, in the order they were added, and the
// deletions among them. Positions are 1, 2, 3... per form, given under
// the store's lock to each submission and each deletion, so a reader sees
// every position up to the last one given and none beyond it.
func (s *Store) SyncSubmissions(ctx context.Context, accountID, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	p := formsapi.FeedPage{Items: make([]formsapi.Submission, 0, min(max(limit, 0), prealloc))}
	next, more, err := s.feed(ctx, accountID, formID, after, limit, &p.Deleted, &p.DeletedAt, &p.Purged, &p.Incarnation, func(pos int64, r *submission) bool {
		p.Items = append(p.Items, cloneSubmission(r.sub))
		p.Positions = append(p.Positions, pos)
		return true
	})
	if err != nil {
		return formsapi.FeedPage{}, err
	}
	p.Next, p.More = next, more
	return p, nil
}

// AppendFeed is SyncSubmissions for the handler's fast path: it appends
// each submission's JSON, made when it was added, to p.Body, and ends the
// page early, with more set, before a submission that would take the
// page's submissions past maxBytes (as the Store contract's byte budget
// counts them), unless it would be the page's first.
func (s *Store) AppendFeed(ctx context.Context, accountID, formID string, q wire.FeedQuery, p *wire.Page) (next int64, more bool, err error) {
	after, limit, maxBytes := q.After, q.Limit, q.MaxBytes
	budget := keyset.NewBudget(formsapi.Query{MaxBytes: maxBytes})
	return s.feed(ctx, accountID, formID, after, limit, &p.Deleted, nil, &p.Purged, &p.Incarnation, func(pos int64, r *submission) bool {
		if !budget.Take(len(r.json)) {
			return false
		}
		p.AddTrustedAt(pos, r.json) // made in this process, never out of its hands
		return true
	})
}

// feed visits one page of a form's feed under the read lock: each
// submission with visit, which returning false ends the page before it,
// and each deletion appended to *deleted (its own position to
// *deletedAt, unless nil). *purged is set to the form's
// last forgotten deletion, and *inc, unless nil, to its incarnation.
func (s *Store) feed(ctx context.Context, accountID, formID string, after int64, limit int, deleted, deletedAt *[]int64, purged *int64, inc *uint64, visit func(int64, *submission) bool) (next int64, more bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("memstore: sync submissions: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	fm, ok := s.forms[formID]
	if !ok || fm.account != accountID {
		return 0, false, fmt.Errorf("memstore: sync submissions: %w", formsapi.ErrFormNotFound)
	}
	if limit < 1 {
		return 0, false, fmt.Errorf("memstore: sync submissions: limit %d is below 1", limit)
	}
	if after < 0 {
		return 0, false, fmt.Errorf("memstore: sync submissions: %w: position %d", formsapi.ErrInvalidCursor, after)
	}
	*purged = fm.purged
	if inc != nil {
		*inc = fm.incarnation()
	}
	next = after
	n := 0
	for i := after; i < int64(len(fm.feed)); i++ {
		e := fm.feed[i]
		if e.sub == nil && e.of == 0 {
			continue // a submission since deleted, or a forgotten deletion
		}
		if n == limit {
			return next, true, nil
		}
		if e.sub != nil {
			if !visit(i+1, e.sub) {
				return next, true, nil
			}
		} else {
			*deleted = append(*deleted, e.of)
			if deletedAt != nil {
				*deletedAt = append(*deletedAt, i+1)
			}
		}
		n++
		next = i + 1
	}
	return next, false, nil
}

// FeedHead is for the handler's export: the position of the last entry
// of the form's feed, every entry up to it visible to later reads.
func (s *Store) FeedHead(ctx context.Context, accountID, formID string, _ *wire.Form) (int64, uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, fmt.Errorf("memstore: feed head: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	fm, ok := s.forms[formID]
	if !ok || fm.account != accountID {
		return 0, 0, fmt.Errorf("memstore: feed head: %w", formsapi.ErrFormNotFound)
	}
	return int64(len(fm.feed)), fm.incarnation(), nil
}

// FormVersion is for the handler's summary of a form: the form's
// incarnation and a version that every addition and deletion changes,
// the length of its feed (each appends an entry; Erase deletes), plus
// one, so that it is never 0.
func (s *Store) FormVersion(ctx context.Context, accountID, formID string, _ *wire.Form) (wire.Form, error) {
	if err := ctx.Err(); err != nil {
		return wire.Form{}, fmt.Errorf("memstore: form version: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	fm, ok := s.forms[formID]
	if !ok || fm.account != accountID {
		return wire.Form{}, fmt.Errorf("memstore: form version: %w", formsapi.ErrFormNotFound)
	}
	return wire.Form{Found: true, Seq: fm.pos.Seq, Version: int64(len(fm.feed)) + 1, Incarnation: fm.incarnation()}, nil
}

// DataFields implements formsapi.FieldStore: the fields of formID whose
// first position is at most upTo, at most limit of them. AddSubmission
// appends a submission's new fields to its form's table under the write
// lock, with the submission's position, so the table is in first
// position order; deletions and Erase leave it as it is, DeleteForm
// drops it with the form.
func (s *Store) DataFields(ctx context.Context, accountID, formID string, upTo int64, limit int) (names []string, first []int64, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("memstore: data fields: %w", err)
	}
	if limit < 1 {
		return nil, nil, fmt.Errorf("memstore: data fields: limit %d is below 1", limit)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	fm, ok := s.forms[formID]
	if !ok || fm.account != accountID {
		return nil, nil, fmt.Errorf("memstore: data fields: %w", formsapi.ErrFormNotFound)
	}
	for _, f := range fm.fields {
		if f.first > upTo || len(names) == limit {
			break
		}
		names, first = append(names, f.name), append(first, f.first)
	}
	return names, first, nil
}
