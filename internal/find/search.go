package find

// Search (q=<term>): a submission matches when one of its values contains
// the term, compared in a normal form that ignores case and accents. Its
// values are every string value of its data at any depth (not member
// names), the text of every number as data writes it, and the file name
// of every attachment (FileName). Each value is normalized (Normalize)
// and compared on its own: a term never matches across two values.
//
// Search reads a bounded prefix of each value and of a submission
// (MaxSearchValueBytes, MaxSearchBytes; RELIABILITY case 104): a term is
// found only there, by every store alike, the index's entries and the
// check of each candidate reading the same text (Texts). Normalization
// may expand its input (U+FDFA's 3 bytes are 33 once decomposed), so the
// bound is on the normal form as well as on what is read: a megabyte of
// any text costs a writer and a check the same few kilobytes.
//
// The database stores index every value's trigrams (three consecutive
// runes of its normal form) in the same index as filters, under keys of
// their own kind (TrigramKey: negative, where Key is never), so a search
// walks the entries of its rarest trigram and checks each candidate with
// SearchMatch, since trigrams alone say only that a value may contain it.

import (
	"encoding/json"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The limits of a search term, counted on its normal form. The handler
// answers 400 naming q for a term past one.
const (
	// MinTermRunes is the fewest characters of a term: one trigram.
	MinTermRunes = 3
	// MaxTermBytes bounds the bytes of a term.
	MaxTermBytes = 64
	// MaxProbes bounds the trigrams of a term whose entries a search
	// counts to find its rarest.
	MaxProbes = 16
)

// The bounds of what search reads of a submission (RELIABILITY case
// 104): the text its index holds and its check compares.
const (
	// MaxSearchValueBytes bounds what search reads of one value: its
	// first 4 KiB, cut back to a whole character, and of their normal
	// form the first 4 KiB, cut the same way. A term that a value holds
	// only past that is not found in it.
	MaxSearchValueBytes = 4 << 10
	// MaxSearchBytes bounds what search reads of one submission's values
	// together, in their order (data's as written, then the files'
	// names): 64 KiB of them and 64 KiB of their normal forms, the value
	// that reaches either bound cut there (and none read once fewer than
	// utf8.UTFMax bytes of either are left). Values past it are not
	// found.
	MaxSearchBytes = 64 << 10
)

// Normalize returns the normal form of s that search compares: its
// compatibility decomposition (NFKD) without combining marks (Unicode
// category Mn), in lower case (with ß as "ss" and a final sigma as σ, as
// full case folding has them). "Zoë", "ZOE" and "zoe" are all "zoe";
// "Straße" is "strasse"; invalid UTF-8 is U+FFFD.
func Normalize(s string) string {
	t, _ := normalize(s, -1)
	return t
}

// normalize is Normalize, which gives up, returning false, as soon as
// the normal form passes max bytes (max < 0: never). It decomposes a
// segment at a time, so that a long input costs no more than the bytes
// before max: a rune may decompose into 18 (U+FDFA), and a megabyte of
// them in q took a second of CPU and tens of megabytes to be refused.
func normalize(s string, max int) (string, bool) {
	if isASCII(s) {
		if max >= 0 && len(s) > max {
			return "", false
		}
		return lowerASCII(s), true
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	var it norm.Iter
	it.InitString(norm.NFKD, s)
	b := make([]byte, 0, min(len(s), 256))
	for !it.Done() {
		b = appendNormal(b, it.Next())
		if max >= 0 && len(b) > max {
			return "", false
		}
	}
	return string(b), true
}

// appendNormal appends to b the segment seg of an NFKD decomposition
// without its combining marks, in lower case (see Normalize).
func appendNormal(b, seg []byte) []byte {
	for _, r := range string(seg) {
		switch {
		case r < utf8.RuneSelf:
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			b = append(b, byte(r))
		case unicode.Is(unicode.Mn, r):
		case r == 'ß' || r == 'ẞ':
			b = append(b, "ss"...)
		case r == 'ς':
			b = utf8.AppendRune(b, 'σ')
		default:
			b = utf8.AppendRune(b, unicode.ToLower(r))
		}
	}
	return b
}

// prefix returns the normal form of s's first maxIn bytes (cut back to a
// whole character), itself cut to its first maxOut bytes (the same way),
// the bytes of s it read, and whether it took Unicode's path (s is not
// ASCII), which costs some 30 times what ASCII's does per byte. it and
// buf are the iterator and the scratch space to use (one each per
// submission: the iterator is large, and a value's normal form grows
// from a few bytes).
func prefix(it *norm.Iter, buf *[]byte, s string, maxIn, maxOut int) (t string, read int, unicodePath bool) {
	s = cut(s, maxIn)
	if isASCII(s) {
		n := min(len(s), maxOut)
		return lowerASCII(s[:n]), n, false
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	it.InitString(norm.NFKD, s)
	b := (*buf)[:0]
	for !it.Done() && len(b) < maxOut {
		b = appendNormal(b, it.Next())
	}
	*buf = b
	return cut(string(b), maxOut), it.Pos(), true
}

// cut returns s's first max bytes, cut back to the start of a character
// (by at most utf8.UTFMax-1 bytes: not within invalid UTF-8).
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for j := 1; j < utf8.UTFMax && i > 0 && !utf8.RuneStart(s[i]); j++ {
		i--
	}
	if !utf8.RuneStart(s[i]) {
		i = max
	}
	return s[:i]
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// lowerASCII is strings.ToLower for ASCII s, without a copy when s has
// no upper case.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// ParseTerm reads the value of q: it returns the term's normal form, or
// what is wrong with the value.
func ParseTerm(v string) (string, string) {
	if !utf8.ValidString(v) {
		return "", "is not valid UTF-8"
	}
	t, ok := normalize(v, MaxTermBytes)
	if !ok {
		return "", "is longer than " + strconv.Itoa(MaxTermBytes) + " bytes once case and accents are set aside (the search term length limit)"
	}
	if utf8.RuneCountInString(t) < MinTermRunes {
		return "", "is shorter than " + strconv.Itoa(MinTermRunes) + " characters once case and accents are set aside (the search term length limit)"
	}
	return t, ""
}

// FileName returns the file name of an attachment at fileURL: the last
// segment of its path, unescaped ("" when it has none).
func FileName(fileURL string) string {
	u, err := url.Parse(fileURL)
	p := fileURL
	if err == nil {
		p = u.Path
	}
	name := path.Base(p)
	if name == "." || name == "/" {
		return ""
	}
	return name
}

// Texts returns the values of a submission that search compares, each
// normalized: the string values of data at any depth, the text of its
// numbers, and the files' names (FileName of each attachment's URL), as
// far as search reads them (MaxSearchValueBytes, MaxSearchBytes). Data
// that is not JSON gives what a scan of its strings and numbers finds.
func Texts(data []byte, files []string) []string {
	var out []string
	texts(data, files, func(t string) bool {
		out = append(out, t)
		return true
	})
	return out
}

// texts calls fn with the normal form of each value of a submission that
// search reads (see Texts), in order, until fn returns false or the
// bounds are reached, and returns the bytes that took Unicode's path
// (prefix), read and made: the cost of the check beyond reading data.
func texts(data []byte, files []string, fn func(string) bool) (normalized int) {
	in, out := MaxSearchBytes, MaxSearchBytes
	var it norm.Iter
	var buf []byte
	eachValue(data, files, func(v string) bool {
		t, read, slow := prefix(&it, &buf, v, min(MaxSearchValueBytes, in), min(MaxSearchValueBytes, out))
		in, out = in-read, out-len(t)
		if slow {
			normalized += read + len(t)
		}
		// Past the last few bytes of either bound no character may fit.
		return fn(t) && in >= utf8.UTFMax && out >= utf8.UTFMax
	})
	return normalized
}

// eachValue calls fn with each value of a submission, not normalized (see
// Texts), until fn returns false. A string without escapes is given as
// far as search may read it (MaxSearchValueBytes, and a character more),
// not copied whole.
func eachValue(data []byte, files []string, fn func(string) bool) {
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			j, escaped := i+1, false
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					escaped = true
					j++
				}
				j++
			}
			if j >= len(data) {
				return // not JSON
			}
			raw := data[i : j+1]
			i = j + 1
			k := i
			for k < len(data) && (data[k] == ' ' || data[k] == '\t' || data[k] == '\n' || data[k] == '\r') {
				k++
			}
			if k < len(data) && data[k] == ':' {
				continue // a member name
			}
			v := string(raw[1 : 1+min(len(raw)-2, MaxSearchValueBytes+utf8.UTFMax)])
			if escaped {
				if err := json.Unmarshal(raw, &v); err != nil {
					continue
				}
			}
			if !fn(v) {
				return
			}
		case c == '-' || '0' <= c && c <= '9':
			j := i + 1
			for j < len(data) && (data[j] >= '0' && data[j] <= '9' || data[j] == '.' || data[j] == 'e' || data[j] == 'E' || data[j] == '+' || data[j] == '-') {
				j++
			}
			if !fn(string(data[i:j])) {
				return
			}
			i = j
		default:
			i++
		}
	}
	for _, f := range files {
		if n := FileName(f); n != "" && !fn(n) {
			return
		}
	}
}

// SearchMatch reports whether a submission with data and attachments at
// the URLs files contains the normalized term (ParseTerm) in one of its
// values (Texts). The empty term matches everything.
func SearchMatch(data []byte, files []string, term string) bool {
	found, _ := Search(data, files, term)
	return found
}

// Search is SearchMatch with the cost of its check: the bytes it passed
// through Unicode normalization, read and made (see Examined).
func Search(data []byte, files []string, term string) (found bool, normalized int) {
	if term == "" {
		return true, 0
	}
	// Data of ASCII only, without escapes, holds every value as it is:
	// a term it does not hold in any case is in none of them (most
	// candidates of a walk through a common trigram).
	if len(files) == 0 && isASCIIText(data) && !containsLowerASCII(data, term) {
		return false, 0
	}
	normalized = texts(data, files, func(t string) bool {
		found = strings.Contains(t, term)
		return !found
	})
	return found, normalized
}

// isASCIIText reports whether b is ASCII without a backslash.
func isASCIIText(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}

// containsLowerASCII reports whether b, lower-cased, contains term.
func containsLowerASCII(b []byte, term string) bool {
	if len(term) == 0 {
		return true
	}
	t0 := term[0]
	for i := 0; i+len(term) <= len(b); i++ {
		if lowerByte(b[i]) != t0 {
			continue
		}
		j := 1
		for j < len(term) && lowerByte(b[i+j]) == term[j] {
			j++
		}
		if j == len(term) {
			return true
		}
	}
	return false
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// TrigramKey returns the index key of the trigram of runes a, b, c: the
// three code points themselves (21 bits each) with the sign bit set, so
// that a trigram key is negative and never equals a Key, which is not,
// nor another trigram's.
func TrigramKey(a, b, c rune) int64 {
	return int64(1<<63 | uint64(a)<<42 | uint64(b)<<21 | uint64(c))
}

// trigrams appends the keys of the trigrams of s to keys.
func trigrams(keys []int64, s string) []int64 {
	var r [3]rune
	n := 0
	for _, c := range s {
		r[0], r[1], r[2] = r[1], r[2], c
		if n++; n >= 3 {
			keys = append(keys, TrigramKey(r[0], r[1], r[2]))
		}
	}
	return keys
}

// SearchKeys returns the index keys of the trigrams of a submission's
// values as search reads them (Texts), each once, ascending.
func SearchKeys(data []byte, files []string) []int64 {
	return sortedUnique(appendTrigrams(make([]int64, 0, keysHint(data, files)), data, files))
}

// appendTrigrams appends to keys the keys of the trigrams of a
// submission's values as search reads them (Texts), unsorted.
func appendTrigrams(keys []int64, data []byte, files []string) []int64 {
	texts(data, files, func(t string) bool {
		keys = trigrams(keys, t)
		return true
	})
	return keys
}

// keysHint is the room to make for a submission's index keys: a key a
// byte of data and of a file's URL (a value of ASCII has a trigram a
// byte but two), so that a short submission's keys are one allocation;
// a long one's grow from 1,024 as they did from none.
func keysHint(data []byte, files []string) int {
	n := len(data)
	for _, f := range files {
		n += len(f)
	}
	return min(n, 1024) + 8
}

// IndexKeys returns every index key of a submission: its filter keys
// (Keys) and its trigram keys (SearchKeys), each once, ascending.
func IndexKeys(data []byte, files []string) []int64 {
	keys, ok := appendKeys(make([]int64, 0, keysHint(data, files)), data)
	if !ok {
		keys = keys[:0] // no filter keys (Keys)
	}
	return sortedUnique(appendTrigrams(keys, data, files))
}

// TermKeys returns the keys of the trigrams of the normalized term that a
// search probes: each distinct one, or MaxProbes of them spread along the
// term when it has more.
func TermKeys(term string) []int64 {
	var keys []int64
	for _, k := range trigrams(nil, term) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	if len(keys) <= MaxProbes {
		return keys
	}
	picked := make([]int64, MaxProbes)
	for i := range picked {
		picked[i] = keys[i*(len(keys)-1)/(MaxProbes-1)]
	}
	return picked
}
