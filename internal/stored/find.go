package stored

import (
	"fmt"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/wire"
)

// Filtered pages: the database stores walk the entries of their index of
// submitted values (see find.Keys) for the key of one clause of q.Filters,
// in page order, joined to the submission each names, and every other
// clause, and the walked one against hash collisions, is checked here
// with find.Match on the submission's data. A page examines at most
// find.MaxExamined entries: one that reaches the bound before it is full
// ends there with a cursor after the last entry examined, so the next
// page resumes the walk there, and it may be short or empty.

// Examined is how many entries a filtered page's statement reads at most:
// one more than the bound, so that the extra row tells that entries
// follow.
const Examined = find.MaxExamined + 1

// WalkKey returns the index key a filtered page of q walks: its first
// clause's.
func WalkKey(q formsapi.Query) int64 {
	f := q.Filters[0]
	return find.Key(f.Field, f.Value)
}

// Clauses returns q.Filters as internal/find has them.
func Clauses(q formsapi.Query) []find.Clause {
	cs := make([]find.Clause, len(q.Filters))
	for i, f := range q.Filters {
		cs[i] = find.Clause{Field: f.Field, Value: f.Value}
	}
	return cs
}

// filterWalk is the rule of a filtered page, whichever way its items are
// kept.
type filterWalk struct {
	q        formsapi.Query
	cs       []find.Clause
	budget   keyset.Budget
	last     keyset.Pos // the last entry examined
	n        int        // items on the page
	examined int
}

func newFilterWalk(q formsapi.Query) filterWalk {
	return filterWalk{q: q, cs: Clauses(q), budget: keyset.NewBudget(q)}
}

// row takes the entry at pos with the submission's data and its size as
// sent. It returns take, whether the item goes on the page, and stop,
// whether the page ends before this entry (its cursor is then cursor).
func (w *filterWalk) row(pos keyset.Pos, data []byte, size int) (take, stop bool) {
	if w.examined == find.MaxExamined {
		return false, true
	}
	w.examined++
	if !find.Match(data, w.cs) {
		w.last = pos
		return false, false
	}
	if w.n == w.q.Limit || !w.budget.Fits(size) {
		return false, true
	}
	w.last = pos
	return true, false
}

// taken counts an item of size bytes as on the page.
func (w *filterWalk) taken(size int) {
	w.budget.Count(size)
	w.n++
}

func (w *filterWalk) cursor() string { return w.last.String() }

// AppendFiltered appends a filtered page of q (see above) to p from rows
// that select an index entry's seq and created_at and its submission's
// data and JSON as sent, in page order, Examined of them at most. It
// sets p.NextCursor; damaged submissions are left out as wire.Page.Add
// leaves them.
func AppendFiltered(rows Rows, q formsapi.Query, p *wire.Page) error {
	w := newFilterWalk(q)
	for rows.Next() {
		var pos keyset.Pos
		var data, encoded []byte
		if err := rows.Scan(&pos.Seq, &pos.At, &data, &encoded); err != nil {
			return err
		}
		take, stop := w.row(pos, data, len(encoded))
		if stop {
			p.NextCursor = w.cursor()
			return nil
		}
		if take && p.Add(pos.Seq, encoded) {
			w.taken(len(encoded))
		}
	}
	p.NextCursor = ""
	return nil
}

// FilteredSubmissions reads a filtered page of q (see above) of the
// submissions of formID from rows that select an index entry's seq and
// created_at and its submission's data, attachments and size in bytes as
// sent, in page order, Examined of them at most.
func FilteredSubmissions(rows Rows, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	p := formsapi.Page[formsapi.Submission]{Items: make([]formsapi.Submission, 0, min(q.Limit, prealloc))}
	w := newFilterWalk(q)
	for rows.Next() {
		var pos keyset.Pos
		var data, attachments []byte
		var size int
		if err := rows.Scan(&pos.Seq, &pos.At, &data, &attachments, &size); err != nil {
			return formsapi.Page[formsapi.Submission]{}, err
		}
		take, stop := w.row(pos, data, size)
		if stop {
			p.NextCursor = w.cursor()
			return p, nil
		}
		if !take {
			continue
		}
		sub, err := submission(formID, pos.At, data, attachments)
		if err != nil {
			return formsapi.Page[formsapi.Submission]{}, fmt.Errorf("submission %d: %w", pos.Seq, err)
		}
		w.taken(size)
		p.Items = append(p.Items, sub)
	}
	return p, nil
}

// Count statements' bounds, as SQL literals: each reads one row more than
// its bound, which says the bound was reached.
const (
	CountLimit   = "100001" // find.MaxCount + 1
	MatchesLimit = "10001"  // find.MaxExactCount + 1
)

// Counted is the Total of a count statement that read n rows, one more
// than bound when it reached it.
func Counted(n int64, bound int64, estimate bool) formsapi.Total {
	switch {
	case n > bound:
		if estimate {
			return formsapi.Total{Value: bound, Kind: find.Estimate}
		}
		return formsapi.Total{Value: bound, Kind: find.AtLeast}
	case estimate:
		return formsapi.Total{Value: n, Kind: find.Estimate}
	}
	return formsapi.Total{Value: n, Kind: find.Exact}
}

// CountMatches counts the matches of q's filters among rows that select
// the data of the submissions of one index key's entries,
// find.MaxExactCount+1 of them at most.
func CountMatches(rows Rows, q formsapi.Query) (formsapi.Total, error) {
	cs := Clauses(q)
	var n, matches int64
	for rows.Next() {
		if n == find.MaxExactCount {
			return formsapi.Total{Value: matches, Kind: find.AtLeast}, nil
		}
		n++
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return formsapi.Total{}, err
		}
		if find.Match(data, cs) {
			matches++
		}
	}
	return formsapi.Total{Value: matches, Kind: find.Exact}, nil
}

// CountQuery is q as a count reads it: its range and filters, from the
// start.
func CountQuery(q formsapi.Query) formsapi.Query {
	return formsapi.Query{Limit: 1, Since: q.Since, Until: q.Until, Filters: q.Filters}
}
