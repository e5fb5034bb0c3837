package wire

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// fieldNamesReference is FieldNames as it was first written, through
// Members alone: FieldNames must give the same names for every input.
func fieldNamesReference(data []byte) []string {
	var names []string
	Members(data, func(name string, _ json.RawMessage) {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	})
	return names
}

var fieldNamesCases = []string{
	`{"a":1,"b":"x","c":true,"d":null,"e":false}`,
	` { "a" : 1 , "b" : [1, {"x":"}"}], "c" : {"d":"]"} } `,
	`{"caf\u00e9":1,"café":1,"a\"b":2,"` + "\xff" + `":3,"nul\u0000":4,"":5}`,
	`{"dup":1,"x":2,"dup":3}`,
	`{}`, `[]`, `"x"`, `1`, `{"a":1}{"b":2}`, `{"a":1} x`, `{"a":`, ``, `{"a":1,}`, `{"a":1,"b":[}`,
}

func init() {
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf(`"f%d":%d`, i%30, i))
	}
	fieldNamesCases = append(fieldNamesCases, "{"+strings.Join(many, ",")+"}")
}

// TestFieldNamesAsDecoded: FieldNames, which reads valid JSON in one
// pass, gives Members' names on every case (see also FuzzFieldNames),
// past the 16 names it dedupes without a set too.
func TestFieldNamesAsDecoded(t *testing.T) {
	for _, c := range fieldNamesCases {
		if got, want := FieldNames([]byte(c)), fieldNamesReference([]byte(c)); !slices.Equal(got, want) {
			t.Errorf("FieldNames(%q) = %q, want %q", c, got, want)
		}
	}
}

func FuzzFieldNames(f *testing.F) {
	for _, c := range fieldNamesCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := FieldNames(data), fieldNamesReference(data); !slices.Equal(got, want) {
			t.Errorf("FieldNames(%q) = %q, want %q", data, got, want)
		}
	})
}
