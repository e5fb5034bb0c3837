// Package find is the one home of the rules of filters on submitted
// fields: how a filter's value is read, what two values equal means, which
// members of a submission's data the writers index, and the key each is
// indexed under. Every store matches by Match, and the two database stores
// index by Keys, so the same filter finds the same submissions in each.
//
// A filter clause names a top-level member of a submission's data and a
// scalar value: a string, a number, true, false or null. Values compare by
// their canonical JSON text (Canonical): strings exactly (case and
// accents count), numbers by their float64 value (42, 42.0 and 4.2e1 are
// equal, as in JavaScript), and the literals by themselves. Objects and
// arrays never match. When data names a member more than once, the last
// one counts, as in encoding/json.
package find

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/formsapi/formsapi/internal/wire"
	"golang.org/x/text/unicode/norm"
)

// The limits on filters. The handler answers 400 naming the limit for a
// request past one.
const (
	// MaxClauses bounds the filter clauses of one request.
	MaxClauses = 8
	// MaxFieldBytes bounds the bytes of a filtered member's name. Members
	// with longer names are not indexed, and cannot be filtered on.
	MaxFieldBytes = 64
	// MaxValueBytes bounds the canonical JSON text of a filter's value
	// (Canonical; a string's counts its quotes and escapes). Values whose
	// canonical text is longer are not indexed, and no filter can name
	// them: an equal value would be as long.
	MaxValueBytes = 256
	// MaxExamined bounds the index entries (the database stores) one
	// filtered page examines: a page that reaches it before it is full
	// ends there, short or empty, with a next cursor. memstore, which
	// keeps no index, examines as many submissions as MaxExaminedBytes
	// lets it.
	MaxExamined = 1000
	// MaxExaminedBytes bounds the work one filtered page does on its
	// candidates, counted as Examined (RELIABILITY case 103): once the
	// candidates it checked come to this many bytes, the page ends after
	// the last of them, short or empty, with a next cursor. Without it, a
	// page of 1,000 entries whose submissions held a megabyte each, all
	// checked and normalized, took seconds of CPU for one request.
	MaxExaminedBytes = 16 << 20
	// MaxExactCount bounds the index entries an exact count of a filtered
	// list checks against its filters (each a read of the submission's
	// data): past it the count is "at_least" the matches found.
	MaxExactCount = 10_000
	// MaxExactCountBytes bounds the same count by its work, counted as
	// Examined: once the candidates it checked come to this many bytes,
	// the count is "at_least" the matches found. Without it, a count over
	// large submissions read up to 10,000 of them (a gigabyte at 100 KB
	// each) and ran past the request's time.
	MaxExactCountBytes = 32 << 20
	// NormalizedCost is what Examined counts for each byte a search's
	// check passes through Unicode normalization (read and made; see
	// Search): about what a byte costs to read, send and compare as
	// ASCII, 16 times over (measured: BENCHMARKS.md, "Work per rate
	// unit").
	NormalizedCost = 16
	// MaxCount bounds the rows or index entries any other count reads
	// (index entries only, no data): past it the count is "at_least"
	// MaxCount (or an "estimate", for an estimate of a filtered list).
	MaxCount = 100_000
)

// Examined is the work of checking one candidate, in bytes: stored, the
// bytes of its data and attachments as the store keeps them, and
// NormalizedCost for each of the normalized bytes its search's check
// passed through Unicode normalization (Search). The bounds on a page's
// and an exact count's work (MaxExaminedBytes, MaxExactCountBytes) and
// the handler's charge of the rate limiter count it.
func Examined(stored, normalized int) int64 {
	return int64(stored) + NormalizedCost*int64(normalized)
}

// The kinds of a count (formsapi.Total.Kind).
const (
	Exact    = "exact"
	AtLeast  = "at_least"
	Estimate = "estimate"
)

// Clause is one filter clause on the top-level member Field of data:
// with Op "" (OpEq), an equality with the JSON scalar whose canonical
// text is Value; with another operator, what ops.go says.
type Clause struct {
	Field string
	Op    string
	// Value is the canonical text of the value (equality, ne and the
	// ranges), "true" or "false" (exists), or a normal form (prefix).
	Value string
	// Values are the canonical texts of an in clause's values, sorted,
	// each once.
	Values []string
	p      prepared
}

// ParseValue reads a filter's value as given in a query string: a JSON
// literal (a number, true, false, null, or a string in double quotes),
// else bare text, which is a string. It returns the value's canonical
// text, or what is wrong with it.
func ParseValue(v string) (string, string) {
	if v == "" {
		return "", `is empty: write "" (two double quotes) for the empty string`
	}
	if !utf8.ValidString(v) {
		return "", "is not valid UTF-8"
	}
	var canon string
	var ok bool
	switch c := v[0]; {
	case c == '"':
		var s string
		if err := json.Unmarshal([]byte(v), &s); err != nil {
			return "", `starts with a double quote but is not one JSON string: quote the whole value, escaping " and \ inside it with \`
		}
		if loneSurrogate(v) {
			// encoding/json would read it as U+FFFD, so the filter would
			// silently ask for another value than the one written.
			return "", `has a \u escape of half a surrogate pair, which is not a character: escape a character outside the Basic Multilingual Plane as a pair (\ud83d\ude00), or write it unescaped`
		}
		canon, ok = String(s), true
	case v == "true" || v == "false" || v == "null":
		canon, ok = v, true
	case c == '-' || c >= '0' && c <= '9':
		if json.Valid([]byte(v)) {
			if canon, ok = Number(v); !ok {
				return "", "is a number beyond the range of a 64-bit float"
			}
		}
	}
	if !ok {
		canon = String(v) // bare text
	}
	if len(canon) > MaxValueBytes {
		return "", "is longer than " + strconv.Itoa(MaxValueBytes) + " bytes as canonical JSON (the filter value length limit)"
	}
	return canon, ""
}

// loneSurrogate reports whether the JSON string literal lit (valid JSON)
// has a \u escape of a UTF-16 surrogate that is not half of a high-low
// pair.
func loneSurrogate(lit string) bool {
	escape := func(i int) (rune, bool) { // the \uXXXX at lit[i:], if any
		if i+6 > len(lit) || lit[i] != '\\' || lit[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(lit[i+2:i+6], 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		r, ok := escape(i)
		if !ok {
			i++ // a two-character escape such as \\ or \"
			continue
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true // a low half with no high half before it
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := escape(i + 6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		default:
			i += 5
		}
	}
	return false
}

// String returns the canonical text of the JSON string s: encoding/json's,
// without its HTML escaping.
func String(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// Number returns the canonical text of the JSON number raw: its float64
// value as encoding/json writes one, so that equal values have equal
// text. It reports false when raw is beyond the float64 range.
func Number(raw string) (string, bool) {
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsInf(f, 0) {
		return "", false
	}
	if f == 0 {
		f = 0 // -0 is 0
	}
	b, err := json.Marshal(f)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// Canonical returns the canonical text of the JSON value raw if it is a
// scalar, or false for an object, an array, or a number beyond the
// float64 range.
func Canonical(raw []byte) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '{', '[':
		return "", false
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false
		}
		return String(s), true
	case 't', 'f', 'n':
		return string(raw), true
	}
	return Number(string(raw))
}

// Key returns the index key of the member field with canonical value
// value: the first 63 bits of a SHA-256 of both, as a non-negative
// integer (what both databases store; search's trigram keys, TrigramKey,
// are the negative ones). Different members may share a key; readers
// check every match with Match.
func Key(field, value string) int64 {
	return key(field, value)
}

// key is Key of a name and a value as strings or byte slices: the hash
// is taken over a buffer on the stack, without allocating.
func key[F, V string | []byte](field F, value V) int64 {
	var buf [MaxFieldBytes + 1 + MaxValueBytes]byte
	b := buf[:0]
	b = append(b, field...)
	b = append(b, 0)
	b = append(b, value...)
	sum := sha256.Sum256(b)
	return int64(binary.BigEndian.Uint64(sum[:]) >> 1)
}

// clauseMembers finds in data, in one pass without decoding it, the
// value of the member each clause names (the last of its name, as
// encoding/json reads it) into raws, and whether it has one into present.
// It reports false when data is not one JSON object, which then
// satisfies no clause.
func clauseMembers(data []byte, cs []Clause, raws [][]byte, present []bool, valid bool) bool {
	each := eachMember
	if valid {
		each = eachValidMember
	}
	return each(data, func(name, raw []byte) {
		for k := range cs {
			if string(name) == cs[k].Field {
				raws[k], present[k] = raw, true
			}
		}
	})
}

// eachMember calls fn with the name (decoded as encoding/json decodes
// it) and the raw value of each top-level member of data, in order, in
// one pass without decoding the values. It reports false when data is
// not one JSON object (then fn has seen no member).
func eachMember(data []byte, fn func(name, raw []byte)) bool {
	if !json.Valid(data) {
		return false
	}
	return eachValidMember(data, fn)
}

// eachValidMember is eachMember for data known to be valid JSON (a
// page's, which the store or the encoder checked): it skips the check.
func eachValidMember(data []byte, fn func(name, raw []byte)) bool {
	_, ok := eachValidMemberAt(data, 0, fn)
	return ok
}

// eachValidMemberAt is eachValidMember for the object that begins at
// data[at] (past any space), in data known to be valid JSON: it returns
// the index just past the object too, or false (and no end) when the
// value there is not an object.
func eachValidMemberAt(data []byte, at int, fn func(name, raw []byte)) (int, bool) {
	i := wire.SkipSpace(data, at)
	if data[i] != '{' {
		return 0, false
	}
	for i = wire.SkipSpace(data, i+1); data[i] != '}'; {
		nameStart, nameEnd := i, wire.ValueEnd(data, i)
		name := data[nameStart+1 : nameEnd-1]
		i = wire.SkipSpace(data, wire.SkipSpace(data, nameEnd)+1) // past the colon
		end := wire.ValueEnd(data, i)
		raw := data[i:end]
		if i = wire.SkipSpace(data, end); data[i] == ',' {
			i = wire.SkipSpace(data, i+1)
		}
		if bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name) {
			// Decoded as encoding/json does (invalid UTF-8 as U+FFFD);
			// a name of valid JSON always decodes.
			var n string
			_ = json.Unmarshal(data[nameStart:nameEnd], &n)
			name = []byte(n)
		}
		fn(name, raw)
	}
	return i + 1, true
}

// matchDecoded is MatchWork through encoding/json's map of data's
// members, for more clauses than clauseMembers takes.
func matchDecoded(data []byte, cs []Clause) (bool, int) {
	m := members(data)
	if m == nil {
		return false, 0
	}
	var it norm.Iter
	var buf []byte
	normalized := 0
	for i := range cs {
		raw, present := m[cs[i].Field]
		ok, n := cs[i].matchOne(raw, present, &it, &buf)
		normalized += n
		if !ok {
			return false, normalized
		}
	}
	return true, normalized
}

// members decodes data's top-level members, the last of each name
// winning; nil when data is not one JSON object.
func members(data []byte) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil
	}
	return m
}

// Keys returns the index keys of data's top-level members that a filter
// can name: a name of at most MaxFieldBytes and a scalar value whose
// canonical text is at most MaxValueBytes. A name given twice is indexed
// by each of its values, so the index holds every value an erasure
// matches (stored.Holds) as well as the last one a filter matches. Nil
// for data that is not one JSON object. Each key appears once, in
// ascending order.
//
// Every write calls it: it reads data in one pass without decoding it,
// and allocates only the keys unless a name or a string has escapes or a
// number is not a plain integer of up to 15 digits (whose canonical text
// is itself).
func Keys(data []byte) []int64 {
	keys, ok := appendKeys(nil, data)
	if !ok {
		return nil
	}
	return sortedUnique(keys)
}

// appendKeys appends data's keys (see Keys) to dst, unsorted, and
// reports whether data is one JSON object.
func appendKeys(keys []int64, data []byte) ([]int64, bool) {
	ok := eachMember(data, func(name, raw []byte) {
		if len(name) > MaxFieldBytes {
			return
		}
		if v, ok := plainCanonical(raw); ok {
			if len(v) <= MaxValueBytes {
				keys = append(keys, key(name, v))
			}
			return
		}
		v, ok := Canonical(raw)
		if !ok || len(v) > MaxValueBytes {
			return
		}
		keys = append(keys, key(name, v))
	})
	return keys, ok
}

// plainCanonical returns the JSON value raw (valid JSON) when it is its
// own canonical text (Canonical) and that is plain to see: a string
// without escapes whose every character encoding/json writes as it is,
// a literal, or an integer of up to 15 digits without a leading zero
// (exact as a float64, which prints it alike), but for -0. It reports
// false for anything else, which Canonical decides.
func plainCanonical(raw []byte) ([]byte, bool) {
	switch c := raw[0]; {
	case c == '"':
		s := raw[1 : len(raw)-1]
		for i := 0; i < len(s); {
			b := s[i]
			if b < utf8.RuneSelf {
				if b < 0x20 || b == '\\' || b == '"' {
					return nil, false
				}
				i++
				continue
			}
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return nil, false // encoding/json escapes these
			}
			i += size
		}
		return raw, true
	case c == 't' || c == 'f' || c == 'n':
		return raw, true
	}
	digits := raw
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || digits[0] == '0' && len(digits) > 1 || string(raw) == "-0" {
		return nil, false
	}
	for _, d := range digits {
		if d < '0' || d > '9' {
			return nil, false
		}
	}
	return raw, true
}

// StringKey returns the index key of the member field with the string
// value, and whether such a member is indexed (see Keys): what an erasure
// by field and value looks up.
func StringKey(field, value string) (int64, bool) {
	v := String(value)
	if len(field) > MaxFieldBytes || len(v) > MaxValueBytes {
		return 0, false
	}
	return Key(field, v), true
}

func sortedUnique(keys []int64) []int64 {
	if len(keys) < 2 {
		return keys
	}
	slices.Sort(keys)
	out := keys[:1]
	for _, k := range keys[1:] {
		if k != out[len(out)-1] {
			out = append(out, k)
		}
	}
	return out
}

// Match reports whether data, a submission's data, satisfies every
// clause. Data that is not a JSON object satisfies none (and no clauses
// at all, any data).
func Match(data []byte, cs []Clause) bool {
	ok, _ := MatchWork(data, cs)
	return ok
}

// MatchWork is Match with the cost of its check beyond reading data: the
// bytes the clauses that compare normal forms (prefix, and ranges on
// text) passed through Unicode normalization, read and made (see
// Examined).
func MatchWork(data []byte, cs []Clause) (bool, int) {
	return matchWork(data, cs, false, -1)
}

// MatchValid is MatchWork for data known to be one valid JSON value: a
// submission's data as a page (wire.Page) holds it, which the store
// checked, or the encoder made, before the page reached its reader. It
// answers as MatchWork does, without MatchWork's check of data's syntax
// (a pass over the whole of it): on bytes that are not valid JSON it may
// answer anything, or panic.
func MatchValid(data []byte, cs []Clause) (bool, int) {
	return matchWork(data, cs, true, -1)
}

// MatchKeyed is MatchValid for data whose index keys hold one of
// ClauseKeys(cs) (a store checked them: wire.Page.KeysChecked), and
// keyed KeyedClause(cs): it answers as MatchValid does, without first
// looking for the values of cs[keyed] in data's bytes, a search such
// data passes (it holds one of them, but for a collision of keys) at
// the cost of a pass or more over it. The other clauses' values are
// looked for as MatchValid does; every clause is then checked exactly.
func MatchKeyed(data []byte, cs []Clause, keyed int) (bool, int) {
	return matchWork(data, cs, true, keyed)
}

// MatchKeyedAt is MatchKeyed for the data that begins at b[at] (past
// any space), b known to be valid JSON, found and checked in one pass:
// it returns the index just past data too. ok is false, having checked
// nothing, when data is not an object or the check needs data's bounds
// first (more than MaxClauses clauses, or a clause other than cs[keyed]
// whose values MatchKeyed looks for): the caller finds data's end and
// calls MatchKeyed.
func MatchKeyedAt(b []byte, at int, cs []Clause, keyed int) (keep bool, normalized, end int, ok bool) {
	if len(cs) > MaxClauses || searchable(cs, keyed) {
		return false, 0, 0, false
	}
	var raws [MaxClauses][]byte
	var present [MaxClauses]bool
	end, ok = eachValidMemberAt(b, at, func(name, raw []byte) {
		for k := range cs {
			if string(name) == cs[k].Field {
				raws[k], present[k] = raw, true
			}
		}
	})
	if !ok {
		return false, 0, 0, false
	}
	keep, normalized = matchMembers(cs, raws[:len(cs)], present[:len(cs)])
	return keep, normalized, end, true
}

func matchWork(data []byte, cs []Clause, valid bool, keyed int) (bool, int) {
	if len(cs) == 0 {
		return true, 0
	}
	// A string value without escapes appears in data as it is, when data
	// has no escapes either: an equality whose string is not in data, or
	// an in none of whose strings is, fails without decoding it (most
	// entries of a walk that a later clause refuses, and those an in
	// refuses). Not for the clause whose keys data is known to hold.
	if searchable(cs, keyed) && bytes.IndexByte(data, '\\') < 0 && utf8.Valid(data) {
		for i := range cs {
			if i != keyed && absent(data, &cs[i]) {
				return false, 0
			}
		}
	}
	var raws [MaxClauses][]byte
	var present [MaxClauses]bool
	if len(cs) > MaxClauses {
		return matchDecoded(data, cs)
	}
	if !clauseMembers(data, cs, raws[:len(cs)], present[:len(cs)], valid) {
		return false, 0
	}
	return matchMembers(cs, raws[:len(cs)], present[:len(cs)])
}

// MatchFound is MatchValid for the members of data its caller found
// itself, in valid JSON (wire.ScanObjectLocating): raws[i] the value of
// the last member of data named cs[i].Field, present[i] whether data has
// one, data itself an object. It answers as MatchValid does on that
// data, every clause checked exactly, without a pass over data.
func MatchFound(cs []Clause, raws [][]byte, present []bool) (bool, int) {
	return matchMembers(cs, raws, present)
}

// matchMembers checks each clause of cs against its member's raw value
// (raws[i], present[i] false for none), as MatchWork does.
func matchMembers(cs []Clause, raws [][]byte, present []bool) (bool, int) {
	// The normalizer's iterator is large: made only for clauses that
	// normalize (prefix, a range on text).
	var it *norm.Iter
	var buf []byte
	normalized := 0
	for i := range cs {
		if it == nil && cs[i].normalizes() {
			it = new(norm.Iter)
		}
		ok, n := cs[i].matchOne(raws[i], present[i], it, &buf)
		normalized += n
		if !ok {
			return false, normalized
		}
	}
	return true, normalized
}

// absent reports whether c, an equality or an in, can keep no
// submission with data, which holds no backslash and is valid UTF-8,
// since none of its values appears in data's bytes: each value is a
// string without escapes (which then appears in such data as it is) and
// is not there. It reports false for any other clause, and for an
// equality or in with a value of another kind.
func absent(data []byte, c *Clause) bool {
	switch c.Op {
	case OpEq:
		return plainString(c.Value) && !containsString(data, []byte(c.Value))
	case OpIn:
		for _, v := range c.Values {
			if !plainString(v) || containsString(data, []byte(v)) {
				return false
			}
		}
		return len(c.Values) > 0
	}
	return false
}

// PlainValues returns values (canonical texts, as an equality's or an
// in's) as the byte strings Absent looks for, when every one of them is a
// string without escapes, or nil when one is not (or there is none).
func PlainValues(values []string) [][]byte {
	if len(values) == 0 {
		return nil
	}
	plain := make([][]byte, len(values))
	for i, v := range values {
		if !plainString(v) {
			return nil
		}
		plain[i] = []byte(v)
	}
	return plain
}

// Absent reports whether b, the bytes of a stored submission object (or
// of its data), shows without being decoded that no member of it has one
// of the values plain (PlainValues: strings without escapes): b holds
// none of them, has no backslash and is valid UTF-8. A member's string
// equal to one of them would be in such bytes as it is (as for the check
// of a clause, absent). b need not be valid JSON: true means only that no
// member of b, were it read, could hold one. It reports false for no
// values, and allocates nothing.
func Absent(b []byte, plain [][]byte) bool {
	for _, v := range plain {
		if containsString(b, v) {
			return false
		}
	}
	return len(plain) > 0 && bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b)
}

// containsString reports whether b holds v, a string's JSON text ("…",
// two bytes at least). bytes.Index looks for a needle's first byte
// first, and stops at every quote of JSON: when what follows v's opening
// quote begins with a byte other than a lower-case letter (which JSON's
// names are full of), most often rarer than a quote, it looks for that
// instead, and falls back to the whole of v after a few hits that the
// quote does not precede.
func containsString(b, v []byte) bool {
	tail := v[1:]
	if c := tail[0]; 'a' <= c && c <= 'z' {
		return bytes.Contains(b, v)
	}
	i := 0
	for range 4 {
		j := bytes.Index(b[i:], tail)
		if j < 0 {
			return false
		}
		if i+j > 0 && b[i+j-1] == '"' {
			return true
		}
		i += j + 1
	}
	// Every occurrence of tail before i was looked at: one of v begins
	// at i-1 or after.
	return bytes.Contains(b[i-1:], v)
}

// searchable reports whether a clause of cs other than cs[skip] is one
// whose values absent looks for.
func searchable(cs []Clause, skip int) bool {
	for i := range cs {
		if i != skip && (cs[i].Op == OpEq || cs[i].Op == OpIn) {
			return true
		}
	}
	return false
}

// plainString reports whether v, a canonical text, is a string without
// escapes.
func plainString(v string) bool {
	return strings.HasPrefix(v, `"`) && !strings.Contains(v, `\`)
}

// ClauseKeys returns the index keys (Key) of one clause of cs, sorted,
// each once, of which a submission's keys (Keys) must hold one for its
// data to satisfy every clause: an equality's one key, or an in's key
// of each value, whichever clause has the fewest. A submission that
// holds none of them satisfies no such clause (Keys indexes every value
// of a member that a filter can name, each of a name given twice too), so
// a store that keeps each submission's keys may skip it unread. Nil when
// no clause is an equality or an in on a member Keys indexes.
func ClauseKeys(cs []Clause) []int64 {
	keys, _ := clauseKeys(cs)
	return keys
}

// KeyedClause returns the index in cs of the clause whose keys
// ClauseKeys returns, or -1 when it returns nil.
func KeyedClause(cs []Clause) int {
	_, i := clauseKeys(cs)
	return i
}

func clauseKeys(cs []Clause) ([]int64, int) {
	var best []int64
	at := -1
	for j, c := range cs {
		var values []string
		switch c.Op {
		case OpEq:
			values = []string{c.Value}
		case OpIn:
			values = c.Values
		default:
			continue
		}
		if len(c.Field) > MaxFieldBytes || len(values) == 0 || best != nil && len(values) >= len(best) {
			continue
		}
		keys := make([]int64, 0, len(values))
		for _, v := range values {
			if len(v) > MaxValueBytes {
				keys = nil
				break
			}
			keys = append(keys, Key(c.Field, v))
		}
		if keys != nil {
			best, at = sortedUnique(keys), j
		}
	}
	return best, at
}
