package formsapi

// The CSV export's reading of a stored submission: one pass over the
// object's bytes, each cell written from them, without encoding/json's
// values. Decoding every row with encoding/json (json.Unmarshal of the
// submission, a json.Decoder over its data, a json.Unmarshal per text
// cell) made about 180 allocations and 8 KB of garbage a row, 14 times a
// JSON Lines line's, and most of a CSV export's CPU (BENCHMARKS.md,
// BenchmarkExport). What a cell says is unchanged: names and text are
// decoded as encoding/json decodes them (escapes, surrogate pairs,
// U+FFFD for invalid UTF-8 and lone surrogates), and nested values are
// compacted as json.Compact does; csvjson_test.go checks both against
// encoding/json.
//
// The objects are a page's (wire.Page), which the store checked to be
// valid JSON objects before they reached it; on bytes that are not, the
// scanner returns errStoredJSON or reads garbage, but never panics or
// reads outside them.

import (
	"bytes"
	"errors"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/wire"
)

// errStoredJSON is the CSV row's error for a stored submission it cannot
// read.
var errStoredJSON = errors.New("export: decode a stored submission: malformed JSON")

// errDataNotObject is the CSV row's error for a stored submission whose
// data is not a JSON object.
var errDataNotObject = errors.New("export: submission data is not a JSON object")

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isJSONSpace(b[i]) {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string that starts at
// b[i] (a quote), and whether it holds a backslash.
//
// It jumps from quote to quote (bytes.IndexByte): a quote ends the string
// unless an odd run of backslashes comes right before it, which escapes
// it.
func stringEnd(b []byte, i int) (end int, escaped, ok bool) {
	for j := i + 1; j < len(b); {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			break
		}
		q := j + k
		run := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			run++
		}
		if run%2 == 0 {
			return q + 1, bytes.IndexByte(b[i+1:q], '\\') >= 0, true
		}
		j = q + 1
	}
	return 0, false, false
}

// valueEnd returns the index just past the JSON value that starts at
// b[i].
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		end, _, ok := stringEnd(b, i)
		return end, ok
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _, ok := stringEnd(b, j)
				if !ok {
					return 0, false
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	case ',', ':', '}', ']':
		return 0, false
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && !isJSONSpace(b[j]) {
		j++
	}
	return j, true
}

// members walks the members of the JSON object b, in the order it has
// them.
type members struct {
	b       []byte
	i       int
	started bool
}

// open starts the walk; it fails when b is not an object.
func (m *members) open() bool {
	m.i = skipSpace(m.b, 0)
	if m.i >= len(m.b) || m.b[m.i] != '{' {
		return false
	}
	m.i++
	return true
}

// next returns the next member: its name as written between its quotes
// (escaped: it holds a backslash), its value's bytes, and more false
// after the last one.
func (m *members) next() (name []byte, escaped bool, value []byte, more bool, err error) {
	name, escaped, at, more, err := m.nextName()
	if !more || err != nil {
		return nil, false, nil, more, err
	}
	value, err = m.value(at)
	return name, escaped, value, err == nil, err
}

// nextName is next without the value: it returns the index at which the
// value begins, and the walk goes on past it after value, or once the
// caller sets m.i past it.
func (m *members) nextName() (name []byte, escaped bool, at int, more bool, err error) {
	b := m.b
	i := skipSpace(b, m.i)
	if i < len(b) && b[i] == '}' {
		m.i = i + 1
		return nil, false, 0, false, nil
	}
	if m.started {
		if i >= len(b) || b[i] != ',' {
			return nil, false, 0, false, errStoredJSON
		}
		i = skipSpace(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		return nil, false, 0, false, errStoredJSON
	}
	end, escaped, ok := stringEnd(b, i)
	if !ok {
		return nil, false, 0, false, errStoredJSON
	}
	name = b[i+1 : end-1]
	i = skipSpace(b, end)
	if i >= len(b) || b[i] != ':' {
		return nil, false, 0, false, errStoredJSON
	}
	m.started = true
	return name, escaped, skipSpace(b, i+1), true, nil
}

// value returns the value that begins at b[at] (nextName's) and moves
// the walk past it.
func (m *members) value(at int) ([]byte, error) {
	vend, ok := valueEnd(m.b, at)
	if !ok {
		return nil, errStoredJSON
	}
	m.i = vend
	return m.b[at:vend], nil
}

// jsonText returns the text of the JSON string whose bytes between the
// quotes are s, as encoding/json decodes it: s itself when it has no
// escape and is valid UTF-8, else its decoding appended to tmp[:0] (and
// tmp grown for the next call). ok is false for what encoding/json
// refuses.
func jsonText(s []byte, escaped bool, tmp *[]byte) (text []byte, ok bool) {
	if !escaped && utf8.Valid(s) {
		return s, true
	}
	*tmp, ok = appendUnquoted((*tmp)[:0], s)
	return *tmp, ok
}

// appendUnquoted appends the decoding of the JSON string whose bytes
// between the quotes are s, as encoding/json's unquote does it: the
// escapes decoded, a surrogate pair as its character, a lone surrogate
// and each byte of invalid UTF-8 as U+FFFD.
func appendUnquoted(b, s []byte) ([]byte, bool) {
	for r := 0; r < len(s); {
		c := s[r]
		switch {
		case c == '\\':
			r++
			if r >= len(s) {
				return b, false
			}
			switch s[r] {
			default:
				return b, false
			case '"', '\\', '/', '\'':
				b = append(b, s[r])
				r++
			case 'b', 'f', 'n', 'r', 't':
				b = append(b, "\b\f\n\r\t"[strings.IndexByte("bfnrt", s[r])])
				r++
			case 'u':
				rr := hex4(s[r+1:])
				if rr < 0 {
					return b, false
				}
				r += 5
				if utf16.IsSurrogate(rr) {
					if r+1 < len(s) && s[r] == '\\' && s[r+1] == 'u' {
						if dec := utf16.DecodeRune(rr, hex4(s[r+2:])); dec != unicode.ReplacementChar {
							r += 6
							b = utf8.AppendRune(b, dec)
							break
						}
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
			}
		case c == '"', c < ' ':
			return b, false
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			b = utf8.AppendRune(b, rr)
		}
	}
	return b, true
}

// hex4 returns the value of the four hex digits s begins with, or -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// appendCompact appends v without the white space between its tokens,
// as json.Compact does.
func appendCompact(b, v []byte) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			end, _, ok := stringEnd(v, i)
			if !ok {
				return append(b, v[i:]...)
			}
			b = append(b, v[i:end]...)
			i = end - 1
		case !isJSONSpace(c):
			b = append(b, c)
		}
	}
	return b
}

// matchParts is submissionParts (without createdAt) for a filtered
// export whose page's keys the store checked (wire.Page.KeysChecked),
// checking cs on data in the walk that finds it (find.MatchKeyedAt): one
// pass over data instead of one to find its end and another to check
// it. checked is false when find.MatchKeyedAt could not check in that
// pass (then the caller checks data with find.MatchKeyed); with data
// named more than once the check of the last counts, as its data does.
func matchParts(obj []byte, cs []find.Clause, keyed int, tmp *[]byte) (data, attachments []byte, keep bool, matched int, checked bool, err error) {
	m := members{b: obj}
	if !m.open() {
		return nil, nil, false, 0, false, errStoredJSON
	}
	for {
		name, escaped, at, more, err := m.nextName()
		if err != nil {
			return nil, nil, false, 0, false, err
		}
		if !more {
			return data, attachments, keep, matched, checked, nil
		}
		if escaped {
			var ok bool
			if name, ok = jsonText(name, true, tmp); !ok {
				return nil, nil, false, 0, false, errStoredJSON
			}
		}
		if bytes.EqualFold(name, []byte("data")) {
			var end int
			if keep, matched, end, checked = find.MatchKeyedAt(obj, at, cs, keyed); checked {
				m.i, data = end, obj[at:end]
				continue
			}
		}
		v, err := m.value(at)
		if err != nil {
			return nil, nil, false, 0, false, err
		}
		switch {
		case bytes.EqualFold(name, []byte("data")):
			data = v
		case bytes.EqualFold(name, []byte("attachments")):
			attachments = v
		}
	}
}

// matchLocated is matchParts for an object of a page that found its
// members in the pass that checked it (wire.Page.Located): loc holds
// their offsets in obj for cs's fields (wire.ScanObjectLocating), and
// the clauses are checked on those values, with no pass over obj or
// data. ok is false, having checked nothing, when the page could not
// find them (loc[0] is -1), data is not an object, or cs has more
// clauses than find.MaxClauses: the caller then finds them itself.
func matchLocated(obj []byte, loc []int, cs []find.Clause) (data, attachments []byte, keep bool, matched int, ok bool) {
	if len(cs) > find.MaxClauses || len(loc) != wire.LocatedStride(len(cs)) || loc[0] < 0 || obj[loc[0]] != '{' {
		return nil, nil, false, 0, false
	}
	data = obj[loc[0]:loc[1]]
	if loc[2] >= 0 {
		attachments = obj[loc[2]:loc[3]]
	}
	var raws [find.MaxClauses][]byte
	var present [find.MaxClauses]bool
	for k := range cs {
		if start := loc[4+2*k]; start >= 0 {
			raws[k], present[k] = obj[start:loc[5+2*k]], true
		}
	}
	keep, matched = find.MatchFound(cs, raws[:len(cs)], present[:len(cs)])
	return data, attachments, keep, matched, true
}

// submissionParts finds the members of a stored submission object obj
// that its CSV row needs: data, attachments and createdAt, matched as
// encoding/json matches a struct's fields (case-insensitively, the last
// of duplicates winning). A member that is absent is nil.
func submissionParts(obj []byte, tmp *[]byte) (data, attachments, createdAt []byte, err error) {
	m := members{b: obj}
	if !m.open() {
		return nil, nil, nil, errStoredJSON
	}
	for {
		name, escaped, v, more, err := m.next()
		if err != nil {
			return nil, nil, nil, err
		}
		if !more {
			return data, attachments, createdAt, nil
		}
		if escaped {
			var ok bool
			if name, ok = jsonText(name, true, tmp); !ok {
				return nil, nil, nil, errStoredJSON
			}
		}
		switch {
		case bytes.EqualFold(name, []byte("data")):
			data = v
		case bytes.EqualFold(name, []byte("attachments")):
			attachments = v
		case bytes.EqualFold(name, []byte("createdAt")):
			createdAt = v
		}
	}
}
