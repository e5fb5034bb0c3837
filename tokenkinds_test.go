package formsapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/storetest"
)

// TestTokenOfEveryKindIsRefusedByEveryOther takes a real token of each
// kind the API hands out (a forms-list cursor, a submissions cursor, a
// sync token) and gives it where each kind is taken: only its own place
// accepts it; every other answers the 400 of that parameter.
func TestTokenOfEveryKindIsRefusedByEveryOther(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	h := formsapi.NewHandler(s, s)
	get := func(target string) response {
		t.Helper()
		return do(t, h, "GET", target, "Authorization", "Bearer "+storetest.KeyA)
	}
	field := func(target, name string) string {
		t.Helper()
		res := get(target)
		var body map[string]any
		if err := json.Unmarshal(res.body, &body); res.status != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %d %s", target, res.status, res.body)
		}
		v, _ := body[name].(string)
		if v == "" {
			t.Fatalf("GET %s: no %s in %s", target, name, res.body)
		}
		return v
	}
	subs := "/v1/forms/" + storetest.FormBusy + "/submissions"
	const (
		badCursor = "invalid cursor: use the nextCursor of a previous page of this same list"
		badSync   = `invalid sync: use "start" or the syncToken of a previous page of this form's feed`
	)
	kinds := []struct {
		name  string
		token string
		slot  string // where it is taken, the token appended
		msg   string // the 400 of that slot
	}{
		{"forms cursor", field("/v1/forms?limit=1", "nextCursor"), "/v1/forms?cursor=", badCursor},
		{"submissions cursor", field(subs+"?limit=1", "nextCursor"), subs + "?cursor=", badCursor},
		{"sync token", field(subs+"?sync=start&limit=1", "syncToken"), subs + "?sync=", badSync},
	}
	for _, tok := range kinds {
		for _, slot := range kinds {
			res := get(slot.slot + url.QueryEscape(tok.token))
			switch {
			case tok.name == slot.name && res.status != http.StatusOK:
				t.Errorf("a %s where it belongs: %d %s", tok.name, res.status, res.body)
			case tok.name != slot.name && (res.status != http.StatusBadRequest || string(res.body) != `{"success":false,"message":`+mustJSON(slot.msg)+`}`):
				t.Errorf("a %s given as a %s: %d %s, want 400 %q", tok.name, slot.name, res.status, res.body, slot.msg)
			}
		}
	}
}
