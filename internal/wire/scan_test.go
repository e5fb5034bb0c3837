package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

func nest(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1)
}

func TestCheckObject(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		data string
		want Problem
	}{
		{"plain", `{"a":[1,2.5e3,true,null,"x"]}`, OK},
		{"at depth", nest(20), OK},
		{"too deep", nest(21), TooDeep},
		{"arrays count", `{"a":` + strings.Repeat("[", 19) + strings.Repeat("]", 19) + `}`, OK},
		{"arrays too deep", `{"a":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`, TooDeep},
		{"number at length", `{"n":` + strings.Repeat("9", 10) + `}`, OK},
		{"number too long", `{"n":` + strings.Repeat("9", 11) + `}`, NumberTooLong},
		{"negative number too long", `{"n":-` + strings.Repeat("9", 10) + `}`, NumberTooLong},
		{"largest float", `{"n":1.797e308}`, OK},
		{"beyond float", `{"n":1e309}`, NumberOutOfRange},
		{"beyond float negative", `{"n":-2e308}`, NumberOutOfRange},
		{"underflow is zero", `{"n":1e-400}`, OK},
		{"surrogate pair", `{"s":"\ud83d\ude00"}`, OK},
		{"surrogate pair upper case", `{"s":"\uD83D\uDE00"}`, OK},
		{"lone high surrogate", `{"s":"\ud83d"}`, LoneSurrogate},
		{"high surrogate then letter", `{"s":"\ud83dx"}`, LoneSurrogate},
		{"two high surrogates", `{"s":"\ud83d\ud83d"}`, LoneSurrogate},
		{"lone low surrogate", `{"s":"\ude00"}`, LoneSurrogate},
		{"surrogate in a key", `{"\udc00":1}`, LoneSurrogate},
		{"escaped NUL is JSON", `{"s":"\u0000"}`, OK},
		{"invalid UTF-8", "{\"s\":\"\xff\"}", BadUTF8},
		{"not an object", `[1]`, Malformed},
		{"broken", `{"a":`, Malformed},
		{"two objects", `{}{}`, Malformed},
		{"raw control character", "{\"s\":\"\x01\"}", Malformed},
	} {
		if got := CheckObject([]byte(c.data), 20, 10); got != c.want {
			t.Errorf("%s: CheckObject(%.60q) = %d, want %d", c.name, c.data, got, c.want)
		}
		// The read side is encoding/json's grammar, unchanged.
		valid, _ := ScanObject([]byte(c.data))
		if want := json.Valid([]byte(c.data)) && strings.HasPrefix(c.data, "{"); valid != want {
			t.Errorf("%s: ScanObject valid = %v, json.Valid says %v", c.name, valid, want)
		}
	}
}

// TestScanObjectDepth keeps the read side at encoding/json's limit, so
// data stored before the write-side limits existed is still read.
func TestScanObjectDepth(t *testing.T) {
	t.Parallel()
	if valid, _ := ScanObject([]byte(nest(MaxDepth))); !valid {
		t.Errorf("ScanObject refuses an object %d levels deep", MaxDepth)
	}
	if valid, _ := ScanObject([]byte(nest(MaxDepth + 1))); valid {
		t.Errorf("ScanObject accepts an object %d levels deep", MaxDepth+1)
	}
}

// FuzzCheckObject holds the write side's promise: whatever CheckObject
// accepts, encoding/json decodes into an any (so no number overflows a
// float64), within the depth bound.
//
//	go test -run '^$' -fuzz '^FuzzCheckObject$' -fuzztime 1m ./internal/wire
func FuzzCheckObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":null}]}`, `{"n":1e308}`, `{"n":-0.0e-400}`, `{"s":"\ud83d\ude00"}`, nest(5)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if CheckObject(data, 5, 30) != OK {
			return
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("CheckObject accepts %q, encoding/json says %v", data, err)
		}
		if d := goDepth(v); d > 5 {
			t.Fatalf("CheckObject accepts %q, %d levels deep", data, d)
		}
	})
}

func goDepth(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, goDepth(e))
		}
	case []any:
		for _, e := range v {
			d = max(d, goDepth(e))
		}
	default:
		return 0
	}
	return d + 1
}

func TestScanObjectWithin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		depth, bound   int
		valid, tooDeep bool
	}{{5, 5, true, false}, {6, 5, false, true}, {MaxSubmissionDepth, MaxSubmissionDepth, true, false}, {MaxSubmissionDepth + 1, MaxSubmissionDepth, false, true}} {
		valid, _, tooDeep := ScanObjectWithin([]byte(nest(c.depth)), c.bound)
		if valid != c.valid || tooDeep != c.tooDeep {
			t.Errorf("depth %d within %d: valid %v, tooDeep %v; want %v, %v", c.depth, c.bound, valid, tooDeep, c.valid, c.tooDeep)
		}
	}
	if valid, _, tooDeep := ScanObjectWithin([]byte(`{"a":`), 5); valid || tooDeep {
		t.Errorf("a broken object: valid %v, tooDeep %v; want false, false", valid, tooDeep)
	}
}
