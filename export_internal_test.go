package formsapi

import (
	"encoding/json"
	"testing"
)

// TestCSVFormulaEscaping is the CSV safety table: every trigger of a
// formula gets a ' by default and is kept with formulas=keep; numbers,
// booleans and other text are untouched; RFC 4180 quoting applies after
// the prefix.
func TestCSVFormulaEscaping(t *testing.T) {
	for _, c := range []struct {
		value        string // a JSON value of data
		escape, keep string // the cell with and without escaping
	}{
		{`"=1+2"`, `'=1+2`, `=1+2`},
		{`"+1"`, `'+1`, `+1`},
		{`"-1"`, `'-1`, `-1`},
		{`"@SUM(A1)"`, `'@SUM(A1)`, `@SUM(A1)`},
		{`"\tx"`, "'\tx", "\tx"},
		{`"\rx"`, "\"'\rx\"", "\"\rx\""},
		{`"\u0000x"`, "'\x00x", "\x00x"},
		{`"=HYPERLINK(\"http://x\",\"y\")"`, `"'=HYPERLINK(""http://x"",""y"")"`, `"=HYPERLINK(""http://x"",""y"")"`},
		{`"=a,b"`, `"'=a,b"`, `"=a,b"`},
		{`"plain"`, `plain`, `plain`},
		{`"a=b"`, `a=b`, `a=b`},
		{`""`, ``, ``},
		{`" x "`, `" x "`, `" x "`},
		{`-12.5`, `-12.5`, `-12.5`}, // numbers untouched
		{`1e3`, `1e3`, `1e3`},
		{`true`, `true`, `true`},
		{`null`, ``, ``},
		{`{"a":"=x"}`, `"{""a"":""=x""}"`, `"{""a"":""=x""}"`}, // JSON text begins with {
		{`[1, 2]`, `"[1,2]"`, `"[1,2]"`},
	} {
		var tmp []byte
		if got := string(appendJSONCell(nil, json.RawMessage(c.value), true, &tmp)); got != c.escape {
			t.Errorf("%s escaped: %q, want %q", c.value, got, c.escape)
		}
		if got := string(appendJSONCell(nil, json.RawMessage(c.value), false, &tmp)); got != c.keep {
			t.Errorf("%s kept: %q, want %q", c.value, got, c.keep)
		}
	}
}
