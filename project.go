package formsapi

// Projection: fields=<name>,<name> keeps only those top-level members in
// each submission's data on a page of submissions. The stores read the
// page as they always do (a projection does not change which items a
// page holds, nor its cursor); the handler rewrites the page's items
// before it tags and sends them, so the tag covers what is sent.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/formsapi/formsapi/internal/find"
)

// maxFields bounds the names of one fields parameter: a 400 naming the
// limit past it.
const maxFields = 32

// fieldsParam is the fields parameter of listParams.
var fieldsParam = listParam{
	name: "fields", field: "Fields", sample: "email,name", list: true,
	parse: func(v string, q *Query) string {
		names := strings.Split(v, ",")
		if len(names) > maxFields {
			return fmt.Sprintf("%d names, more than %d (the fields count limit)", len(names), maxFields)
		}
		for _, n := range names {
			switch {
			case n == "":
				return "a name is empty: separate the names of top-level data members with single commas"
			case len(n) > find.MaxFieldBytes:
				return fmt.Sprintf("a name is longer than %d bytes (the fields name length limit)", find.MaxFieldBytes)
			case !utf8.ValidString(n):
				// No submission's data has such a member: it is valid UTF-8.
				return "a name is not valid UTF-8"
			}
		}
		slices.Sort(names)
		if len(slices.Compact(slices.Clone(names))) != len(names) {
			return "a name is given twice"
		}
		q.Fields = names
		return ""
	},
	append: func(b []byte, q Query) []byte {
		b = append(b, byte(len(q.Fields)))
		for _, f := range q.Fields {
			b = appendLenString(b, f)
		}
		return b
	},
	read: func(b []byte, q *Query) ([]byte, bool) {
		if len(b) < 1 || int(b[0]) > maxFields {
			return nil, false
		}
		n := int(b[0])
		b = b[1:]
		q.Fields = nil
		if n > 0 {
			q.Fields = make([]string, n)
		}
		for i := range n {
			var ok bool
			if q.Fields[i], b, ok = readString(b); !ok {
				return nil, false
			}
		}
		return b, true
	},
}

// projectItems rewrites the submissions in items, the JSON objects of a
// page separated by commas, keeping in each one's data only the members
// named in fields (sorted), in the order data has them. An item that does
// not decode is kept as it is: the page readers sent only objects they
// checked.
func projectItems(items []byte, fields []string) []byte {
	if len(items) == 0 {
		return items
	}
	var objs []json.RawMessage
	if err := json.Unmarshal(append(append([]byte{'['}, items...), ']'), &objs); err != nil {
		return items
	}
	out := make([]byte, 0, len(items))
	for i, o := range objs {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendProjected(out, o, fields)
	}
	return out
}

// submissionObject is a submission as sent, its members kept raw.
type submissionObject struct {
	FormID      json.RawMessage `json:"formId"`
	Data        json.RawMessage `json:"data"`
	Attachments json.RawMessage `json:"attachments"`
	CreatedAt   json.RawMessage `json:"createdAt"`
}

func appendProjected(b, obj []byte, fields []string) []byte {
	var s submissionObject
	if err := json.Unmarshal(obj, &s); err != nil || len(s.Data) == 0 {
		return append(b, obj...)
	}
	b = append(b, `{"formId":`...)
	b = append(b, s.FormID...)
	b = append(b, `,"data":{`...)
	dec := json.NewDecoder(bytes.NewReader(s.Data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return append(b[:len(b)-1], append(s.Data, `,"attachments":`...)...)
	}
	n := 0
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		if _, ok := slices.BinarySearch(fields, name); !ok {
			continue
		}
		b = appendComma(b, n)
		b = append(b, find.String(name)...)
		b = append(b, ':')
		b = append(b, v...)
		n++
	}
	b = append(b, `},"attachments":`...)
	b = append(b, s.Attachments...)
	b = append(b, `,"createdAt":`...)
	b = append(b, s.CreatedAt...)
	return append(b, '}')
}

// appendLenString appends s, length-prefixed.
func appendLenString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
