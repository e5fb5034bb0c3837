package find

import (
	"slices"
	"strings"
	"testing"
)

func TestParseList(t *testing.T) {
	for v, want := range map[string][]string{
		`a,b`:          {`"a"`, `"b"`},
		`b,a,b`:        {`"a"`, `"b"`},
		`"a,b",c`:      {`"a,b"`, `"c"`},
		`42,42.0,"42"`: {`"42"`, `42`},
		`"x\"y",null`:  {`"x\"y"`, `null`},
		`true`:         {`true`},
		strings.Repeat("1,", MaxListValues-1) + "1": {`1`},
	} {
		got, msg := ParseList(v)
		if msg != "" || !slices.Equal(got, want) {
			t.Errorf("ParseList(%s) = %q, %q; want %q", v, got, msg, want)
		}
	}
	for v, says := range map[string]string{
		``:        "is empty",
		`a,`:      "at value 2 is empty",
		`,a`:      "at value 1 is empty",
		`"a"b`:    "followed by more than a comma",
		`"a`:      "at value 1 starts with a double quote",
		`1e999,1`: "beyond the range",
		strings.Repeat("1,", MaxListValues) + "1": "the filter list length limit",
		"1," + strings.Repeat("v", MaxValueBytes): "the filter value length limit",
	} {
		if _, msg := ParseList(v); !strings.Contains(msg, says) {
			t.Errorf("ParseList(%.40s): %q, want it to say %q", v, msg, says)
		}
	}
}

func TestParseClause(t *testing.T) {
	for _, c := range []struct{ op, v, value, says string }{
		{OpGte, "4", "4", ""},
		{OpGte, "gte.4", `"gte.4"`, ""},
		{OpLt, "2024-05-01T12:00:00Z", `"2024-05-01T12:00:00Z"`, ""},
		{OpGt, "true", "", "does not order"},
		{OpLte, "null", "", "does not order"},
		{OpNe, "null", "null", ""},
		{OpExists, "true", "true", ""},
		{OpExists, "1", "", "must be true"},
		{OpPrefix, "ZOË", "zoe", ""},
		{OpPrefix, `"Zo,ë"`, "zo,e", ""},
		{OpPrefix, "\u0301", "", "is empty once"},
		{OpPrefix, strings.Repeat("\ufdfa", 10), "", "the filter value length limit"},
	} {
		got, msg := ParseClause("f", c.op, c.v)
		if c.says != "" {
			if !strings.Contains(msg, c.says) {
				t.Errorf("%s %s: %q, want it to say %q", c.op, c.v, msg, c.says)
			}
			continue
		}
		if msg != "" || got.Value != c.value || got.Op != c.op || got.Field != "f" {
			t.Errorf("%s %s: %+v, %q; want value %s", c.op, c.v, got, msg, c.value)
		}
	}
	if op, ok := ParseOp("eq"); !ok || op != OpEq {
		t.Errorf(`ParseOp("eq") = %q, %t`, op, ok)
	}
	if _, ok := ParseOp("gtx"); ok {
		t.Error(`ParseOp("gtx") is known`)
	}
}

// TestOperators: each operator on members of each kind, prepared and
// not.
func TestOperators(t *testing.T) {
	long := strings.Repeat("a", MaxSearchValueBytes+10)
	for _, c := range []struct {
		data  string
		c     Clause
		match bool
	}{
		{`{"n":10}`, Clause{Field: "n", Op: OpGte, Value: "10"}, true},
		{`{"n":9}`, Clause{Field: "n", Op: OpGte, Value: "10"}, false},
		{`{"n":1e2}`, Clause{Field: "n", Op: OpGt, Value: "10"}, true},
		{`{"n":"11"}`, Clause{Field: "n", Op: OpGt, Value: "10"}, false},
		{`{"n":true}`, Clause{Field: "n", Op: OpGt, Value: "10"}, false},
		{`{}`, Clause{Field: "n", Op: OpLt, Value: "10"}, false},
		{`{"n":null}`, Clause{Field: "n", Op: OpLt, Value: "10"}, false},
		{`{"t":"2024-05-01T14:00:00+02:00"}`, Clause{Field: "t", Op: OpLte, Value: `"2024-05-01T12:00:00Z"`}, true},
		{`{"t":"2024-05-01T14:00:00+02:00"}`, Clause{Field: "t", Op: OpLt, Value: `"2024-05-01T12:00:00Z"`}, false},
		{`{"t":"2024-05-01T12:00:00.5Z"}`, Clause{Field: "t", Op: OpGt, Value: `"2024-05-01T12:00:00Z"`}, true},
		{`{"t":"2024-05-01"}`, Clause{Field: "t", Op: OpLt, Value: `"2024-05-01T12:00:00Z"`}, false},
		{`{"t":"2024-05-01T12:00:00Z"}`, Clause{Field: "t", Op: OpGt, Value: `"2024-04-01"`}, false},
		{`{"t":"2024-05-01"}`, Clause{Field: "t", Op: OpGt, Value: `"2024-04-30"`}, true},
		{`{"s":"Zoë"}`, Clause{Field: "s", Op: OpGte, Value: `"ZOE"`}, true},
		{`{"s":"Zoë"}`, Clause{Field: "s", Op: OpGt, Value: `"ZOE"`}, false},
		{`{"s":"zoe "}`, Clause{Field: "s", Op: OpGt, Value: `"ZOE"`}, true},
		{`{"s":"zoe\u0436"}`, Clause{Field: "s", Op: OpGt, Value: `"zoe"`}, true}, // cut past the value's length
		{`{"s":"` + long + `b"}`, Clause{Field: "s", Op: OpGt, Value: `"` + strings.Repeat("a", 200) + `"`}, true},
		{`{"s":"Zoë"}`, Clause{Field: "s", Op: OpNe, Value: `"zoe"`}, true},
		{`{"s":"zoe"}`, Clause{Field: "s", Op: OpNe, Value: `"zoe"`}, false},
		{`{}`, Clause{Field: "s", Op: OpNe, Value: `"zoe"`}, true},
		{`{"s":null}`, Clause{Field: "s", Op: OpNe, Value: `null`}, false},
		{`{"s":4.2e1}`, Clause{Field: "s", Op: OpIn, Values: []string{`"a"`, `42`}}, true},
		{`{"s":"42"}`, Clause{Field: "s", Op: OpIn, Values: []string{`"a"`, `42`}}, false},
		{`{"s":[42]}`, Clause{Field: "s", Op: OpIn, Values: []string{`42`}}, false},
		{`{"s":0}`, Clause{Field: "s", Op: OpExists, Value: "true"}, true},
		{`{"s":{}}`, Clause{Field: "s", Op: OpExists, Value: "true"}, true},
		{`{"s":null}`, Clause{Field: "s", Op: OpExists, Value: "true"}, false},
		{`{"s":null}`, Clause{Field: "s", Op: OpExists, Value: "false"}, true},
		{`{"t":1}`, Clause{Field: "s", Op: OpExists, Value: "false"}, true},
		{`{"s":"ÉCOLE"}`, Clause{Field: "s", Op: OpPrefix, Value: "eco"}, true},
		{`{"s":"\u00c9cole"}`, Clause{Field: "s", Op: OpPrefix, Value: "ecole"}, true},
		{`{"s":"eco"}`, Clause{Field: "s", Op: OpPrefix, Value: "ecole"}, false},
		{`{"s":1234}`, Clause{Field: "s", Op: OpPrefix, Value: "12"}, false},
		{`{"s":"x","s":"eco"}`, Clause{Field: "s", Op: OpPrefix, Value: "eco"}, true},
		{`[1]`, Clause{Field: "s", Op: OpNe, Value: "1"}, false},
		{`{"s":1}`, Clause{Field: "s", Op: OpGt, Value: "true"}, false}, // a value that does not order
	} {
		for _, cs := range [][]Clause{{c.c}, Prepare([]Clause{c.c})} {
			if got := Match([]byte(c.data), cs); got != c.match {
				t.Errorf("%.60s %s %s %v: %t, want %t", c.data, c.c.Op, c.c.Value, c.c.Values, got, c.match)
			}
		}
	}
}

// TestOperatorWork: a prefix or a text range counts the bytes it
// normalized, bounded by what search reads of a value.
func TestOperatorWork(t *testing.T) {
	huge := `{"s":"` + strings.Repeat("é", 1<<20) + `"}`
	cs := Prepare([]Clause{{Field: "s", Op: OpPrefix, Value: "e"}})
	ok, n := MatchWork([]byte(huge), cs)
	if !ok || n == 0 || n > 2*MaxSearchValueBytes {
		t.Errorf("prefix of a megabyte: %t, %d normalized bytes, want a match within %d", ok, n, 2*MaxSearchValueBytes)
	}
	ok, n = MatchWork([]byte(`{"s":"plain ascii"}`), cs)
	if ok || n != 0 {
		t.Errorf("ASCII: %t, %d normalized bytes, want no match and 0", ok, n)
	}
}

// TestClauseMembersAsDecoded: the one-pass reading of the clauses'
// members finds what encoding/json's map of them has, on names with
// escapes, invalid UTF-8, names given twice and white space.
func TestClauseMembersAsDecoded(t *testing.T) {
	cs := Prepare([]Clause{
		{Field: "a", Op: OpExists, Value: "true"}, {Field: "é", Op: OpGte, Value: "1"},
		{Field: "\ufffd", Op: OpNe, Value: "1"}, {Field: "b", Op: OpIn, Values: []string{`"x"`}},
	})
	for _, data := range []string{
		`{"a":1,"é":2,"b":"x"}`, `{ "a" : null , "\u00e9" : 0 , "b" : "y" , "b" : "x" }`, "{\"\xff\":1,\"a\":[],\"é\":1.5}",
		`{"a":{"b":"x"},"é":"2","b":["x"]}`, `{}`, `[1]`, `"a"`, `{"a":1`, `{"a":1,"é":3,"b":"x","\ufffd":2}`,
	} {
		want, _ := matchDecoded([]byte(data), cs)
		for k := range cs {
			one, _ := matchDecoded([]byte(data), cs[k:k+1])
			got, _ := MatchWork([]byte(data), cs[k:k+1])
			if got != one {
				t.Errorf("%s, clause %d: %t, decoded %t", data, k, got, one)
			}
		}
		if got, _ := MatchWork([]byte(data), cs); got != want {
			t.Errorf("%s: %t, decoded %t", data, got, want)
		}
	}
}

func BenchmarkMatchOperators(b *testing.B) {
	data := []byte(`{"n":12345,"email":"user12345@example.com","plan":"basic","half":false,"name":"Alex Smith","city":"City 345","message":"Hello, this is submission number 12345, with a few words of text."}`)
	cs := Prepare([]Clause{{Field: "n", Op: OpLt, Value: "10"}, {Field: "plan", Op: OpNe, Value: `"basic"`}})
	b.Run("one pass", func(b *testing.B) {
		for b.Loop() {
			MatchWork(data, cs)
		}
	})
	b.Run("decoded", func(b *testing.B) {
		for b.Loop() {
			matchDecoded(data, cs)
		}
	})
}
