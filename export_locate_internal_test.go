package formsapi

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/wire"
)

// TestMatchLocatedAgrees: a filtered export's check of an object by the
// offsets its page found (matchLocated, wire.Page.Locate) gives what the
// check that walks the object gives (matchParts, and submissionParts
// with find.MatchValid): the same data, attachments and answer, for every
// clause set and stored object, on a page where objects of other shapes,
// a damaged one (left out) and one with invalid UTF-8 (sent with U+FFFD,
// its offsets moved) sit between the others, so that offsets taken from
// another object's place would give another answer. It checks too that
// the page found the plain objects' members (the fast path is taken).
func TestMatchLocatedAgrees(t *testing.T) {
	objects := []struct {
		obj   string
		found bool // the page finds its members
	}{
		{`{"formId":"f","data":{"country":"GB","n":1},"attachments":[],"createdAt":"x"}`, true},
		{`{"formId":"f","data":{"name":"a much longer name than the others","country":"NL","n":2},"attachments":[{"fileUrl":"https://x/GB.pdf"}],"createdAt":"x"}`, true},
		{`{"formId":"f","data":{"country":"GB"},"data":{"n":1,"country":"FR"}}`, true},
		{`{"formId":"f","data":{"x":{"country":"GB"}},"attachments":[]}`, true},
		{`{"formId":"f","data":{"country":"GB","country":"NL"}}`, true},
		{`{"formId":"f","data":[{"country":"GB"}]}`, false}, // data not an object
		{`{"formId":"f","data":{"country":"GB","n":1},"Data":{"country":"NL"}}`, false},
		{`{"formId":"f","DATA":{"country":"GB"}}`, false},
		{`{"formId":"f","data":{"c\u006funtry":"GB"}}`, false},
		{`{"formId":"f","data":{"n":3,"country":"G` + "\xff" + `B"},"attachments":[]}`, false},
		{`{"formId":"f","data":{"n":4,"country":"GB"}`, false}, // damaged: left out
		{`{"formId":"f","attachments":[]}`, false},             // no data
		{` {"data" : {"n" : 1 , "country" : "GB"} , "formId" : "f"} `, true},
		{`{"formId":"f","data":{"n":"1","country":null}}`, true},
		{`{"formId":"f","data":{"n":1.0,"country":"gb"},"attachments":[],"attachments":[{"fileUrl":"https://x/y"}]}`, true},
	}
	for _, set := range [][][3]string{
		{{"country", find.OpIn, "NL,GB"}},
		{{"country", find.OpEq, "GB"}},
		{{"n", find.OpGte, "1"}},
		{{"country", find.OpExists, "false"}},
		{{"n", find.OpNe, "1"}, {"country", find.OpIn, "GB,FR"}},
		{{"n", find.OpEq, "1"}, {"country", find.OpPrefix, "g"}, {"n", find.OpLt, "2"}},
	} {
		var cs []find.Clause
		for _, c := range set {
			clause, msg := find.ParseClause(c[0], c[1], c[2])
			if msg != "" {
				t.Fatal(msg)
			}
			cs = append(cs, clause)
		}
		cs = find.Prepare(cs)
		fields := make([]string, len(cs))
		for i, c := range cs {
			fields[i] = c.Field
		}
		page := wire.Page{Locate: fields}
		var kept []int // the objects the page holds, by index in objects
		for i, o := range objects {
			if page.AddAt(int64(i+1), []byte(o.obj)) {
				kept = append(kept, i)
			}
		}
		n := wire.LocatedStride(len(fields))
		if len(page.Located) != len(page.Positions)*n {
			t.Fatalf("%v: %d offsets for %d objects", set, len(page.Located), len(page.Positions))
		}
		start := 0
		for j, end := range page.Ends {
			obj := page.Body[start:end]
			if obj[0] == ',' {
				obj = obj[1:]
			}
			start = end
			name := fmt.Sprintf("%v on %s", set, objects[kept[j]].obj)
			data, att, keep, _, ok := matchLocated(obj, page.Located[j*n:(j+1)*n], cs)
			if ok != objects[kept[j]].found {
				t.Fatalf("%s: found %v", name, ok)
			}
			if !ok {
				continue
			}
			var tmp []byte
			wantData, wantAtt, _, err := submissionParts(obj, &tmp)
			if err != nil {
				t.Fatal(err)
			}
			wantKeep, _ := find.MatchValid(wantData, cs)
			if !bytes.Equal(data, wantData) || !bytes.Equal(att, wantAtt) || keep != wantKeep {
				t.Fatalf("%s: data %s, attachments %s, keep %v; walked: %s, %s, %v", name, data, att, keep, wantData, wantAtt, wantKeep)
			}
			if keyed := find.KeyedClause(cs); keyed >= 0 {
				d, a, k, _, checked, err := matchParts(obj, cs, keyed, &tmp)
				if err != nil {
					t.Fatal(err)
				}
				if !checked {
					d = wantData
					k, _ = find.MatchKeyed(d, cs, keyed)
				}
				if !bytes.Equal(d, data) || !bytes.Equal(a, att) || k != keep {
					t.Fatalf("%s: keep %v; matchParts: %s, %s, %v", name, keep, d, a, k)
				}
			}
		}
	}
}
