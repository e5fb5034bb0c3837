package formsapi

import (
	"bytes"
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
		// Past leading spaces and byte order marks (U+FEFF), which
		// readers drop or trim, the first character counts (attack
		// finding F1): the ' goes before the spaces.
		{`" =1+1"`, `' =1+1`, `" =1+1"`},
		{`"   @SUM(A1)"`, `'   @SUM(A1)`, `"   @SUM(A1)"`},
		{`"\ufeff=1+1"`, "'\uFEFF=1+1", "\uFEFF=1+1"},
		{`" \ufeff -1"`, "' \uFEFF -1", "\" \uFEFF -1\""},
		{`"\ufeff\ufeff+x"`, "'\uFEFF\uFEFF+x", "\uFEFF\uFEFF+x"},
		{`" \tx"`, "' \tx", "\" \tx\""},
		{`" =a,b"`, `"' =a,b"`, `" =a,b"`},
		{`"\ufeff"`, "\uFEFF", "\uFEFF"}, // nothing past them
		{`"   "`, `"   "`, `"   "`},
		{`" x"`, `" x"`, `" x"`},
		// Only those two are skipped, and only ASCII triggers count: a
		// full-width ＝ starts no formula in Excel, LibreOffice or
		// Google Sheets; a no-break or zero-width space, or a line
		// feed, before a trigger is not skipped.
		{`"＝1+1"`, `＝1+1`, `＝1+1`},
		{`"\u00a0=1"`, "\u00a0=1", "\u00a0=1"},
		{`"\u200b=1"`, "\u200b=1", "\u200b=1"},
		{`"\n=1"`, "\"\n=1\"", "\"\n=1\""},
		{`"x =1"`, `x =1`, `x =1`},
		{`"\ufeffx=1"`, "\uFEFFx=1", "\uFEFFx=1"},
		// A BOM cut short is not skipped.
		{`"\u00ef=1"`, "\u00ef=1", "\u00ef=1"},
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

// TestCSVHeaderCellsAreNotFormulas: a field's header cell goes through the
// same rule as a text cell (appendCSVCell), and as it begins "data." no
// field name, however formula-like, makes it one; with formulas=keep too.
func TestCSVHeaderCellsAreNotFormulas(t *testing.T) {
	names := []string{"=1+1", " =1+1", "\uFEFF=1+1", "+x", "-x", "@x", "\tx", "\rx", "\x00x", "a,b", "q\"q", "plain"}
	const want = "ref,position,createdAt,data.=1+1,data. =1+1,data.\uFEFF=1+1,data.+x,data.-x,data.@x,data.\tx,\"data.\rx\",data.\x00x,\"data.a,b\",\"data.q\"\"q\",data.plain,attachments\r\n"
	for _, keep := range []bool{false, true} {
		var b bytes.Buffer
		x := &exporter{names: names, dst: &b, e: export{keepFormat: keep}}
		if err := x.header(); err != nil {
			t.Fatal(err)
		}
		if b.String() != want {
			t.Errorf("keep %v: header %q, want %q", keep, b.String(), want)
		}
	}
	for _, n := range names {
		if c := appendCSVCell(nil, "data."+n, true); c[0] == '\'' {
			t.Errorf("header cell of %q: %q", n, c)
		}
		if !formulaLike(n) && n != "a,b" && n != "q\"q" && n != "plain" {
			t.Errorf("name %q: formulaLike false, want true (a text cell of it is escaped)", n)
		}
	}
}

// TestAppendOneLine: the JSON Lines escapes of U+0085, U+2028 and U+2029
// (RELIABILITY 109), beside characters of the same lead bytes (U+0080 to
// U+00BF, U+2000 to U+20FF) and a sequence cut at the end, which stay as
// they are.
func TestAppendOneLine(t *testing.T) {
	for _, c := range [][2]string{
		{``, ``},
		{`{"a":"b"}`, `{"a":"b"}`},
		{"\"\u2028\"", `"\u2028"`},
		{"\"\u2029\u2028\u0085\"", `"\u2029\u2028\u0085"`},
		{"\"’…©\u00a0\u2027\u202a\u0084\u0086\"", "\"’…©\u00a0\u2027\u202a\u0084\u0086\""},
		{"\"é\u0085ü\u2028€\"", "\"é\\u0085ü\\u2028€\""},
		{"x\xc2", "x\xc2"},
		{"x\xe2\x80", "x\xe2\x80"},
		{"\u0085\u0085\u2029", `\u0085\u0085\u2029`},
	} {
		if got := string(appendOneLine([]byte("<"), []byte(c[0]))); got != "<"+c[1] {
			t.Errorf("appendOneLine(%q) = %q, want %q", c[0], got[1:], c[1])
		}
	}
}
