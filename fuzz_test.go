package formsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
	"github.com/formsapi/formsapi/storetest"
)

// bearerGrammar is RFC 6750's credentials grammar, written independently
// of the parser: scheme, one or more spaces, b64token.
var bearerGrammar = regexp.MustCompile(`^(?i:bearer) +([A-Za-z0-9._~+/-]+=*)$`)

// FuzzAuthorization checks that the handler accepts an Authorization
// header exactly when it matches the grammar, fits MaxKeyLen and, for keys
// with our prefix, has a good checksum, and that only then is the
// resolver asked. One handler serves every input (building one per input
// ran about 40 inputs a second), with refusals unpaced: paced, the
// refused headers would be answered 100 a second.
//
//	go test -run '^$' -fuzz '^FuzzAuthorization$' -fuzztime 10m .
func FuzzAuthorization(f *testing.F) {
	k, _ := formsapi.NewKey()
	for _, s := range []string{"Bearer " + k, "bearer abc", "BEARER   abc==", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz",
		"Bearer a b", "Bearer\tabc", "Bearer tök", "Bearer a,b", "Bearer %41", "Bearer abc;x", "  bearer    tok  ",
		"Bearer \xff\xfe", "Bearer =", "Bearer a=b", "Bearer " + k[:len(k)-1] + "0", "Token abc", "Bearer " + strings.Repeat("a", 300)} {
		f.Add(s)
	}
	var mu sync.Mutex
	var got []string // the keys the resolver was asked about, for the input being run
	resolver := formsapi.KeyResolverFunc(func(_ context.Context, key string) (string, error) {
		mu.Lock()
		got = append(got, key)
		mu.Unlock()
		return "acct", nil
	})
	store := fakeStore{forms: func(context.Context) (formsapi.Page[formsapi.Form], error) {
		return formsapi.Page[formsapi.Form]{}, nil
	}}
	h := formsapi.NewHandler(store, resolver, formsapi.WithoutRefusalPacing())
	f.Fuzz(func(t *testing.T, header string) {
		mu.Lock()
		got = got[:0]
		mu.Unlock()
		r := httptest.NewRequest("GET", "/v1/forms", nil)
		r.Header["Authorization"] = []string{header}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		mu.Lock()
		asked := slices.Clone(got)
		mu.Unlock()

		trimmed := strings.Trim(header, " \t")
		m := bearerGrammar.FindStringSubmatch(trimmed)
		want := m != nil && len(m[1]) <= maxKeyLen &&
			(!strings.HasPrefix(m[1], keyformat.Prefix) || checkKey(m[1]) == nil)
		if accepted := w.Code == 200; accepted != want {
			t.Fatalf("header %q: status %d, grammar says accept=%v", header, w.Code, want)
		}
		if want != (len(asked) == 1) {
			t.Fatalf("header %q: %d resolver calls", header, len(asked))
		}
		if want && asked[0] != m[1] {
			t.Fatalf("header %q: resolver got %q, want %q", header, asked[0], m[1])
		}
		if !want && w.Code != 401 {
			t.Fatalf("header %q: status %d, want 401", header, w.Code)
		}
	})
}

// FuzzHandler drives the whole handler over memstore with a fuzzed method,
// path, query and extra header, with one of the seed's keys or none.
//
//	go test -run '^$' -fuzz '^FuzzHandler$' -fuzztime 10m .
func FuzzHandler(f *testing.F) {
	for _, c := range []struct {
		method, path, query, hName, hValue string
		key                                uint8
	}{
		{"GET", "/v1/forms", "", "", "", 0},
		{"GET", "/v1/forms/contact-a/submissions", "limit=3&order=asc", "Accept", "application/json", 0},
		{"GET", "/v1/forms/contact-b/submissions", "", "X-Account-ID", storetest.AccountB, 0},
		{"GET", "/v1/forms/contact-b/submissions", "accountId=acct-b", "Cookie", "account=acct-b", 1},
		{"HEAD", "/v1/forms", "since=2024-03-01T09:00:00Z&until=2024-03-01T10:00:00Z", "", "", 2},
		{"POST", "/v1/forms", "", "Content-Length", "5000000", 0},
		{"GET", "/v1//forms", "", "", "", 0},
		{"GET", "/v1/forms/../forms", "cursor=abc", "", "", 0},
		{"GET", "/v1/forms/%2e%2e/submissions", "limit=%zz", "", "", 3},
		{"get", "/v1/forms", "", "", "", 0},
		{"GET", "/v1/forms/contact-a\x00/submissions", "", "X-Request-Id", "id", 0},
		{"GET", "/v1/openapi.json", "", "", "", 4},
		{"OPTIONS", "*", "", "Origin", "https://evil.example", 0},
	} {
		f.Add(c.method, c.path, c.query, c.hName, c.hValue, c.key)
	}
	s := seeded(f)
	keys := []string{storetest.KeyA, storetest.KeyB, storetest.KeyRevoked, storetest.KeyNotAdded, ""}
	h := formsapi.NewHandler(s, s, formsapi.WithoutRefusalPacing()) // paced, its refused keys would be answered 100 a second
	f.Fuzz(func(t *testing.T, method, path, query, hName, hValue string, key uint8) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery = method, path, "", query
		if hName != "" && hName != "Authorization" {
			r.Header[hName] = []string{hValue}
		}
		k := keys[int(key)%len(keys)]
		if k != "" {
			r.Header.Set("Authorization", "Bearer "+k)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		body := w.Body.Bytes()
		switch w.Code {
		case 200, 400, 401, 404, 405:
		default:
			t.Fatalf("%s %q ?%q: status %d", method, path, query, w.Code)
		}
		for name, want := range map[string]string{"Content-Type": "application/json; charset=utf-8", "Cache-Control": wantCacheControl(w.Code, body), "X-Content-Type-Options": "nosniff"} {
			if got := w.Header().Get(name); got != want {
				t.Fatalf("%s %q: %s %q", method, path, name, got)
			}
		}
		if w.Header().Get("X-Request-Id") == "" || w.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("%s %q: headers %v", method, path, w.Header())
		}
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s %q: body is not JSON: %q", method, path, body)
		}
		if _, isDoc := v["openapi"]; !isDoc {
			if _, ok := v["success"].(bool); !ok {
				t.Fatalf("%s %q: no success in %q", method, path, body)
			}
			if _, ok := v["message"].(string); !ok {
				t.Fatalf("%s %q: no message in %q", method, path, body)
			}
		}
		if bytes.Contains(body, []byte(storetest.Canary)) {
			t.Fatalf("%s %q: internal metadata in %q", method, path, body)
		}
		if k != storetest.KeyB && bytes.Contains(body, []byte(storetest.CanaryB)) {
			t.Fatalf("%s %q: account B's data reached another key: %q", method, path, body)
		}
		if k == storetest.KeyB && bytes.Contains(body, []byte(`"contact-a"`)) {
			t.Fatalf("%s %q: account A's data reached B: %q", method, path, body)
		}
	})
}
