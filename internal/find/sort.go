package find

// Sort by a submitted field: sort=<field> (ascending) and sort=-<field>
// (descending) on a list of submissions. A submission sorts by the value
// of its top-level member <field> (the last of its name, as filters read
// it) through its sort key (SortKey), a string of bytes whose byte order
// is the sort order, so that the database stores keep the keys in an
// ordinary ordered index and compare them as bytes:
//
//   - Kinds order numbers < RFC 3339 instants < other text < false < true,
//     the kinds the range operators compare (ops.go) first, each as they
//     compare it: numbers as float64 values, instants as instants (any
//     offset), other strings by their normal form (as search normalizes
//     text, of their first MaxSearchValueBytes) byte by byte, of which the
//     key keeps the first SortTextBytes: strings whose normal forms share
//     those are tied.
//   - null, objects, arrays and absent members have no key: those
//     submissions come after every submission with one, in either
//     direction.
//   - Ties, and the submissions without a key, are ordered by creation
//     time and position, in the sort's direction (the list's keyset).
//
// A descending sort is the exact reverse of the ascending one over the
// submissions with a key; those without one stay last.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ErrNoSortIndex is the error of a sorted list asked of a store that
// keeps no ordered index of sort keys (its sort index setting off): the
// handler answers 501.
var ErrNoSortIndex = errors.New("the store keeps no sort index: sorted lists are off (sqlitestore.WithSortIndex, pgstore.WithSortIndex)")

// NotSortedError is the error of a sorted list by a field that the
// store's sort index does not keep: the index is on for named fields
// only (sqlitestore.WithSortIndex, pgstore.WithSortIndex with names), and
// Field is not one of them. The handler answers 501, naming it.
type NotSortedError struct{ Field string }

func (e *NotSortedError) Error() string {
	return fmt.Sprintf("the store's sort index keeps only the fields it was opened with, not %q", e.Field)
}

// CheckSortFields returns an error naming the first of names that no
// sort index can keep (empty, not valid UTF-8, holding a NUL, longer
// than MaxFieldBytes), or one given twice: the fields of a sort index.
func CheckSortFields(names []string) error {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		switch {
		case n == "":
			return errors.New("sort index field: an empty name")
		case !utf8.ValidString(n):
			return fmt.Errorf("sort index field %q: not valid UTF-8", n)
		case strings.IndexByte(n, 0) >= 0:
			// A database's text (PostgreSQL's) cannot keep it.
			return fmt.Errorf("sort index field %q: holds a NUL", n)
		case len(n) > MaxFieldBytes:
			return fmt.Errorf("sort index field %q: longer than %d bytes", n, MaxFieldBytes)
		case seen[n]:
			return fmt.Errorf("sort index field %q: named twice", n)
		}
		seen[n] = true
	}
	return nil
}

// SortTextBytes bounds the bytes of a string's normal form that its sort
// key keeps: strings whose normal forms begin with the same
// SortTextBytes bytes sort as equals (ordered by creation time).
const SortTextBytes = 128

// The first byte of a sort key: its kind, in the order kinds sort.
const (
	sortNumber  = 0x10
	sortInstant = 0x20
	sortText    = 0x30
	sortFalse   = 0x40
	sortTrue    = 0x41
)

// MaxSortKeyBytes bounds the length of a sort key.
const MaxSortKeyBytes = 1 + SortTextBytes

// ParseSort reads the value of sort=: a field name, ascending, or a
// field name after "-", descending. It returns the field and the
// direction, or what is wrong with the value (the message of a 400,
// after "invalid sort: ").
func ParseSort(v string) (field string, desc bool, msg string) {
	field = v
	if strings.HasPrefix(v, "-") {
		field, desc = v[1:], true
	}
	switch {
	case field == "":
		return "", false, `name a field of the submissions' data: sort=<field> ascending, sort=-<field> descending`
	case !utf8.ValidString(field):
		return "", false, "the field name is not valid UTF-8"
	case len(field) > MaxFieldBytes:
		return "", false, "the field name is longer than " + strconv.Itoa(MaxFieldBytes) + " bytes (the filter field length limit)"
	}
	return field, desc, ""
}

// SortField returns the index key of the sorted field name: what the
// database stores' ordered index keeps beside each sort key, so that
// one form's entries for one field are one run of the index. Different
// names may share one; readers check each entry's submission.
func SortField(name string) int64 {
	return key(name, "")
}

// SortKey returns the sort key of the member raw (its JSON value), or
// false when it has none: null, an object, an array, or a number beyond
// the float64 range.
func SortKey(raw []byte) ([]byte, bool) {
	var it *norm.Iter
	var buf []byte
	return sortKey(nil, raw, &it, &buf)
}

func sortKey(dst, raw []byte, it **norm.Iter, buf *[]byte) ([]byte, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, false
	}
	switch c := raw[0]; {
	case c == 't':
		return append(dst, sortTrue), true
	case c == 'f':
		return append(dst, sortFalse), true
	case c == 'n' || c == '{' || c == '[':
		return nil, false
	case c == '"':
		if len(raw) < 2 || raw[len(raw)-1] != '"' {
			return nil, false // not a JSON string (FuzzSortKey)
		}
		s, ok := memberString(raw)
		if !ok {
			return nil, false
		}
		if t, ok := Instant(s); ok {
			dst = append(dst, sortInstant)
			dst = binary.BigEndian.AppendUint64(dst, uint64(t.Unix())^(1<<63))
			return binary.BigEndian.AppendUint32(dst, uint32(t.Nanosecond())), true
		}
		if *it == nil && !isASCII(s) {
			*it = new(norm.Iter)
		}
		t, _, _ := prefix(*it, buf, s, MaxSearchValueBytes, SortTextBytes+utf8.UTFMax)
		if len(t) > SortTextBytes {
			t = t[:SortTextBytes] // bytes, not characters: byte order holds
		}
		dst = append(dst, sortText)
		return append(dst, t...), true
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return nil, false // not a JSON number: "NaN", "Inf"
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, false
	}
	if f == 0 {
		f = 0 // -0 is 0
	}
	bits := math.Float64bits(f)
	if bits&(1<<63) != 0 {
		bits = ^bits
	} else {
		bits |= 1 << 63
	}
	dst = append(dst, sortNumber)
	return binary.BigEndian.AppendUint64(dst, bits), true
}

// SortValue returns the sort key of data's top-level member field (the
// last of its name), or false when data has no such member with a key,
// or is not one JSON object.
func SortValue(data []byte, field string) ([]byte, bool) {
	var raw []byte
	found := false
	if !eachMember(data, func(name, r []byte) {
		if string(name) == field {
			raw, found = r, true
		}
	}) || !found {
		return nil, false
	}
	return SortKey(raw)
}

// SortEntry is one entry of the ordered index of a submission: the
// SortField of one of its top-level members and the member's SortKey.
type SortEntry struct {
	Field int64
	Key   []byte
}

// SortEntries returns the entries of data in the ordered index: one for
// each top-level member whose name is at most MaxFieldBytes and whose
// value (the last of its name) has a sort key, in the order of data's
// members. Nil for data that is not one JSON object, or that has none.
func SortEntries(data []byte) []SortEntry {
	var names [][]byte
	var raws [][]byte
	var seen map[string]int // past a few names: each name's index
	if !eachMember(data, func(name, raw []byte) {
		if len(name) > MaxFieldBytes {
			return
		}
		if seen == nil && len(names) == 16 {
			seen = make(map[string]int, 32)
			for i, n := range names {
				seen[string(n)] = i
			}
		}
		if seen != nil {
			if i, ok := seen[string(name)]; ok {
				raws[i] = raw // the last of its name counts
				return
			}
			seen[string(name)] = len(names)
		} else {
			for i := range names {
				if string(names[i]) == string(name) {
					raws[i] = raw
					return
				}
			}
		}
		names = append(names, name)
		raws = append(raws, raw)
	}) {
		return nil
	}
	var out []SortEntry
	var it *norm.Iter
	var buf []byte
	for i := range names {
		k, ok := sortKey(nil, raws[i], &it, &buf)
		if !ok {
			continue
		}
		out = append(out, SortEntry{Field: key(names[i], ""), Key: k})
	}
	return out
}
