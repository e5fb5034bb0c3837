package wire

import (
	"encoding/json"
	"testing"
)

func TestScanObject(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in            string
		valid, utf8OK bool
	}{
		{`{}`, true, true},
		{" \t\r\n{ } \n", true, true},
		{`{"a":[1,-2.5e+3,true,false,null,{"b":"\u00e9\n"}]}`, true, true},
		{"{\"a\":\"\xff\"}", true, false},
		{"{\"\xc3\xa9\":1}", true, true},
		{``, false, true},
		{`[]`, false, true},
		{`"x"`, false, true},
		{`{}{}`, false, true},
		{`{"a":}`, false, true},
		{`{"a":1,}`, false, true},
		{`{"a":01}`, false, true},
		{`{"a":"\x"}`, false, true},
		{"{\"a\":\"\x01\"}", false, true},
		{`{"a":1`, false, true},
		{`{'a':1}`, false, true},
	} {
		valid, utf8OK := ScanObject([]byte(c.in))
		if valid != c.valid || (valid && utf8OK != c.utf8OK) {
			t.Errorf("ScanObject(%q) = %v, %v; want %v, %v", c.in, valid, utf8OK, c.valid, c.utf8OK)
		}
		var v map[string]any
		if jsonOK := json.Unmarshal([]byte(c.in), &v) == nil && v != nil; c.utf8OK && jsonOK != c.valid {
			t.Errorf("%q: encoding/json says valid object = %v, the table says %v", c.in, jsonOK, c.valid)
		}
	}
}

func TestPageAdd(t *testing.T) {
	t.Parallel()
	p := Page{Body: []byte("[")}
	if p.AddedAny() {
		t.Fatal("AddedAny on an empty page")
	}
	adds := []struct {
		obj string
		ok  bool
	}{{`{"a":1}`, true}, {`{"a":`, false}, {"{\"b\":\"x\xff\xfey\"}", true}, {`[]`, false}}
	for i, a := range adds {
		if got := p.Add(int64(i+1), []byte(a.obj)); got != a.ok {
			t.Errorf("Add(%q) = %v, want %v", a.obj, got, a.ok)
		}
	}
	p.AddTrusted([]byte(`{"c":2}`))
	p.Body = append(p.Body, ']')
	if want := "[{\"a\":1},{\"b\":\"x\uFFFDy\"},{\"c\":2}]"; string(p.Body) != want {
		t.Errorf("body %s, want %s", p.Body, want)
	}
	if !json.Valid(p.Body) || !p.AddedAny() {
		t.Errorf("the page is not valid JSON or not marked as holding items")
	}
	if len(p.Skipped) != 2 || p.Skipped[0].Seq != 2 || p.Skipped[1].Seq != 4 || p.Skipped[0].Reason == "" {
		t.Errorf("Skipped = %+v, want positions 2 and 4 with reasons", p.Skipped)
	}
}

func TestPageRewind(t *testing.T) {
	t.Parallel()
	p := Page{Body: []byte("[")}
	m := p.Mark()
	p.Add(1, []byte(`{"a":1}`))
	p.Add(2, []byte(`{"a":`))
	p.NextCursor = "x"
	p.Rewind(m) // a failed read, then the retry:
	p.Add(1, []byte(`{"a":1}`))
	p.Body = append(p.Body, ']')
	if string(p.Body) != `[{"a":1}]` || len(p.Skipped) != 0 || p.NextCursor != "" {
		t.Errorf("after a rewind and a retry: body %s, skipped %v, cursor %q", p.Body, p.Skipped, p.NextCursor)
	}
}
