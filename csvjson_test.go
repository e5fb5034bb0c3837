package formsapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/formsapi/formsapi/internal/wire"
)

// referenceCSVRow is the CSV row as export.go wrote it before csvjson.go,
// with encoding/json: the oracle the one-pass row must equal.
func referenceCSVRow(x *exporter, b, ref, position, obj []byte) ([]byte, error) {
	var s struct {
		Data        json.RawMessage
		Attachments json.RawMessage
		CreatedAt   string
	}
	if err := json.Unmarshal(obj, &s); err != nil {
		return b, err
	}
	compact := func(v []byte) []byte {
		var buf bytes.Buffer
		if json.Compact(&buf, v) != nil {
			return v
		}
		return buf.Bytes()
	}
	cells := make([]json.RawMessage, len(x.names))
	var other []byte
	err := wire.Members(s.Data, func(name string, v json.RawMessage) {
		if i, ok := x.cols[name]; ok {
			cells[i] = v
			return
		}
		if other == nil {
			other = append(other, '{')
		} else {
			other = append(other, ',')
		}
		other = appendString(other, name)
		other = append(other, ':')
		other = append(other, compact(v)...)
	})
	if err != nil {
		return b, err
	}
	b = append(b, ref...)
	b = append(b, ',')
	b = append(b, position...)
	b = append(b, ',')
	b = append(b, s.CreatedAt...)
	escape := !x.e.keepFormat
	for _, v := range cells {
		b = append(b, ',')
		b = referenceJSONCell(b, v, escape, compact)
	}
	if x.other {
		b = append(b, ',')
		if other != nil {
			b = referenceCSVCell(b, string(append(other, '}')), escape)
		}
	}
	b = append(b, ',')
	if att := compact(s.Attachments); string(att) != "[]" && len(att) > 0 {
		b = referenceCSVCell(b, string(att), escape)
	}
	return append(b, "\r\n"...), nil
}

func referenceJSONCell(b []byte, v json.RawMessage, escape bool, compact func([]byte) []byte) []byte {
	if len(v) == 0 {
		return b
	}
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return b
		}
		return referenceCSVCell(b, s, escape)
	case 'n':
		return b
	case 't', 'f', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return append(b, v...)
	}
	return referenceCSVCell(b, string(compact(v)), escape)
}

func referenceCSVCell(b []byte, s string, escape bool) []byte {
	if t := strings.TrimLeft(s, " \uFEFF"); escape && t != "" && strings.IndexByte(formulaTriggers, t[0]) >= 0 {
		s = "'" + s
	}
	if s == "" || !strings.ContainsAny(s, ",\"\r\n") && s[0] != ' ' && s[len(s)-1] != ' ' {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// csvRowCases are stored submissions whose rows the one-pass reader must
// write as encoding/json's reading did: escapes of every kind in names
// and text, surrogate pairs and lone surrogates, invalid UTF-8, white
// space everywhere, nesting, duplicates, case-folded member names,
// formula triggers, members past the header's columns, null and odd
// attachments and createdAt.
var csvRowCases = []string{
	`{"data":{"a":"x","b":2},"attachments":[],"createdAt":"2024-01-01T00:00:00Z"}`,
	`{"data":{"a":"=1+2","b":"-3","c":"+31 6","d":"@x"},"attachments":[{"name":"f.pdf","size":3}],"createdAt":"2024-01-01T00:00:00Z"}`,
	` { "data" : { "a" : [ 1 , 2 , { "k" : "v w" } ] , "b" : { } } , "attachments" : [ ] , "createdAt" : "t" } `,
	`{"data":{"a":"q\"uote, comma\r\nline","b":"\u00e9\u0041\ud83d\ude00\ud800x\udc00","c":"\\/\b\f\n\r\t"},"createdAt":"t"}`,
	`{"data":{"\u0061":"escaped name","b\u0000":"nul name","é":"utf8 name"},"createdAt":"t"}`,
	`{"data":{"a":1,"a":2,"b":"x","b":null},"createdAt":"t"}`,
	`{"Data":{"a":"folded"},"DATA":{"b":"last wins"},"CREATEDAT":"c","Attachments":null}`,
	`{"data":{"a":" lead","b":"trail ","c":"\t=tab","d":"\r=cr","e":"\u0000nul"},"createdAt":"t"}`,
	`{"data":{"z":1,"y":{"deep":[[[{"x":"y"}]]]},"a":true,"b":false,"c":-0.5e+10},"createdAt":"t"}`,
	`{"data":{"extra1":"\"x\"","a":"1","extra2":{"s":" "}},"createdAt":"t"}`,
	`{"data":{},"attachments":{"odd":1},"createdAt":null}`,
	`{"data":{"a":"x"},"attachments":"text","createdAt":"t","data":{"b":"y"}}`,
	`{"data":null,"createdAt":"t"}`,
	`{"data":[1],"createdAt":"t"}`,
	`{"createdAt":"t"}`,
	`{"data":{"a":"x"},"createdAt":12}`,
	`{"data":{"a":"x"},"createdAt":"t\u00e9\"x"}`,
	"{\"data\":{\"a\":\"bad \xff utf8 \xe2\x82\",\"b\\u00ff\":\"\xc3\"},\"createdAt\":\"t\"}",
	`{"data":{"attachmentſ":"x"},"attachmentſ":[1],"createdAt":"t"}`,
	`{"data":{"a":"x"},"attachments":[ "a" ,  "b" ],"createdAt":"t"}`,
}

// TestCSVRowMatchesEncodingJSON: the one-pass CSV row equals, byte for
// byte, the row encoding/json's reading wrote, for every case with and
// without formula escaping, with the header's columns and with a last
// otherData column; damaged data fails both.
func TestCSVRowMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for i, obj := range csvRowCases {
		checkCSVRow(t, fmt.Sprint(i), []byte(obj))
	}
}

// FuzzCSVRow is TestCSVRowMatchesEncodingJSON over any object a page may
// hold (wire.Page.Add's check):
//
//	go test -run '^$' -fuzz FuzzCSVRow -fuzztime 5m .
func FuzzCSVRow(f *testing.F) {
	for _, obj := range csvRowCases {
		f.Add([]byte(obj))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		var p wire.Page
		if !p.Add(1, obj) {
			return // a page never holds it
		}
		checkCSVRow(t, "", p.Body)
	})
}

func checkCSVRow(t *testing.T, name string, obj []byte) {
	t.Helper()
	for _, c := range []struct {
		names []string
		other bool
		keep  bool
	}{
		{[]string{"a", "b", "c", "d", "e", "z", "é", "attachmentſ"}, false, false},
		{[]string{"a", "b", "c", "d", "e", "z", "é", "attachmentſ"}, false, true},
		{[]string{"b\x00", "a"}, true, false},
		{nil, true, true},
		{nil, false, false},
	} {
		x := &exporter{e: export{keepFormat: c.keep}, names: c.names, other: c.other, cols: map[string]int{}}
		for i, n := range c.names {
			x.cols[n] = i
		}
		want, wantErr := referenceCSVRow(x, []byte("prev\r\n"), []byte("REF"), []byte("POS"), obj)
		// Twice, the second time with the buffers the first left.
		for range 2 {
			got, err := x.csvRow([]byte("prev\r\n"), []byte("REF"), []byte("POS"), obj)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%s %q columns %q: error %v, encoding/json's %v", name, obj, c.names, err, wantErr)
			}
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("%s %q columns %q keep %v:\n got %q\nwant %q", name, obj, c.names, c.keep, got, want)
			}
		}
	}
}

// TestJSONTextMatchesEncodingJSON: the decoding of a string's text is
// encoding/json's, escapes, surrogates and invalid UTF-8 included.
func TestJSONTextMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	var tmp []byte
	for _, s := range []string{`""`, `"plain"`, `"\u00e9\u00E9"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"\ude00\ud83d"`,
		`"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, "\"\xff\xfe\"", "\"\xe2\x82\"", `"\"\\\/\b\f\n\r\t"`, `"tail\ud800"`, `"\u0000"`} {
		var want string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		raw := []byte(s)[1 : len(s)-1]
		got, ok := jsonText(raw, bytes.IndexByte(raw, '\\') >= 0, &tmp)
		if !ok || string(got) != want {
			t.Errorf("%s: %q %v, want %q", s, got, ok, want)
		}
	}
}
