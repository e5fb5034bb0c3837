package wire

import "unicode/utf8"

// ScanObject reports whether data is exactly one JSON object, optionally
// surrounded by white space, accepting what json.Valid accepts; and
// whether all of data is valid UTF-8. One pass does both, several times
// faster than json.Valid followed by utf8.Valid: every stored object is
// checked before it is sent, since storage is not trusted.
func ScanObject(data []byte) (valid, utf8OK bool) {
	s := scanner{b: data, utf8OK: true}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' || !s.value() {
		return false, false
	}
	s.ws()
	return s.i == len(s.b), s.utf8OK
}

// maxDepth matches encoding/json's nesting limit.
const maxDepth = 10000

type scanner struct {
	b      []byte
	i      int
	depth  int
	utf8OK bool
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
	if s.depth++; s.depth > maxDepth {
		return false
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
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				s.i += 6
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
