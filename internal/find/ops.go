package find

// Operators: filter[<field>][<op>]=<value>, beside equality
// (filter[<field>]=<value>, Op ""). Each clause looks at the top-level
// member Field of a submission's data, the last of its name, as equality
// does:
//
//   - ne: the complement of equality: every submission the equality
//     clause of the same value does not keep (the member absent, null, an
//     object, or another value), so that Eq and Ne split a list in two.
//   - in: equal to one of Values (canonical texts, sorted, each once).
//   - exists: Value "true" keeps a member present and not null; "false" a
//     member absent or null.
//   - prefix: a string member whose normal form (Normalize, of its first
//     MaxSearchValueBytes as search reads it) starts with Value, itself a
//     normal form. Numbers and other kinds never match.
//   - gt, gte, lt, lte: an order between the member and Value, which is
//     a number or a string. Numbers compare as float64 values; a string
//     that is an RFC 3339 instant (Instant) compares as an instant with
//     another instant; any other string compares by its normal form (of
//     its first MaxSearchValueBytes) with another such string, byte by
//     byte (code point order). A member of another kind than Value (a
//     number against a string, an instant against other text, true,
//     false, null, an object, an array, or no member) does not match.

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The operators of a clause (Clause.Op); "" is equality.
const (
	OpEq     = ""
	OpNe     = "ne"
	OpGt     = "gt"
	OpGte    = "gte"
	OpLt     = "lt"
	OpLte    = "lte"
	OpIn     = "in"
	OpExists = "exists"
	OpPrefix = "prefix"
)

// Ops are the operators a request may name in filter[<field>][<op>], in
// the order they are documented; "eq" is equality spelled out.
var Ops = []string{"eq", OpNe, OpGt, OpGte, OpLt, OpLte, OpIn, OpExists, OpPrefix}

// MaxListValues bounds the values of one in clause (the filter list
// length limit).
const MaxListValues = 32

// MaxInstantBytes bounds the length of a string that may be an instant:
// longer strings are text. RFC 3339's longest, with nanoseconds and an
// offset, is 35 bytes.
const MaxInstantBytes = 40

// Instant reports whether s is an RFC 3339 instant (as time.Parse reads
// time.RFC3339Nano), and which.
func Instant(s string) (time.Time, bool) {
	if len(s) < len("2006-01-02T15:04:05Z") || len(s) > MaxInstantBytes || s[0] < '0' || s[0] > '9' {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// The kinds of an ordered value.
const (
	kindNone = iota
	kindNumber
	kindInstant
	kindText
)

// prepared is what a clause's evaluation needs of its value, computed
// once per walk (Prepare) rather than per submission.
type prepared struct {
	ok   bool
	kind int
	num  float64
	at   time.Time
	text string // a text's or a prefix's normal form
}

// Prepare returns cs ready to match: each clause's value read once. A
// clause not prepared is read at each Match.
func Prepare(cs []Clause) []Clause {
	out := make([]Clause, len(cs))
	for i, c := range cs {
		c.p = c.prepare()
		out[i] = c
	}
	return out
}

func (c Clause) prepare() prepared {
	p := prepared{ok: true}
	switch c.Op {
	case OpPrefix:
		p.text = c.Value
	case OpGt, OpGte, OpLt, OpLte:
		p.kind, p.num, p.at, p.text = orderedValue(c.Value)
	}
	return p
}

// orderedValue reads the canonical text v of a range's value: its kind
// and its number, instant or normal form.
func orderedValue(v string) (kind int, num float64, at time.Time, text string) {
	if v == "" {
		return kindNone, 0, time.Time{}, ""
	}
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal([]byte(v), &s) != nil {
			return kindNone, 0, time.Time{}, ""
		}
		if t, ok := Instant(s); ok {
			return kindInstant, 0, t, ""
		}
		return kindText, 0, time.Time{}, Normalize(s)
	case 't', 'f', 'n':
		return kindNone, 0, time.Time{}, ""
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsInf(f, 0) {
		return kindNone, 0, time.Time{}, ""
	}
	return kindNumber, f, time.Time{}, ""
}

// ParseOp reads the operator of filter[<field>][<op>]: it returns the
// clause's Op ("eq" is equality, ""), or false for an unknown one.
func ParseOp(op string) (string, bool) {
	if op == "eq" {
		return OpEq, true
	}
	return op, slices.Contains(Ops, op)
}

// ParseClause reads the value v of a clause with operator op (ParseOp's)
// on field as given in a query string, returning the clause or what is
// wrong with the value (the message of a 400, after "the value ").
//
//   - eq, ne and the ranges take a value as equality does (ParseValue); a
//     range's must be a number or a string: true, false and null do not
//     order.
//   - in takes a comma-separated list of such values, MaxListValues at
//     most; a string holding a comma is written quoted ("a,b").
//   - exists takes true or false.
//   - prefix takes text, bare or as a quoted JSON string, of 1 to
//     MaxValueBytes bytes once normalized (Normalize).
func ParseClause(field, op, v string) (Clause, string) {
	c := Clause{Field: field, Op: op}
	switch op {
	case OpIn:
		vs, msg := ParseList(v)
		if msg != "" {
			return Clause{}, msg
		}
		c.Values = vs
		return c, ""
	case OpExists:
		if v != "true" && v != "false" {
			return Clause{}, "must be true (present and not null) or false (absent or null)"
		}
		c.Value = v
		return c, ""
	case OpPrefix:
		p, msg := ParsePrefix(v)
		if msg != "" {
			return Clause{}, msg
		}
		c.Value = p
		return c, ""
	}
	canon, msg := ParseValue(v)
	if msg != "" {
		return Clause{}, msg
	}
	if op == OpGt || op == OpGte || op == OpLt || op == OpLte {
		if k, _, _, _ := orderedValue(canon); k == kindNone {
			return Clause{}, "is " + canon + ", which does not order: " + op + " compares numbers, RFC 3339 instants and text"
		}
	}
	c.Value = canon
	return c, ""
}

// ParsePrefix reads the value of a prefix clause: text, bare or quoted
// as a JSON string, returned in its normal form.
func ParsePrefix(v string) (string, string) {
	if !utf8.ValidString(v) {
		return "", "is not valid UTF-8"
	}
	s := v
	if strings.HasPrefix(v, `"`) {
		if err := json.Unmarshal([]byte(v), &s); err != nil || loneSurrogate(v) {
			return "", "starts with a double quote but is not one JSON string"
		}
	}
	t, ok := normalize(s, MaxValueBytes)
	if !ok {
		return "", "is longer than " + strconv.Itoa(MaxValueBytes) + " bytes once case and accents are set aside (the filter value length limit)"
	}
	if t == "" {
		return "", "is empty once case and accents are set aside"
	}
	return t, ""
}

// ParseList reads the value of an in clause: values as ParseValue reads
// them, separated by commas, a quoted string running to its closing
// quote whatever it holds. It returns their canonical texts, sorted,
// each once.
func ParseList(v string) ([]string, string) {
	if v == "" {
		return nil, "is empty: give one value or more, separated by commas"
	}
	var out []string
	for i, n := 0, 1; ; n++ {
		if n > MaxListValues {
			return nil, "has more than " + strconv.Itoa(MaxListValues) + " values (the filter list length limit)"
		}
		end := len(v)
		if strings.HasPrefix(v[i:], `"`) {
			// A quoted string ends at its first unescaped quote.
			j := i + 1
			for j < len(v) && v[j] != '"' {
				if v[j] == '\\' {
					j++
				}
				j++
			}
			end = min(j+1, len(v))
			if end < len(v) && v[end] != ',' {
				return nil, "has a quoted value followed by more than a comma, at value " + strconv.Itoa(n)
			}
		} else if k := strings.IndexByte(v[i:], ','); k >= 0 {
			end = i + k
		}
		canon, msg := ParseValue(v[i:end])
		if msg != "" {
			return nil, "at value " + strconv.Itoa(n) + " " + msg
		}
		out = append(out, canon)
		if end == len(v) {
			break
		}
		i = end + 1
	}
	slices.Sort(out)
	return slices.Compact(out), ""
}

// normalizes reports whether c's check may normalize text: a prefix, or
// a range whose value is not a number or an instant.
func (c *Clause) normalizes() bool {
	switch c.Op {
	case OpPrefix:
		return true
	case OpGt, OpGte, OpLt, OpLte:
		p := c.p
		if !p.ok {
			p = c.prepare()
		}
		return p.kind == kindText
	}
	return false
}

// matchOne reports whether the member raw (present: ok) satisfies c, and
// the bytes its check passed through Unicode normalization.
func (c *Clause) matchOne(raw json.RawMessage, present bool, it *norm.Iter, buf *[]byte) (bool, int) {
	switch c.Op {
	case OpEq, OpNe:
		eq := false
		if present {
			eq = canonicalIs(raw, c.Value)
		}
		return eq == (c.Op == OpEq), 0
	case OpIn:
		if !present {
			return false, 0
		}
		if v, ok := plainCanonical(bytes.TrimSpace(raw)); ok {
			// Values are sorted: the first not below v is v or not there.
			i := sort.Search(len(c.Values), func(i int) bool { return c.Values[i] >= string(v) })
			return i < len(c.Values) && c.Values[i] == string(v), 0
		}
		v, ok := Canonical(raw)
		if !ok {
			return false, 0
		}
		_, found := slices.BinarySearch(c.Values, v)
		return found, 0
	case OpExists:
		set := present && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
		return set == (c.Value == "true"), 0
	}
	if !present {
		return false, 0
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false, 0
	}
	p := c.p
	if !p.ok {
		p = c.prepare()
	}
	if c.Op == OpPrefix {
		s, ok := memberString(raw)
		if !ok {
			return false, 0
		}
		t, read, slow := prefix(it, buf, s, MaxSearchValueBytes, len(p.text)+utf8.UTFMax)
		n := 0
		if slow {
			n = read + len(t)
		}
		return strings.HasPrefix(t, p.text), n
	}
	var cmp, normalized int
	switch p.kind {
	case kindNumber:
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return false, 0
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(f, 0) {
			return false, 0
		}
		switch {
		case f < p.num:
			cmp = -1
		case f > p.num:
			cmp = 1
		}
	case kindInstant:
		s, ok := memberString(raw)
		if !ok {
			return false, 0
		}
		t, ok := Instant(s)
		if !ok {
			return false, 0
		}
		cmp = t.Compare(p.at)
	case kindText:
		s, ok := memberString(raw)
		if !ok {
			return false, 0
		}
		if _, ok := Instant(s); ok {
			return false, 0
		}
		// The member's normal form as far as it can differ from the
		// value's: a byte past the value's length orders them as the
		// whole would.
		t, read, slow := prefix(it, buf, s, MaxSearchValueBytes, len(p.text)+utf8.UTFMax)
		if slow {
			normalized = read + len(t)
		}
		cmp = strings.Compare(t, p.text)
	default:
		return false, 0
	}
	switch c.Op {
	case OpGt:
		return cmp > 0, normalized
	case OpGte:
		return cmp >= 0, normalized
	case OpLt:
		return cmp < 0, normalized
	case OpLte:
		return cmp <= 0, normalized
	}
	return false, normalized
}

// memberString decodes raw, a member's JSON value, when it is a string.
func memberString(raw []byte) (string, bool) {
	if raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// canonicalIs reports whether the canonical text of raw, a member's JSON
// value, is value (Canonical's, without allocating for a value that is
// its own canonical text).
func canonicalIs(raw []byte, value string) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	if v, ok := plainCanonical(raw); ok {
		return string(v) == value
	}
	v, ok := Canonical(raw)
	return ok && v == value
}
