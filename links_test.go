package formsapi_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// nextLink returns the URL in a Link: <URL>; rel="next" header, or "".
func nextLink(t *testing.T, h http.Header) string {
	t.Helper()
	link := h.Get("Link")
	if link == "" {
		return ""
	}
	u, ok := strings.CutPrefix(link, "<")
	u, ok2 := strings.CutSuffix(u, `>; rel="next"`)
	if !ok || !ok2 {
		t.Fatalf("Link %q is not <URL>; rel=\"next\"", link)
	}
	return u
}

// walkWithGet follows the next links from first with the URL exactly as the
// header gives it, as Python's requests or a curl script would, to the last
// page, and returns every page's Link URL and the number of items seen.
func walkWithGet(t *testing.T, client *http.Client, first, key string) (links []string, items int) {
	t.Helper()
	next := first
	for pages := 0; next != ""; pages++ {
		if pages > 100 {
			t.Fatal("the walk does not end")
		}
		req, err := http.NewRequest("GET", next, nil)
		if err != nil {
			t.Fatalf("the Link URL %q is not requestable: %v", next, err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		record("GET", req.URL.RequestURI(), response{res.StatusCode, res.Header, body})
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", next, res.StatusCode, body)
		}
		page := decode(t, body)
		for _, list := range []string{"forms", "submissions"} {
			if v, ok := page[list].([]any); ok {
				items += len(v)
			}
		}
		next = nextLink(t, res.Header)
		if next != "" {
			links = append(links, next)
			u, err := url.Parse(next)
			if err != nil || !u.IsAbs() {
				t.Fatalf("Link %q is not an absolute URL", next)
			}
			if got, want := u.Query().Get("cursor"), page["nextCursor"]; got != want {
				t.Fatalf("Link cursor %q, nextCursor %v", got, want)
			}
		}
	}
	return links, items
}

// TestNextLinkIsAbsoluteAtRootAndUnderPrefixes walks a form over a real
// server, at the root, under one prefix and under a nested one, with
// plain GETs of the Link URLs, and checks every URL names the scheme,
// the host and the mount prefix.
func TestNextLinkIsAbsoluteAtRootAndUnderPrefixes(t *testing.T) {
	t.Parallel()
	api := seededHandler(t)
	for _, prefix := range []string{"", "/api", "/tenants/x/forms-api"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			is := is.New(t)
			mux := http.NewServeMux()
			mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
			if prefix == "" {
				mux.Handle("/v1/", api)
			} else {
				mux.Handle(prefix+"/", http.StripPrefix(prefix, api))
			}
			srv := httptest.NewServer(mux)
			defer srv.Close()

			links, n := walkWithGet(t, srv.Client(), srv.URL+prefix+"/v1/forms/contact-a/submissions?limit=3&order=asc", storetest.KeyA)
			is.Equal(n, 23)         // every submission, through the links
			is.Equal(len(links), 7) // 8 pages of at most 3
			for _, l := range links {
				is.True(strings.HasPrefix(l, srv.URL+prefix+"/v1/forms/contact-a/submissions?cursor=")) // scheme, host, prefix and path
				is.True(strings.HasSuffix(l, "&limit=3"))                                               // the request's limit rides along
			}
			links, n = walkWithGet(t, srv.Client(), srv.URL+prefix+"/v1/forms?limit=1", storetest.KeyA)
			is.Equal(n, 4) // the forms list too
			for _, l := range links {
				is.True(strings.HasPrefix(l, srv.URL+prefix+"/v1/forms?cursor=")) // the forms list's own path
			}
		})
	}
}

// TestNextLinkOverTLS: a request that came over TLS gets an https link.
func TestNextLinkOverTLS(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", seededHandler(t)))
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	is.True(strings.HasPrefix(srv.URL, "https://"))
	links, n := walkWithGet(t, srv.Client(), srv.URL+"/api/v1/forms/contact-a/submissions?limit=5", storetest.KeyA)
	is.Equal(n, 23) // every submission
	for _, l := range links {
		is.True(strings.HasPrefix(l, srv.URL+"/api/v1/forms/contact-a/submissions?cursor=")) // https, host and prefix
	}
}

// TestWithBaseURLBehindARewritingProxy puts the API behind a reverse proxy
// that serves it under /public/forms and forwards to the backend's root,
// as a TLS-terminating or path-rewriting proxy does: the backend never
// sees the public host or path, so only WithBaseURL can give clients
// links that work.
func TestWithBaseURLBehindARewritingProxy(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	// behindProxy starts a proxy for a backend with opts and returns the
	// public base URL. The proxy's address is known before it starts, so
	// the backend can be configured with it.
	behindProxy := func(opts func(public string) []formsapi.Option) (public string, backend *httptest.Server) {
		front := httptest.NewUnstartedServer(nil)
		public = "http://" + front.Listener.Addr().String() + "/public/forms"
		backend = httptest.NewServer(seededHandler(t, opts(public)...))
		target, _ := url.Parse(backend.URL)
		front.Config.Handler = &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, "/public/forms")
			pr.Out.URL.RawPath = ""
			pr.SetXForwarded() // sent, and ignored: clients can forge them
		}}
		front.Start()
		t.Cleanup(front.Close)
		t.Cleanup(backend.Close)
		return public, backend
	}

	// Without WithBaseURL the backend can only describe itself.
	public, _ := behindProxy(func(string) []formsapi.Option { return nil })
	res := doHTTP(t, "GET", public+"/v1/forms?limit=1", storetest.KeyA)
	is.Equal(res.status, 200)
	is.True(!strings.HasPrefix(nextLink(t, res.header), public)) // the public URL is unknown to the backend

	// With it, the links lead through the proxy, to the last page.
	public, backend := behindProxy(func(public string) []formsapi.Option {
		return []formsapi.Option{formsapi.WithBaseURL(public + "/")} // a trailing slash is dropped
	})
	links, n := walkWithGet(t, http.DefaultClient, public+"/v1/forms/contact-a/submissions?limit=4", storetest.KeyA)
	is.Equal(n, 23) // every submission, through the proxy
	is.Equal(len(links), 5)
	for _, l := range links {
		is.True(strings.HasPrefix(l, public+"/v1/forms/contact-a/submissions?cursor=")) // built from the base URL
	}

	// The request's Host is not used: asking the backend directly under
	// another Host still gives the base URL.
	req, _ := http.NewRequest("GET", backend.URL+"/v1/forms?limit=1", nil)
	req.Host = "attacker.example"
	req.Header.Set("Authorization", "Bearer "+storetest.KeyA)
	r, err := http.DefaultClient.Do(req)
	is.NoErr(err)
	r.Body.Close()
	is.True(strings.HasPrefix(nextLink(t, r.Header), public+"/v1/forms?cursor=")) // the base URL alone
}

func TestWithBaseURLRefusesUnusableURLs(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "/api", "forms.example.com", "ftp://h/", "https://user:pw@h/api", "https://h/api?x=1", "https://h/api#f", "https://h/a/../b", "https://a,b/"} {
		func() {
			defer func() {
				v := recover()
				msg, _ := v.(string)
				if !strings.HasPrefix(msg, "formsapi: WithBaseURL: ") {
					t.Errorf("WithBaseURL(%q): panic %v, want a formsapi: WithBaseURL message", bad, v)
				}
				if strings.Contains(msg, "pw") {
					t.Errorf("WithBaseURL(%q): the panic %q echoes the credentials", bad, msg)
				}
			}()
			formsapi.WithBaseURL(bad)
		}()
	}
}

// rawGet sends one HTTP/1.1 request as written, so that the Host header and
// the request target can be anything net/http's server itself lets
// through, and returns the status and the Link URL.
func rawGet(t *testing.T, addr, target, host string, extra ...string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + storetest.KeyA + "\r\nConnection: close\r\n"
	for _, h := range extra {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.Header.Get("X-Request-Id") != "" { // net/http's own answers are not the handler's
		record("GET", strings.TrimPrefix(target, "http://"+addr), response{res.StatusCode, res.Header, body})
	}
	return res.StatusCode, nextLink(t, res.Header)
}

// TestNextLinkHostHeader: Host values net/http accepts but that are no
// plain host (commas, quotes, zones, empty ports) never reach the Link,
// which then holds only the path; IPv6 literals and ports are kept;
// X-Forwarded-* and Forwarded are ignored.
func TestNextLinkHostHeader(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", seededHandler(t)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	const path = "/api/v1/forms?limit=1"
	for _, c := range []struct {
		host, want string
		extra      []string
	}{
		{host: addr, want: "http://" + addr + "/api/v1/forms?cursor="},
		{host: "forms.example.com", want: "http://forms.example.com/api/v1/forms?cursor="},
		{host: "[::1]:8080", want: "http://[::1]:8080/api/v1/forms?cursor="},
		{host: "[2001:db8::1]", want: "http://[2001:db8::1]/api/v1/forms?cursor="},
		{host: "a,b", want: "/api/v1/forms?cursor="},
		{host: "a;b=c", want: "/api/v1/forms?cursor="},
		{host: "a'b", want: "/api/v1/forms?cursor="},
		{host: "a*b", want: "/api/v1/forms?cursor="},
		{host: "h:", want: "/api/v1/forms?cursor="},
		{host: "h:99999", want: "/api/v1/forms?cursor="},
		{host: "[fe80::1%25eth0]:80", want: "/api/v1/forms?cursor="},
		{host: "h", want: "http://h/api/v1/forms?cursor=", extra: []string{
			"X-Forwarded-Host: evil.example", "X-Forwarded-Proto: https", "X-Forwarded-Prefix: /evil",
			"Forwarded: host=evil.example;proto=https",
		}},
	} {
		status, link := rawGet(t, addr, path, c.host, c.extra...)
		if status != 200 || !strings.HasPrefix(link, c.want) {
			t.Errorf("Host %q: %d, Link %q; want 200 and a link starting %q", c.host, status, link, c.want)
		}
	}
	// net/http answers malformed Host headers itself, before the handler.
	for _, host := range []string{"a b", "h<o>st", "a/b"} {
		if status, _ := rawGet(t, addr, path, host); status != 400 {
			t.Errorf("Host %q: %d, want net/http's 400", host, status)
		}
	}
	// The absolute form of the request target, which servers accept too.
	status, link := rawGet(t, addr, "http://"+addr+path, addr)
	if status != 200 || !strings.HasPrefix(link, "http://"+addr+"/api/v1/forms?cursor=") {
		t.Errorf("absolute-form target: %d, Link %q", status, link)
	}
	// A prefix with characters that must be escaped in a URL stays escaped.
	mux.Handle("/t%C3%A9/", http.StripPrefix("/té", seededHandler(t)))
	status, link = rawGet(t, addr, "/t%C3%A9/v1/forms?limit=1", addr)
	if status != 200 || !strings.HasPrefix(link, "http://"+addr+"/t%C3%A9/v1/forms?cursor=") {
		t.Errorf("escaped prefix: %d, Link %q", status, link)
	}
}

// TestNextLinkWithoutHost: a request handed to the handler without a Host
// (built with http.NewRequest, never sent) gets a link with the path only.
func TestNextLinkWithoutHost(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := seededHandler(t)
	r := httptest.NewRequest("GET", "/v1/forms?limit=1", nil)
	r.Host, r.RequestURI = "", ""
	r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	is.Equal(w.Code, 200)
	is.True(strings.HasPrefix(nextLink(t, w.Result().Header), "/v1/forms?cursor=")) // path only
	record("GET", "/v1/forms?limit=1", response{w.Code, w.Result().Header, w.Body.Bytes()})
}
