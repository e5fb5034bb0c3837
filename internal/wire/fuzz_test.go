package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzScanObject holds the library's own JSON scanner to encoding/json:
// it must accept exactly the single objects json.Valid accepts.
//
//	go test -run '^$' -fuzz '^FuzzScanObject$' -fuzztime 10m ./internal/wire
func FuzzScanObject(f *testing.F) {
	for _, s := range []string{`{}`, ` {"a":1} `, `{"a":[1,2.5e-3,-0,true,false,null,{"b":"\u00e9\n"}]}`, `[]`, `{"a":}`, `{"a":1,}`,
		`{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\xff\"}", "{\"a\":\"\x01\"}", `{}{}`, `{"a" 1}`,
		`{"a":tru}`, `{"a":1e}`, `{"a":"` + strings.Repeat("x", 100) + `"}`, strings.Repeat(`{"a":`, 50) + "1" + strings.Repeat("}", 50), `"x"`, ``, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		trimmed := bytes.TrimLeft(data, " \t\r\n")
		want := json.Valid(data) && len(trimmed) > 0 && trimmed[0] == '{'
		if got, _ := ScanObject(data); got != want {
			t.Fatalf("ScanObject(%q) = %v, json.Valid says %v", data, got, want)
		}
	})
}
