package wire

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// ScanObject reports whether data is exactly one JSON object, optionally
// surrounded by white space, accepting what json.Valid accepts; and
// whether all of data is valid UTF-8. One pass does both, several times
// faster than json.Valid followed by utf8.Valid: every stored object is
// checked before it is sent, since storage is not trusted.
func ScanObject(data []byte) (valid, utf8OK bool) {
	s := scanner{b: data, utf8OK: true, maxDepth: MaxDepth}
	return s.object(), s.utf8OK
}

// MaxDepth is encoding/json's nesting limit, which ScanObject keeps too.
const MaxDepth = 10000

// The deepest a stored object may nest for the response that carries it
// to stay within MaxDepth: a response adds two levels around a submission
// object (the response object and its submissions array), three around a
// submission's data.
const (
	MaxSubmissionDepth = MaxDepth - 2
	MaxDataDepth       = MaxDepth - 3
)

// ScanObjectWithin is ScanObject with a nesting bound of maxDepth levels
// (the object itself is level 1); tooDeep says that the bound is why data
// was refused.
func ScanObjectWithin(data []byte, maxDepth int) (valid, utf8OK, tooDeep bool) {
	s := scanner{b: data, utf8OK: true, maxDepth: min(maxDepth, MaxDepth)}
	valid = s.object()
	return valid, s.utf8OK, s.problem == TooDeep
}

// ScanObjectLocating is ScanObjectWithin that also finds, in the same
// pass, where the values of a stored submission's members are: in at
// (LocatedStride(len(fields)) entries), the start and end offsets in data
// of the value of the member named "data" (at[0], at[1]), of
// "attachments" (at[2], at[3]), and, in data's value, of the member
// named fields[k] (at[4+2k], at[5+2k]); each the last of its name, as
// encoding/json reads an object, and -1, -1 for none. A member of data
// is found only when data's value is an object, and only its own
// members (not those of objects within it).
//
// It reads names as their bytes, with none decoded: when a name could
// mean one of those without being exactly its bytes (a name with an
// escape or a byte outside ASCII, among the object's members or data's,
// or a case of "data" or "attachments" other than theirs, which
// encoding/json matches), or data holds invalid UTF-8, the offsets
// would not be the ones a decoding reader finds: at[0] is then -1, and
// the caller finds the members itself. When valid is false, at means
// nothing.
func ScanObjectLocating(data []byte, maxDepth int, fields []string, at []int) (valid, utf8OK, tooDeep bool) {
	for i := range at {
		at[i] = -1
	}
	l := locator{fields: fields, at: at, sure: true}
	s := scanner{b: data, utf8OK: true, maxDepth: min(maxDepth, MaxDepth), loc: &l}
	valid = s.object()
	if !l.sure || !s.utf8OK {
		at[0], at[1] = -1, -1
	}
	return valid, s.utf8OK, s.problem == TooDeep
}

// LocatedStride is how many offsets ScanObjectLocating writes for n
// fields.
func LocatedStride(n int) int { return 4 + 2*n }

// locator is what ScanObjectLocating looks for, and where it found it.
type locator struct {
	fields []string
	at     []int
	sure   bool // no name seen that could mean a member looked for without being its bytes
	inData bool // the scan is in data's value
}

// locatingObject is container('}') for the submission object and the
// objects that are values of its members, for ScanObjectLocating: each
// member's value is scanned by member, which notes where it is.
func (s *scanner) locatingObject() bool {
	if s.depth++; s.depth > s.maxDepth {
		return s.fail(TooDeep)
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		s.ws()
		at := s.i
		if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
			return false
		}
		name := s.b[at+1 : s.i-1] // between the quotes
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		if !s.member(name) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// member scans the value of the member name (between its quotes, as
// written) of an object at depth 1 (the submission) or 2 (within one of
// its members), noting where the members the locator looks for are.
func (s *scanner) member(name []byte) bool {
	l := s.loc
	s.ws()
	start := s.i
	switch {
	case s.depth == 1:
		switch string(name) {
		case "data":
			// A later data is the one read: the members found in an
			// earlier one are not its.
			for k := 4; k < len(l.at); k++ {
				l.at[k] = -1
			}
			l.inData = true
			ok := s.value()
			l.inData = false
			l.at[0], l.at[1] = start, s.i
			return ok
		case "attachments":
			ok := s.value()
			l.at[2], l.at[3] = start, s.i
			return ok
		}
		if !asciiName(name) || asciiEqualFold(name, "data") || asciiEqualFold(name, "attachments") {
			l.sure = false
		}
	case l.inData: // a member of data's object
		if !asciiName(name) && (bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name)) {
			l.sure = false // a name a decoding reader decodes
			break
		}
		ok := s.value()
		for k, f := range l.fields {
			if string(name) == f {
				l.at[4+2*k], l.at[5+2*k] = start, s.i
			}
		}
		return ok
	}
	return s.value()
}

// asciiName reports whether name, a JSON string's bytes between its
// quotes, is plain ASCII without an escape: its own decoding.
func asciiName(name []byte) bool {
	for _, c := range name {
		if c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}

// asciiEqualFold reports whether name (ASCII) equals word (lower-case
// ASCII) but for the case of its letters.
func asciiEqualFold(name []byte, word string) bool {
	if len(name) != len(word) {
		return false
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != word[i] {
			return false
		}
	}
	return true
}

// Problem is why CheckObject refused an object.
type Problem int

// The problems CheckObject finds; OK is none.
const (
	OK               Problem = iota
	Malformed                // not exactly one JSON object
	BadUTF8                  // invalid UTF-8 inside a string
	TooDeep                  // nested deeper than the bound
	NumberTooLong            // a number longer than the bound
	NumberOutOfRange         // a number beyond the range of a 64-bit float
	LoneSurrogate            // a \u escape of half a UTF-16 surrogate pair
)

// CheckObject is the write side's stricter ScanObject, in the same one
// pass: data must be exactly one JSON object in valid UTF-8, nested at
// most maxDepth levels (the object itself is level 1), with no number
// longer than maxNumberLen characters or outside the range of a 64-bit
// float (which encoding/json refuses to decode into a float64), and no
// \u escape of an unpaired UTF-16 surrogate (which I-JSON, RFC 7493,
// forbids and some parsers refuse). Bounds of zero or less mean none
// beyond MaxDepth.
func CheckObject(data []byte, maxDepth, maxNumberLen int) Problem {
	if maxDepth <= 0 || maxDepth > MaxDepth {
		maxDepth = MaxDepth
	}
	s := scanner{b: data, utf8OK: true, strict: true, maxDepth: maxDepth, maxNumberLen: maxNumberLen}
	if !s.object() {
		return s.problem
	}
	if !s.utf8OK {
		return BadUTF8
	}
	return OK
}

type scanner struct {
	b        []byte
	i        int
	depth    int
	utf8OK   bool
	maxDepth int

	// Only CheckObject sets these: the read side accepts what
	// encoding/json accepts, the write side promises more.
	strict       bool
	maxNumberLen int
	problem      Problem // why the scan failed, when strict

	// Only ScanObjectLocating sets loc: where the members it looks for
	// are, found in the same pass.
	loc *locator
}

// object scans all of s.b as one object.
func (s *scanner) object() bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' || !s.value() {
		return s.fail(Malformed)
	}
	s.ws()
	return s.i == len(s.b) || s.fail(Malformed)
}

// fail records p as the reason for a failed scan, unless a more precise
// reason was recorded first, and returns false.
func (s *scanner) fail(p Problem) bool {
	if s.problem == OK {
		s.problem = p
	}
	return false
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) value() bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		if s.loc != nil && s.depth < 2 {
			return s.locatingObject()
		}
		return s.container('}')
	case c == '[':
		return s.container(']')
	case c == '"':
		return s.str()
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	return false
}

// container scans an object (end '}') or array (end ']') at s.i.
func (s *scanner) container(end byte) bool {
	if s.depth++; s.depth > s.maxDepth {
		return s.fail(TooDeep)
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == end {
		s.i++
		s.depth--
		return true
	}
	for {
		if end == '}' {
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
				return false
			}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return false
			}
			s.i++
		}
		if !s.value() {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case end:
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// Plain marks the bytes a JSON string holds as they are: printable ASCII
// other than '"' and '\\'. Both the scanner and the encoder skip runs of
// them with one table lookup per byte.
var Plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (s *scanner) str() bool {
	s.i++ // opening quote
	for s.i < len(s.b) {
		for s.i < len(s.b) && Plain[s.b[s.i]] {
			s.i++
		}
		if s.i >= len(s.b) {
			return false
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false
				}
				r, ok := hex4(s.b[s.i+2 : s.i+6])
				if !ok {
					return false
				}
				s.i += 6
				if s.strict && 0xD800 <= r && r <= 0xDFFF && !s.lowSurrogateAfter(r) {
					return s.fail(LoneSurrogate)
				}
			default:
				return false
			}
		case c < 0x20:
			return false
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			if r == utf8.RuneError && size == 1 {
				s.utf8OK = false
			}
			s.i += size
		}
	}
	return false
}

// hex4 decodes the four hex digits of a \u escape.
func hex4(h []byte) (rune, bool) {
	var r rune
	for _, c := range h {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// lowSurrogateAfter reports whether r, a surrogate just read, is a high
// one followed by a \u escape of a low one, which it then consumes.
func (s *scanner) lowSurrogateAfter(r rune) bool {
	if r >= 0xDC00 || s.i+6 > len(s.b) || s.b[s.i] != '\\' || s.b[s.i+1] != 'u' {
		return false
	}
	lo, ok := hex4(s.b[s.i+2 : s.i+6])
	if !ok || lo < 0xDC00 || lo > 0xDFFF {
		return false
	}
	s.i += 6
	return true
}

func (s *scanner) lit(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

func (s *scanner) number() bool {
	start := s.i
	if !s.numberSyntax() {
		return false
	}
	if !s.strict {
		return true
	}
	if s.maxNumberLen > 0 && s.i-start > s.maxNumberLen {
		return s.fail(NumberTooLong)
	}
	// Out of range is what ParseFloat reports as ErrRange: beyond the
	// largest float64, never a mere underflow to zero.
	if _, err := strconv.ParseFloat(string(s.b[start:s.i]), 64); err != nil {
		return s.fail(NumberOutOfRange)
	}
	return true
}

func (s *scanner) numberSyntax() bool {
	if s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if !s.digits() {
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}
