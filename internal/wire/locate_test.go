package wire

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// locateReference finds what ScanObjectLocating finds, by decoding obj
// as encoding/json does: the last member named data or attachments in
// any case, and in data (when an object) the last member named each of
// fields.
func locateReference(t *testing.T, obj []byte, fields []string) (data, att []byte, raws [][]byte, present []bool) {
	t.Helper()
	var top struct{ Data, Attachments json.RawMessage }
	if err := json.Unmarshal(obj, &top); err != nil {
		t.Fatalf("%s: %v", obj, err)
	}
	raws, present = make([][]byte, len(fields)), make([]bool, len(fields))
	var m map[string]json.RawMessage
	if bytes.HasPrefix(top.Data, []byte("{")) {
		if err := json.Unmarshal(top.Data, &m); err != nil {
			t.Fatalf("%s: %v", top.Data, err)
		}
	}
	for k, f := range fields {
		raws[k], present[k] = m[f]
	}
	return top.Data, top.Attachments, raws, present
}

// span is obj[at[i]:at[i+1]], nil for none.
func span(obj []byte, at []int, i int) []byte {
	if at[i] < 0 {
		return nil
	}
	return obj[at[i]:at[i+1]]
}

// TestScanObjectLocating: the offsets ScanObjectLocating gives are those
// of the members encoding/json reads (the last of a name, data's and
// attachments' in any case, a field only among data's own members), on
// hand-written objects and on random ones built from names that fool a
// reader of bytes (cases, escapes, a long s that folds to s, names
// outside ASCII, members nested or named twice); it gives none (at[0]
// -1) when a name could mean one of them without being its bytes, or
// the object holds invalid UTF-8; and it finds them whenever no such name
// is there.
func TestScanObjectLocating(t *testing.T) {
	t.Parallel()
	fields := []string{"country", "n", "coüntry"}
	at := make([]int, LocatedStride(len(fields)))
	check := func(obj []byte, sure bool) {
		t.Helper()
		valid, utf8OK, _ := ScanObjectLocating(obj, MaxSubmissionDepth, fields, at)
		wantValid, wantUTF8 := ScanObject(obj)
		if valid != wantValid || utf8OK != wantUTF8 {
			t.Fatalf("%s: valid %v, utf8 %v; ScanObject: %v, %v", obj, valid, utf8OK, wantValid, wantUTF8)
		}
		if !valid {
			return
		}
		data, att, raws, present := locateReference(t, obj, fields)
		if at[0] < 0 {
			if sure && utf8OK && data != nil {
				t.Fatalf("%s: data not found", obj)
			}
			return
		}
		if !sure || !utf8OK {
			t.Fatalf("%s: found data at %d, though a name or a byte could fool a reader of bytes", obj, at[0])
		}
		if got := span(obj, at, 0); !bytes.Equal(got, data) {
			t.Fatalf("%s: data %s, encoding/json reads %s", obj, got, data)
		}
		if got := span(obj, at, 2); !bytes.Equal(got, att) {
			t.Fatalf("%s: attachments %s, encoding/json reads %s", obj, got, att)
		}
		for k, f := range fields {
			got := span(obj, at, 4+2*k)
			if (got != nil) != present[k] || !bytes.Equal(got, raws[k]) {
				t.Fatalf("%s: %s %s, encoding/json reads %s (present %v)", obj, f, got, raws[k], present[k])
			}
		}
	}
	for _, c := range []struct {
		obj  string
		sure bool
	}{
		{`{"formId":"f","data":{"country":"GB","n":1},"attachments":[],"createdAt":"x"}`, true},
		{` { "data" : { "country" : "GB" , "n" : [1, {"n":2}] } , "attachments" : [ {"country":"NL"} ] } `, true},
		{`{"data":{"country":"GB"},"data":{"n":1}}`, true},                          // the last data: no country
		{`{"data":{"country":"GB","country":"NL"}}`, true},                          // the last country
		{`{"data":{"x":{"country":"GB"}},"attachments":[],"attachments":{}}`, true}, // nested: no country
		{`{"data":[{"country":"GB"}]}`, true},                                       // data not an object
		{`{"data":"{\"country\":\"GB\"}"}`, true},
		{`{"attachments":[],"x":{"data":{"country":"GB"}}}`, true}, // no data
		{`{"data":{"coüntry":"GB"}}`, true},                        // a name outside ASCII, its own bytes
		{`{"data":{"country":"GB"},"Data":{"n":1}}`, false},        // encoding/json reads Data
		{`{"data":{"country":"GB"},"d\u0061ta":{"n":1}}`, false},
		{`{"data":{"country":"GB"},"ATTACHMENTS":[1]}`, false},
		{`{"data":{"country":"GB"},"attachmentſ":[1]}`, false}, // ſ folds to s
		{`{"data":{"c\u006funtry":"GB"}}`, false},
		{`{"data":{"country":"G` + "\xff" + `B"}}`, false}, // sent as U+FFFD: the offsets would move
		{`{"data":{"country":"GB"},"formId":"` + "\xff" + `"}`, false},
		{`{"data":{"country":"GB"}`, true}, // not valid
		{`{"data":{"country":"GB"}} x`, true},
	} {
		check([]byte(c.obj), c.sure)
	}

	// Random objects: names from a pool, each marked whether a reader of
	// bytes may take it as it is written.
	type name struct {
		text string
		sure bool
	}
	top := []name{{`data`, true}, {`data`, true}, {`attachments`, true}, {`formId`, true}, {`x`, true},
		{`Data`, false}, {`DATA`, false}, {`d\u0061ta`, false}, {`Attachments`, false}, {`attachmentſ`, false}, {`dätä`, false}}
	inner := []name{{`country`, true}, {`country`, true}, {`n`, true}, {`coüntry`, true}, {`other`, true},
		{`Country`, true}, {`c\u006funtry`, false}, {`n\u0000`, false}}
	rng := rand.New(rand.NewPCG(39, 2))
	ws := func() string { return [...]string{"", "", " ", "\n\t"}[rng.IntN(4)] }
	var value func(depth int, names []name, sure *bool) string
	object := func(depth int, names []name, sure *bool) string {
		var b strings.Builder
		b.WriteString("{" + ws())
		for i := range rng.IntN(5) {
			if i > 0 {
				b.WriteString("," + ws())
			}
			n := names[rng.IntN(len(names))]
			*sure = *sure && n.sure
			b.WriteString(`"` + n.text + `"` + ws() + ":" + ws())
			next, inData := inner, sure
			if depth > 0 {
				next = top // deeper: any name, none looked for
			}
			if depth == 0 && n.text != "data" {
				ignored := true // only data's members are looked at
				inData = &ignored
			}
			b.WriteString(value(depth+1, next, inData) + ws())
		}
		return b.String() + "}"
	}
	value = func(depth int, names []name, sure *bool) string {
		if depth > 3 {
			return `"GB"`
		}
		switch rng.IntN(7) {
		case 0, 1, 2:
			if depth > 1 {
				ignored := true // names below data's members are not looked at
				return object(depth, names, &ignored)
			}
			return object(depth, names, sure)
		case 3:
			ignored := true
			return "[" + value(depth+1, top, &ignored) + "," + ws() + "1]"
		case 4:
			return `"G\"B"`
		case 5:
			return `-1.5e3`
		}
		return `null`
	}
	for range 20000 {
		sure := true
		obj := object(0, top, &sure)
		check([]byte(obj), sure)
	}
}
