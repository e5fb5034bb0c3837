package formsapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/google/go-cmp/cmp"
)

// checkedOnly hides a store's fast path, so the handler takes the checked
// formsapi.Store path.
type checkedOnly struct{ formsapi.Store }

// TestFastPathMatchesCheckedPath walks every list of the seed in both
// orders, with filters and several page sizes, through the stores' fast
// path and through the checked path, and requires the same pages.
func TestFastPathMatchesCheckedPath(t *testing.T) {
	sq, err := sqlitestore.Open(filepath.Join(t.TempDir(), "f.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	if err := storetest.Load(context.Background(), sq, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	mem := seeded(t)
	for _, c := range []struct {
		name  string
		store formsapi.Store
		keys  formsapi.KeyResolver
	}{{"memstore", mem, mem}, {"sqlitestore", sq, sq}} {
		t.Run(c.name, func(t *testing.T) {
			fast := formsapi.NewHandler(c.store, c.keys)
			checked := formsapi.NewHandler(checkedOnly{c.store}, c.keys)
			for _, form := range []string{storetest.FormBusy, storetest.FormSmall, storetest.FormEmpty, storetest.FormB, "no-such-id"} {
				for _, query := range []string{"limit=1000", "limit=3", "limit=4&order=asc", "limit=5&since=2024-03-01T09:01:00Z&until=2024-03-01T09:04:00Z", "order=asc&since=2024-03-01T09:02:00Z"} {
					path := "/v1/forms/" + form + "/submissions"
					if got, want := pages(t, fast, path, query), pages(t, checked, path, query); !cmp.Equal(got, want) {
						t.Errorf("%s?%s: fast path differs (-checked +fast):\n%s", path, query, cmp.Diff(want, got))
					}
				}
			}
		})
	}
}

// pages walks a list and returns each page's status and body, with the
// cursor (sealed with a random nonce) masked.
func pages(t *testing.T, h http.Handler, path, query string) []any {
	t.Helper()
	var out []any
	target := path + "?" + query
	for n := 0; n < 100; n++ {
		res := do(t, h, "GET", target, bearer(storetest.KeyA)...)
		var body map[string]any
		if err := json.Unmarshal(res.body, &body); err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		next, _ := body["nextCursor"].(string)
		out = append(out, res.status, withoutCursor(body))
		if next == "" {
			return out
		}
		target = path + "?" + query + "&cursor=" + url.QueryEscape(next)
	}
	t.Fatalf("%s: the walk does not end", path)
	return nil
}
