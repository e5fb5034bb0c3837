// Package keyset is the one home of the paging rules of the library's own
// stores. A list is ordered by creation time, ties broken by an insertion
// sequence; a page is every item strictly between two positions, lo and
// hi, that Bounds folds Since, Until and the cursor into, and the next page
// resumes after the (time, sequence) pair of the last item returned.
//
// memstore searches its slices with these bounds, sqlitestore and pgstore
// bind them to one row-value comparison per side, and storetest's oracle
// uses Contains: every store pages by the same rules because there is
// only one copy of them.
package keyset

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/wire"
)

// Pos is the place of one item in a list: its creation time in Unix
// nanoseconds and its insertion sequence, unique within the list and
// always positive in stored items.
type Pos struct {
	At, Seq int64
}

// String encodes p as a store cursor.
func (p Pos) String() string {
	return strconv.FormatInt(p.At, 36) + "." + strconv.FormatInt(p.Seq, 36)
}

// Parse decodes a cursor made by String. Anything else is
// formsapi.ErrInvalidCursor.
func Parse(s string) (Pos, error) {
	at, seq, ok := strings.Cut(s, ".")
	if ok {
		a, err1 := strconv.ParseInt(at, 36, 64)
		q, err2 := strconv.ParseInt(seq, 36, 64)
		if err1 == nil && err2 == nil {
			return Pos{At: a, Seq: q}, nil
		}
	}
	return Pos{}, fmt.Errorf("%w: %q", formsapi.ErrInvalidCursor, s)
}

// Less reports whether p comes before q in ascending order.
func (p Pos) Less(q Pos) bool {
	return p.At < q.At || p.At == q.At && p.Seq < q.Seq
}

// Bounds folds q's Since, Until and Cursor into the exclusive bounds of
// its page: the page holds the items with lo < pos < hi, the first
// q.Limit of them in q.Order. Stored sequences are positive, so with the
// sequence bound math.MinInt64, lo < pos means createdAt >= Since and
// pos < hi means createdAt < Until. A cursor narrows the side the page
// walks away from: after it for Oldest, before it for Newest. A cursor
// that Parse refuses is an error wrapping formsapi.ErrInvalidCursor.
func Bounds(q formsapi.Query) (lo, hi Pos, err error) {
	lo = Pos{At: math.MinInt64, Seq: math.MinInt64}
	hi = Pos{At: math.MaxInt64, Seq: math.MaxInt64}
	if !q.Since.IsZero() {
		lo = Pos{At: Nanos(q.Since), Seq: math.MinInt64}
	}
	if !q.Until.IsZero() {
		hi = Pos{At: Nanos(q.Until), Seq: math.MinInt64}
	}
	if q.Cursor != "" {
		c, err := Parse(q.Cursor)
		if err != nil {
			return lo, hi, err
		}
		if q.Order == formsapi.Oldest {
			if lo.Less(c) {
				lo = c
			}
		} else if c.Less(hi) {
			hi = c
		}
	}
	return lo, hi, nil
}

// Contains reports whether an item created at t lies within q's Since and
// Until, by the same bounds a page uses; q's cursor is ignored.
func Contains(q formsapi.Query, t time.Time) bool {
	lo, hi, _ := Bounds(formsapi.Query{Since: q.Since, Until: q.Until})
	p := Pos{At: Nanos(t), Seq: 1}
	return lo.Less(p) && p.Less(hi)
}

// Fetch returns how many rows a store should read for q: one more than
// q.Limit, so that the extra row tells whether a next page exists. A
// Limit below 1 is an error: the handler never sends one, so a store that
// gets it is being misused and says so rather than guessing.
func Fetch(q formsapi.Query) (int, error) {
	if q.Limit < 1 {
		return 0, fmt.Errorf("limit %d is not positive", q.Limit)
	}
	if q.Limit == math.MaxInt {
		return q.Limit, nil // no list is that long anyway
	}
	return q.Limit + 1, nil
}

// The range of times that Unix nanoseconds can hold.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// Nanos returns t in Unix nanoseconds, clamped to the int64 range: a
// filter bound outside the years 1678 to 2262 (which time.Time.UnixNano
// leaves undefined) then still compares correctly with stored times,
// which are always inside them.
func Nanos(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// Budget ends a page at q.MaxBytes (see wire.Budget).
type Budget = wire.Budget

// NewBudget returns the budget of q: none if q.MaxBytes is not positive.
func NewBudget(q formsapi.Query) Budget {
	return wire.NewBudget(q.MaxBytes)
}
