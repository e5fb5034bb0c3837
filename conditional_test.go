package formsapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

var weakTag = regexp.MustCompile(`^W/"[A-Za-z0-9_-]+"$`)

// checkNotModified holds a 304 to RFC 9110 §15.4.5 and to what a page's
// 200 carried: no body, no content headers, the same tag and caching.
func checkNotModified(t *testing.T, res response, tag string) {
	t.Helper()
	if res.status != http.StatusNotModified {
		t.Fatalf("status %d, want 304; body %s", res.status, res.body)
	}
	if len(res.body) != 0 {
		t.Errorf("304 with a %d-byte body", len(res.body))
	}
	for name, want := range map[string]string{
		"ETag": tag, "Cache-Control": "private, no-cache", "Vary": "Authorization, Accept-Encoding",
		"X-Content-Type-Options": "nosniff", "Content-Type": "", "Content-Length": "", "Content-Encoding": "", "Link": "",
	} {
		if got := res.header.Get(name); got != want {
			t.Errorf("304 %s: %q, want %q", name, got, want)
		}
	}
	if res.header.Get("X-Request-Id") == "" {
		t.Error("304 without X-Request-Id")
	}
}

func TestConditionalRequests(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := seeded(t)
	h := formsapi.NewHandler(s, s)
	key := bearer(storetest.KeyA)
	inm := func(tag string) []string { return append([]string{"If-None-Match", tag}, key...) }

	for _, target := range []string{"/v1/forms", "/v1/forms?limit=2", "/v1/forms/contact-a/submissions", "/v1/forms/contact-a/submissions?limit=5&order=asc", "/v1/forms/survey-a/submissions"} {
		first := do(t, h, "GET", target, key...)
		is.Equal(first.status, 200)
		tag := first.header.Get("ETag")
		is.True(weakTag.MatchString(tag))                                                              // a weak tag
		is.Equal(first.header.Get("Cache-Control"), "private, no-cache")                               // the client may keep it, and must revalidate
		is.Equal(first.header.Get("Vary"), "Authorization, Accept-Encoding")                           // per key
		is.Equal(do(t, h, "GET", target, key...).header.Get("ETag"), tag)                              // the same page, the same tag
		checkNotModified(t, do(t, h, "GET", target, inm(tag)...), tag)                                 // If-None-Match: 304
		checkNotModified(t, do(t, h, "HEAD", target, inm(tag)...), tag)                                // for HEAD too
		checkNotModified(t, do(t, h, "GET", target, inm(`"x", `+tag)...), tag)                         // in a list
		checkNotModified(t, do(t, h, "GET", target, inm(strings.TrimPrefix(tag, "W/"))...), tag)       // weak comparison
		checkNotModified(t, do(t, h, "GET", target, inm("*")...), tag)                                 // any current page
		is.Equal(do(t, h, "GET", target, inm(`W/"other"`)...).status, 200)                             // another tag: the page
		is.Equal(do(t, h, "GET", target, inm(`garbage`)...).status, 200)                               // a malformed header: the page
		is.Equal(do(t, h, "GET", target, append(inm(tag), bearer(storetest.KeyA2)...)...).status, 401) // two keys: 401 first
		other := do(t, h, "GET", target, append([]string{"If-None-Match", tag}, bearer(storetest.KeyA2)...)...)
		checkNotModified(t, other, tag) // another key of the same account sees the same page
	}

	// Errors are never 304, whatever If-None-Match says.
	for _, c := range []struct {
		target string
		hdrs   []string
		status int
	}{
		{"/v1/forms", []string{"If-None-Match", "*"}, 401},
		{"/v1/forms", append([]string{"If-None-Match", "*"}, bearer(storetest.KeyRevoked)...), 401},
		{"/v1/forms?limit=0", inm("*"), 400},
		{"/v1/forms/contact-b/submissions", inm("*"), 404},
		{"/v1/nope", inm("*"), 404},
	} {
		res := do(t, h, "GET", c.target, c.hdrs...)
		is.Equal(res.status, c.status)                        // the error, not 304
		is.Equal(res.header.Get("ETag"), "")                  // errors carry no tag
		is.Equal(res.header.Get("Cache-Control"), "no-store") // and are not kept
	}
}

// TestConditionalRequestsAreExact: a new submission, a new or changed
// form, a revoked key and another account all change the answer.
func TestConditionalRequestsAreExact(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	s := seeded(t)
	h := formsapi.NewHandler(s, s)
	key := bearer(storetest.KeyA)
	get := func(target string, hdrs ...string) response { return do(t, h, "GET", target, append(hdrs, key...)...) }

	// A new submission on the first page changes its tag ...
	const subs = "/v1/forms/contact-a/submissions?limit=5"
	first := get(subs)
	tag := first.header.Get("ETag")
	second := get(nextLink(t, first.header))
	tag2 := second.header.Get("ETag")
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "contact-a", Data: []byte(`{"new":true}`)}, formsapi.Metadata{}))
	res := get(subs, "If-None-Match", tag)
	is.Equal(res.status, 200)              // the new submission is sent
	is.True(res.header.Get("ETag") != tag) // under a new tag
	is.True(bytes.Contains(res.body, []byte(`{"new":true}`)))
	// ... and the old cursor still leads to the same second page, whose
	// tag is unchanged: a page the new submission did not touch stays 304.
	checkNotModified(t, get(nextLink(t, first.header), "If-None-Match", tag2), tag2)

	// The last page of an ascending list gains the new submission.
	const asc = "/v1/forms/signup-a/submissions?order=asc"
	ascRes := get(asc)
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "signup-a", Data: []byte(`{"late":1}`)}, formsapi.Metadata{}))
	is.Equal(get(asc, "If-None-Match", ascRes.header.Get("ETag")).status, 200) // changed

	// A page that was full and last gains a next page: the tag changes.
	const full = "/v1/forms/signup-a/submissions?limit=4&order=asc"
	fullRes := get(full)
	is.Equal(fullRes.header.Get("Link"), "") // 4 of 4: no next page yet
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "signup-a", Data: []byte(`{"later":1}`)}, formsapi.Metadata{}))
	res = get(full, "If-None-Match", fullRes.header.Get("ETag"))
	is.Equal(res.status, 200)             // changed
	is.True(res.header.Get("Link") != "") // it now has a next page

	// A new form changes the forms list.
	forms := get("/v1/forms")
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "new-form-a", Title: "New"}))
	is.Equal(get("/v1/forms", "If-None-Match", forms.header.Get("ETag")).status, 200)

	// A revoked key gets 401, not 304.
	k, err := formsapi.NewKey()
	is.NoErr(err)
	is.NoErr(s.AddKey(ctx, k, storetest.AccountA))
	ok := do(t, h, "GET", "/v1/forms", bearer(k)...)
	is.Equal(ok.status, 200)
	is.NoErr(s.RevokeKey(ctx, k))
	res = do(t, h, "GET", "/v1/forms", append(bearer(k), "If-None-Match", ok.header.Get("ETag"))...)
	is.Equal(res.status, 401) // revoked: 401 before any 304

	// Two accounts without forms see the same body, but not the same tag.
	is.NoErr(s.AddKey(ctx, "key-empty-1", "empty-1"))
	is.NoErr(s.AddKey(ctx, "key-empty-2", "empty-2"))
	e1 := do(t, h, "GET", "/v1/forms", bearer("key-empty-1")...)
	e2 := do(t, h, "GET", "/v1/forms", bearer("key-empty-2")...)
	is.Equal(string(e1.body), string(e2.body))              // the same bytes
	is.True(e1.header.Get("ETag") != e2.header.Get("ETag")) // another account, another tag
	is.Equal(do(t, h, "GET", "/v1/forms", append(bearer("key-empty-2"), "If-None-Match", e1.header.Get("ETag"))...).status, 200)

	// A changed form, in a host's store that can change one.
	title := "Before"
	var mu sync.Mutex
	host := fakeStore{forms: func(context.Context) (formsapi.Page[formsapi.Form], error) {
		mu.Lock()
		defer mu.Unlock()
		return formsapi.Page[formsapi.Form]{Items: []formsapi.Form{{ID: "f", Title: title, CreatedAt: time.Unix(0, 0)}}}, nil
	}}
	hh := formsapi.NewHandler(host, okKey)
	before := do(t, hh, "GET", "/v1/forms", bearer("k")...)
	checkNotModified(t, do(t, hh, "GET", "/v1/forms", append(bearer("k"), "If-None-Match", before.header.Get("ETag"))...), before.header.Get("ETag"))
	mu.Lock()
	title = "After"
	mu.Unlock()
	is.Equal(do(t, hh, "GET", "/v1/forms", append(bearer("k"), "If-None-Match", before.header.Get("ETag"))...).status, 200) // the changed title is sent
}

// TestConditionalRequestsAcrossReplicas: handlers sharing a cursor secret
// and a store give the same tags, so a poller behind a load balancer gets
// its 304s; another secret gives other tags, so a client never keeps a
// cursor the server would refuse.
func TestConditionalRequestsAcrossReplicas(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := seeded(t)
	secret := []byte("0123456789abcdef0123456789abcdef")
	a := formsapi.NewHandler(s, s, formsapi.WithCursorSecret(secret))
	b := formsapi.NewHandler(s, s, formsapi.WithCursorSecret(secret))
	c := formsapi.NewHandler(s, s, formsapi.WithCursorSecret([]byte("another secret, another replica")))
	const target = "/v1/forms/contact-a/submissions?limit=3"
	first := do(t, a, "GET", target, bearer(storetest.KeyA)...)
	tag := first.header.Get("ETag")
	checkNotModified(t, do(t, b, "GET", target, append(bearer(storetest.KeyA), "If-None-Match", tag)...), tag)
	is.Equal(do(t, c, "GET", target, append(bearer(storetest.KeyA), "If-None-Match", tag)...).status, 200)
	// After a 304 the kept body's cursor still works on the other replica.
	var page struct{ NextCursor string }
	decodeInto(t, first.body, &page)
	is.Equal(do(t, b, "GET", "/v1/forms/contact-a/submissions?limit=3&cursor="+page.NextCursor, bearer(storetest.KeyA)...).status, 200)
}

// TestConditionalPollingIsExact polls random lists while writers add
// submissions, forms and keys, over memstore and over SQLite (with its
// read cache and its stored-JSON fast path). Each conditional poll is
// paired with an unconditional GET made right after it, with no write in
// between: a 304 must mean the page is what the client kept, and a 200
// must mean it changed.
func TestConditionalPollingIsExact(t *testing.T) {
	t.Parallel()
	sq, err := sqlitestore.Open(filepath.Join(t.TempDir(), "forms.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	if err := storetest.Load(context.Background(), sq, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]interface {
		formsapi.Store
		formsapi.KeyResolver
		formsapi.Writer
	}{"memstore": seeded(t), "sqlitestore": sq} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := formsapi.NewHandler(s, s)
			rng := rand.New(rand.NewPCG(1, 2))
			targets := []string{
				"/v1/forms", "/v1/forms?limit=2", "/v1/forms?order=asc&limit=3",
				"/v1/forms/contact-a/submissions", "/v1/forms/contact-a/submissions?limit=4",
				"/v1/forms/contact-a/submissions?order=asc&limit=30", "/v1/forms/signup-a/submissions?order=asc",
				"/v1/forms/survey-a/submissions?limit=1", "/v1/forms/signup-a/submissions?since=2024-03-01T00:00:00Z",
			}
			kept := map[string]response{}
			var revalidated, changed int
			for i := 0; i < 400; i++ {
				switch rng.IntN(6) {
				case 0:
					form := []string{"contact-a", "signup-a", "survey-a"}[rng.IntN(3)]
					at := time.Date(2024, 3, 1, 9, rng.IntN(120), 0, 0, time.UTC)
					if rng.IntN(2) == 0 {
						at = time.Time{} // now
					}
					if err := s.AddSubmission(ctx, formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"i":%d}`, i)), CreatedAt: at}, formsapi.Metadata{}); err != nil {
						t.Fatal(err)
					}
				case 1:
					if rng.IntN(8) == 0 {
						if err := s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: fmt.Sprintf("polled-%d", i), Title: "T"}); err != nil {
							t.Fatal(err)
						}
					}
				}
				target := targets[rng.IntN(len(targets))]
				prev, havePrev := kept[target]
				hdrs := bearer(storetest.KeyA)
				if havePrev {
					hdrs = append(hdrs, "If-None-Match", prev.header.Get("ETag"))
				}
				cond := do(t, h, "GET", target, hdrs...)
				fresh := do(t, h, "GET", target, bearer(storetest.KeyA)...)
				if fresh.status != 200 {
					t.Fatalf("%s: %d", target, fresh.status)
				}
				switch {
				case cond.status == 304:
					revalidated++
					if !havePrev {
						t.Fatalf("%s: 304 without If-None-Match", target)
					}
					if a, b := pageSansCursor(t, prev.body), pageSansCursor(t, fresh.body); a != b {
						t.Fatalf("%s: 304, but the page changed:\nkept  %s\nfresh %s", target, a, b)
					}
				case cond.status == 200:
					if havePrev {
						changed++
						if a, b := pageSansCursor(t, prev.body), pageSansCursor(t, cond.body); a == b {
							t.Fatalf("%s: 200 with If-None-Match, but the page did not change", target)
						}
					}
					kept[target] = cond
				default:
					t.Fatalf("%s: %d", target, cond.status)
				}
			}
			if revalidated < 50 || changed < 50 {
				t.Fatalf("the run exercised too little: %d 304s, %d changed pages", revalidated, changed)
			}
		})
	}
}

// pageSansCursor is a page's body with its nextCursor (fresh on every
// answer) replaced by whether there was one.
func pageSansCursor(t *testing.T, body []byte) string {
	t.Helper()
	v := decode(t, body)
	if _, ok := v["nextCursor"]; ok {
		v["nextCursor"] = "<present>"
	}
	return fmt.Sprint(v)
}

func decodeInto(t *testing.T, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatal(err)
	}
}

// gunzip decodes a gzip body.
func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("broken gzip: %v", err)
	}
	return out
}

func TestCompression(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := memstore.New()
	ctx := context.Background()
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "big", Title: "Big"}))
	for i := 0; i < 100; i++ {
		data := fmt.Sprintf(`{"name":"Person %d","email":"p%d@example.com","message":"Hello, I would like to know more about your product."}`, i, i)
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "big", Data: []byte(data)}, formsapi.Metadata{}))
	}
	is.NoErr(s.AddKey(ctx, "k", "acct"))
	h := formsapi.NewHandler(s, s)
	key := bearer("k")
	gz := append([]string{"Accept-Encoding", "gzip, deflate, br"}, key...)

	const target = "/v1/forms/big/submissions?limit=50"
	plain := do(t, h, "GET", target, key...)
	zipped := do(t, h, "GET", target, gz...)
	is.Equal(plain.header.Get("Content-Encoding"), "")                                 // not asked for: identity
	is.Equal(zipped.header.Get("Content-Encoding"), "gzip")                            // asked for: gzip
	is.Equal(zipped.header.Get("Vary"), "Authorization, Accept-Encoding")              // caches keep both apart
	is.Equal(plain.header.Get("Vary"), "Authorization, Accept-Encoding")               // on both
	is.Equal(zipped.header.Get("Content-Length"), fmt.Sprint(len(zipped.body)))        // the coded length
	is.True(len(zipped.body)*4 < len(plain.body))                                      // JSON pages shrink well
	is.Equal(pageSansCursor(t, gunzip(t, zipped.body)), pageSansCursor(t, plain.body)) // the same page
	is.Equal(zipped.header.Get("ETag"), plain.header.Get("ETag"))                      // the same weak tag
	is.Equal(zipped.header.Get("Content-Type"), "application/json; charset=utf-8")

	// A 304 to a gzip request: no body, no Content-Encoding.
	tag := zipped.header.Get("ETag")
	checkNotModified(t, do(t, h, "GET", target, append(gz, "If-None-Match", tag)...), tag)

	// HEAD with gzip: see TestHeadAnswersLikeGetEverywhere, over a server.

	// Refused, or not worth it: identity.
	for _, c := range []struct {
		target string
		ae     string
	}{
		{target, "gzip;q=0"}, {target, "identity"}, {target, "br"},
		{"/v1/forms/big/submissions?limit=1", "gzip"}, // under 1 KiB
		{"/v1/forms/nope/submissions", "gzip"},        // an error
	} {
		res := do(t, h, "GET", c.target, append([]string{"Accept-Encoding", c.ae}, key...)...)
		is.Equal(res.header.Get("Content-Encoding"), "") // identity
		is.Equal(res.header.Get("Content-Length"), fmt.Sprint(len(res.body)))
	}

	// The document is compressed too.
	doc := do(t, h, "GET", "/v1/openapi.json", "Accept-Encoding", "gzip")
	is.Equal(doc.header.Get("Content-Encoding"), "gzip")
	is.Equal(doc.header.Get("Vary"), "Accept-Encoding")
	want := do(t, h, "GET", "/v1/openapi.json")
	is.True(bytes.Equal(gunzip(t, doc.body), want.body)) // the same document

	// Over a real server, Go's client asks for gzip and decodes it.
	srv := httptest.NewServer(h)
	defer srv.Close()
	links, n := walkWithGet(t, http.DefaultClient, srv.URL+"/v1/forms/big/submissions?limit=30", "k")
	is.Equal(n, 100)
	is.Equal(len(links), 3)
}

// TestHeadAnswersLikeGetEverywhere: HEAD on both lists and the document,
// with and without gzip and If-None-Match, gets the GET's status and
// headers (the Link's cursor has a fresh nonce) and no body, over a real
// server.
func TestHeadAnswersLikeGetEverywhere(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	srv := httptest.NewServer(formsapi.NewHandler(s, s))
	defer srv.Close()
	transport := &http.Transport{DisableCompression: true} // the raw headers, as sent
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	send := func(method, target string, hdrs ...string) response {
		req, _ := http.NewRequest(method, srv.URL+target, nil)
		for i := 0; i+1 < len(hdrs); i += 2 {
			req.Header.Set(hdrs[i], hdrs[i+1])
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		out := response{res.StatusCode, res.Header, body}
		record(method, req.URL.RequestURI(), out)
		return out
	}
	cursorRe := regexp.MustCompile(`cursor=[^&>]+`)
	gzipHeads, notModifiedHeads := 0, 0
	for _, target := range []string{"/v1/forms?limit=2", "/v1/forms/contact-a/submissions", "/v1/forms/contact-a/submissions?limit=1", "/v1/openapi.json", "/v1/forms/nope/submissions", "/v1/forms?limit=x"} {
		for _, ae := range []string{"", "gzip"} {
			hdrs := []string{"Authorization", "Bearer " + storetest.KeyA, "Accept-Encoding", ae}
			get := send("GET", target, hdrs...)
			for _, extra := range [][]string{nil, {"If-None-Match", get.header.Get("ETag")}} {
				if extra != nil && get.header.Get("ETag") == "" {
					continue
				}
				g := send("GET", target, append(hdrs, extra...)...)
				h := send("HEAD", target, append(hdrs, extra...)...)
				if h.status != g.status || len(h.body) != 0 {
					t.Errorf("HEAD %s (%q, %v): %d with %d bytes; GET %d", target, ae, extra, h.status, len(h.body), g.status)
				}
				gh, hh := g.header.Clone(), h.header.Clone()
				for _, x := range []http.Header{gh, hh} {
					x.Del("X-Request-Id")
					x.Del("Date")
					if l := x.Get("Link"); l != "" {
						x.Set("Link", cursorRe.ReplaceAllString(l, "cursor=C"))
					}
				}
				if h.header.Get("Content-Encoding") == "gzip" {
					gzipHeads++
				}
				if h.status == 304 {
					notModifiedHeads++
				}
				if fmt.Sprint(gh) != fmt.Sprint(hh) {
					t.Errorf("HEAD %s (%q, %v) headers differ from GET's:\nGET  %v\nHEAD %v", target, ae, extra, gh, hh)
				}
			}
		}
	}
	if gzipHeads < 2 || notModifiedHeads < 6 {
		t.Errorf("%d gzip and %d 304 answers to HEAD: the cases did not run", gzipHeads, notModifiedHeads)
	}
}

// TestScopedFormsTagIgnoresOtherForms: a scoped key's pages of forms keep
// their tags when forms it cannot see are added anywhere in the list, as
// long as the forms it can see are the same.
func TestScopedFormsTagIgnoresOtherForms(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := memstore.New()
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var visible []string
	for i := range 6 {
		id := fmt.Sprintf("v%d", i)
		is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: id, CreatedAt: at.Add(time.Duration(10*i) * time.Minute)}))
		visible = append(visible, id)
	}
	key := mustKey(t)
	is.NoErr(s.AddKeyWith(ctx, key, "acct", formsapi.KeyOptions{Forms: visible}))
	h := formsapi.NewHandler(s, s, formsapi.WithPageSize(2, 3))
	tags := func() []string {
		var out []string
		target := "/v1/forms?limit=2"
		for target != "" {
			res := do(t, h, "GET", target, bearer(key)...)
			is.Equal(res.status, 200)
			out = append(out, res.header.Get("ETag"))
			var p struct{ NextCursor string }
			is.NoErr(json.Unmarshal(res.body, &p))
			target = ""
			if p.NextCursor != "" {
				target = "/v1/forms?limit=2&cursor=" + url.QueryEscape(p.NextCursor)
			}
		}
		return out
	}
	want := tags()
	is.Equal(len(want), 3) // three pages of two
	for i := range 12 {
		// Forms of the account the key cannot see, before, between and
		// after the ones it can.
		is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: fmt.Sprintf("x%d", i), CreatedAt: at.Add(time.Duration(5*i-3) * time.Minute)}))
		if got := tags(); !slices.Equal(got, want) {
			t.Fatalf("after adding hidden form x%d: tags %v, want %v", i, got, want)
		}
	}
}
