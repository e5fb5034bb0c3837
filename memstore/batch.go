package memstore

import (
	"context"
	"fmt"
	"iter"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/stored"
)

var _ formsapi.BatchWriter = (*Store)(nil)

// AddSubmissions adds every submission batch yields, with its metadata,
// as that many AddSubmission calls would, all at once: a read sees none
// of the batch or all of it. Every submission is checked (limits, form,
// metadata ID) before any is added; if one is refused, nothing of the
// batch is added, and the error names it (its index in the batch, from
// 0) and wraps what AddSubmission would have returned:
// formsapi.ErrFormNotFound, or formsapi.ErrInvalidInput naming the field
// (a metadata ID the form has, or an earlier submission of the batch
// gave it, among others). The store's lock is held only while the
// checked batch is added, not while batch is iterated.
func (s *Store) AddSubmissions(ctx context.Context, batch iter.Seq2[formsapi.Submission, formsapi.Metadata]) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: add submissions: %w", err)
	}
	var rs []newSubmission
	for sub, m := range batch {
		r, err := s.prepareSubmission(sub, m)
		if err != nil {
			return fmt.Errorf("memstore: add submissions: %w", &stored.ItemError{Item: len(rs), Err: err})
		}
		rs = append(rs, r)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: add submissions: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	forms := make([]*form, len(rs))
	ids := map[[2]string]bool{}
	for i, r := range rs {
		fm, err := s.addable(r, ids)
		if err != nil {
			return fmt.Errorf("memstore: add submissions: %w", &stored.ItemError{Item: i, Form: r.sub.FormID, Err: err})
		}
		forms[i] = fm
	}
	for i, r := range rs {
		s.add(forms[i], r)
	}
	return nil
}
