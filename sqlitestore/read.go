package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/internal/wire"
)

// ListForms implements formsapi.Store. It returns an error if q.Limit is
// below 1, and one wrapping formsapi.ErrInvalidCursor for a cursor this
// package did not make.
func (s *Store) ListForms(ctx context.Context, accountID string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	p, err := s.listForms(ctx, accountID, q)
	if err != nil {
		return formsapi.Page[formsapi.Form]{}, fmt.Errorf("sqlitestore: list forms: %w", err)
	}
	return p, nil
}

func (s *Store) listForms(ctx context.Context, accountID string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	var p formsapi.Page[formsapi.Form]
	if err := ctx.Err(); err != nil {
		return p, err
	}
	args, err := listArgs(accountID, q)
	if err != nil {
		return p, err
	}
	st := s.formsDesc
	if q.Order == formsapi.Oldest {
		st = s.formsAsc
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	p, err = stored.Forms(rows, q)
	if err != nil {
		return formsapi.Page[formsapi.Form]{}, err
	}
	if err := rows.Err(); err != nil {
		return formsapi.Page[formsapi.Form]{}, err
	}
	return p, nil
}

// ListSubmissions implements formsapi.Store. It returns an error wrapping
// formsapi.ErrFormNotFound when formID is not a form of accountID, an error
// if q.Limit is below 1, and one wrapping formsapi.ErrInvalidCursor for a
// cursor this package did not make. Metadata is never read.
func (s *Store) ListSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	p, err := s.listSubmissions(ctx, accountID, formID, q)
	if err != nil {
		return formsapi.Page[formsapi.Submission]{}, fmt.Errorf("sqlitestore: list submissions: %w", err)
	}
	return p, nil
}

// formVersion returns the seq and version of formID if it is a form of
// accountID: the ownership check before any submission is read, and what
// the read cache checks its pages against.
func (s *Store) formVersion(ctx context.Context, accountID, formID string) (seq, version int64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	err = s.formOf.QueryRowContext(ctx, formID, accountID).Scan(&seq, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, formsapi.ErrFormNotFound
	}
	return seq, version, err
}

func (s *Store) listSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	var p formsapi.Page[formsapi.Submission]
	formSeq, _, err := s.formVersion(ctx, accountID, formID)
	if err != nil {
		return p, err
	}
	args, err := listArgs(formSeq, q)
	if err != nil {
		return p, err
	}
	st := s.subsDesc
	if q.Order == formsapi.Oldest {
		st = s.subsAsc
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	p, err = stored.Submissions(rows, formID, q)
	if err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	if err := rows.Err(); err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	return p, nil
}

// FastPath is for this module's handler, which reads pages straight from
// the store's encoded JSON when it is given the store itself. A host's
// type that embeds the store has this method too, but it returns the
// embedded store, so the handler sees the host's type and calls its
// methods (its overrides), never the embedded store's behind its back.
func (s *Store) FastPath() wire.Self { return wire.Self{Store: s} }

// AppendSubmissions is ListSubmissions for the handler's fast path: it
// appends the stored JSON of each submission to p.Body, one column per
// row, with nothing decoded.
func (s *Store) AppendSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, p *wire.Page) error {
	if err := s.appendSubmissions(ctx, accountID, formID, q, p); err != nil {
		return fmt.Errorf("sqlitestore: list submissions: %w", err)
	}
	return nil
}

func (s *Store) appendSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, p *wire.Page) error {
	formSeq, version, err := s.formVersion(ctx, accountID, formID)
	if err != nil {
		return err
	}
	if _, err := keyset.Fetch(q); err != nil { // before the cache could answer it
		return err
	}
	lo, hi, err := keyset.Bounds(q)
	if err != nil {
		return err
	}
	start := len(p.Body)
	budget := keyset.NewBudget(q)
	if s.cache == nil {
		return s.readEncoded(ctx, formSeq, q.Order, lo, hi, keyset.Pos{}, q.Limit, &budget, p, start, nil)
	}
	key := newPageKey(formSeq, q, lo, hi)
	held := s.cache.get(version, key)
	if body, next, ok := held.serve(q, p.Body); ok {
		p.Body, p.NextCursor = body, next
		return nil
	}
	// Read after the version: the page is at least as new as its tag.
	e := &entry{version: version}
	if n := len(held.items()); n > 0 {
		// The cache holds the start of the page at this version: read only
		// the rest, after its last item.
		p.AddTrusted(held.body) // read and checked at this version
		e.ends = append(make([]int, 0, q.Limit), held.ends...)
		e.pos = append(make([]keyset.Pos, 0, q.Limit), held.pos...)
		for i := range n {
			budget.Count(held.itemSize(i)) // serve found that they all fit
		}
		if q.Order == formsapi.Oldest {
			lo = held.pos[n-1]
		} else {
			hi = held.pos[n-1]
		}
		if err := s.readEncoded(ctx, formSeq, q.Order, lo, hi, held.pos[n-1], q.Limit-n, &budget, p, start, e); err != nil {
			return err
		}
	} else if err := s.readEncoded(ctx, formSeq, q.Order, lo, hi, keyset.Pos{}, q.Limit, &budget, p, start, e); err != nil {
		return err
	}
	if len(p.Skipped) > 0 {
		return nil // not cached, so that every read logs the damage
	}
	e.body = bytes.Clone(p.Body[start:])
	e.more = p.NextCursor != ""
	s.cache.put(key, e)
	return nil
}

// readEncoded appends to p.Body at most limit encoded submissions of the
// form with seq formSeq whose positions lie strictly between lo and hi, in
// order, and sets p.NextCursor if more follow. What p.Body holds after
// start is earlier items of the same page, which budget has counted, the
// last of them at prev; the page ends early where budget says. If e is
// not nil, it records where each item ends after start, and its keyset
// position.
func (s *Store) readEncoded(ctx context.Context, formSeq int64, order formsapi.Order, lo, hi, prev keyset.Pos, limit int, budget *keyset.Budget, p *wire.Page, start int, e *entry) error {
	st := s.encodedDesc
	if order == formsapi.Oldest {
		st = s.encodedAsc
	}
	rows, err := st.QueryContext(ctx, formSeq, lo.At, lo.Seq, hi.At, hi.Seq)
	if err != nil {
		return err
	}
	defer rows.Close()
	last, cur := prev, keyset.Pos{}
	var encoded sql.RawBytes // valid until the next Next: copied at once
	for n := 0; rows.Next(); n++ {
		if n == limit {
			p.NextCursor = last.String()
			break
		}
		if err := rows.Scan(&cur.Seq, &cur.At, &encoded); err != nil {
			return err
		}
		if !budget.Fits(len(encoded)) {
			p.NextCursor = last.String()
			if e != nil {
				e.nextSize = len(encoded)
			}
			break
		}
		last = cur
		// The file may have been damaged or edited: Add leaves out what is
		// not the object AppendSubmissionJSON wrote.
		if !p.Add(last.Seq, encoded) {
			continue
		}
		budget.Count(len(encoded))
		if e != nil {
			e.ends = append(e.ends, len(p.Body)-start)
			e.pos = append(e.pos, last)
		}
	}
	return rows.Err()
}

// listArgs returns the arguments of a list statement for the list owner
// (the account ID or the form's seq) and q: the page's keyset bounds. The
// caller reads at most keyset.Fetch(q) rows: one more than the limit, to
// learn whether a next page exists. It returns an error for a limit below
// 1.
func listArgs(owner any, q formsapi.Query) ([]any, error) {
	if _, err := keyset.Fetch(q); err != nil {
		return nil, err
	}
	lo, hi, err := keyset.Bounds(q)
	if err != nil {
		return nil, err
	}
	return []any{owner, lo.At, lo.Seq, hi.At, hi.Seq}, nil
}
