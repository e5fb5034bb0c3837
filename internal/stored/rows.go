package stored

import (
	"fmt"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
)

// Rows is the part of a query result the page readers use, which both
// database/sql's *sql.Rows and pgx's pgx.Rows have. The readers stop early
// and never look at Err: the caller closes the rows and checks Err then,
// as pgx requires.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
}

// prealloc caps the capacity reserved for a page up front, so a huge
// limit on a short list costs nothing.
const prealloc = 256

// Time is a stored Unix-nanosecond time as the API returns it.
func Time(ns int64) time.Time {
	return time.Unix(0, ns).UTC()
}

// Forms reads one page of forms from rows that select seq, created_at, id,
// title, icon and notification_email in page order, keyset.Fetch(q) of
// them at most: a row past q.Limit only says that a next page exists.
func Forms(rows Rows, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	p := formsapi.Page[formsapi.Form]{Items: make([]formsapi.Form, 0, min(q.Limit, prealloc))}
	var last keyset.Pos
	for rows.Next() {
		if len(p.Items) == q.Limit {
			p.NextCursor = last.String()
			break
		}
		var f formsapi.Form
		if err := rows.Scan(&last.Seq, &last.At, &f.ID, &f.Title, &f.Icon, &f.NotificationEmail); err != nil {
			return formsapi.Page[formsapi.Form]{}, err
		}
		f.CreatedAt = Time(last.At)
		p.Items = append(p.Items, f)
	}
	return p, nil
}

// Submissions reads one page of the submissions of formID from rows that
// select seq, created_at, data, attachments and the row's size in bytes,
// in page order, keyset.Fetch(q) of them at most. It stops early, with a
// cursor, before the page would pass q's byte budget (keyset.Budget).
func Submissions(rows Rows, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	p := formsapi.Page[formsapi.Submission]{Items: make([]formsapi.Submission, 0, min(q.Limit, prealloc))}
	var last, cur keyset.Pos
	budget := keyset.NewBudget(q)
	for rows.Next() {
		if len(p.Items) == q.Limit {
			p.NextCursor = last.String()
			break
		}
		var data, attachments []byte
		var size int
		if err := rows.Scan(&cur.Seq, &cur.At, &data, &attachments, &size); err != nil {
			return formsapi.Page[formsapi.Submission]{}, err
		}
		if !budget.Take(size) {
			p.NextCursor = last.String()
			break
		}
		last = cur
		sub, err := submission(formID, last.At, data, attachments)
		if err != nil {
			return formsapi.Page[formsapi.Submission]{}, fmt.Errorf("submission %d: %w", last.Seq, err)
		}
		p.Items = append(p.Items, sub)
	}
	return p, nil
}

// Feed reads one page of a form's sync feed from rows that select
// feed_pos, created_at, data, attachments and of_pos in feed order, after
// feed position after: first the form's row, at position 0, whose of_pos
// is its feed_purged and created_at its incarnation, then submissions
// (of_pos 0) and tombstones (of_pos the position of the submission
// deleted), limit+1 entries at most. found reports whether the form's row
// was among them.
func Feed(rows Rows, formID string, after int64, limit int) (p formsapi.FeedPage, found bool, err error) {
	p = formsapi.FeedPage{Next: after, Items: make([]formsapi.Submission, 0, min(limit, prealloc))}
	for rows.Next() {
		var pos, at, of int64
		var data, attachments []byte
		if err := rows.Scan(&pos, &at, &data, &attachments, &of); err != nil {
			return formsapi.FeedPage{}, false, err
		}
		if pos == 0 { // the form's row, first: its incarnation in at
			p.Purged, p.Incarnation, found = of, uint64(at), true
			continue
		}
		if len(p.Items)+len(p.Deleted) == limit { // the extra row: more follow
			p.More = true
			break
		}
		switch {
		case of > 0:
			p.Deleted = append(p.Deleted, of)
			p.DeletedAt = append(p.DeletedAt, pos)
		default:
			sub, err := submission(formID, at, data, attachments)
			if err != nil {
				return formsapi.FeedPage{}, false, fmt.Errorf("submission at feed position %d: %w", pos, err)
			}
			p.Items = append(p.Items, sub)
			p.Positions = append(p.Positions, pos)
		}
		p.Next = pos
	}
	return p, found, nil
}

func submission(formID string, at int64, data, attachments []byte) (formsapi.Submission, error) {
	att, err := DecodeAttachments(attachments)
	return formsapi.Submission{FormID: formID, Data: data, Attachments: att, CreatedAt: Time(at)}, err
}
