package formsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/storetest"
	"github.com/google/go-cmp/cmp"
	"github.com/matryer/is"
)

// seeded returns memstore loaded with storetest's seed.
func seeded(t testing.TB) *memstore.Store {
	s := memstore.New()
	if err := storetest.Load(context.Background(), s, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	return s
}

// seededHandler is the handler over one seeded memstore, which serves as
// both the store and the key resolver.
func seededHandler(t testing.TB, opts ...formsapi.Option) http.Handler {
	s := seeded(t)
	return formsapi.NewHandler(s, s, opts...)
}

// counting wraps a store and resolver and records every call, so tests can
// assert that a request never reached them and with which account.
type counting struct {
	store    formsapi.Store
	keys     formsapi.KeyResolver
	mu       sync.Mutex
	calls    int
	resolves int
	accounts []string
}

func (c *counting) ListForms(ctx context.Context, account string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	c.mu.Lock()
	c.calls++
	c.accounts = append(c.accounts, account)
	c.mu.Unlock()
	return c.store.ListForms(ctx, account, q)
}

func (c *counting) ListSubmissions(ctx context.Context, account, form string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	c.mu.Lock()
	c.calls++
	c.accounts = append(c.accounts, account)
	c.mu.Unlock()
	return c.store.ListSubmissions(ctx, account, form, q)
}

func (c *counting) ResolveKey(ctx context.Context, key string) (string, error) {
	c.mu.Lock()
	c.resolves++
	c.mu.Unlock()
	return c.keys.ResolveKey(ctx, key)
}

// response is what a test sees of one answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// exchange is one request the suite made and the response it got.
type exchange struct {
	method, target string
	res            response
}

// seen records every exchange of the handler tests, so that
// TestMain can check each response against the OpenAPI document.
var seen struct {
	sync.Mutex
	all []exchange
}

func record(method, target string, res response) {
	res.header = res.header.Clone() // tests may change theirs afterwards
	seen.Lock()
	seen.all = append(seen.all, exchange{method, target, res})
	seen.Unlock()
}

// do sends one request to h. headers alternate names and values; a name may
// repeat to send the header twice.
func do(t testing.TB, h http.Handler, method, target string, headers ...string) response {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Add(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	res := response{w.Code, w.Result().Header, w.Body.Bytes()}
	record(method, r.URL.RequestURI(), res)
	return res
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// decode parses a body as generic JSON, for comparing whole bodies.
func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, b)
	}
	return v
}

// withoutCursor replaces a nextCursor value, which is sealed with a random
// nonce, by a marker, so whole bodies can be compared.
func withoutCursor(v map[string]any) map[string]any {
	if _, ok := v["nextCursor"]; ok {
		v["nextCursor"] = "<cursor>"
	}
	return v
}

func checkStandardHeaders(t *testing.T, res response) {
	t.Helper()
	for name, want := range map[string]string{
		"Content-Type":           "application/json; charset=utf-8",
		"Cache-Control":          wantCacheControl(res.status, res.body),
		"X-Content-Type-Options": "nosniff",
	} {
		if got := res.header.Get(name); got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	if res.header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
}

// wantCacheControl is the Cache-Control an answer must carry: a page may
// be kept by the key holder's client but must be revalidated, the OpenAPI
// document by anyone, and errors are never stored.
func wantCacheControl(status int, body []byte) string {
	switch {
	case status != 200 && status != 304:
		return "no-store"
	case bytes.HasPrefix(body, []byte("{\n  \"openapi\"")):
		return "no-cache"
	}
	return "private, no-cache"
}

func TestRequestID(t *testing.T) {
	is := is.New(t)
	var logs bytes.Buffer
	failing := fakeStore{forms: func(context.Context) (formsapi.Page[formsapi.Form], error) {
		return formsapi.Page[formsapi.Form]{}, errors.New("disk on fire")
	}}
	h := formsapi.NewHandler(failing, okKey, formsapi.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))

	res := do(t, h, "GET", "/v1/forms", "Authorization", "Bearer k", "X-Request-Id", "client-chosen.id:42")
	is.Equal(res.header.Get("X-Request-Id"), "client-chosen.id:42")                // a well-formed incoming ID is kept
	is.True(strings.Contains(logs.String(), `"request_id":"client-chosen.id:42"`)) // and logged with the failure

	seen := map[string]bool{}
	for _, incoming := range []string{"", "has space", "<script>", strings.Repeat("x", 129), "ünï"} {
		res := do(t, h, "GET", "/v1/nope", "X-Request-Id", incoming)
		id := res.header.Get("X-Request-Id")
		is.True(id != "" && id != incoming) // a malformed ID is replaced
		is.True(!seen[id])                  // generated IDs are unique
		seen[id] = true
	}
	two := do(t, h, "GET", "/v1/nope", "X-Request-Id", "a", "X-Request-Id", "b")
	is.True(two.header.Get("X-Request-Id") != "a") // two IDs: neither is trusted
}

func TestListForms(t *testing.T) {
	is := is.New(t)
	h := seededHandler(t)
	res := do(t, h, "GET", "/v1/forms", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200) // list forms
	checkStandardHeaders(t, res)
	want := map[string]any{
		"success": true,
		"message": "forms retrieved",
		"forms": []any{
			// signup-a and survey-a share a time; the later-added comes first.
			map[string]any{"formId": "signup-a", "title": "Sign up", "icon": "user", "notificationEmail": "signups@example.com", "createdAt": "2024-03-01T10:00:00Z"},
			map[string]any{"formId": "survey-a", "title": "Survey", "icon": "chart", "notificationEmail": "owner-a@example.com", "createdAt": "2024-03-01T10:00:00Z"},
			map[string]any{"formId": "contact-a", "title": "Contact us", "icon": "mail", "notificationEmail": "owner-a@example.com", "createdAt": "2024-03-01T09:00:00Z"},
			map[string]any{"formId": "feedback-a", "title": "Feedback", "icon": "", "notificationEmail": "", "createdAt": "2024-02-29T09:00:00Z"},
		},
	}
	is.Equal(cmp.Diff(want, decode(t, res.body)), "") // forms body (-want +got)
	is.Equal(res.header.Get("Link"), "")              // no next page

	empty := do(t, h, "GET", "/v1/forms?order=asc", bearer(storetest.KeyB)...)
	is.Equal(empty.status, 200) // list B's forms
	is.True(!bytes.Contains(empty.body, []byte("contact-a")))
	is.True(!bytes.Contains(empty.body, []byte("-a\""))) // none of A's forms
}

func TestAccountWithoutFormsGetsEmptyArray(t *testing.T) {
	is := is.New(t)
	s := seeded(t)
	key, err := formsapi.NewKey()
	is.NoErr(err)                                                         // new key
	is.NoErr(s.AddKey(context.Background(), key, storetest.AccountEmpty)) // add key
	res := do(t, formsapi.NewHandler(s, s), "GET", "/v1/forms", bearer(key)...)
	is.Equal(res.status, 200) // list
	is.Equal(string(res.body), `{"success":true,"message":"forms retrieved","forms":[]}`)
}

func TestListSubmissions(t *testing.T) {
	is := is.New(t)
	h := seededHandler(t)
	res := do(t, h, "GET", "/v1/forms/contact-a/submissions?limit=2", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200) // list submissions
	checkStandardHeaders(t, res)
	want := map[string]any{
		"success": true,
		"message": "submissions retrieved",
		"submissions": []any{
			map[string]any{
				"formId":      "contact-a",
				"data":        map[string]any{"n": json.Number("22"), "name": "Person 22", "email": "p22@example.com", "message": "Hello <b>22</b> & été"},
				"attachments": []any{},
				"createdAt":   "2024-03-01T09:05:00.123456789Z",
			},
			map[string]any{
				"formId": "contact-a",
				"data":   map[string]any{"n": json.Number("20"), "name": "Person 20", "email": "p20@example.com", "message": "Hello <b>20</b> & été"},
				"attachments": []any{
					map[string]any{"fieldName": "cv", "fileUrl": "https://files.example.com/20/cv.pdf", "fileSize": json.Number("1020"), "mimeType": "application/pdf"},
					map[string]any{"fieldName": "photo", "fileUrl": "https://files.example.com/20/p.png", "fileSize": json.Number("0"), "mimeType": "image/png"},
				},
				"createdAt": "2024-03-01T09:05:00Z",
			},
		},
		"nextCursor": "<cursor>",
	}
	is.Equal(cmp.Diff(want, withoutCursor(decode(t, res.body))), "")                                          // submissions body (-want +got)
	is.True(strings.HasPrefix(res.header.Get("Link"), "<http://example.com/v1/forms/contact-a/submissions?")) // an absolute Link to the next page
	is.True(strings.HasSuffix(res.header.Get("Link"), `>; rel="next"`))
}

func TestUserFieldsNamedLikeMetadataAreData(t *testing.T) {
	is := is.New(t)
	h := seededHandler(t)
	res := do(t, h, "GET", "/v1/forms/contact-a/submissions?limit=1000", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200)                                             // list
	is.True(bytes.Contains(res.body, []byte(`"ip":"typed by the user"`))) // the respondent's own "ip" field is data
	is.True(!bytes.Contains(res.body, []byte(storetest.Canary)))          // internal metadata never is
	is.True(!bytes.Contains(res.body, []byte("203.0.113.")))
	is.True(!bytes.Contains(res.body, []byte(storetest.CanaryB))) // nor B's data
}

// TestExactKeySets decodes every object of both lists and checks its keys
// equal the documented allow-list.
func TestExactKeySets(t *testing.T) {
	h := seededHandler(t)
	forms := decode(t, do(t, h, "GET", "/v1/forms?limit=1", bearer(storetest.KeyA)...).body)
	checkKeys(t, forms, "forms", "message", "nextCursor", "success")
	for _, f := range forms["forms"].([]any) {
		checkKeys(t, f.(map[string]any), "createdAt", "formId", "icon", "notificationEmail", "title")
	}
	subs := decode(t, do(t, h, "GET", "/v1/forms/contact-a/submissions?limit=1000", bearer(storetest.KeyA)...).body)
	checkKeys(t, subs, "message", "submissions", "success")
	for _, s := range subs["submissions"].([]any) {
		checkKeys(t, s.(map[string]any), "attachments", "createdAt", "data", "formId") // and each attachment's
	}
}

// follow walks a list through the Link headers from the first URL, the way
// a client would, and returns the n field of every submission.
func follow(t *testing.T, srvURL, first, key string) []string {
	t.Helper()
	var got []string
	next := srvURL + first
	for pages := 0; next != ""; pages++ {
		if pages > 100 {
			t.Fatal("the walk does not end")
		}
		req, _ := http.NewRequest("GET", next, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", next, res.StatusCode, body)
		}
		var page struct {
			Submissions []struct{ Data struct{ N json.Number } }
			NextCursor  string
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Submissions {
			got = append(got, s.Data.N.String())
		}
		link := res.Header.Get("Link")
		if (link == "") != (page.NextCursor == "") {
			t.Fatalf("Link %q but nextCursor %q", link, page.NextCursor)
		}
		next = ""
		if link != "" {
			// The URL as it is, the way clients hand it to a request function.
			ref := strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
			u, err := url.Parse(ref)
			if err != nil || !u.IsAbs() {
				t.Fatalf("Link %q is not an absolute URL", link)
			}
			if u.Query().Get("cursor") != page.NextCursor {
				t.Fatalf("Link cursor %q differs from nextCursor %q", u.Query().Get("cursor"), page.NextCursor)
			}
			next = ref
		}
	}
	return got
}

func TestPagingThroughLinks(t *testing.T) {
	is := is.New(t)
	srv := httptest.NewServer(seededHandler(t))
	defer srv.Close()
	for _, order := range []string{"desc", "asc"} {
		all := follow(t, srv.URL, "/v1/forms/contact-a/submissions?limit=1000&order="+order, storetest.KeyA)
		is.Equal(len(all), 23) // one page holds all
		for _, limit := range []string{"1", "4", "5", "22"} {
			got := follow(t, srv.URL, "/v1/forms/contact-a/submissions?limit="+limit+"&order="+order, storetest.KeyA)
			is.Equal(cmp.Diff(all, got), "") // pages give the same as one page (-one +pages)
		}
	}
	// since and until ride along in the cursor.
	got := follow(t, srv.URL, "/v1/forms/contact-a/submissions?limit=2&order=asc&since=2024-03-01T09:01:00Z&until=2024-03-01T09:03:00Z", storetest.KeyA)
	is.Equal(len(got), 8) // two minutes of four submissions each
}

func TestMountedUnderStripPrefix(t *testing.T) {
	is := is.New(t)
	api := seededHandler(t)
	host := http.NewServeMux()
	host.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	host.Handle("/api/", http.StripPrefix("/api", api))
	srv := httptest.NewServer(host)
	defer srv.Close()

	got := follow(t, srv.URL, "/api/v1/forms/contact-a/submissions?limit=3", storetest.KeyA)
	is.Equal(len(got), 23) // every submission through the mounted Link headers

	// A bare StripPrefix, as under a router that does not clean paths:
	// non-canonical paths get the JSON 404, never a redirect without /api.
	bare := http.StripPrefix("/api", api)
	for _, p := range []string{"/api/v1//forms", "/api/v1/./forms", "/api/v1/forms/x/../contact-a/submissions", "/api/v1/forms/"} {
		res := do(t, bare, "GET", p, bearer(storetest.KeyA)...)
		is.Equal(res.status, 404) // non-canonical path
		is.Equal(res.header.Get("Location"), "")
		checkStandardHeaders(t, res)
	}
	res := do(t, bare, "GET", "/api/v1/forms", bearer(storetest.KeyA)...)
	is.Equal(res.status, 200) // the canonical path works
}

// TestWireContract has one row per case of the README's API reference
// (and the cases around it): status, headers and the whole body.
func TestWireContract(t *testing.T) {
	s := seeded(t)
	otherList := func() string {
		// A valid cursor, but for FormSmall's list.
		res := do(t, formsapi.NewHandler(s, s, formsapi.WithCursorSecret([]byte("test secret"))), "GET", "/v1/forms/signup-a/submissions?limit=1", bearer(storetest.KeyA)...)
		return decode(t, res.body)["nextCursor"].(string)
	}()
	formsCursor := func(key string) string {
		res := do(t, formsapi.NewHandler(s, s, formsapi.WithCursorSecret([]byte("test secret"))), "GET", "/v1/forms?limit=1", bearer(key)...)
		return decode(t, res.body)["nextCursor"].(string)
	}
	cursorA, cursorB := formsCursor(storetest.KeyA), formsCursor(storetest.KeyB)
	foreignCursor := func() string {
		res := do(t, formsapi.NewHandler(s, s), "GET", "/v1/forms?limit=1", bearer(storetest.KeyA)...)
		return decode(t, res.body)["nextCursor"].(string)
	}()

	const (
		invalidKey  = `{"success":false,"message":"invalid API key"}`
		notFound    = `{"success":false,"message":"form not found"}`
		noRoute     = `{"success":false,"message":"not found: the API serves GET /v1/forms, GET /v1/forms/{formId}/submissions, GET /v1/forms/{formId}/export, GET /v1/forms/{formId}/summary and GET /v1/openapi.json"}`
		notAllowed  = `{"success":false,"message":"method not allowed: use GET or HEAD"}`
		badCursor   = `{"success":false,"message":"invalid cursor: use the nextCursor of a previous page of this same list"}`
		challenge   = `Bearer realm="formsapi"`
		invalidTokn = `Bearer realm="formsapi", error="invalid_token"`
	)
	badLimit := `{"success":false,"message":"invalid limit: must be a whole number from 1 to 1000"}`
	badTime := func(p string) string {
		return `{"success":false,"message":"invalid ` + p + `: must be an RFC 3339 time such as 2024-05-01T12:00:00Z (percent-encode a + in the offset as %2B)"}`
	}
	cases := []struct {
		name    string
		method  string
		target  string
		headers []string
		status  int
		body    string            // exact body; "" to check only that it is JSON with success
		want    map[string]string // headers that must have these values ("" = absent)
		noStore bool              // the store and resolver must not be called
	}{
		{name: "forms ok", method: "GET", target: "/v1/forms", headers: bearer(storetest.KeyA), status: 200},
		{name: "submissions ok", method: "GET", target: "/v1/forms/contact-a/submissions", headers: bearer(storetest.KeyA), status: 200},
		{name: "lower-case scheme", method: "GET", target: "/v1/forms", headers: []string{"Authorization", "bearer " + storetest.KeyA}, status: 200},
		{name: "upper-case scheme", method: "GET", target: "/v1/forms", headers: []string{"Authorization", "BEARER " + storetest.KeyA2}, status: 200},
		{name: "several spaces", method: "GET", target: "/v1/forms", headers: []string{"Authorization", "Bearer   " + storetest.KeyA}, status: 200},
		{name: "unknown query parameters ignored", method: "GET", target: "/v1/forms?foo=bar&account=acct-b&", headers: bearer(storetest.KeyA), status: 200},

		{name: "no key", method: "GET", target: "/v1/forms", status: 401, body: invalidKey, want: map[string]string{"WWW-Authenticate": challenge}, noStore: true},
		{name: "no key, submissions of a real form", method: "GET", target: "/v1/forms/contact-a/submissions", status: 401, body: invalidKey, want: map[string]string{"WWW-Authenticate": challenge}, noStore: true},
		{name: "no key, submissions of no form", method: "GET", target: "/v1/forms/nope/submissions", status: 401, body: invalidKey, want: map[string]string{"WWW-Authenticate": challenge}, noStore: true},
		{name: "basic scheme", method: "GET", target: "/v1/forms", headers: []string{"Authorization", "Basic dXNlcjpwYXNz"}, status: 401, body: invalidKey, want: map[string]string{"WWW-Authenticate": challenge}, noStore: true},
		{name: "empty bearer", method: "GET", target: "/v1/forms", headers: []string{"Authorization", "Bearer"}, status: 401, body: invalidKey, want: map[string]string{"WWW-Authenticate": invalidTokn}, noStore: true},
		{name: "token with space", method: "GET", target: "/v1/forms", headers: []string{"Authorization", "Bearer a b"}, status: 401, body: invalidKey, want: map[string]string{"WWW-Authenticate": invalidTokn}, noStore: true},
		{name: "tab after scheme", method: "GET", target: "/v1/forms", headers: []string{"Authorization", "Bearer\t" + storetest.KeyA}, status: 401, body: invalidKey, noStore: true},
		{name: "non-ASCII token", method: "GET", target: "/v1/forms", headers: []string{"Authorization", "Bearer t\xc3\xb6k"}, status: 401, body: invalidKey, noStore: true},
		{name: "two headers", method: "GET", target: "/v1/forms", headers: append(bearer(storetest.KeyA), bearer(storetest.KeyB)...), status: 401, body: invalidKey, noStore: true},
		{name: "our prefix, bad checksum", method: "GET", target: "/v1/forms", headers: bearer(otherLastChar(storetest.KeyB)), status: 401, body: invalidKey, noStore: true},
		{name: "oversized token", method: "GET", target: "/v1/forms", headers: bearer(strings.Repeat("a", 4096)), status: 401, body: invalidKey, noStore: true},
		{name: "key in the query string", method: "GET", target: "/v1/forms?access_token=" + storetest.KeyA + "&api_key=" + storetest.KeyA, status: 401, body: invalidKey, noStore: true},
		{name: "unknown key", method: "GET", target: "/v1/forms", headers: bearer(storetest.KeyNotAdded), status: 401, body: invalidKey, want: map[string]string{"WWW-Authenticate": invalidTokn}},
		{name: "revoked key", method: "GET", target: "/v1/forms", headers: bearer(storetest.KeyRevoked), status: 401, body: invalidKey, want: map[string]string{"WWW-Authenticate": invalidTokn}},

		{name: "unknown form", method: "GET", target: "/v1/forms/no-such-id/submissions", headers: bearer(storetest.KeyA), status: 404, body: notFound, want: map[string]string{"WWW-Authenticate": ""}},
		{name: "another account's form", method: "GET", target: "/v1/forms/contact-b/submissions", headers: bearer(storetest.KeyA), status: 404, body: notFound},
		{name: "form ID in another case", method: "GET", target: "/v1/forms/CONTACT-A/submissions", headers: bearer(storetest.KeyA), status: 404, body: notFound},
		{name: "form ID with encoded slash", method: "GET", target: "/v1/forms/contact-a%2Fx/submissions", headers: bearer(storetest.KeyA), status: 404, body: notFound},
		{name: "form ID with NUL", method: "GET", target: "/v1/forms/contact-a%00/submissions", headers: bearer(storetest.KeyA), status: 404, body: notFound},
		{name: "form ID with quote", method: "GET", target: "/v1/forms/x'%20OR%20'1'='1/submissions", headers: bearer(storetest.KeyA), status: 404, body: notFound},

		{name: "limit 0", method: "GET", target: "/v1/forms?limit=0", headers: bearer(storetest.KeyA), status: 400, body: badLimit},
		{name: "limit -1", method: "GET", target: "/v1/forms?limit=-1", headers: bearer(storetest.KeyA), status: 400, body: badLimit},
		{name: "limit 1001", method: "GET", target: "/v1/forms/contact-a/submissions?limit=1001", headers: bearer(storetest.KeyA), status: 400, body: badLimit},
		{name: "limit 1e9", method: "GET", target: "/v1/forms?limit=1e9", headers: bearer(storetest.KeyA), status: 400, body: badLimit},
		{name: "limit abc", method: "GET", target: "/v1/forms?limit=abc", headers: bearer(storetest.KeyA), status: 400, body: badLimit},
		{name: "limit 1.5", method: "GET", target: "/v1/forms?limit=1.5", headers: bearer(storetest.KeyA), status: 400, body: badLimit},
		{name: "limit twice", method: "GET", target: "/v1/forms?limit=1&limit=500", headers: bearer(storetest.KeyA), status: 400, body: `{"success":false,"message":"invalid limit: the parameter is given more than once"}`},
		{name: "order up", method: "GET", target: "/v1/forms?order=up", headers: bearer(storetest.KeyA), status: 400, body: `{"success":false,"message":"invalid order: must be \"desc\" (newest first) or \"asc\" (oldest first)"}`},
		{name: "since not a time", method: "GET", target: "/v1/forms?since=yesterday", headers: bearer(storetest.KeyA), status: 400, body: badTime("since")},
		{name: "until with unencoded plus", method: "GET", target: "/v1/forms?until=2024-01-01T00:00:00+02:00", headers: bearer(storetest.KeyA), status: 400, body: badTime("until")},
		{name: "until before since", method: "GET", target: "/v1/forms?since=2024-02-01T00:00:00Z&until=2024-01-01T00:00:00Z", headers: bearer(storetest.KeyA), status: 400, body: `{"success":false,"message":"invalid until: must be later than since"}`},
		{name: "malformed query string", method: "GET", target: "/v1/forms?limit=%zz", headers: bearer(storetest.KeyA), status: 400, body: `{"success":false,"message":"the query string is malformed: check its percent-encoding"}`},
		{name: "garbage cursor", method: "GET", target: "/v1/forms?cursor=abc", headers: bearer(storetest.KeyA), status: 400, body: badCursor},
		{name: "cursor of another list", method: "GET", target: "/v1/forms/contact-a/submissions?cursor=" + otherList, headers: bearer(storetest.KeyA), status: 400, body: badCursor},
		{name: "cursor of another account", method: "GET", target: "/v1/forms?cursor=" + cursorB, headers: bearer(storetest.KeyA), status: 400, body: badCursor},
		{name: "cursor of another server", method: "GET", target: "/v1/forms?cursor=" + foreignCursor, headers: bearer(storetest.KeyA), status: 400, body: badCursor},
		{name: "cursor with another order", method: "GET", target: "/v1/forms?order=asc&cursor=" + cursorA, headers: bearer(storetest.KeyA), status: 400, body: `{"success":false,"message":"invalid cursor: it was issued for another order"}`},
		{name: "cursor with another since", method: "GET", target: "/v1/forms?since=2020-01-01T00:00:00Z&cursor=" + cursorA, headers: bearer(storetest.KeyA), status: 400, body: `{"success":false,"message":"invalid cursor: it was issued for another since"}`},
		{name: "cursor with its own order", method: "GET", target: "/v1/forms?order=desc&cursor=" + cursorA, headers: bearer(storetest.KeyA), status: 200},
		{name: "cursor of same account, other key", method: "GET", target: "/v1/forms?cursor=" + cursorA, headers: bearer(storetest.KeyA2), status: 200},

		{name: "POST forms", method: "POST", target: "/v1/forms", headers: bearer(storetest.KeyA), status: 405, body: notAllowed, want: map[string]string{"Allow": "GET, HEAD"}, noStore: true},
		{name: "DELETE submissions", method: "DELETE", target: "/v1/forms/contact-a/submissions", status: 405, body: notAllowed, want: map[string]string{"Allow": "GET, HEAD"}, noStore: true},
		{name: "OPTIONS forms", method: "OPTIONS", target: "/v1/forms", headers: []string{"Origin", "https://evil.example"}, status: 405, body: notAllowed, want: map[string]string{"Allow": "GET, HEAD", "Access-Control-Allow-Origin": ""}, noStore: true},
		{name: "lower-case get", method: "get", target: "/v1/forms", headers: bearer(storetest.KeyA), status: 405, body: notAllowed, noStore: true},

		{name: "unknown path", method: "GET", target: "/v1/nope", status: 404, body: noRoute, noStore: true},
		{name: "v2", method: "GET", target: "/v2/forms", headers: bearer(storetest.KeyA), status: 404, body: noRoute, noStore: true},
		{name: "upper-case V1", method: "GET", target: "/V1/forms", headers: bearer(storetest.KeyA), status: 404, body: noRoute, noStore: true},
		{name: "trailing slash", method: "GET", target: "/v1/forms/", headers: bearer(storetest.KeyA), status: 404, body: noRoute, noStore: true},
		{name: "extra segment", method: "GET", target: "/v1/forms/contact-a/submissions/extra", headers: bearer(storetest.KeyA), status: 404, body: noRoute, noStore: true},
		{name: "double slash", method: "GET", target: "/v1//forms", headers: bearer(storetest.KeyA), status: 404, body: noRoute, noStore: true},
		{name: "dot segment", method: "GET", target: "/v1/forms/x/../contact-a/submissions", headers: bearer(storetest.KeyA), status: 404, body: noRoute, noStore: true},
		{name: "encoded slash in path", method: "GET", target: "/v1/forms%2F", headers: bearer(storetest.KeyA), status: 404, body: noRoute, noStore: true},
		{name: "root", method: "GET", target: "/", status: 404, body: noRoute, noStore: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := &counting{store: s, keys: s}
			h := formsapi.NewHandler(cs, cs, formsapi.WithCursorSecret([]byte("test secret")))
			res := do(t, h, c.method, c.target, c.headers...)
			if res.status != c.status {
				t.Fatalf("status %d, want %d; body %s", res.status, c.status, res.body)
			}
			checkStandardHeaders(t, res)
			if c.body != "" {
				if diff := cmp.Diff(c.body, string(res.body)); diff != "" {
					t.Errorf("body (-want +got):\n%s", diff)
				}
			}
			v := decode(t, res.body)
			if v["success"] != (c.status == 200) || v["message"] == "" {
				t.Errorf("envelope: success %v, message %q", v["success"], v["message"])
			}
			if c.status == 401 && res.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			for name, want := range c.want {
				if got := res.header.Get(name); got != want {
					t.Errorf("%s: got %q, want %q", name, got, want)
				}
			}
			if c.noStore && (cs.calls != 0 || cs.resolves != 0) {
				t.Errorf("%d store and %d resolver calls, want none", cs.calls, cs.resolves)
			}
			for _, a := range cs.accounts {
				if a != storetest.AccountA && a != storetest.AccountB {
					t.Errorf("store called for account %q", a)
				}
			}
			if bytes.Contains(res.body, []byte(storetest.KeyA)) || bytes.Contains(res.body, []byte(storetest.KeyB)) {
				t.Error("a key is echoed in the body")
			}
		})
	}
}

func TestNotFoundIsTheSameForAbsentAndForeignForms(t *testing.T) {
	is := is.New(t)
	h := seededHandler(t)
	absent := do(t, h, "GET", "/v1/forms/no-such-id/submissions", bearer(storetest.KeyA)...)
	foreign := do(t, h, "GET", "/v1/forms/contact-b/submissions", bearer(storetest.KeyA)...)
	malformed := do(t, h, "GET", "/v1/forms/%FF/submissions", bearer(storetest.KeyA)...)
	is.Equal(absent.status, 404)                        // absent
	is.Equal(foreign.status, 404)                       // foreign
	is.Equal(string(absent.body), string(foreign.body)) // identical bytes
	is.Equal(string(absent.body), string(malformed.body))
	absent.header.Del("X-Request-Id")
	foreign.header.Del("X-Request-Id")
	is.Equal(cmp.Diff(absent.header, foreign.header), "") // identical headers but for the request ID
}

func TestHeadAnswersLikeGet(t *testing.T) {
	is := is.New(t)
	h := seededHandler(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, key := range []string{storetest.KeyA, "", storetest.KeyNotAdded} {
		get := doHTTP(t, "GET", srv.URL+"/v1/forms", key)
		head := doHTTP(t, "HEAD", srv.URL+"/v1/forms", key)
		is.Equal(head.status, get.status) // same status
		is.Equal(len(head.body), 0)       // no body
		for _, name := range []string{"Content-Type", "Content-Length", "Cache-Control", "X-Content-Type-Options", "WWW-Authenticate"} {
			is.Equal(head.header.Get(name), get.header.Get(name)) // same header
		}
	}
}

func doHTTP(t *testing.T, method, u, key string) response {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	out := response{res.StatusCode, res.Header, body}
	record(method, req.URL.RequestURI(), out)
	return out
}

// fakeStore answers with whatever its functions say.
type fakeStore struct {
	forms func(ctx context.Context) (formsapi.Page[formsapi.Form], error)
	subs  func(ctx context.Context) (formsapi.Page[formsapi.Submission], error)
}

func (f fakeStore) ListForms(ctx context.Context, _ string, _ formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	return f.forms(ctx)
}

func (f fakeStore) ListSubmissions(ctx context.Context, _, _ string, _ formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	return f.subs(ctx)
}

var okKey = formsapi.KeyResolverFunc(func(context.Context, string) (string, error) { return "acct", nil })

func TestFailures(t *testing.T) {
	const secret = "CANARY-SQL near \"secret_table\": /var/lib/x.db"
	boom := errors.New(secret)
	failing := fakeStore{
		forms: func(context.Context) (formsapi.Page[formsapi.Form], error) {
			return formsapi.Page[formsapi.Form]{}, boom
		},
		subs: func(context.Context) (formsapi.Page[formsapi.Submission], error) {
			return formsapi.Page[formsapi.Submission]{}, boom
		},
	}
	panicking := fakeStore{
		forms: func(context.Context) (formsapi.Page[formsapi.Form], error) { panic(secret) },
		subs:  func(context.Context) (formsapi.Page[formsapi.Submission], error) { panic(secret) },
	}
	blocking := fakeStore{
		forms: func(ctx context.Context) (formsapi.Page[formsapi.Form], error) {
			<-ctx.Done()
			return formsapi.Page[formsapi.Form]{}, ctx.Err()
		},
		subs: func(ctx context.Context) (formsapi.Page[formsapi.Submission], error) {
			<-ctx.Done()
			return formsapi.Page[formsapi.Submission]{}, ctx.Err()
		},
	}
	corrupt := fakeStore{
		subs: func(context.Context) (formsapi.Page[formsapi.Submission], error) {
			return formsapi.Page[formsapi.Submission]{Items: []formsapi.Submission{{FormID: "f", Data: []byte(`{"a":CANARY`)}}}, nil
		},
	}
	resolverDown := formsapi.KeyResolverFunc(func(context.Context, string) (string, error) { return "", boom })
	const internal = `{"success":false,"message":"internal server error"}`
	const unavailable = `{"success":false,"message":"service unavailable: the request took too long, try again"}`
	cases := []struct {
		name   string
		store  formsapi.Store
		keys   formsapi.KeyResolver
		path   string
		opts   []formsapi.Option
		status int
		body   string
	}{
		{"store error, forms", failing, okKey, "/v1/forms", nil, 500, internal},
		{"store error, submissions", failing, okKey, "/v1/forms/f/submissions", nil, 500, internal},
		{"store panic, forms", panicking, okKey, "/v1/forms", nil, 500, internal},
		{"store panic, submissions", panicking, okKey, "/v1/forms/f/submissions", nil, 500, internal},
		{"resolver down", failing, resolverDown, "/v1/forms", nil, 500, internal},
		{"store past its deadline", blocking, okKey, "/v1/forms/f/submissions", []formsapi.Option{formsapi.WithStoreTimeout(20 * time.Millisecond)}, 503, unavailable},
		{"corrupt stored data is left out", corrupt, okKey, "/v1/forms/f/submissions", nil, 200, `{"success":true,"message":"submissions retrieved","submissions":[]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			var logs bytes.Buffer
			h := formsapi.NewHandler(c.store, c.keys, append(c.opts, formsapi.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))...)
			res := do(t, h, "GET", c.path, "Authorization", "Bearer some-key")
			is.Equal(res.status, c.status)                             // status
			is.Equal(string(res.body), c.body)                         // generic body
			is.Equal(res.header.Get("WWW-Authenticate"), "")           // never a 401 challenge
			is.True(!bytes.Contains(logs.Bytes(), []byte(`{\"a\":`)))  // nor stored data
			is.True(!bytes.Contains(res.body, []byte("CANARY")))       // the cause stays out of the body
			is.True(logs.Len() > 0)                                    // and goes to the log
			is.True(!bytes.Contains(logs.Bytes(), []byte("some-key"))) // without the key
			checkStandardHeaders(t, res)
		})
	}
}

func TestUntrustedStoreOutput(t *testing.T) {
	is := is.New(t)
	var logs bytes.Buffer
	store := fakeStore{
		forms: func(context.Context) (formsapi.Page[formsapi.Form], error) {
			return formsapi.Page[formsapi.Form]{}, nil // nil items
		},
		subs: func(context.Context) (formsapi.Page[formsapi.Submission], error) {
			return formsapi.Page[formsapi.Submission]{Items: []formsapi.Submission{
				{FormID: "f", CreatedAt: time.Date(2024, 1, 1, 1, 0, 0, 0, time.FixedZone("X", 3600))}, // nil data and attachments
				{FormID: "other-form", Data: []byte(`{"leak":"` + storetest.CanaryB + `"}`)},
				{FormID: "f", Data: []byte("{\"bad\":\"\xff\"}")},
			}}, nil
		},
	}
	h := formsapi.NewHandler(store, okKey, formsapi.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	forms := do(t, h, "GET", "/v1/forms", "Authorization", "Bearer k")
	is.Equal(string(forms.body), `{"success":true,"message":"forms retrieved","forms":[]}`) // nil becomes []
	res := do(t, h, "GET", "/v1/forms/f/submissions", "Authorization", "Bearer k")
	is.Equal(res.status, 200) // list
	is.Equal(string(res.body), `{"success":true,"message":"submissions retrieved","submissions":[`+
		`{"formId":"f","data":{},"attachments":[],"createdAt":"2024-01-01T00:00:00Z"},`+
		`{"formId":"f","data":{"bad":"`+"\uFFFD"+`"},"attachments":[],"createdAt":"0001-01-01T00:00:00Z"}]}`)
	is.True(strings.Contains(logs.String(), "another form")) // the dropped item is logged
}

func TestClientGoneCancelsTheStore(t *testing.T) {
	is := is.New(t)
	var canceled atomic.Bool
	started := make(chan struct{})
	store := fakeStore{forms: func(ctx context.Context) (formsapi.Page[formsapi.Form], error) {
		close(started)
		<-ctx.Done()
		canceled.Store(true)
		return formsapi.Page[formsapi.Form]{}, ctx.Err()
	}}
	done := make(chan struct{})
	h := formsapi.NewHandler(store, okKey, formsapi.WithLogger(slog.New(slog.DiscardHandler)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		close(done)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/forms", nil)
	req.Header.Set("Authorization", "Bearer k")
	go func() {
		<-started
		cancel()
	}()
	_, err := http.DefaultClient.Do(req)
	is.True(err != nil) // the client gave up
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler is still waiting on the store")
	}
	is.True(canceled.Load()) // the store saw the cancellation
}

func TestNewHandlerPanicsOnMissingDependencies(t *testing.T) {
	for _, c := range []struct {
		name  string
		store formsapi.Store
		keys  formsapi.KeyResolver
	}{{"no store", nil, okKey}, {"no resolver", memstore.New(), nil}} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			formsapi.NewHandler(c.store, c.keys)
		})
	}
}

func TestPageSizeOption(t *testing.T) {
	is := is.New(t)
	h := seededHandler(t, formsapi.WithPageSize(2, 5))
	res := do(t, h, "GET", "/v1/forms/contact-a/submissions", bearer(storetest.KeyA)...)
	is.Equal(len(decode(t, res.body)["submissions"].([]any)), 2) // the default
	res = do(t, h, "GET", "/v1/forms/contact-a/submissions?limit=6", bearer(storetest.KeyA)...)
	is.Equal(res.status, 400) // above the maximum
	is.Equal(string(res.body), `{"success":false,"message":"invalid limit: must be a whole number from 1 to 5"}`)
}

// TestLogsNeverHoldKeys drives the whole wire table once more with a
// capturing logger and a failing store, and checks the logs.
func TestLogsNeverHoldKeys(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := seeded(t)
	h := formsapi.NewHandler(s, s, formsapi.WithLogger(logger))
	down := formsapi.NewHandler(s, formsapi.KeyResolverFunc(func(context.Context, string) (string, error) {
		return "", errors.New("resolver down")
	}), formsapi.WithLogger(logger))
	for _, key := range []string{storetest.KeyA, storetest.KeyB, storetest.KeyRevoked, storetest.KeyNotAdded} {
		for _, target := range []string{"/v1/forms", "/v1/forms/contact-a/submissions", "/v1/forms/contact-b/submissions?cursor=x", "/v1/nope"} {
			do(t, h, "GET", target, bearer(key)...)
			do(t, down, "GET", target, bearer(key)...)
		}
	}
	if logs.Len() == 0 {
		t.Fatal("nothing was logged; the check would prove nothing")
	}
	for _, secret := range []string{storetest.KeyA, storetest.KeyB, storetest.KeyRevoked, storetest.KeyNotAdded, "Bearer "} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}

func TestOpenAPIServedWithoutKey(t *testing.T) {
	is := is.New(t)
	cs := &counting{store: seeded(t), keys: seeded(t)}
	h := formsapi.NewHandler(cs, cs)
	res := do(t, h, "GET", "/v1/openapi.json")
	is.Equal(res.status, 200) // no key needed
	checkStandardHeaders(t, res)
	doc := decode(t, res.body)
	is.Equal(doc["openapi"], "3.1.0")                          // an OpenAPI 3.1 document
	is.True(doc["paths"].(map[string]any)["/v1/forms"] != nil) // describing the API
	is.Equal(cs.resolves, 0)                                   // no key lookup
	res = do(t, h, "POST", "/v1/openapi.json")
	is.Equal(res.status, 405) // GET and HEAD only
}

// TestNoGoroutineLeftBehind sends 200 concurrent requests to a store that
// blocks until its context ends, then has every client give up. Each
// store call must see the cancellation and return before its request's
// handler does, and no goroutine the handler starts for a request may
// outlive it: each request is served under a pprof label, which every
// goroutine started under it inherits, and once the server has closed
// (which waits for every handler to return) none may carry it. The test
// waits for events the store signals, never for time to pass, and counts
// only the requests' own goroutines, not the process's.
func TestNoGoroutineLeftBehind(t *testing.T) {
	const n = 200
	type returnedKey struct{}
	var started, canceled, returned atomic.Int64
	allStarted := make(chan struct{})
	store := fakeStore{forms: func(ctx context.Context) (formsapi.Page[formsapi.Form], error) {
		if r, ok := ctx.Value(returnedKey{}).(*atomic.Bool); ok {
			defer r.Store(true)
		}
		defer returned.Add(1)
		if started.Add(1) == n {
			close(allStarted)
		}
		<-ctx.Done()
		canceled.Add(1)
		return formsapi.Page[formsapi.Form]{}, ctx.Err()
	}}
	// 200 requests of one key at once: past the default bounds of
	// requests in flight and of the pages' room, which this test is not
	// about.
	unbounded := formsapi.WithRateLimit(ratelimit.Options{InFlightPerKey: -1, InFlightPerAccount: -1, BytesInFlight: -1})
	h := formsapi.NewHandler(store, okKey, formsapi.WithLogger(slog.New(slog.DiscardHandler)), unbounded)
	label := pprof.Labels("formsapi-test", t.Name())
	var early atomic.Int64 // handlers that returned before their store call
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var storeReturned atomic.Bool
		ctx := context.WithValue(r.Context(), returnedKey{}, &storeReturned)
		pprof.Do(ctx, label, func(ctx context.Context) { h.ServeHTTP(w, r.WithContext(ctx)) })
		if !storeReturned.Load() {
			early.Add(1)
		}
	}))
	transport := &http.Transport{MaxConnsPerHost: n}
	client := &http.Client{Transport: transport}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/forms", nil)
			req.Header.Set("Authorization", "Bearer k")
			if res, err := client.Do(req); err == nil {
				res.Body.Close()
			}
		}()
	}
	select {
	case <-allStarted:
	case <-time.After(time.Minute): // only if the test is failing: no success waits for it
		t.Fatalf("only %d of %d requests reached the store", started.Load(), n)
	}
	cancel()
	wg.Wait()
	srv.Close() // waits for every handler to return
	transport.CloseIdleConnections()
	if got := canceled.Load(); got != n {
		t.Errorf("%d of %d store calls saw the cancellation", got, n)
	}
	if got := returned.Load(); got != n {
		t.Errorf("%d of %d store calls returned", got, n)
	}
	if got := early.Load(); got != 0 {
		t.Errorf("%d handlers returned before their store call did", got)
	}
	if left, stacks := labelled(label); left > 0 {
		t.Errorf("%d goroutines started for a request outlived it:\n%s", left, stacks)
	}
}

// labelled counts the goroutines that carry every label of set, and
// returns their stacks.
func labelled(set pprof.LabelSet) (int, string) {
	var want []string
	pprof.ForLabels(pprof.WithLabels(context.Background(), set), func(k, v string) bool {
		b, _ := json.Marshal(map[string]string{k: v})
		want = append(want, strings.Trim(string(b), "{}"))
		return true
	})
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	count, stacks := 0, ""
	for _, block := range strings.Split(b.String(), "\n\n") {
		_, labels, ok := strings.Cut(block, "# labels: ")
		if !ok {
			continue
		}
		labels, _, _ = strings.Cut(labels, "\n")
		if !containsAll(labels, want) {
			continue
		}
		var c int
		fmt.Sscan(block, &c) // each block starts with its count
		count += c
		stacks += block + "\n\n"
	}
	return count, stacks
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// otherLastChar is key with its last character (part of its checksum)
// changed: to "x", or to "y" when it is "x" already (a key from
// crypto/rand ends in "x" once in 64 runs, and was then sent unchanged).
func otherLastChar(key string) string {
	if strings.HasSuffix(key, "x") {
		return key[:len(key)-1] + "y"
	}
	return key[:len(key)-1] + "x"
}
