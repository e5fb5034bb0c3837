package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/internal/wire"
)

// SyncSubmissions implements formsapi.FeedStore: the submissions of
// formID after position after, in the order they were committed.
//
// Positions are 1, 2, 3... per form. AddSubmission takes the next one from
// a counter on the form's row in the statement that inserts, and the
// row's lock is held until that statement's transaction commits: a
// second writer to the same form waits for the first to commit before it
// can take a number, so no position becomes visible before a lower one.
// An identity column or a sequence would not do, since a transaction can
// take 10, another 11, and the second commit first. Metadata is never
// read.
func (s *Store) SyncSubmissions(ctx context.Context, accountID, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	var p formsapi.FeedPage
	err := retry(ctx, func() (err error) {
		p, err = s.syncSubmissions(ctx, accountID, formID, after, limit)
		return err
	})
	if err != nil {
		return formsapi.FeedPage{}, fmt.Errorf("pgstore: sync submissions: %w", withCtx(ctx, err))
	}
	return p, nil
}

func (s *Store) syncSubmissions(ctx context.Context, accountID, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	p := formsapi.FeedPage{Next: after}
	rows, err := s.feedRows(ctx, s.sql.feed, accountID, formID, after, limit, false)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	p, found, err := stored.Feed(rows, formID, after, limit)
	if err != nil {
		return formsapi.FeedPage{}, err
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return formsapi.FeedPage{}, err
	}
	if !found {
		return formsapi.FeedPage{}, formsapi.ErrFormNotFound // no row: not a form of accountID
	}
	return p, nil
}

// AppendFeed is SyncSubmissions for the handler's fast path: it appends
// the stored JSON of each submission to p.Body, with nothing decoded, and
// ends the page early, with more set, before a submission that would take
// the page's submissions past maxBytes, unless it would be the page's
// first. A stored row that is damaged is left out and recorded in
// p.Skipped, as on the lists; the feed moves past it.
func (s *Store) AppendFeed(ctx context.Context, accountID, formID string, q wire.FeedQuery, p *wire.Page) (next int64, more bool, err error) {
	after, limit, maxBytes := q.After, q.Limit, q.MaxBytes
	// appendFeed leaves p as it was when it fails, so a retry starts over.
	err = retry(ctx, func() (err error) {
		next, more, err = s.appendFeed(ctx, accountID, formID, after, limit, maxBytes, q.Keys, p)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("pgstore: sync submissions: %w", withCtx(ctx, err))
	}
	return next, more, nil
}

func (s *Store) appendFeed(ctx context.Context, accountID, formID string, after int64, limit, maxBytes int, keys []int64, p *wire.Page) (next int64, more bool, err error) {
	// The handler's combined lookup may have found the form already (see
	// AuthorizeForm): then no statement needs to ask whether it exists.
	found := p.Form != nil && p.Form.Found
	if p.Form != nil && !found {
		return 0, false, formsapi.ErrFormNotFound
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if !storableText(accountID) || !storableText(formID) {
		return 0, false, formsapi.ErrFormNotFound // no such form can be stored
	}
	if err := feedArgs(limit, after); err != nil {
		if !found {
			if ferr := s.checkForm(ctx, accountID, formID); ferr != nil {
				return 0, false, ferr
			}
		}
		return 0, false, err
	}
	want := int64(0)
	if found {
		want = p.Form.Version
	}
	err = s.fromReplica(ctx, found, want, func(src source) (err error) {
		next, more, err = s.readFeed(ctx, src, accountID, formID, after, limit, maxBytes, keys, found, p)
		return err
	})
	return next, more, err
}

// readFeed reads a page of the feed for appendFeed on src. On the replica
// it returns errStale, having appended nothing, when the form's version
// there is not src.want or the form is not there.
func (s *Store) readFeed(ctx context.Context, src source, accountID, formID string, after int64, limit, maxBytes int, keys []int64, found bool, p *wire.Page) (next int64, more bool, err error) {
	budget := keyset.NewBudget(formsapi.Query{MaxBytes: maxBytes})
	st, args := s.sql.feedEncoded, []any{formID, accountID, after, limit + 1, budget.Room()}
	if len(keys) > 0 {
		// A submission whose keys hold none of keys comes without its
		// JSON (sqlFeedKeyed), counted in the page's Excluded.
		st, args = s.sql.feedKeyed, append(args, keys)
		p.KeysChecked = true
	}
	rows, err := src.db.Query(ctx, st, args...)
	if err != nil {
		return 0, false, src.failed(err, true)
	}
	defer rows.Close()
	mark := p.Mark()
	defer func() {
		if err != nil {
			p.Rewind(mark) // a retry, or the primary, reads the page again from here
		}
	}()
	f := wire.FeedRows{Page: p, Budget: budget, Limit: limit, Next: after}
	var pos, of, total, limited, version int64
	var encoded pgtype.DriverBytes // valid until the next Next: copied at once
	form := false
	for rows.Next() {
		if err := rows.Scan(&pos, &encoded, &of, &total, &version); err != nil {
			return 0, false, err
		}
		if src.replica && !form && (pos != 0 || version != src.want) {
			return 0, false, errStale // the form's row comes first, if there
		}
		if pos == 0 {
			form = true // the form's row, first: the form is accountID's
			p.Incarnation = uint64(total)
		} else {
			limited = total
		}
		if !f.Row(pos, encoded, of) {
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, false, src.failed(err, true) // p is rewound: the primary can read it all
	}
	if src.replica && !form {
		return 0, false, errStale // no form there: the primary tells
	}
	next, more = f.Next, f.More
	if !more && int64(f.Taken()) < limited {
		more = true // the statement's byte bound ended the rows, not the feed
	}
	if !form && !found {
		return 0, false, formsapi.ErrFormNotFound // no row: not a form of accountID
	}
	return next, more, nil
}

// feedRows checks the page's arguments, answering ErrFormNotFound first
// for a form that is not accountID's (unless found says it is), and runs
// st for one page and one row more.
func (s *Store) feedRows(ctx context.Context, st string, accountID, formID string, after int64, limit int, found bool, extra ...any) (pgx.Rows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !storableText(accountID) || !storableText(formID) {
		return nil, formsapi.ErrFormNotFound // no such form can be stored
	}
	if err := feedArgs(limit, after); err != nil {
		if !found {
			if ferr := s.checkForm(ctx, accountID, formID); ferr != nil {
				return nil, ferr
			}
		}
		return nil, err
	}
	return s.pool.Query(ctx, st, append([]any{formID, accountID, after, limit + 1}, extra...)...)
}

// feedArgs checks a feed page's limit and position.
func feedArgs(limit int, after int64) error {
	if limit < 1 {
		return fmt.Errorf("limit %d is below 1", limit)
	}
	if after < 0 {
		return fmt.Errorf("%w: feed position %d", formsapi.ErrInvalidCursor, after)
	}
	return nil
}

// FeedHead is for the handler's export: the position of the last entry
// of the form's feed (the form's feed_last, which every insert and
// deletion moves in its transaction), every entry up to it visible to
// later reads.
func (s *Store) FeedHead(ctx context.Context, accountID, formID string, _ *wire.Form) (int64, uint64, error) {
	var head, inc int64
	err := retry(ctx, func() error {
		return s.pool.QueryRow(ctx, qualifyTables(s.schema, `SELECT feed_last, incarnation FROM formsapi_forms WHERE id = $1 AND account_id = $2`), formID, accountID).Scan(&head, &inc)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = formsapi.ErrFormNotFound
	}
	if err != nil {
		return 0, 0, fmt.Errorf("pgstore: feed head: %w", withCtx(ctx, err))
	}
	return head, uint64(inc), nil
}

// DataFields implements formsapi.FieldStore: the fields of formID whose
// first position is at most upTo, at most limit of them, from the
// formsapi_fields table that AddSubmission keeps in the statement that
// inserts the submission (migration 0015). Deletions leave the table as
// it is; a form's deletion deletes its fields.
func (s *Store) DataFields(ctx context.Context, accountID, formID string, upTo int64, limit int) (names []string, first []int64, err error) {
	if limit < 1 {
		return nil, nil, fmt.Errorf("pgstore: data fields: limit %d is below 1", limit)
	}
	var found bool
	err = retry(ctx, func() error {
		names, first, found = nil, nil, false
		rows, err := s.pool.Query(ctx, s.sql.dataFields, formID, accountID, upTo, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name []byte
			var pos *int64
			if err := rows.Scan(&name, &pos); err != nil {
				return err
			}
			found = true
			if pos != nil {
				names, first = append(names, string(name)), append(first, *pos)
			}
		}
		return rows.Err()
	})
	if err == nil && !found {
		err = formsapi.ErrFormNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: data fields: %w", withCtx(ctx, err))
	}
	return names, first, nil
}
