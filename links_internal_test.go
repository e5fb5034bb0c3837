package formsapi

import (
	"net/url"
	"testing"
)

// TestNextLinkIsValuesEncode: the next link, built without url.Values,
// carries byte for byte the query url.Values.Encode writes, for cursors
// and limits with characters the encoding escapes.
func TestNextLinkIsValuesEncode(t *testing.T) {
	for _, c := range []struct{ cursor, limit string }{
		{"abc", ""},
		{"abc", "10"},
		{"a+b/c=d_-", "25"},
		{"x y&z?#%", "1 0"},
		{"", "100"},
		{"é\x00", "&="},
	} {
		v := url.Values{"cursor": {c.cursor}}
		if c.limit != "" {
			v.Set("limit", c.limit)
		}
		const base = "http://h/v1/forms/f/submissions"
		if got, want := nextLink(base, c.cursor, c.limit), "<"+base+"?"+v.Encode()+`>; rel="next"`; got != want {
			t.Errorf("nextLink(%q, %q) = %q, want %q", c.cursor, c.limit, got, want)
		}
	}
}
