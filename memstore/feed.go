package memstore

import (
	"context"
	"fmt"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/wire"
)

// SyncSubmissions implements formsapi.FeedStore: the submissions of
// formID after position after, in the order they were added. Positions
// are 1, 2, 3... per form, given under the store's lock, so a reader sees
// every position up to the last one added and none beyond it.
func (s *Store) SyncSubmissions(ctx context.Context, accountID, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	var p formsapi.FeedPage
	items := make([]formsapi.Submission, 0, min(max(limit, 0), prealloc))
	next, more, err := s.feed(ctx, accountID, formID, after, limit, func(r *submission) bool {
		items = append(items, cloneSubmission(r.sub))
		return true
	})
	if err != nil {
		return p, err
	}
	return formsapi.FeedPage{Items: items, Next: next, More: more}, nil
}

// AppendFeed is SyncSubmissions for the handler's fast path: it appends
// each submission's JSON, made when it was added, to p.Body, and ends the
// page early, with more set, before a submission that would take the
// page's submissions past maxBytes (as the Store contract's byte budget
// counts them), unless it would be the page's first.
func (s *Store) AppendFeed(ctx context.Context, accountID, formID string, after int64, limit, maxBytes int, p *wire.Page) (next int64, more bool, err error) {
	budget := keyset.NewBudget(formsapi.Query{MaxBytes: maxBytes})
	return s.feed(ctx, accountID, formID, after, limit, func(r *submission) bool {
		if !budget.Take(len(r.json)) {
			return false
		}
		p.AddTrusted(r.json) // made in this process, never out of its hands
		return true
	})
}

// feed visits one page of a form's feed under the read lock; a visit
// that returns false ends the page before that submission.
func (s *Store) feed(ctx context.Context, accountID, formID string, after int64, limit int, visit func(*submission) bool) (next int64, more bool, err error) {
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
	next = after
	n := 0
	for i := after; i < int64(len(fm.feed)); i++ {
		r := fm.feed[i]
		if r == nil {
			continue // deleted
		}
		if n == limit || !visit(r) {
			return next, true, nil
		}
		n++
		next = i + 1
	}
	return next, false, nil
}
