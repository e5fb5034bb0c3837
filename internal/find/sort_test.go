package find

import (
	"bytes"
	"encoding/json"
	"testing"
)

// sortValues are member values of every kind the sort orders: numbers
// in several forms, instants at several offsets, text that normalizes
// alike, booleans, and values without a key.
var sortValues = []string{
	`0`, `-0`, `1`, `-1`, `42`, `42.0`, `4.2e1`, `1e2`, `99.5`, `-7.25`, `1e-3`, `-1e300`, `1e300`, `9007199254740993`,
	`"2024-03-10T12:00:00Z"`, `"2024-03-10T14:00:00+02:00"`, `"2024-03-10T12:00:00.5Z"`, `"1999-12-31T23:59:59-08:00"`, `"0001-01-01T00:00:00Z"`,
	`"Zoë"`, `"zoe"`, `"ZOË"`, `"Zoe "`, `"Straße"`, `"strasse"`, `""`, `"a"`, `"ab"`, `"2024-03-05"`, `"42"`, `"日本"`, `"øre"`, `"ore"`,
	`true`, `false`,
}

// TestSortKeysOrderAsRangesCompare: two values of a kind the range
// operators compare order by their sort keys exactly as gt and lt say,
// equal where both say neither; kinds order numbers < instants < text <
// false < true; null, objects, arrays and numbers past float64 have no
// key.
func TestSortKeysOrderAsRangesCompare(t *testing.T) {
	kind := func(k []byte) byte { return k[0] }
	for _, a := range sortValues {
		ka, ok := SortKey([]byte(a))
		if !ok {
			t.Fatalf("%s has no sort key", a)
		}
		for _, b := range sortValues {
			kb, _ := SortKey([]byte(b))
			c := bytes.Compare(ka, kb)
			if kind(ka) != kind(kb) {
				if (kind(ka) < kind(kb)) != (c < 0) {
					t.Errorf("%s and %s: kinds %x and %x, but keys compare %d", a, b, kind(ka), kind(kb), c)
				}
				continue
			}
			if kind(ka) >= sortFalse {
				continue
			}
			data := []byte(`{"v":` + a + `}`)
			gt := Match(data, []Clause{{Field: "v", Op: OpGt, Value: mustCanon(t, b)}})
			lt := Match(data, []Clause{{Field: "v", Op: OpLt, Value: mustCanon(t, b)}})
			want := 0
			switch {
			case gt:
				want = 1
			case lt:
				want = -1
			}
			if c != want {
				t.Errorf("%s vs %s: keys compare %d, the range operators %d", a, b, c, want)
			}
		}
	}
	for _, none := range []string{`null`, `{"a":1}`, `[1]`, `1e400`, ` `} {
		if k, ok := SortKey([]byte(none)); ok {
			t.Errorf("%s has sort key %x, want none", none, k)
		}
	}
}

func mustCanon(t *testing.T, v string) string {
	t.Helper()
	c, ok := Canonical([]byte(v))
	if !ok {
		t.Fatalf("%s has no canonical text", v)
	}
	return c
}

// TestSortEntries: one entry per top-level member with a key, the last
// value of a name given twice, names past MaxFieldBytes left out.
func TestSortEntries(t *testing.T) {
	long := string(bytes.Repeat([]byte("f"), MaxFieldBytes+1))
	es := SortEntries([]byte(`{"a":1,"b":null,"c":{"x":1},"a":"z","d":true,"` + long + `":1}`))
	if len(es) != 2 {
		t.Fatalf("entries %v, want a and d", es)
	}
	ka, _ := SortKey([]byte(`"z"`))
	if es[0].Field != SortField("a") || !bytes.Equal(es[0].Key, ka) || es[1].Field != SortField("d") {
		t.Errorf("entries %v, want a's last value and d", es)
	}
	if v, ok := SortValue([]byte(`{"a":1,"a":"z"}`), "a"); !ok || !bytes.Equal(v, ka) {
		t.Errorf("SortValue of a name given twice: %x, want its last value's key", v)
	}
	if SortEntries([]byte(`[1]`)) != nil {
		t.Errorf("entries of data that is not an object")
	}
	// A text key keeps SortTextBytes bytes of the normal form, whole
	// characters or not.
	k, _ := SortKey([]byte(`"` + string(bytes.Repeat([]byte("é"), 200)) + `"`))
	if len(k) != 1+SortTextBytes {
		t.Errorf("a long text's key has %d bytes, want %d", len(k), 1+SortTextBytes)
	}
}

// FuzzSortKey: any member value has a key or not without panicking, and
// two numbers' keys order as the numbers:
//
//	go test -run '^$' -fuzz FuzzSortKey -fuzztime 1m ./internal/find/
func FuzzSortKey(f *testing.F) {
	for _, v := range sortValues {
		f.Add(v, `1`)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ka, oka := SortKey([]byte(a))
		kb, okb := SortKey([]byte(b))
		if !oka || !okb || ka[0] != sortNumber || kb[0] != sortNumber {
			return
		}
		data := []byte(`{"v":` + a + `}`)
		cb, ok := Canonical([]byte(b))
		if !ok || !json.Valid(data) || !json.Valid([]byte(b)) {
			return // members are valid JSON
		}
		gt := Match(data, []Clause{{Field: "v", Op: OpGt, Value: cb}})
		if c := bytes.Compare(ka, kb); (c > 0) != gt {
			t.Errorf("%s vs %s: keys compare %d, gt says %v", a, b, c, gt)
		}
	})
}
