package stored

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/wire"
)

// Sorted pages (formsapi.Query.Sort): the database stores keep an
// ordered index of sort keys, one entry for each top-level member of a
// submission that has one (find.SortEntries): the form, the field's
// find.SortField, the key, and the submission's position. A sorted page
// walks the form's entries for the field in (key, created_at, seq)
// order, in the sort's direction, from the cursor's place: an index seek,
// so a deep page costs what the first does. Once they are done it walks
// the form's submissions themselves in (created_at, seq) order, the same
// direction, for those without a key (keyset.SortPos). Every row is
// checked here: an entry against its submission's own key for the field
// (a hash collision of field names, or a name given twice, is left out),
// a submission of the second part for having none, and both against the
// list's range (Since, Until: checked, not walked, in the first part),
// filters and search. A page examines at most find.MaxExamined rows and
// find.MaxExaminedBytes of work, as a filtered page does, and may end
// short with a cursor after the last row it examined.

// SortSource is where a store reads the rows of a sorted page from.
type SortSource[X any] struct {
	// Keyed returns the form's index entries for the field strictly after
	// the place (key, at, seq) in the walk's direction (ascending: greater;
	// descending: less), in walk order, each joined to its submission:
	// seq, created_at, key, data, attachments and X (the JSON as sent, or
	// its size). It may stop after limit rows (a statement's LIMIT):
	// the walk then asks again from the last.
	Keyed func(key []byte, at, seq int64, limit int) (Rows, error)
	// Plain returns the form's submissions strictly between the
	// positions lo and hi, in walk order: seq, created_at, data,
	// attachments and X, limit of them at least, as Keyed.
	Plain func(lo, hi keyset.Pos, limit int) (Rows, error)
}

// sortWalk is the rule of a sorted page.
type sortWalk struct {
	s        keyset.Sorted
	q        formsapi.Query
	cs       []find.Clause
	budget   keyset.Budget
	last     keyset.SortPos
	moved    bool // last is set
	n        int
	examined int
	work     int64
}

// row takes the row at place p. take says the item goes on the page,
// stop that the page ends with this call (its cursor is then w.cursor).
func (w *sortWalk) row(p keyset.SortPos, data, attachments []byte, size int) (take, stop bool) {
	if w.examined == find.MaxExamined {
		return false, true
	}
	w.examined++
	k, has := find.SortValue(data, w.s.Field)
	found := has == p.Keyed && (!has || bytes.Equal(k, p.Key))
	if found && p.Keyed {
		found = keyset.Contains(w.q, Time(p.At))
	}
	var work int64 = int64(len(data) + len(attachments))
	if found {
		found, work = Finds(data, attachments, w.cs, w.q.Search)
	}
	w.work += work
	spent := w.work >= find.MaxExaminedBytes
	if !found {
		w.last, w.moved = p, true
		return false, spent
	}
	if w.n == w.q.Limit || !w.budget.Fits(size) {
		return false, true
	}
	w.last, w.moved = p, true
	return true, spent
}

func (w *sortWalk) taken(size int) {
	w.budget.Count(size)
	w.n++
}

// walkSorted reads the page of q from src. take gets each item that goes
// on the page, and reports whether it did (a damaged one does not). It
// returns the page's cursor, "" after the last.
func walkSorted[X any](ctx context.Context, q formsapi.Query, src SortSource[X], size func(X) int, take func(pos keyset.Pos, data, attachments []byte, x X) (bool, error)) (string, error) {
	if q.Limit < 1 {
		return "", fmt.Errorf("limit %d is not positive", q.Limit)
	}
	s, err := keyset.ParseSorted(q)
	if err != nil {
		return "", err
	}
	w := &sortWalk{s: s, q: q, cs: Clauses(q), budget: keyset.NewBudget(q)}
	defer func() { wire.AddExamined(ctx, w.work) }()
	// each visits rows; done reports the page ended, n the rows read.
	var n int
	each := func(rows Rows, keyed bool) (bool, error) {
		n = 0
		for rows.Next() {
			n++
			var p keyset.SortPos
			var data, attachments []byte
			var x X
			var err error
			if keyed {
				p.Keyed = true
				err = rows.Scan(&p.Seq, &p.At, &p.Key, &data, &attachments, &x)
			} else {
				err = rows.Scan(&p.Seq, &p.At, &data, &attachments, &x)
			}
			if err != nil {
				return false, err
			}
			t, stop := w.row(p, data, attachments, size(x))
			if t {
				ok, err := take(p.Pos, data, attachments, x)
				if err != nil {
					return false, err
				}
				if ok {
					w.taken(size(x))
				}
			}
			if stop {
				return true, nil
			}
		}
		return false, nil
	}
	// batch is how many rows a statement reads: the page and one more at
	// first, as many as the page may still examine after that (a
	// statement's rows are all read and sent by PostgreSQL, read or not).
	batch := func() int { return min(q.Limit+1, Examined) }
	if s.After == nil || s.After.Keyed {
		key, at, seq := []byte{}, int64(math.MinInt64), int64(math.MinInt64)
		if s.Desc {
			key, at, seq = []byte{0xFF}, math.MaxInt64, math.MaxInt64
		}
		if a := s.After; a != nil {
			key, at, seq = a.Key, a.At, a.Seq
		}
		for limit := batch(); ; limit = Examined - w.examined {
			rows, err := src.Keyed(key, at, seq, limit)
			if err != nil {
				return "", err
			}
			done, err := each(rows, true)
			if cerr := closeRows(rows); err == nil {
				err = cerr
			}
			if err != nil || done {
				return w.cursor(), err
			}
			if n < limit {
				break // the entries are done
			}
			key, at, seq = w.last.Key, w.last.At, w.last.Seq // the last row read
		}
	}
	plain := formsapi.Query{Since: q.Since, Until: q.Until, Order: formsapi.Oldest}
	if s.Desc {
		plain.Order = formsapi.Newest
	}
	if a := s.After; a != nil && !a.Keyed {
		plain.Cursor = a.Pos.String()
	}
	for limit := batch(); ; limit = Examined - w.examined {
		lo, hi, err := keyset.Bounds(plain)
		if err != nil {
			return "", err
		}
		rows, err := src.Plain(lo, hi, limit)
		if err != nil {
			return "", err
		}
		done, err := each(rows, false)
		if cerr := closeRows(rows); err == nil {
			err = cerr
		}
		switch {
		case err != nil:
			return "", err
		case done:
			return w.cursor(), nil
		case n < limit:
			return "", nil // the form is done
		}
		plain.Cursor = w.last.Pos.String() // the last row read
	}
}

// cursor is the cursor after the last row examined: the place the page
// began at when it examined none (a page that ends before its first row
// only when the first row does not fit, which the budget never refuses).
func (w *sortWalk) cursor() string {
	if !w.moved {
		if w.s.After != nil {
			return w.s.After.String()
		}
		return "n" // never reached: a first row always fits
	}
	return w.last.String()
}

// closeRows closes rows and returns the error that ended them, if any:
// both database/sql's and pgx's rows have Close and Err.
func closeRows(rows Rows) error {
	switch r := rows.(type) {
	case interface {
		Close() error
		Err() error
	}:
		if err := r.Close(); err != nil {
			return err
		}
		return r.Err()
	case interface {
		Close()
		Err() error
	}:
		r.Close()
		return r.Err()
	}
	return nil
}

// AppendSorted appends the sorted page of q (see above) to p from src,
// whose X is the submission's JSON as sent, and sets p.NextCursor. It
// adds the page's work to the Meter of ctx; damaged submissions are left
// out as wire.Page.Add leaves them.
func AppendSorted(ctx context.Context, q formsapi.Query, src SortSource[[]byte], p *wire.Page) error {
	next, err := walkSorted(ctx, q, src, func(b []byte) int { return len(b) }, func(pos keyset.Pos, _, _ []byte, encoded []byte) (bool, error) {
		return p.Add(pos.Seq, encoded), nil
	})
	p.NextCursor = next
	return err
}

// SortedSubmissions reads the sorted page of q (see above) of the
// submissions of formID from src, whose X is the size of the
// submission's JSON as sent. It adds the page's work to the Meter of
// ctx.
func SortedSubmissions(ctx context.Context, formID string, q formsapi.Query, src SortSource[int]) (formsapi.Page[formsapi.Submission], error) {
	p := formsapi.Page[formsapi.Submission]{Items: make([]formsapi.Submission, 0, min(max(q.Limit, 0), prealloc))}
	next, err := walkSorted(ctx, q, src, func(n int) int { return n }, func(pos keyset.Pos, data, attachments []byte, _ int) (bool, error) {
		sub, err := submission(formID, pos.At, data, attachments)
		if err != nil {
			return false, fmt.Errorf("submission %d: %w", pos.Seq, err)
		}
		p.Items = append(p.Items, sub)
		return true, nil
	})
	if err != nil {
		return formsapi.Page[formsapi.Submission]{}, err
	}
	p.NextCursor = next
	return p, nil
}
