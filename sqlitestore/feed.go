package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/internal/wire"
)

// SyncSubmissions implements formsapi.FeedStore: the submissions of
// formID after position after, in the order they were committed.
// Positions are 1, 2, 3... per form, taken from a counter on the form's
// row by the statement that inserts the submission, under SQLite's one
// write lock; an insert into the table by another writer of the file is
// numbered by a trigger. Submissions stored before the feed existed were
// numbered in the order they were inserted. Feed pages are read from the
// file every time, never from the read cache. Metadata is never read.
func (s *Store) SyncSubmissions(ctx context.Context, accountID, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	p, err := s.syncSubmissions(ctx, accountID, formID, after, limit)
	if err != nil {
		return formsapi.FeedPage{}, fmt.Errorf("sqlitestore: sync submissions: %w", err)
	}
	return p, nil
}

func (s *Store) syncSubmissions(ctx context.Context, accountID, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	p := formsapi.FeedPage{Next: after}
	rows, err := s.feedRows(ctx, s.feed, accountID, formID, after, limit)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	if p, err = stored.Feed(rows, formID, after, limit); err != nil {
		return formsapi.FeedPage{}, err
	}
	if err := rows.Err(); err != nil {
		return formsapi.FeedPage{}, err
	}
	return p, nil
}

// AppendFeed is SyncSubmissions for the handler's fast path: it appends
// the stored JSON of each submission to p.Body, with nothing decoded.
func (s *Store) AppendFeed(ctx context.Context, accountID, formID string, after int64, limit int, p *wire.Feed) error {
	if err := s.appendFeed(ctx, accountID, formID, after, limit, p); err != nil {
		return fmt.Errorf("sqlitestore: sync submissions: %w", err)
	}
	return nil
}

func (s *Store) appendFeed(ctx context.Context, accountID, formID string, after int64, limit int, p *wire.Feed) error {
	p.Next, p.More = after, false
	rows, err := s.feedRows(ctx, s.feedEncoded, accountID, formID, after, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	var encoded sql.RawBytes // valid until the next Next: copied at once
	for n := 0; rows.Next(); n++ {
		if n == limit {
			p.More = true
			break
		}
		if err := rows.Scan(&p.Next, &encoded); err != nil {
			return err
		}
		// The file may have been damaged or edited: never send what is
		// not the object AppendSubmissionJSON wrote.
		if valid, utf8OK := wire.ScanObject(encoded); !valid || !utf8OK {
			return fmt.Errorf("submission at feed position %d: stored JSON is damaged", p.Next)
		}
		if n > 0 {
			p.Body = append(p.Body, ',')
		}
		p.Body = append(p.Body, encoded...)
	}
	return rows.Err()
}

// feedRows checks that formID is a form of accountID, then the page's
// arguments, and runs st; the caller reads one row more than the page.
func (s *Store) feedRows(ctx context.Context, st *sql.Stmt, accountID, formID string, after int64, limit int) (*sql.Rows, error) {
	formSeq, _, err := s.formVersion(ctx, accountID, formID)
	if err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("limit %d is below 1", limit)
	}
	if after < 0 {
		return nil, fmt.Errorf("%w: feed position %d", formsapi.ErrInvalidCursor, after)
	}
	return st.QueryContext(ctx, formSeq, after)
}
