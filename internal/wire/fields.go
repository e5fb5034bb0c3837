package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// errNotObject is Members' error for data that is not a JSON object.
var errNotObject = errors.New("submission data is not a JSON object")

// Members calls fn with each member of the JSON object data, in the
// order it has them, its name decoded as encoding/json decodes it (the
// one decoding of a field name: the export's columns and the stores'
// field tables both use it). It returns an error, having called fn for
// the members before it, when data is not a JSON object.
func Members(data []byte, fn func(name string, value json.RawMessage)) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return errNotObject
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return fmt.Errorf("decode submission data: %w", err)
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return fmt.Errorf("decode submission data: %w", err)
		}
		fn(t.(string), v)
	}
	return nil
}

// FieldNames returns the names of the top-level members of data, in the
// order of their first appearance in it, each once: the fields one
// submission gives its form's field table (formsapi.FieldStore). Data
// that is not a JSON object (damaged, never from the write side) gives
// the names read before the damage, possibly none.
//
// Every write calls it: valid JSON, all a writer stores, is read in one
// pass without decoding its values (a name with escapes or invalid
// UTF-8 is decoded as Members decodes it); anything else goes through
// Members.
func FieldNames(data []byte) []string {
	var names []string
	var seen map[string]bool // past a few names, a set
	add := func(name string) {
		if seen != nil {
			if seen[name] {
				return
			}
			seen[name] = true
		} else {
			for _, n := range names {
				if n == name {
					return
				}
			}
			if len(names) == 16 {
				seen = make(map[string]bool, 32)
				for _, n := range names {
					seen[n] = true
				}
				seen[name] = true
			}
		}
		names = append(names, name)
	}
	if !json.Valid(data) {
		Members(data, func(name string, _ json.RawMessage) { add(name) })
		return names
	}
	i := SkipSpace(data, 0)
	if data[i] != '{' {
		return nil
	}
	for i = SkipSpace(data, i+1); data[i] != '}'; {
		start, end := i, ValueEnd(data, i)
		i = SkipSpace(data, ValueEnd(data, SkipSpace(data, SkipSpace(data, end)+1)))
		if data[i] == ',' {
			i = SkipSpace(data, i+1)
		}
		raw := data[start+1 : end-1]
		if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
			add(string(raw))
			continue
		}
		var name string
		if err := json.Unmarshal(data[start:end], &name); err != nil {
			return names
		}
		add(name)
	}
	return names
}
