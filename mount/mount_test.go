package mount_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/mount"
)

const origin = "https://app.example.com"

// api returns the forms API over a store with one form of two
// submissions, allowing origin, and a key of its account.
func api(t *testing.T) (http.Handler, string) {
	t.Helper()
	ctx := context.Background()
	s := memstore.New()
	now := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "contact", Title: "Contact", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		sub := formsapi.Submission{FormID: "contact", CreatedAt: now.Add(time.Duration(i) * time.Second), Data: []byte(`{"n":1}`)}
		if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddKey(ctx, key, "acct"); err != nil {
		t.Fatal(err)
	}
	return formsapi.NewHandler(s, s, formsapi.WithCORS(origin)), key
}

// home is the host's own page.
func home(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the host's home page") }

// answer is what a request got.
type answer struct {
	code                  int
	contentType, body     string
	location, allowOrigin string
	link                  string
	message               string // the "message" member of a JSON error
}

func do(t *testing.T, h http.Handler, method, target, key string, preflight bool) answer {
	t.Helper()
	r := httptest.NewRequest(method, "http://forms.test"+target, nil)
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	if preflight {
		r.Header.Set("Origin", origin)
		r.Header.Set("Access-Control-Request-Method", "GET")
		r.Header.Set("Access-Control-Request-Headers", "authorization")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	a := answer{code: w.Code, contentType: w.Header().Get("Content-Type"), body: w.Body.String(),
		location: w.Header().Get("Location"), allowOrigin: w.Header().Get("Access-Control-Allow-Origin"),
		link: w.Header().Get("Link")}
	if strings.HasPrefix(a.contentType, "application/json") {
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(w.Body.Bytes(), &e) == nil {
			a.message = e.Message
		}
	}
	return a
}

// isJSON tells whether a is the forms API's JSON answer with code.
func isJSON(a answer, code int) bool {
	return a.code == code && strings.HasPrefix(a.contentType, "application/json")
}

// checkTheAPIsOwnAnswers checks what every documented mount must give:
// the host's GET / still served, a CORS preflight answered by the API
// (204 with the origin allowed), a JSON 405 for POST, pages with the
// prefix in their next-page link.
func checkTheAPIsOwnAnswers(t *testing.T, h http.Handler, key string) {
	t.Helper()
	if a := do(t, h, "GET", "/", "", false); a.code != 200 || a.body != "the host's home page" {
		t.Errorf("GET /: %+v, want the host's home page", a)
	}
	if a := do(t, h, "OPTIONS", "/api/v1/forms/contact/submissions", "", true); a.code != http.StatusNoContent || a.allowOrigin != origin {
		t.Errorf("preflight: %+v, want the API's 204 allowing %s", a, origin)
	}
	for _, m := range []string{"POST", "DELETE", "PUT", "PATCH", "OPTIONS", "BREW"} {
		if a := do(t, h, m, "/api/v1/forms", key, false); !isJSON(a, http.StatusMethodNotAllowed) {
			t.Errorf("%s /api/v1/forms: %+v, want the API's JSON 405", m, a)
		}
	}
	a := do(t, h, "GET", "/api/v1/forms/contact/submissions?limit=1", key, false)
	if !isJSON(a, 200) || !strings.HasPrefix(a.link, "<http://forms.test/api/v1/forms/contact/submissions?") {
		t.Errorf("a page: %+v, want 200 with a next link under /api", a)
	}
	if a := do(t, h, "GET", "/api/v1/nothing", key, false); !isJSON(a, 404) || a.message == "" {
		t.Errorf("GET /api/v1/nothing: %+v, want the API's JSON 404", a)
	}
}

// nonCanonical are paths under the mount that are not in canonical form,
// each with the path the ServeMux cleans it to ("" if it is clean to the
// ServeMux, which keeps a trailing slash).
var nonCanonical = [][2]string{
	{"/api//v1/forms", "/api/v1/forms"},
	{"/api/./v1/forms", "/api/v1/forms"},
	{"/api/v1/../v1/forms", "/api/v1/forms"},
	{"/api/v1//forms/contact/submissions", "/api/v1/forms/contact/submissions"},
	{"/api/v1/forms/", ""},
}

// TestPrefixBesideGetSlash mounts the API the one-line way in front of a
// ServeMux whose host has a method pattern for every path ("GET /", which
// a method-less "/api/" would conflict with): every answer under /api,
// the non-canonical paths included, is the API's JSON.
func TestPrefixBesideGetSlash(t *testing.T) {
	t.Parallel()
	api, key := api(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", home)
	mux.HandleFunc("POST /api-keys", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the host's") })
	h := mount.Prefix("/api", api, mux)

	checkTheAPIsOwnAnswers(t, h, key)
	for _, p := range append(nonCanonical, [2]string{"/api"}) {
		if a := do(t, h, "GET", p[0], key, false); !isJSON(a, 404) || a.location != "" {
			t.Errorf("GET %s: %+v, want the API's JSON 404, no redirect", p, a)
		}
	}
	// Other paths stay the host's, prefixes of /api included.
	for _, p := range []string{"/apis", "/x/api/v1/forms"} {
		if a := do(t, h, "GET", p, key, false); a.body != "the host's home page" {
			t.Errorf("GET %s: %+v, want the host's", p, a)
		}
	}
	if a := do(t, h, "POST", "/api-keys", "", false); a.body != "the host's" {
		t.Errorf("POST /api-keys: %+v, want the host's", a)
	}
	// An escaped path reaches the API with its escapes: a%2Fb is one form
	// ID (not found), and an escaped prefix is still the prefix.
	if a := do(t, h, "GET", "/api/v1/forms/a%2Fb/submissions", key, false); !isJSON(a, 404) || !strings.Contains(a.message, "form") {
		t.Errorf("GET an escaped form ID: %+v, want the API's form 404", a)
	}
	if a := do(t, h, "GET", "/%61pi/v1/forms/contact/submissions?limit=1", key, false); !isJSON(a, 200) || !strings.HasPrefix(a.link, "<http://forms.test/%61pi/v1/") {
		t.Errorf("GET under an escaped prefix: %+v, want the page, linked under the prefix as sent", a)
	}
}

// TestPrefixEscapedSlash (issue 42): an escaped slash (%2F) is part of a
// path segment on both sides of the prefix, as the API at the root and a
// ServeMux read it. /api%2Fv1/forms has no segment "api" (its first is
// "api/v1"), so it is the host's, as /apix is; it was served as
// /api/v1/forms. /api/v1%2Fforms is the API's /v1%2Fforms: the JSON 404
// of the API at the root.
func TestPrefixEscapedSlash(t *testing.T) {
	t.Parallel()
	api, key := api(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", home)
	h := mount.Prefix("/api", api, mux)
	for _, p := range []string{"/api%2Fv1/forms", "/api%2fv1/forms", "/api%2F", "/%61pi%2Fv1/forms/contact/submissions"} {
		if a := do(t, h, "GET", p, key, false); a.body != "the host's home page" {
			t.Errorf("GET %s: %+v, want the host's (no segment is the prefix)", p, a)
		}
	}
	if a := do(t, api, "GET", "/v1%2Fforms", key, false); !isJSON(a, 404) {
		t.Errorf("GET /v1%%2Fforms at the root: %+v, want the API's JSON 404", a)
	}
	for _, p := range []string{"/api/v1%2Fforms", "/%61pi/v1%2Fforms"} {
		if a := do(t, h, "GET", p, key, false); !isJSON(a, 404) {
			t.Errorf("GET %s: %+v, want the API's JSON 404, as /v1%%2Fforms at the root", p, a)
		}
	}
	// A prefix of two segments: escaped letters are the prefix, an
	// escaped slash is not.
	deep := mount.Prefix("/x/api", api, mux)
	if a := do(t, deep, "GET", "/%78/%61%70%69/v1/forms/contact/submissions?limit=1", key, false); !isJSON(a, 200) {
		t.Errorf("GET under /x/api escaped: %+v, want the page", a)
	}
	if a := do(t, deep, "GET", "/x%2Fapi/v1/forms", key, false); a.body != "the host's home page" {
		t.Errorf("GET /x%%2Fapi/v1/forms: %+v, want the host's", a)
	}
	// A ServeMux mount reads it the same way: its "/api/" pattern matches
	// no segment "api/v1", and the ServeMux's own plain 404 answers.
	sm := http.NewServeMux()
	sm.HandleFunc("GET /{$}", home)
	sm.Handle("/api/", http.StripPrefix("/api", api))
	if a := do(t, sm, "GET", "/api%2Fv1/forms", key, false); a.code != 404 || isJSON(a, 404) {
		t.Errorf("ServeMux, GET /api%%2Fv1/forms: %+v, want the ServeMux's 404, not the API's", a)
	}
}

// TestServeMuxMountBesideHomePage mounts the API on a ServeMux the
// method-less way ("/api/"), beside a host that serves its home page at
// "GET /{$}" (not "GET /", which conflicts): preflights and 405s are the
// API's; a non-canonical path gets the ServeMux's 307 to the clean path,
// as docs/embedding.md says, which the API then answers.
func TestServeMuxMountBesideHomePage(t *testing.T) {
	t.Parallel()
	api, key := api(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", home)
	mux.Handle("/api/", http.StripPrefix("/api", api))

	checkTheAPIsOwnAnswers(t, mux, key)
	for _, p := range nonCanonical {
		a := do(t, mux, "GET", p[0], key, false)
		switch {
		case p[1] == "" && !isJSON(a, 404):
			t.Errorf("GET %s: %+v, want the API's JSON 404", p[0], a)
		case p[1] != "" && (a.code != http.StatusTemporaryRedirect || a.location != p[1]):
			t.Errorf("GET %s: %+v, want the ServeMux's 307 to %s", p[0], a, p[1])
		}
	}
}

// TestServeMuxPitfalls holds docs/embedding.md's warnings to what the
// ServeMux does: a method-less "/api/" beside "GET /" panics when
// registered, and a "GET /api/" mount leaves preflights and other methods
// to the ServeMux's plain-text 405.
func TestServeMuxPitfalls(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	api, key := api(t)
	panicked := func() (v any) {
		defer func() { v = recover() }()
		mux := http.NewServeMux()
		mux.HandleFunc("GET /", home)
		mux.Handle("/api/", http.StripPrefix("/api", api))
		return nil
	}()
	is.True(panicked != nil && strings.Contains(fmt.Sprint(panicked), "conflicts with pattern")) // "/api/" beside "GET /" panics

	mux := http.NewServeMux()
	mux.HandleFunc("GET /", home)
	mux.Handle("GET /api/", http.StripPrefix("/api", api))
	a := do(t, mux, "OPTIONS", "/api/v1/forms", "", true)
	is.Equal(a.code, http.StatusMethodNotAllowed) // the ServeMux answers the preflight
	is.Equal(a.allowOrigin, "")                   // with no CORS header: the browser fails the request
	a = do(t, mux, "POST", "/api/v1/forms", key, false)
	is.True(a.code == http.StatusMethodNotAllowed && strings.HasPrefix(a.contentType, "text/plain")) // the ServeMux's plain-text 405
}

// TestPrefixRefusesBadPrefixes: a setup mistake panics at start.
func TestPrefixRefusesBadPrefixes(t *testing.T) {
	t.Parallel()
	api, _ := api(t)
	host := http.NewServeMux()
	for _, p := range []string{"", "/", "api", "/api/../x", "/api//v1", "//"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Prefix(%q) did not panic", p)
				}
			}()
			mount.Prefix(p, api, host)
		}()
	}
	for _, h := range [][2]http.Handler{{nil, host}, {api, nil}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Prefix with a nil handler did not panic")
				}
			}()
			mount.Prefix("/api", h[0], h[1])
		}()
	}
	// A trailing slash is dropped: "/api/" mounts at /api.
	r := httptest.NewRequest("GET", "/api", nil)
	w := httptest.NewRecorder()
	mount.Prefix("/api/", api, host).ServeHTTP(w, r)
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		t.Errorf("Prefix(\"/api/\") left /api to the host: %d %s", w.Code, w.Body)
	}
}
