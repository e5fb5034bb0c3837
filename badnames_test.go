package formsapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/storetest"
)

// TestNamesNotUTF8: a filter's field or a projected name that is not
// valid UTF-8 names no member any submission can have (a submission's
// data is valid UTF-8), so it is a 400 naming the parameter, before any
// store call, as a value that is not valid UTF-8 is.
func TestNamesNotUTF8(t *testing.T) {
	for query, says := range map[string]string{
		"filter[%FF]=1":              "invalid filter[…]: the field name is not valid UTF-8",
		"filter[a%ED%A0%80b]=1":      "invalid filter[…]: the field name is not valid UTF-8",
		"filter[a]=1&filter[b%C3]=x": "invalid filter[…]: the field name is not valid UTF-8",
		"fields=a,%FF":               "invalid fields: a name is not valid UTF-8",
		"fields=%C3%28":              "invalid fields: a name is not valid UTF-8",
	} {
		c := &counting{store: seeded(t), keys: seeded(t)}
		h := formsapi.NewHandler(c, c)
		res := do(t, h, "GET", findPath+"?"+query, bearer(storetest.KeyA)...)
		if res.status != http.StatusBadRequest || !strings.Contains(string(res.body), says) {
			t.Errorf("?%s: %d %s, want 400 saying %q", query, res.status, res.body, says)
		}
		if c.calls != 0 {
			t.Errorf("?%s: the store was called %d times", query, c.calls)
		}
	}
	// Names that are valid UTF-8, odd as they are, are names.
	h := findHandler(t)
	for _, query := range []string{"filter[%C3%A9]=1", "filter[a%00b]=1", "fields=%C3%A9,a%00b", "filter[%EF%BF%BD]=1"} {
		if res := do(t, h, "GET", findPath+"?"+query, bearer(storetest.KeyA)...); res.status != http.StatusOK {
			t.Errorf("?%s: %d %s, want 200", query, res.status, res.body)
		}
	}
}
