package find

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseValue(t *testing.T) {
	for in, want := range map[string]string{
		`42`:             `42`,
		`42.0`:           `42`,
		`4.2e1`:          `42`,
		`-0`:             `0`,
		`1e21`:           `1e+21`,
		`0.1`:            `0.1`,
		`true`:           `true`,
		`null`:           `null`,
		`"42"`:           `"42"`,
		`"a\"b"`:         `"a\"b"`,
		`"Zo\u00eb"`:     `"Zoë"`,
		`Zoë`:            `"Zoë"`,
		`a<b>&c`:         `"a<b>&c"`,
		`42abc`:          `"42abc"`, // not a JSON number: bare text
		`True`:           `"True"`,
		`-`:              `"-"`,
		`01`:             `"01"`, // JSON has no leading zeros
		`"\ud83d\ude00"`: `"😀"`,
		`"\\ud800"`:      `"\\ud800"`, // an escaped backslash, then text
		`"\u00e9\\"`:     `"é\\"`,
	} {
		got, msg := ParseValue(in)
		if msg != "" || got != want {
			t.Errorf("ParseValue(%q) = %q, %q; want %q", in, got, msg, want)
		}
	}
	for _, in := range []string{"", `"open`, `"a"b"`, "1e999", "\xff", strings.Repeat("v", MaxValueBytes-1),
		`"\ud800"`, `"\udc00"`, `"a\ud83dz"`, `"\ud83d\u0041"`, `"\ude00\ud83d"`, `"\\\ud800"`} {
		if got, msg := ParseValue(in); msg == "" {
			t.Errorf("ParseValue(%q) = %q, want a refusal", in, got)
		}
	}
	if _, msg := ParseValue(strings.Repeat("v", MaxValueBytes-2)); msg != "" {
		t.Errorf("a value of the limit's length: %s", msg)
	}
}

func TestMatchAndKeysAgree(t *testing.T) {
	data := []byte(`{"a":42.0,"b":"x","b":"y","c":{"d":1},"e":[1],"f":null,"g":true,"` + strings.Repeat("k", MaxFieldBytes+1) + `":1,"h":"` + strings.Repeat("v", MaxValueBytes) + `"}`)
	keys := Keys(data)
	if !slices.IsSorted(keys) {
		t.Errorf("keys not sorted: %v", keys)
	}
	for _, c := range []struct {
		field, value string
		match        bool
	}{
		{"a", "42", true}, {"a", `"42"`, false}, {"b", `"y"`, true}, {"b", `"x"`, false},
		{"c", `{"d":1}`, false}, {"e", "[1]", false}, {"f", "null", true}, {"g", "true", true}, {"g", `"true"`, false},
	} {
		cs := []Clause{{Field: c.field, Value: c.value}}
		if Match(data, cs) != c.match {
			t.Errorf("Match %s=%s: %t, want %t", c.field, c.value, !c.match, c.match)
		}
		_, indexed := slices.BinarySearch(keys, Key(c.field, c.value))
		if c.match && !indexed {
			t.Errorf("%s=%s matches but is not indexed", c.field, c.value)
		}
	}
	if _, ok := slices.BinarySearch(keys, Key("b", `"x"`)); !ok {
		t.Error("the first value of a name given twice is not indexed (an erasure matches it)")
	}
	if len(keys) != 5 { // a, b twice, f, g; not c, e, the long name, the long value
		t.Errorf("%d keys, want 4", len(keys))
	}
	if Match([]byte(`[1]`), []Clause{{Field: "a", Value: "1"}}) || Keys([]byte(`"x"`)) != nil {
		t.Error("data that is not an object matches or has keys")
	}
}

// TestMatchShortcutAgrees: the shortcut that refuses a string absent from
// data gives what decoding gives, for escapes, invalid UTF-8 and U+2028.
func TestMatchShortcutAgrees(t *testing.T) {
	for _, c := range []struct {
		data, value string
		match       bool
	}{
		{`{"a":"x\u00e9"}`, `"xé"`, true},
		{"{\"a\":\"x\xffy\"}", String("x\uFFFDy"), true},
		{"{\"a\":\"x\u2028\"}", String("x\u2028"), true},
		{`{"a":"x/y"}`, `"x/y"`, true},
		{`{"a":"xy","b":"q"}`, `"q"`, false},
		{`{"b":"xy"}`, `"xy"`, false},
	} {
		if got := Match([]byte(c.data), []Clause{{Field: "a", Value: c.value}}); got != c.match {
			t.Errorf("Match(%q, a=%s) = %t, want %t", c.data, c.value, got, c.match)
		}
	}
}

// keysReference is Keys as it was written first, through encoding/json's
// decoder and Canonical, for data that is valid JSON (stored.Holds and
// Match find nothing in any other): Keys must give the same keys for
// every input.
func keysReference(data []byte) []int64 {
	if !json.Valid(data) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []int64
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil
		}
		name, _ := t.(string)
		if len(name) > MaxFieldBytes {
			continue
		}
		v, ok := Canonical(raw)
		if !ok || len(v) > MaxValueBytes {
			continue
		}
		h := sha256.Sum256([]byte(name + "\x00" + v))
		keys = append(keys, int64(binary.BigEndian.Uint64(h[:])>>1))
	}
	return sortedUnique(keys)
}

var keysCases = []string{
	`{"a":1,"b":"x","c":true,"d":null,"e":false}`,
	` { "a" : 1 , "b" : [1, {"x":"}"}], "c" : {"d":"]"} } `,
	`{"n":-0,"m":0,"o":-12,"p":012,"q":1.0,"r":1e2,"s":123456789012345,"t":1234567890123456,"u":-123456789012345}`,
	`{"a":"\u00e9","b":"é","c":"\"q\"","d":"a\\b","e":"\u2028","f":"` + "\u2028" + `","g":"<&>","h":"\u0001"}`,
	`{"caf\u00e9":1,"café":1,"a\"b":2,"` + "\xff" + `":3,"v":"` + "\xff\xfe" + `","w":"` + "\uFFFD" + `"}`,
	`{"dup":1,"dup":2,"dup":1}`,
	`{"` + strings.Repeat("k", MaxFieldBytes) + `":1,"` + strings.Repeat("k", MaxFieldBytes+1) + `":1}`,
	`{"long":"` + strings.Repeat("v", MaxValueBytes-2) + `","longer":"` + strings.Repeat("v", MaxValueBytes-1) + `"}`,
	`{"big":1e400,"neg":-1e400,"x":"\ud83d\ude00","lone":"\ud83d"}`,
	`{}`, `[]`, `"x"`, `1`, `{"a":1}{"b":2}`, `{"a":1} x`, `{"a":`, ``, `{"a":1,}`, `{"a":1}  `,
}

// TestKeysAsDecoded: Keys, which reads data in one pass, gives the keys
// of the decoder's reading of it on every case (see also FuzzKeys).
func TestKeysAsDecoded(t *testing.T) {
	for _, c := range keysCases {
		if got, want := Keys([]byte(c)), keysReference([]byte(c)); !slices.Equal(got, want) {
			t.Errorf("Keys(%q) = %v, want %v", c, got, want)
		}
	}
}

func FuzzKeys(f *testing.F) {
	for _, c := range keysCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Keys(data), keysReference(data); !slices.Equal(got, want) {
			t.Errorf("Keys(%q) = %v, want %v", data, got, want)
		}
	})
}

// TestMatchKeyedAgrees: MatchKeyed, and MatchKeyedAt on data inside a
// stored object, answer as MatchValid on every valid case of keysCases
// and of the shortcut's cases, for equalities, ins and operators, alone
// and together (with another equality, whose bytes are still looked
// for, MatchKeyedAt declines); MatchKeyedAt returns data's end.
// TestAbsent: a stored object that Absent says holds none of an
// equality's or an in's values has data that the clause refuses (whatever
// else is in the object), Absent says so of every such object without
// escapes, and never of one holding a value, however it is written; and
// containsString finds what bytes.Contains finds.
func TestAbsent(t *testing.T) {
	datas := append([]string{
		`{"a":"NL"}`, `{"a":"xNL"}`, `{"a":"\u004eL"}`, "{\"a\":\"N\xffL\"}", `{"a":"NL","a":"q"}`,
		`{"b":"NL"}`, `{"a":{"a":"NL"}}`, `{"a":["NL"]}`, `{"a":"aNL"}`, `{"a":""}`, `{"a":"Zoë"}`,
		`{"a":"xNL","b":"yNL","c":"zNL","d":"wNL","e":"vNL","f":"NL"}`,
		`{"a":"xNL","b":"yNL","c":"zNL","d":"wNL","e":"vNL","f":"NLx"}`,
		`{"a":"searching","b":"search"}`, `{"a":"research"}`, `{"a":1}`, `{"a":true}`,
	}, keysCases...)
	clauses := []Clause{
		{Field: "a", Value: `"NL"`},
		{Field: "a", Op: OpIn, Values: []string{`"DE"`, `"NL"`}},
		{Field: "a", Op: OpIn, Values: []string{`""`, `"q"`}},
		{Field: "a", Value: `"search"`},
		{Field: "a", Op: OpIn, Values: []string{`"Zoë"`, `"research"`}},
		{Field: "a", Op: OpIn, Values: []string{`"NL"`, `1`}}, // not plain: never absent
		{Field: "a", Value: `"a\"b"`},                         // not plain: never absent
	}
	for _, c := range clauses {
		values := c.Values
		if c.Op == OpEq {
			values = []string{c.Value}
		}
		plain := PlainValues(values)
		if (plain == nil) != (c.Values != nil && c.Values[1] == `1` || c.Value == `"a\"b"`) {
			t.Errorf("PlainValues(%q) = %q", values, plain)
		}
		for _, d := range datas {
			obj := []byte(`{"formId":"f","data":` + d + `,"attachments":[],"createdAt":"2024-01-01T00:00:00Z"}`)
			got := Absent(obj, plain)
			if got && json.Valid([]byte(d)) && Match([]byte(d), []Clause{c}) {
				t.Errorf("Absent(%s, %q) but the clause keeps its data", obj, values)
			}
			want := plain != nil && bytes.IndexByte(obj, '\\') < 0 && utf8.Valid(obj)
			for _, v := range plain {
				want = want && !bytes.Contains(obj, v)
			}
			if got != want {
				t.Errorf("Absent(%s, %q) = %t, want %t", obj, values, got, want)
			}
		}
	}
	// containsString against bytes.Contains, over every string of up to
	// 9 bytes of an alphabet of quotes and the needles' bytes (past the
	// hits it looks at before it falls back).
	needles := []string{`"NL"`, `""`, `"aN"`, `"LNL"`, `"N"`}
	alphabet := []byte(`"NLa`)
	var walk func(b []byte)
	walk = func(b []byte) {
		for _, v := range needles {
			if got, want := containsString(b, []byte(v)), bytes.Contains(b, []byte(v)); got != want {
				t.Fatalf("containsString(%q, %q) = %t, want %t", b, v, got, want)
			}
		}
		if len(b) == 9 {
			return
		}
		for _, c := range alphabet {
			walk(append(b, c))
		}
	}
	walk(nil)
	// Past the few hits it looks at before falling back.
	long := []byte(strings.Repeat(`xNL" `, 9) + `"NL"`)
	if !containsString(long, []byte(`"NL"`)) || containsString(long[:len(long)-4], []byte(`"NL"`)) {
		t.Errorf("containsString misses %q past its hits, or finds it before", `"NL"`)
	}
}

func TestMatchKeyedAgrees(t *testing.T) {
	datas := append([]string{`{"a":"x\u00e9"}`, "{\"a\":\"x\xffy\"}", `{"a":"xy","b":"q"}`, `{"b":"xy"}`, `{"a":["x"],"b":{"a":"xy"}}`, `{ "a" : "xy" , "a" : "q" }`}, keysCases...)
	clauses := [][]Clause{
		{{Field: "a", Value: `"xy"`}},
		{{Field: "a", Op: OpIn, Values: []string{`"xé"`, `"q"`, `1`}}},
		{{Field: "b", Op: OpIn, Values: []string{`"x"`, `"xy"`}}, {Field: "a", Op: OpNe, Value: `"q"`}},
		{{Field: "a", Op: OpGte, Value: `0`}, {Field: "dup", Value: `1`}},
		{{Field: "a", Value: `"xy"`}, {Field: "b", Value: `"q"`}},
		{{Field: "c", Op: OpExists, Value: `true`}, {Field: "a", Op: OpIn, Values: []string{`1`, `"xy"`}}},
	}
	for _, d := range datas {
		if !json.Valid([]byte(d)) {
			continue
		}
		obj := []byte(`{"id":"s1","data":` + d + `,"attachments":[]}`)
		at := len(`{"id":"s1","data":`)
		for _, cs := range clauses {
			keyed := KeyedClause(cs)
			want, wantN := MatchValid([]byte(d), cs)
			if got, n := MatchKeyed([]byte(d), cs, keyed); got != want || n != wantN {
				t.Errorf("MatchKeyed(%s, %v, %d) = %t, %d; MatchValid: %t, %d", d, cs, keyed, got, n, want, wantN)
			}
			got, n, end, ok := MatchKeyedAt(obj, at, cs, keyed)
			switch {
			case !ok && (d[0] == '{' && !searchable(cs, keyed)):
				t.Errorf("MatchKeyedAt(%s, %v) declined", d, cs)
			case ok && (got != want || n != wantN || end != at+len(strings.TrimRight(d, " \t\r\n"))):
				t.Errorf("MatchKeyedAt(%s, %v) = %t, %d, end %d; want %t, %d, end %d", d, cs, got, n, end, want, wantN, at+len(strings.TrimRight(d, " \t\r\n")))
			}
		}
	}
}
