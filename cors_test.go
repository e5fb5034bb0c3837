package formsapi_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/storetest"
)

const appOrigin = "https://app.example.com"

// preflight sends a browser's preflight for a GET with the key and a
// validator, from origin, without recording it: a preflight is no
// operation of openapi.json.
func preflight(h http.Handler, path, origin string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("OPTIONS", path, nil)
	r.Header.Set("Origin", origin)
	r.Header.Set("Access-Control-Request-Method", "GET")
	r.Header.Set("Access-Control-Request-Headers", "authorization,if-none-match")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// headerList returns the comma-separated values of every line of name.
func headerList(h http.Header, name string) []string {
	var all []string
	for _, v := range h.Values(name) {
		for _, item := range strings.Split(v, ",") {
			all = append(all, strings.TrimSpace(item))
		}
	}
	return all
}

func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(v string) bool { return strings.EqualFold(v, s) })
}

// TestCORSPreflight: an allowed origin's preflight is answered 204 with
// no body, before the key resolver or the store is asked, allowing GET
// with Authorization and If-None-Match; another origin's gets no CORS
// header at all and the 405 of any OPTIONS, as without WithCORS.
func TestCORSPreflight(t *testing.T) {
	is := is.New(t)
	s := seeded(t)
	c := &counting{store: s, keys: s}
	h := formsapi.NewHandler(c, c, formsapi.WithCORS(appOrigin, "http://localhost:5173"))

	for _, path := range []string{"/v1/forms", "/v1/forms/" + storetest.FormBusy + "/submissions", "/v1/openapi.json"} {
		w := preflight(h, path, appOrigin)
		is.Equal(w.Code, http.StatusNoContent)                             // answered
		is.Equal(w.Body.Len(), 0)                                          // with no body
		is.Equal(w.Header().Get("Access-Control-Allow-Origin"), appOrigin) // for this origin
		is.True(containsFold(headerList(w.Header(), "Access-Control-Allow-Methods"), "GET"))
		is.True(containsFold(headerList(w.Header(), "Access-Control-Allow-Headers"), "Authorization"))
		is.True(containsFold(headerList(w.Header(), "Access-Control-Allow-Headers"), "If-None-Match"))
		is.True(containsFold(headerList(w.Header(), "Vary"), "Origin"))
		is.Equal(w.Header().Get("Access-Control-Allow-Credentials"), "") // no credentials mode
		is.True(w.Header().Get("Access-Control-Max-Age") != "")
		is.True(w.Header().Get("X-Request-Id") != "") // like every answer
	}
	is.Equal(c.calls+c.resolves, 0) // neither the key resolver nor the store was asked

	r := httptest.NewRequest("OPTIONS", "/v1/forms", nil)
	r.Header.Set("Origin", appOrigin)
	r.Header.Set("Access-Control-Request-Method", "GET")
	r.Header.Set("X-Request-Id", "browser-trace-1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	is.Equal(w.Code, http.StatusNoContent)
	is.Equal(w.Header().Get("X-Request-Id"), "browser-trace-1") // the client's own, as on any answer

	w = preflight(h, "/v1/forms", "http://localhost:5173")
	is.Equal(w.Header().Get("Access-Control-Allow-Origin"), "http://localhost:5173") // the other listed origin

	for _, origin := range []string{"https://evil.example", "https://app.example.com.evil.example", "http://app.example.com", "null"} {
		w := preflight(h, "/v1/forms", origin)
		is.Equal(w.Code, http.StatusMethodNotAllowed) // as without CORS
		for name := range w.Header() {
			is.True(!strings.HasPrefix(name, "Access-Control-")) // no CORS header
		}
		is.True(containsFold(headerList(w.Header(), "Vary"), "Origin")) // but the answer varies by origin
	}

	plain := seededHandler(t)
	w = preflight(plain, "/v1/forms", appOrigin)
	is.Equal(w.Code, http.StatusMethodNotAllowed) // off by default
	for name := range w.Header() {
		is.True(!strings.HasPrefix(name, "Access-Control-"))
	}
	is.True(!containsFold(headerList(w.Header(), "Vary"), "Origin"))
}

// TestCORSActualRequests: a GET from an allowed origin gets
// Access-Control-Allow-Origin, the headers it may read, and Vary naming
// Origin beside what the handler varies by; one from another origin, or
// without Origin, gets none of it; "*" allows every origin.
func TestCORSActualRequests(t *testing.T) {
	is := is.New(t)
	h := seededHandler(t, formsapi.WithCORS(appOrigin))
	page := "/v1/forms/" + storetest.FormBusy + "/submissions?limit=2"

	res := do(t, h, "GET", page, append(bearer(storetest.KeyA), "Origin", appOrigin)...)
	is.Equal(res.status, 200)
	is.True(res.header.Get("Link") != "") // a page with a next one
	is.Equal(res.header.Get("Access-Control-Allow-Origin"), appOrigin)
	exposed := headerList(res.header, "Access-Control-Expose-Headers")
	for _, name := range []string{"Link", "ETag", "RateLimit", "RateLimit-Policy", "Retry-After", "WWW-Authenticate", "X-Request-Id"} {
		is.True(containsFold(exposed, name)) // readable by the page
	}
	vary := headerList(res.header, "Vary")
	is.True(containsFold(vary, "Origin") && containsFold(vary, "Authorization") && containsFold(vary, "Accept-Encoding"))

	res = do(t, h, "GET", page, append(bearer(storetest.KeyA), "Origin", appOrigin, "If-None-Match", res.header.Get("ETag"))...)
	is.Equal(res.status, 304)
	is.Equal(res.header.Get("Access-Control-Allow-Origin"), appOrigin) // a 304 too

	res = do(t, h, "GET", "/v1/forms", "Origin", appOrigin)
	is.Equal(res.status, 401)
	is.Equal(res.header.Get("Access-Control-Allow-Origin"), appOrigin) // the page can read why

	for _, headers := range [][]string{{"Origin", "https://evil.example"}, nil, {"Origin", appOrigin, "Origin", appOrigin}} {
		res = do(t, h, "GET", page, append(bearer(storetest.KeyA), headers...)...)
		is.Equal(res.status, 200) // served: CORS is the browser's to enforce
		for name := range res.header {
			is.True(!strings.HasPrefix(name, "Access-Control-")) // with no CORS header
		}
		is.True(containsFold(headerList(res.header, "Vary"), "Origin"))
	}

	any := seededHandler(t, formsapi.WithCORS("*"))
	res = do(t, any, "GET", "/v1/openapi.json", "Origin", "https://anyone.example")
	is.Equal(res.status, 200)
	is.Equal(res.header.Get("Access-Control-Allow-Origin"), "*")
	w := preflight(any, "/v1/forms", "https://anyone.example")
	is.Equal(w.Code, http.StatusNoContent)
	is.Equal(w.Header().Get("Access-Control-Allow-Origin"), "*")
	is.True(containsFold(headerList(w.Header(), "Access-Control-Allow-Headers"), "Authorization")) // named: "*" would not cover it
}

// TestCORSExposesEveryHeaderSent: over every kind of answer the handler
// gives (a page with a next link, a 304, each 401, a 429, a 404, a 405,
// the OpenAPI document, an export), every response header is one a
// browser lets a page read anyway (CORS-safelisted) or in
// Access-Control-Expose-Headers, the one list (cors.go), and every name
// of that list was sent by one of them. A header added to the handler
// without adding it there fails this test.
func TestCORSExposesEveryHeaderSent(t *testing.T) {
	is := is.New(t)
	h := seededHandler(t, formsapi.WithCORS(appOrigin),
		formsapi.WithRateLimit(ratelimit.Options{Limiter: ratelimit.NewMemory(), Policy: ratelimit.Policy{Name: "t", Quota: 3, Window: time.Hour}}))
	page := "/v1/forms/" + storetest.FormBusy + "/submissions?limit=2"
	origin := []string{"Origin", appOrigin}
	first := do(t, h, "GET", page, append(bearer(storetest.KeyA), origin...)...)
	answers := []response{
		first,
		do(t, h, "GET", page, append(bearer(storetest.KeyA), append(origin, "If-None-Match", first.header.Get("ETag"), "Accept-Encoding", "gzip")...)...),
		do(t, h, "GET", page+"&sync=start", append(bearer(storetest.KeyA), append(origin, "Accept-Encoding", "gzip")...)...),
		do(t, h, "GET", "/v1/forms", append(bearer(storetest.KeyA), origin...)...), // the 429
		do(t, h, "GET", "/v1/forms", origin...),
		do(t, h, "GET", "/v1/forms", append(bearer(storetest.KeyNotAdded), origin...)...),
		do(t, h, "GET", "/v1/nowhere", origin...),
		do(t, h, "DELETE", "/v1/forms", origin...),
		do(t, h, "GET", "/v1/openapi.json", append(origin, "Accept-Encoding", "gzip")...),
		do(t, h, "GET", "/v1/forms/"+storetest.FormB+"/export?format=csv", append(bearer(storetest.KeyB), origin...)...), // another account: within its rate
	}
	readable := append(slices.Clone(corsSafelisted), "Date") // Date: net/http's, not the handler's
	exposed := headerList(first.header, "Access-Control-Expose-Headers")
	sent, unreadable := map[string]bool{}, map[string]bool{}
	statuses := map[int]bool{}
	for _, res := range answers {
		statuses[res.status] = true
		is.Equal(res.header.Get("Access-Control-Allow-Origin"), appOrigin)
		is.Equal(headerList(res.header, "Access-Control-Expose-Headers"), exposed) // the same list on every answer
		for name := range res.header {
			sent[name] = true
			if strings.HasPrefix(name, "Access-Control-") || containsFold(readable, name) {
				continue
			}
			if !containsFold(exposed, name) && !unreadable[name] {
				unreadable[name] = true
				t.Errorf("the handler sends %s (status %d), which a browser app cannot read: add it to exposedHeaders", name, res.status)
			}
		}
	}
	for _, s := range []int{200, 304, 401, 404, 405, 429} {
		is.True(statuses[s]) // every kind of answer was seen
	}
	// Data-Age is sent only by a node answering from a copy (pgstore's
	// WithStaleness), which pgstore's TestBoundedStaleness checks.
	for _, name := range exposed {
		if !sent[http.CanonicalHeaderKey(name)] && name != "Data-Age" {
			t.Errorf("%s is exposed but no answer sent it: the list holds something stale", name)
		}
	}
}

// corsSafelisted are the response headers a browser lets a page read
// without Access-Control-Expose-Headers (Fetch: the CORS-safelisted
// response-header names).
var corsSafelisted = []string{"Cache-Control", "Content-Language", "Content-Length", "Content-Type", "Expires", "Last-Modified", "Pragma"}

// TestCORSExposesEveryDocumentedHeader: every response header that
// openapi.json documents, of every response of every operation, is one a
// page on an allowed origin can read: CORS-safelisted or named in
// Access-Control-Expose-Headers (an export's Sync-Token and
// Content-Disposition were not, so a browser app got null for the handle
// the export gives for the feed). And the list names nothing the
// document does not.
func TestCORSExposesEveryDocumentedHeader(t *testing.T) {
	c, err := loadContract()
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string][]string{} // header -> "GET /path 200", where documented
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, r := range op.Responses.Map() {
				if r.Value == nil {
					t.Fatalf("%s %s %s: an unresolved response", method, path, status)
				}
				for name := range r.Value.Headers {
					documented[http.CanonicalHeaderKey(name)] = append(documented[http.CanonicalHeaderKey(name)], method+" "+path+" "+status)
				}
			}
		}
	}
	if len(documented) < 10 {
		t.Fatalf("only %d response headers found in openapi.json: the walk is broken", len(documented))
	}
	h := seededHandler(t, formsapi.WithCORS(appOrigin))
	res := do(t, h, "GET", "/v1/forms", append(bearer(storetest.KeyA), "Origin", appOrigin)...)
	exposed := headerList(res.header, "Access-Control-Expose-Headers")
	for name, where := range documented {
		if !containsFold(corsSafelisted, name) && !containsFold(exposed, name) {
			slices.Sort(where)
			t.Errorf("openapi.json documents %s (%s…), which a browser app on an allowed origin cannot read: add it to exposedHeaders (cors.go)", name, where[0])
		}
	}
	for _, name := range exposed {
		if documented[http.CanonicalHeaderKey(name)] == nil {
			t.Errorf("Access-Control-Expose-Headers names %s, which openapi.json does not document", name)
		}
	}
}

// TestWithCORSPanics on what is no origin.
func TestWithCORSPanics(t *testing.T) {
	for _, origins := range [][]string{nil, {""}, {"app.example.com"}, {"ftp://app.example.com"}, {"https://app.example.com/path"},
		{"https://user@app.example.com"}, {"https://app.example.com?q"}, {"https://"},
		// what no browser sends, which would silently allow nothing
		{"https://app.example.com:"}, {"https://app.example.com:0443"}, {"https://app.example.com:0"}, {"https://app.example.com:70000"},
		{"https://*.example.com"}, {"https://bücher.example"}, {"https://[fe80::1%25eth0]"}, {"https://app.example.com/?"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("WithCORS(%q) did not panic", origins)
				}
			}()
			formsapi.WithCORS(origins...)
		}()
	}
	formsapi.WithCORS("https://App.Example.com:8443/", "http://localhost:5173", "*") // these are fine
}

// TestWithCORSListsOriginsAsBrowsersSendThem: an origin given with its
// scheme's default port, in upper case or as a long IPv6 form is the
// origin a browser sends without them.
func TestWithCORSListsOriginsAsBrowsersSendThem(t *testing.T) {
	t.Parallel()
	for given, sent := range map[string]string{
		"https://app.example.com:443":   "https://app.example.com",
		"http://APP.example.com:80/":    "http://app.example.com",
		"https://app.example.com:80":    "https://app.example.com:80",
		"http://[0:0:0:0:0:0:0:1]:8080": "http://[::1]:8080",
		"https://xn--bcher-kva.example": "https://xn--bcher-kva.example",
	} {
		h := formsapi.NewHandler(memstore.New(), memstore.New(), formsapi.WithCORS(given))
		r := httptest.NewRequest(http.MethodOptions, "/v1/forms", nil)
		r.Header.Set("Origin", sent)
		r.Header.Set("Access-Control-Request-Method", "GET")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Origin") != sent {
			t.Errorf("WithCORS(%q), preflight from %q: %d, Allow-Origin %q", given, sent, w.Code, w.Header().Get("Access-Control-Allow-Origin"))
		}
	}
}
