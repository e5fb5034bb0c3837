package keyset

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
)

// A list sorted by a submitted field (formsapi.Query.Sort) is walked in
// two parts: the submissions with a sort key for the field (find.SortKey),
// by (key, position) in the sort's direction, then those without one, by
// position in the same direction. SortPos is a place in that walk.
type SortPos struct {
	// Keyed is true in the first part, where Key is the sort key of the
	// submission at Pos.
	Keyed bool
	Key   []byte
	Pos
}

// Sorted is what a sorted list's page needs of q: the field, the
// direction and where the page starts (the cursor's place, or the start
// of the walk when q has none: Start). A cursor or a sort that does not
// read is an error wrapping formsapi.ErrInvalidCursor.
type Sorted struct {
	Field string
	Desc  bool
	// After is the cursor's place; nil for the first page.
	After *SortPos
}

// ParseSorted reads q's sort and cursor.
func ParseSorted(q formsapi.Query) (Sorted, error) {
	field, desc, msg := find.ParseSort(q.Sort)
	if msg != "" {
		return Sorted{}, fmt.Errorf("sort %q: %s", q.Sort, msg)
	}
	s := Sorted{Field: field, Desc: desc}
	if q.Cursor == "" {
		return s, nil
	}
	p, err := ParseSortPos(q.Cursor)
	if err != nil {
		return Sorted{}, err
	}
	s.After = &p
	return s, nil
}

// String encodes p as a store cursor: "k", the key in hex, ".", and the
// position in the first part; "n" and the position in the second.
func (p SortPos) String() string {
	if p.Keyed {
		return "k" + hex.EncodeToString(p.Key) + "." + p.Pos.String()
	}
	return "n" + p.Pos.String()
}

// ParseSortPos decodes a cursor made by SortPos.String. Anything else is
// formsapi.ErrInvalidCursor.
func ParseSortPos(s string) (SortPos, error) {
	bad := fmt.Errorf("%w: %q", formsapi.ErrInvalidCursor, s)
	switch {
	case strings.HasPrefix(s, "k"):
		h, rest, ok := strings.Cut(s[1:], ".")
		if !ok || h == "" || len(h) > 2*find.MaxSortKeyBytes {
			return SortPos{}, bad
		}
		k, err := hex.DecodeString(h)
		if err != nil {
			return SortPos{}, bad
		}
		pos, err := Parse(rest)
		if err != nil {
			return SortPos{}, bad
		}
		return SortPos{Keyed: true, Key: k, Pos: pos}, nil
	case strings.HasPrefix(s, "n"):
		pos, err := Parse(s[1:])
		if err != nil {
			return SortPos{}, bad
		}
		return SortPos{Pos: pos}, nil
	}
	return SortPos{}, bad
}

// Compare orders two places of the keyed part ascending: by key, then
// position.
func (p SortPos) Compare(o SortPos) int {
	if c := bytes.Compare(p.Key, o.Key); c != 0 {
		return c
	}
	switch {
	case p.Less(o.Pos):
		return -1
	case o.Less(p.Pos):
		return 1
	}
	return 0
}

// Follows reports whether the place p comes after s.After in s's walk
// (every place does on the first page).
func (s Sorted) Follows(p SortPos) bool {
	a := s.After
	if a == nil {
		return true
	}
	switch {
	case a.Keyed && !p.Keyed:
		return true
	case !a.Keyed && p.Keyed:
		return false
	case p.Keyed:
		c := p.Compare(*a)
		return c > 0 && !s.Desc || c < 0 && s.Desc
	}
	return a.Less(p.Pos) && !s.Desc || p.Pos.Less(a.Pos) && s.Desc
}

// Before reports whether place p comes before o in s's walk.
func (s Sorted) Before(p, o SortPos) bool {
	return Sorted{Desc: s.Desc, After: &p}.Follows(o)
}
