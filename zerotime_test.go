package formsapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestZeroTimeBound: since and until at 0001-01-01T00:00:00Z, the zero
// time, in any offset, are a 400 naming the parameter wherever they are
// parsed (the lists and the summary; the export takes neither), not
// read as no bound (an until there would list everything). An instant
// before it is a bound like any other, and its cursor is sealed as before.
func TestZeroTimeBound(t *testing.T) {
	m := memstore.New()
	if err := storetest.Load(context.Background(), m, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	h := formsapi.NewHandler(m, m)
	form := "/v1/forms/" + storetest.FormBusy
	for _, zero := range []string{"0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000Z", "0001-01-01T02:00:00%2B02:00"} {
		for _, c := range []struct{ target, param string }{
			{"/v1/forms?since=" + zero, "since"},
			{"/v1/forms?until=" + zero, "until"},
			{form + "/submissions?since=" + zero, "since"},
			{form + "/submissions?until=" + zero, "until"},
			{form + "/submissions?since=" + zero + "&until=2030-01-01T00:00:00Z", "since"},
			{form + "/summary?since=" + zero + "&until=2024-01-02T00:00:00Z", "since"},
			{form + "/summary?until=" + zero, "until"},
			{form + "/export?since=" + zero, "since"},
		} {
			r := do(t, h, "GET", c.target, bearer(storetest.KeyA)...)
			if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "invalid "+c.param) && !strings.Contains(string(r.body), "invalid \\\""+c.param) {
				t.Errorf("%s: %d %s, want 400 naming %s", c.target, r.status, r.body, c.param)
			}
			if !strings.Contains(c.target, "/export") && !strings.Contains(string(r.body), "zero time") {
				t.Errorf("%s: %s, want the message to name the zero time", c.target, r.body)
			}
		}
	}
	// A bound before the zero time keeps everything; its cursor reads on
	// with the same since, and refuses another.
	since := url.QueryEscape("0000-12-31T23:59:59Z")
	all := do(t, h, "GET", form+"/submissions?limit=1000", bearer(storetest.KeyA)...)
	first := do(t, h, "GET", form+"/submissions?limit=2&since="+since, bearer(storetest.KeyA)...)
	if all.status != http.StatusOK || first.status != http.StatusOK {
		t.Fatalf("pages: %d %s / %d %s", all.status, all.body, first.status, first.body)
	}
	var p struct {
		Items      []json.RawMessage `json:"submissions"`
		NextCursor string            `json:"nextCursor"`
	}
	if err := json.Unmarshal(first.body, &p); err != nil || len(p.Items) != 2 || p.NextCursor == "" {
		t.Fatalf("first page: %v %s", err, first.body)
	}
	next := form + "/submissions?limit=2&cursor=" + url.QueryEscape(p.NextCursor)
	if r := do(t, h, "GET", next+"&since="+since, bearer(storetest.KeyA)...); r.status != http.StatusOK {
		t.Errorf("the next page with the same since: %d %s", r.status, r.body)
	}
	if r := do(t, h, "GET", next+"&since=2000-01-01T00:00:00Z", bearer(storetest.KeyA)...); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "issued for another since") {
		t.Errorf("the next page with another since: %d %s", r.status, r.body)
	}
}
