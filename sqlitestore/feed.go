package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/keyset"
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
	rows, _, err := s.feedRows(ctx, s.feed, accountID, formID, after, limit, nil)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	p, found, err := stored.Feed(rows, formID, after, limit)
	if err != nil {
		return formsapi.FeedPage{}, err
	}
	if err := rows.Err(); err != nil {
		return formsapi.FeedPage{}, err
	}
	if !found {
		return formsapi.FeedPage{}, formsapi.ErrFormNotFound // deleted since it was looked up
	}
	return p, nil
}

// AppendFeed is SyncSubmissions for the handler's fast path: it appends
// the stored JSON of each submission to p.Body, with nothing decoded, and
// ends the page early, with more set, before a submission that would take
// the page's submissions past maxBytes, unless it would be the page's
// first. A stored row that is damaged is left out and recorded in
// p.Skipped, as on the lists; the feed moves past it.
//
// With keys (q.Keys), it leaves out (p.Excluded) a submission that
// cannot hold one of them, before its JSON is checked or copied onto the
// page: when the keys' values (q.Values) are all strings without escapes,
// one whose stored JSON's bytes show it holds none of them (find.Absent,
// the statement of the page without keys: a byte search of the JSON the
// page reads anyway costs less than reading and checking find_keys);
// otherwise it reads each submission's find_keys too, and leaves out one
// whose find_keys it has and holds none of them.
func (s *Store) AppendFeed(ctx context.Context, accountID, formID string, q wire.FeedQuery, p *wire.Page) (next int64, more bool, err error) {
	next, more, err = s.appendFeed(ctx, accountID, formID, q, p)
	if err != nil {
		return 0, false, fmt.Errorf("sqlitestore: sync submissions: %w", err)
	}
	return next, more, nil
}

func (s *Store) appendFeed(ctx context.Context, accountID, formID string, q wire.FeedQuery, p *wire.Page) (next int64, more bool, err error) {
	st, keyed := s.feedEncoded, len(q.Keys) > 0
	var plain [][]byte
	if keyed {
		if plain = find.PlainValues(q.Values); plain == nil {
			st = s.feedKeyed
		}
	}
	byKeys := keyed && plain == nil
	rows, form, err := s.feedRows(ctx, st, accountID, formID, q.After, q.Limit, p.Form)
	if err != nil {
		return 0, false, err
	}
	p.Incarnation, p.KeysChecked = form.Incarnation, keyed
	defer rows.Close()
	budget := keyset.NewBudget(formsapi.Query{MaxBytes: q.MaxBytes})
	f := wire.FeedRows{Page: p, Budget: budget, Limit: q.Limit, Next: q.After}
	var pos, of int64
	var encoded, keys sql.RawBytes // valid until the next Next: copied at once
	found := false
	for rows.Next() {
		if byKeys {
			err = rows.Scan(&pos, &encoded, &of, &keys)
		} else {
			err = rows.Scan(&pos, &encoded, &of)
		}
		if err != nil {
			return 0, false, err
		}
		found = found || pos == 0
		switch {
		case pos == 0 || of != 0:
		case plain != nil && find.Absent(encoded, plain),
			byKeys && keys != nil && !holdsAnyKey(keys, q.Keys):
			encoded, of = nil, -int64(len(encoded))
		}
		if !f.Row(pos, encoded, of) {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return 0, false, err
	}
	if !found {
		// The form's row is gone: deleted since the request's lookup (or
		// the export's first page) found it. Its page is no page of an
		// empty form, and never one of a form that took its ID since.
		return 0, false, formsapi.ErrFormNotFound
	}
	return f.Next, f.More, nil
}

// feedRows checks that formID is a form of accountID (known, if not nil,
// says whether it is), then the page's arguments, and runs st; the caller
// reads one row more than the page. It returns the form as it found it.
func (s *Store) feedRows(ctx context.Context, st *sql.Stmt, accountID, formID string, after int64, limit int, known *wire.Form) (*sql.Rows, wire.Form, error) {
	form, err := s.knownForm(ctx, accountID, formID, known)
	if err != nil {
		return nil, wire.Form{}, err
	}
	if limit < 1 {
		return nil, wire.Form{}, fmt.Errorf("limit %d is below 1", limit)
	}
	if after < 0 {
		return nil, wire.Form{}, fmt.Errorf("%w: feed position %d", formsapi.ErrInvalidCursor, after)
	}
	rows, err := st.QueryContext(ctx, form.Seq, after)
	return rows, form, err
}

// FeedHead is for the handler's export: the position of the last entry
// of the form's feed (the form's feed_last, which every insert and
// deletion moves in its transaction), every entry up to it visible to
// later reads. known is the combined lookup's form, or nil.
func (s *Store) FeedHead(ctx context.Context, accountID, formID string, known *wire.Form) (int64, uint64, error) {
	form, err := s.knownForm(ctx, accountID, formID, known)
	if err != nil {
		return 0, 0, fmt.Errorf("sqlitestore: feed head: %w", err)
	}
	var head, inc int64
	if err := s.read.QueryRowContext(ctx, `SELECT feed_last, incarnation FROM formsapi_forms WHERE seq = ?`, form.Seq).Scan(&head, &inc); err != nil {
		if errors.Is(err, sql.ErrNoRows) { // deleted since the lookup
			err = formsapi.ErrFormNotFound
		}
		return 0, 0, fmt.Errorf("sqlitestore: feed head: %w", err)
	}
	return head, uint64(inc), nil
}

// DataFields implements formsapi.FieldStore: the fields of formID whose
// first position is at most upTo, at most limit of them, from the
// formsapi_fields table that triggers keep on every insert into the
// file (migration 0012), whoever makes it; SQLite's JSON functions
// decode the names. Deletions leave the table as it is; a form's
// deletion deletes its fields.
func (s *Store) DataFields(ctx context.Context, accountID, formID string, upTo int64, limit int) (names []string, first []int64, err error) {
	if limit < 1 {
		return nil, nil, fmt.Errorf("sqlitestore: data fields: limit %d is below 1", limit)
	}
	form, err := s.formVersion(ctx, accountID, formID)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlitestore: data fields: %w", err)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT name, first_pos FROM formsapi_fields
WHERE form_seq = ? AND first_pos <= ? ORDER BY first_pos, ord LIMIT ?`, form.Seq, upTo, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("sqlitestore: data fields: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var pos int64
		if err := rows.Scan(&name, &pos); err != nil {
			return nil, nil, fmt.Errorf("sqlitestore: data fields: %w", err)
		}
		names, first = append(names, name), append(first, pos)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("sqlitestore: data fields: %w", err)
	}
	return names, first, nil
}

// holdsAnyKey reports whether list, a find_keys column (a JSON array of
// integers in ascending order, findKeys's), holds one of keys (sorted).
// A filter's keys are not negative, and come after search's negative
// ones: when there are negative ones, only the part after the last '-'
// is read. Anything it cannot read as such an array holds them all (the
// submission is then checked as any other).
func holdsAnyKey(list []byte, keys []int64) bool {
	if len(list) < 2 || list[0] != '[' || list[len(list)-1] != ']' {
		return true
	}
	body := list[1 : len(list)-1]
	if len(body) > 0 && body[0] == '-' {
		i := bytes.LastIndexByte(body, '-')
		j := bytes.IndexByte(body[i:], ',')
		if j < 0 {
			return false // negative keys only
		}
		body = body[i+j+1:]
	}
	for len(body) > 0 {
		end := bytes.IndexByte(body, ',')
		if end < 0 {
			end = len(body)
		}
		k, ok := parseKey(body[:end])
		if !ok {
			return true
		}
		if _, found := slices.BinarySearch(keys, k); found {
			return true
		}
		if end == len(body) {
			break
		}
		body = body[end+1:]
	}
	return false
}

// parseKey reads b as a non-negative decimal integer of at most 19
// digits (every index key of a filter).
func parseKey(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var k uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		k = k*10 + uint64(c-'0')
	}
	if k > math.MaxInt64 {
		return 0, false
	}
	return int64(k), true
}
