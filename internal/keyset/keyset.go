// Package keyset is the position format of the library's own stores: a
// list ordered by creation time, ties broken by an insertion sequence, is
// resumed after the (time, sequence) pair of the last item returned.
package keyset

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/formsapi/formsapi"
)

// Pos is the place of one item in a list: its creation time in Unix
// nanoseconds and its unique insertion sequence.
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
