package formsapi

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi/internal/token"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/matryer/is"
)

func TestValidHost(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]bool{
		"example.com": true, "EXAMPLE.com:443": true, "127.0.0.1": true, "127.0.0.1:8080": true,
		"localhost": true, "my_host.internal:1": true, "a:65535": true, "[::1]": true, "[::1]:8080": true,
		"[2001:db8::7]:443": true, "[::ffff:192.0.2.1]": true,
		"": false, "a:": false, "a:0": false, "a:65536": false, "a:+80": false, "a:-1": false, "a:8o": false,
		"a:123456": false, "[::1]:": false, "[::1]x": false, "[::1": false, "::1": false, "[127.0.0.1]": false,
		"[fe80::1%eth0]": false, "[fe80::1%25eth0]:80": false, "[zz::1]": false,
		"evil.com/x": false, "evil.com?x": false, "a b": false, "a,b": false, "a;b": false, "h<o>st": false,
		"user@host": false, "a'b": false, "a%41": false, "*": false, ".": false, ".a": false, "a..b": false,
		"-a": false, strings.Repeat("a", 254): false, strings.Repeat("a", 253): true, "a:80:80": false,
	} {
		if got := validHost(h); got != want {
			t.Errorf("validHost(%q) = %v, want %v", h, got, want)
		}
	}
}

func TestParseBaseURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://forms.example.com/api":    "https://forms.example.com/api",
		"https://forms.example.com/api/":   "https://forms.example.com/api",
		"https://forms.example.com":        "https://forms.example.com",
		"https://forms.example.com/":       "https://forms.example.com",
		"HTTP://h:8080/a/b":                "http://h:8080/a/b",
		"https://[::1]:8443/x%20y":         "https://[::1]:8443/x%20y",
		"https://h/t%C3%A9nant/forms-api/": "https://h/t%C3%A9nant/forms-api",
	} {
		got, err := parseBaseURL(in)
		if err != nil || got != want {
			t.Errorf("parseBaseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"":                       "absolute",
		"/api":                   "absolute",
		"forms.example.com/api":  "absolute",
		"ftp://h/api":            "absolute",
		"https:opaque":           "host",
		"https:///api":           "host",
		"https://u:p@h/api":      "user name",
		"https://h/api?x=1":      "query",
		"https://h/api?":         "query",
		"https://h/api#x":        "fragment",
		"https://h/api#":         "fragment",
		"https://h,evil/api":     "host",
		"https://h:0/api":        "host",
		"https://h/a/../b":       "segments",
		"https://h//api":         "segments",
		"https://h/a/./b":        "segments",
		"https://h/%zz":          "URL",
		"https://[fe80::1%25e]/": "host",
		"javascript:alert(1)//x": "absolute",
		"https://h/api\x00":      "URL",
		"https://h/<a>":          "",
		"https://h/a\"b":         "",
	} {
		got, err := parseBaseURL(in)
		if why == "" {
			// Accepted, but nothing may break out of the Link's <...>.
			if err == nil && strings.ContainsAny(got, "<>\" ") {
				t.Errorf("parseBaseURL(%q) = %q: unsafe in a Link header", in, got)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("parseBaseURL(%q) = %q, %v; want an error about %q", in, got, err, why)
		}
	}
}

func TestMountPrefix(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ requestURI, path, want string }{
		{"/v1/forms", "/v1/forms", ""},
		{"/api/v1/forms?limit=2", "/v1/forms", "/api"},
		{"/a/b/c/v1/forms/x/submissions", "/v1/forms/x/submissions", "/a/b/c"},
		{"/t%C3%A9/v1/forms", "/v1/forms", "/t%C3%A9"},
		{"/a%2Fb/v1/forms", "/v1/forms", "/a%2Fb"},
		{"http://host/api/v1/forms?x", "/v1/forms", "/api"},
		{"/api/v1/forms/a%2Db/submissions", "/v1/forms/a%2Db/submissions", "/api"},
		{"/a<b>\"/v1/forms", "/v1/forms", "/a%3Cb%3E%22"},
		{"/a%zz/v1/forms", "/v1/forms", "/a%25zz"},
		{"/rewritten", "/v1/forms", ""},
		{"/api//v1/forms", "/v1/forms", ""},
		{"", "/v1/forms", ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RequestURI = c.requestURI
		r.URL.Path, r.URL.RawPath = c.path, ""
		if strings.Contains(c.path, "%") {
			r.URL.RawPath = c.path
			r.URL.Path = strings.ReplaceAll(c.path, "%2D", "-")
		}
		if got := mountPrefix(r); got != c.want {
			t.Errorf("RequestURI %q, path %q: prefix %q, want %q", c.requestURI, c.path, got, c.want)
		}
	}
}

func TestNoneMatch(t *testing.T) {
	t.Parallel()
	const tag = `W/"abc"`
	for _, c := range []struct {
		vals []string
		want bool
	}{
		{[]string{`W/"abc"`}, true},
		{[]string{`"abc"`}, true}, // weak comparison
		{[]string{`"x", W/"abc"`}, true},
		{[]string{`"x"`, `W/"abc"`}, true},
		{[]string{`*`}, true},
		{[]string{` , "x" ,W/"abc"`}, true},
		{[]string{`"a,b", W/"abc"`}, true}, // a comma inside a tag
		{nil, false},
		{[]string{""}, false},
		{[]string{`"abd"`}, false},
		{[]string{`W/"ab"`}, false},
		{[]string{`abc`}, false},
		{[]string{`W/abc`}, false},
		{[]string{`"abc`}, false},
		{[]string{`w/"abc"`}, false}, // W/ is case-sensitive
		{[]string{`junk W/"abc"`}, false},
	} {
		if got := noneMatch(c.vals, tag); got != c.want {
			t.Errorf("noneMatch(%q) = %v, want %v", c.vals, got, c.want)
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		vals []string
		want bool
	}{
		{[]string{"gzip"}, true},
		{[]string{"GZIP"}, true},
		{[]string{"x-gzip"}, true},
		{[]string{"gzip, deflate, br"}, true},
		{[]string{"br;q=1.0, gzip;q=0.8, *;q=0.1"}, true},
		{[]string{"br", "gzip"}, true},
		{[]string{"*"}, true},
		{[]string{"gzip;q=0.001"}, true},
		{[]string{"gzip ; q=1"}, true},
		{nil, false},
		{[]string{""}, false},
		{[]string{"identity"}, false},
		{[]string{"br, deflate"}, false},
		{[]string{"gzip;q=0"}, false},
		{[]string{"gzip;Q=0.000"}, false},
		{[]string{"gzip;q=0., *"}, false},
		{[]string{"*;q=0"}, false},
		{[]string{"*, gzip;q=0"}, false},
		{[]string{"gzipx"}, false},
	} {
		if got := acceptsGzip(c.vals); got != c.want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", c.vals, got, c.want)
		}
	}
}

func TestPageTag(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := &api{tags: newTagger([]byte("secret"))}
	base := listRequest{request: request{list: token.List{Account: "acct", FormID: "f"}}}
	base.q.Limit = 10
	tag := a.pageTag(base, "next", []byte("body"), pageItems{})
	is.True(strings.HasPrefix(tag, `W/"`) && strings.HasSuffix(tag, `"`)) // a weak tag
	is.Equal(a.pageTag(base, "next", []byte("body"), pageItems{}), tag)   // the same page, the same tag

	other := func(f func(r *listRequest)) listRequest { r := base; f(&r); return r }
	for name, r := range map[string]listRequest{
		"account": other(func(r *listRequest) { r.list.Account = "acct2" }),
		"form":    other(func(r *listRequest) { r.list.FormID = "g" }),
		"order":   other(func(r *listRequest) { r.q.Order = Oldest }),
		"limit":   other(func(r *listRequest) { r.q.Limit = 11 }),
		"since":   other(func(r *listRequest) { r.q.Since = time.Unix(1, 0) }),
		"until":   other(func(r *listRequest) { r.q.Until = time.Unix(0, 1) }),
		// A field boundary cannot be moved between account and form.
		"boundary": other(func(r *listRequest) { r.list = token.List{Account: "acctf"} }),
	} {
		if a.pageTag(r, "next", []byte("body"), pageItems{}) == tag {
			t.Errorf("changing the %s keeps the tag", name)
		}
	}
	is.True(a.pageTag(base, "", []byte("body"), pageItems{}) != tag)     // the last page differs from one with a next page
	is.True(a.pageTag(base, "next", []byte("bodY"), pageItems{}) != tag) // another body
	b := &api{tags: newTagger([]byte("another secret"))}
	is.True(b.pageTag(base, "next", []byte("body"), pageItems{}) != tag) // another cursor secret
}

// TestPageTagHeldDigest: a page whose items a store's read cache served
// whole (wire.Page.Digests) is tagged from the digest kept with the held
// page, computed once, and the tag is the one computed from the bytes:
// the same page gets the same tag whether it was a hit or a miss, on
// every node. The envelope before the items counts as before, and
// another handler's key or another run of items is never taken from the
// digests held.
func TestPageTagHeldDigest(t *testing.T) {
	t.Parallel()
	a := &api{tags: newTagger([]byte("secret"))}
	b := &api{tags: newTagger([]byte("another secret"))}
	req := listRequest{request: request{list: token.List{Account: "acct", FormID: "f"}}}
	req.q.Limit = 10
	env := `{"success":true,"message":"m","submissions":[`
	page := func(items string) []byte { return []byte(env + items) }
	items := pageItems{start: len(env)}
	one, two := `{"id":"1"}`, `{"id":"1"},{"id":"2"}`
	want := a.pageTag(req, "", page(two), items)
	if whole := a.pageTag(req, "", page(two), pageItems{}); whole == want {
		t.Error("the items' start is not part of the tag") // a boundary moved between envelope and items
	}

	var held wire.Digests
	with := func(n int) pageItems { return pageItems{start: len(env), held: &held, n: n} }
	if got := a.pageTag(req, "", page(two), with(2)); got != want {
		t.Fatalf("first tag from a held page %s, want %s (the bytes')", got, want)
	}
	// Kept: the same request does not hash the items again. The held
	// page never changes, so the digest's bytes stand for them; here the
	// body lies (same length, other bytes) to show the digest is used.
	if got := a.pageTag(req, "", page(strings.Replace(two, "2", "3", 1)), with(2)); got != want {
		t.Errorf("repeat tag %s, want the kept %s", got, want)
	}
	// Another handler over the same held page keys its own digest.
	if got, w := b.pageTag(req, "", page(two), with(2)), b.pageTag(req, "", page(two), items); got != w {
		t.Errorf("another handler's tag %s, want %s", got, w)
	}
	// Fewer items of the same held page: a digest of their own.
	if got, w := a.pageTag(req, "", page(one), with(1)), a.pageTag(req, "", page(one), items); got != w || got == want {
		t.Errorf("tag of the first item %s, want %s (and not %s)", got, w, want)
	}
	// Bounded: more runs than slots push out the oldest, which is then
	// hashed again, right.
	for n := 3; n < 10; n++ {
		a.pageTag(req, "", page(two+strings.Repeat(",{}", n-2)), with(n))
	}
	if got := a.pageTag(req, "", page(two), with(2)); got != want {
		t.Errorf("tag after the digest was pushed out %s, want %s", got, want)
	}
}
