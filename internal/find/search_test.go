package find

import (
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"Zoë Ünal": "zoe unal",
		"ZOE":      "zoe",
		"Straße":   "strasse",
		"ﬁle":      "file", // compatibility ligature
		"İstanbul": "istanbul",
		"Ａｂｃ":      "abc", // full width
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseTerm(t *testing.T) {
	if got, msg := ParseTerm("ZOË"); got != "zoe" || msg != "" {
		t.Errorf("ParseTerm(ZOË) = %q, %q", got, msg)
	}
	for _, bad := range []string{"", "ab", "ë́", "\xff\xfe\xfd", string(make([]byte, 65))} {
		if _, msg := ParseTerm(bad); msg == "" {
			t.Errorf("ParseTerm(%q) accepted", bad)
		}
	}
	long := "ééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééééé" // 64 runes, 128 bytes: 64 once normalized
	if _, msg := ParseTerm(long); msg != "" {
		t.Errorf("ParseTerm of 64 accented letters: %s", msg)
	}
}

func TestTexts(t *testing.T) {
	data := []byte(`{"Name":"Zoë","n":{"deep":[1.50,"Ünal",true,null,{"k":"v"}]},"age":42}`)
	got := Texts(data, []string{"https://files.example/a/R%C3%A9sum%C3%A9.PDF?x=1", "https://files.example/"})
	want := []string{"zoe", "1.50", "unal", "v", "42", "resume.pdf"}
	if !slices.Equal(got, want) {
		t.Errorf("Texts = %q, want %q", got, want)
	}
}

func TestSearchMatch(t *testing.T) {
	data := []byte(`{"name":"Zoë Ünal","tags":["x","Größe"],"code":12345}`)
	for term, want := range map[string]bool{
		"zoe": true, "e un": true, "grosse": true, "234": true, "name": false, "zoe unal x": false, "tag": false,
	} {
		if got := SearchMatch(data, nil, term); got != want {
			t.Errorf("SearchMatch(%q) = %v, want %v", term, got, want)
		}
	}
}

// Every trigram of a term that a value contains is among the value's
// keys: the index never misses a match.
func TestTermKeysAreAmongSearchKeys(t *testing.T) {
	data := []byte(`{"name":"Zoë Ünal, 42 Rue de la Paix","more":"a much longer value with many trigrams in it"}`)
	keys := SearchKeys(data, nil)
	for _, term := range []string{"zoe", "paix", "ue de la p", "with many trigrams in it"} {
		tk := TermKeys(term)
		if len(tk) == 0 || len(tk) > MaxProbes {
			t.Errorf("TermKeys(%q): %d keys", term, len(tk))
		}
		for _, k := range tk {
			if _, ok := slices.BinarySearch(keys, k); !ok {
				t.Errorf("a trigram key of %q is not among the value's", term)
			}
			if k >= 0 {
				t.Errorf("trigram key %d is not negative", k)
			}
		}
	}
	for _, k := range Keys(data) {
		if k < 0 {
			t.Errorf("filter key %d is negative", k)
		}
	}
}

// BenchmarkIndexKeys is the writer's share of the index for a short
// submission: its filter keys and its values' trigram keys.
func BenchmarkIndexKeys(b *testing.B) {
	data := []byte(`{"name":"Zoë Ünal","email":"zoe@example.com","subject":"Question 1","message":"Hello! Could you tell me more about your pricing?","consent":true}`)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(IndexKeys(data, nil))
	}
	b.ReportMetric(float64(n), "keys")
}

// BenchmarkSearchMatch is a search's check of one candidate.
func BenchmarkSearchMatch(b *testing.B) {
	data := []byte(`{"name":"Zoë Ünal","email":"zoe@example.com","subject":"Question 1","message":"Hello! Could you tell me more about your pricing?","consent":true}`)
	b.ReportAllocs()
	for b.Loop() {
		SearchMatch(data, nil, "pricing")
	}
}

// TestNormalizeBySegments: Normalize, which decomposes a segment at a
// time, gives what decomposing the whole string at once gives.
func TestNormalizeBySegments(t *testing.T) {
	whole := func(s string) string {
		var b []rune
		for _, r := range norm.NFKD.String(strings.ToValidUTF8(s, "\uFFFD")) {
			switch {
			case unicode.Is(unicode.Mn, r):
			case r == 'ß' || r == 'ẞ':
				b = append(b, 's', 's')
			case r == 'ς':
				b = append(b, 'σ')
			default:
				b = append(b, unicode.ToLower(r))
			}
		}
		return string(b)
	}
	for _, s := range []string{
		"Zoe\u0308 Ünal", "e" + strings.Repeat("\u0301", 40) + "x", "\uFDFA\uFDFA ﬃ", "İSTANBUL ıstanbul", "ẞtraße ΣΟΦΟΣ",
		"ǅemal Ω Å", "ＡＢＣ👍🏽\u200d👩", "\xffa\xfe\xfdb", "한국어 ㄱㄴ", "\u0301abc", "a\x00b",
	} {
		if got, want := Normalize(s), whole(s); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestParseTermLongBoundedWork: a long q is refused after reading about
// MaxTermBytes of its normal form. Before, ParseTerm decomposed all of
// it first: a megabyte of U+FDFA (18 runes each once decomposed) took a
// second of CPU and allocated about 40 MB to answer 400. The bound is
// checked as the bytes allocated, not as time.
func TestParseTermLongBoundedWork(t *testing.T) {
	for _, long := range []string{strings.Repeat("\uFDFA", 1<<18), strings.Repeat("e\u0301", 1<<18), strings.Repeat("A", 1<<20)} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, msg := ParseTerm(long)
		runtime.ReadMemStats(&after)
		if msg == "" {
			t.Fatalf("ParseTerm of %d bytes accepted", len(long))
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
			t.Errorf("ParseTerm of %d bytes (%q...) allocated %d bytes, want at most 64 KiB", len(long), long[:6], n)
		}
	}
}
