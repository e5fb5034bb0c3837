package find

import (
	"encoding/json"
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

// TestSearchReadsABoundedPrefix: search finds a term only within the
// first MaxSearchValueBytes of a value (cut back to a whole character)
// and the first MaxSearchBytes of a submission's values, and its index
// keys are those of that text alone, so that the index and the check
// agree past the bounds too.
func TestSearchReadsABoundedPrefix(t *testing.T) {
	pad := func(n int) string { return strings.Repeat("x", n) }
	values := func(vs ...string) []byte {
		b, _ := json.Marshal(map[string][]string{"v": vs})
		return b
	}
	many := make([]string, MaxSearchBytes/MaxSearchValueBytes)
	for i := range many {
		many[i] = pad(MaxSearchValueBytes)
	}
	for _, c := range []struct {
		name string
		data []byte
		want bool
	}{
		{"AtTheStart", values("needle " + pad(1<<20)), true},
		{"EndsAtTheBound", values(pad(MaxSearchValueBytes-6) + "needle"), true},
		{"AcrossTheBound", values(pad(MaxSearchValueBytes-3) + "needle"), false},
		{"PastTheBound", values(pad(1<<20) + "needle"), false},
		{"AccentedAtTheBound", values(strings.Repeat("é", (MaxSearchValueBytes-6)/2) + "NEEDLE"), true},
		{"CutInsideACharacter", values(pad(MaxSearchValueBytes-1) + "é" + "needle"), false},
		{"NextValue", values(pad(1<<20), "needle"), true},
		{"ValuesWithinTheSubmission", values(append(many[:len(many)-1:len(many)-1], "needle")...), true},
		{"ValuesPastTheSubmission", values(append(many, "needle")...), false},
		// U+FDFA is 3 bytes, 33 once normalized: the normal form's
		// bound is reached after 124 of them.
		{"ExpansionBounded", values(strings.Repeat("\uFDFA", 124) + "needle"), false},
		{"ExpansionWithin", values(strings.Repeat("\uFDFA", 123) + "needle"), true},
	} {
		found, _ := Search(c.data, nil, "needle")
		if found != c.want {
			t.Errorf("%s: found %v, want %v", c.name, found, c.want)
		}
		keys := SearchKeys(c.data, nil)
		indexed := true
		for _, k := range TermKeys("needle") {
			if _, ok := slices.BinarySearch(keys, k); !ok {
				indexed = false
			}
		}
		if c.want && !indexed {
			t.Errorf("%s: found, but the index lacks a trigram of the term", c.name)
		}
	}
}

// TestSearchKeysCostBounded: the writer's trigram keys of a megabyte of
// U+FDFA (3 bytes, 18 characters once decomposed), in one value or in
// many, cost about what a megabyte of ASCII's do, in bytes normalized
// and in bytes allocated, since search reads a bounded prefix of each
// value and of the submission (RELIABILITY case 104). Before, the one
// value took 1.5 s of a writer's CPU, 7.7 times a megabyte of ASCII, and
// about 100 MB of allocations. The bound is checked as bytes, not time.
func TestSearchKeysCostBounded(t *testing.T) {
	one := func(unit string) []byte {
		return []byte(`{"v":"` + strings.Repeat(unit, (1<<20)/len(unit)) + `"}`)
	}
	many := func(unit string) []byte {
		return []byte(`{"v":["` + strings.Repeat(unit+`","`, (1<<20)/(len(unit)+3)) + `"]}`)
	}
	cost := func(data []byte) (normalized int, allocated uint64) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		SearchKeys(data, nil)
		runtime.ReadMemStats(&after)
		_, normalized = Search(data, nil, "absent term")
		return normalized, after.TotalAlloc - before.TotalAlloc
	}
	_, ascii := cost(one("qwer wertz "))
	_, asciiMany := cost(many("qwer wertz"))
	for name, data := range map[string][]byte{
		"one value of U+FDFA": one("\uFDFA"), "many values of U+FDFA": many("\uFDFA"),
		"one value of é": one("é"), "many values of é": many("é"),
	} {
		normalized, allocated := cost(data)
		if limit := 2 * MaxSearchBytes; normalized > limit {
			t.Errorf("%s: %d bytes normalized, want at most %d", name, normalized, limit)
		}
		if limit := 2 * max(ascii, asciiMany); allocated > limit {
			t.Errorf("%s: %d bytes allocated, want at most %d (twice a megabyte of ASCII's)", name, allocated, limit)
		}
	}
}

// BenchmarkSearchWork is a search's check of one candidate of each shape
// the bound on a page's work must price (find.Examined, with
// NormalizedCost): a megabyte of ASCII that holds the term's letters, 16
// values of 4 KiB of é, values of one U+FDFA (33 bytes once normalized),
// values of combining marks (nothing once normalized) and mixed text. It
// reports the nanoseconds per byte of work: NormalizedCost is chosen so
// that no shape costs much more per byte of work than reading ASCII does
// (BENCHMARKS.md, "Work per rate unit").
func BenchmarkSearchWork(b *testing.B) {
	values := func(v string, k int) []byte {
		vs := make([]string, k)
		for i := range vs {
			vs[i] = v
		}
		d, _ := json.Marshal(map[string]any{"a": "qwer wertz", "v": vs})
		return d
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"ASCII", values(strings.Repeat("qwer wertz ", 1<<20/11), 1)},
		{"Accents", values(strings.Repeat("é", 2048), 16)},
		{"FDFA", values("\uFDFA", 10000)},
		{"Marks", values("a"+strings.Repeat("\u0301", 2047), 32)},
		{"Mixed", values(strings.Repeat("Grüße aus Köln, qwer ", 200), 16)},
	} {
		b.Run(c.name, func(b *testing.B) {
			var work int64
			for b.Loop() {
				_, n := Search(c.data, nil, "qwertz")
				work = Examined(len(c.data), n)
			}
			b.ReportMetric(float64(work), "work-bytes")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(work), "ns/work-byte")
		})
	}
}
