package find

import (
	"slices"
	"strings"
	"testing"
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
		cs := []Clause{{c.field, c.value}}
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
	if Match([]byte(`[1]`), []Clause{{"a", "1"}}) || Keys([]byte(`"x"`)) != nil {
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
		if got := Match([]byte(c.data), []Clause{{"a", c.value}}); got != c.match {
			t.Errorf("Match(%q, a=%s) = %t, want %t", c.data, c.value, got, c.match)
		}
	}
}
