package formsapi

// CORS: with WithCORS, browser apps served from the listed origins may
// call the API. It is in the library, not left to the host's middleware,
// because only the handler knows which headers it sends that a browser
// app needs to read (exposedHeaders, the one list of them) and which it
// reads from requests (allowedHeaders); a generic middleware would be
// configured with lists that drift from the handler's.
//
// Security: the API authenticates with a Bearer header, which a browser
// never attaches on its own (unlike cookies), so a page on another
// origin can only call the API with a key its own code holds; CORS
// cannot widen what a key may read, and credentials mode is never
// needed (Access-Control-Allow-Credentials is never sent). Giving a key
// to code running in a browser, where its user can read it, is the
// host's choice; a scoped key (KeyOptions.Forms) limits what it reads.
// The OpenAPI document holds nothing secret and may be fetched from any
// origin that is allowed; "*" allows every origin.

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// exposedHeaders are the response headers the handler sets that CORS
// does not let a page read unless named (Cache-Control, Content-Type,
// Content-Length and the other CORS-safelisted ones it always may):
// every header openapi.json documents, so that a browser app reads what
// any other client reads. The next page, the validator for If-None-Match,
// the rate limit and when to retry, why a key was refused, the ID to
// quote in a report, an export's Sync-Token (where the feed continues)
// and file name, and the rest of what the document describes. Tests
// check that every header the handler sends, and every one openapi.json
// documents, is either safelisted or here, and that nothing here is
// neither sent nor documented.
var exposedHeaders = []string{"Link", "ETag", "RateLimit", "RateLimit-Policy", "Retry-After", "WWW-Authenticate", "X-Request-Id",
	"Sync-Token", "Content-Disposition", "Accept-Ranges", "Allow", "Content-Encoding", "Vary", "X-Content-Type-Options", "Data-Age"}

// allowedHeaders are the request headers the handler reads that a browser
// sends only after a preflight: the key, the validator of a conditional
// request, and a request ID to correlate.
var allowedHeaders = []string{"Authorization", "If-None-Match", "X-Request-Id"}

// corsMaxAge is how long, in seconds, a browser may keep a preflight's
// answer: two hours, the most Chromium keeps one.
const corsMaxAge = "7200"

// WithCORS lets browser apps served from origins call the API across
// origins: requests from one of them get Access-Control-Allow-Origin and
// Access-Control-Expose-Headers naming every header openapi.json
// documents that a page could not read otherwise (Link, ETag, the
// rate-limit headers, an export's Sync-Token…), and a
// preflight (OPTIONS with Origin and Access-Control-Request-Method) is
// answered 204, with no body, before any key is looked at, allowing GET
// and HEAD with the Authorization, If-None-Match and X-Request-Id
// headers (and carrying an X-Request-Id, as every answer does). Every
// answer carries Vary: Origin, so a cache keeps one per
// origin. A request from an origin not listed, and its preflight, get
// no CORS header: the preflight is then answered like any OPTIONS, 405.
// Credentials mode (cookies) is not offered: the API's Bearer key is a
// header the page's code sets.
//
// Each origin is "scheme://host[:port]", as a browser sends it (http or
// https, no path), or "*" for every origin. Without WithCORS, the
// default, no CORS header is ever sent and browsers keep pages on other
// origins from reading any answer. It panics on an origin of another
// form, or with none.
func WithCORS(origins ...string) Option {
	if len(origins) == 0 {
		panic("formsapi: WithCORS: no origin")
	}
	p := &corsPolicy{origins: map[string]bool{}}
	for _, o := range origins {
		if o == "*" {
			p.any = true
			continue
		}
		origin, err := parseOrigin(o)
		if err != nil {
			panic(fmt.Sprintf("formsapi: WithCORS(%q): %v", o, err))
		}
		p.origins[origin] = true
	}
	return func(c *config) { c.cors = p }
}

// parseOrigin returns o as a browser serializes an origin (RFC 6454: the
// scheme and host in lower case, the port only when it is not the
// scheme's default), or an error if no browser could send it, so that a
// listed origin never silently allows nothing: a port that is empty, has
// a leading zero or is out of range, a wildcard, or a host that is not
// ASCII (browsers send an internationalized name in its xn-- form).
func parseOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	switch {
	case err != nil:
		return "", fmt.Errorf("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("want an http or https origin")
	case u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || u.ForceQuery:
		return "", fmt.Errorf(`want "scheme://host[:port]" and nothing more`)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if strings.HasSuffix(u.Host, ":") {
		return "", fmt.Errorf("an empty port")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return "", fmt.Errorf("port %q: want 1 to 65535 without leading zeros", port)
		}
	}
	if strings.HasPrefix(u.Host, "[") { // an IPv6 literal
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return "", fmt.Errorf("host %q: not an IPv6 address", host)
		}
		host = "[" + ip.String() + "]"
	} else {
		for _, r := range host {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
				return "", fmt.Errorf("host %q: want letters, digits, '-' and '.' (an internationalized name in its xn-- form, as browsers send it; no wildcard)", host)
			}
		}
	}
	if port == map[string]string{"http": "80", "https": "443"}[u.Scheme] {
		port = "" // browsers leave the default port out
	}
	if port != "" {
		return u.Scheme + "://" + host + ":" + port, nil
	}
	return u.Scheme + "://" + host, nil
}

type corsPolicy struct {
	origins map[string]bool
	any     bool // "*"
}

// allowOrigin returns the Access-Control-Allow-Origin for a request's
// Origin header values, "" when the origin is not allowed.
func (p *corsPolicy) allowOrigin(values []string) string {
	if len(values) != 1 || values[0] == "" {
		return ""
	}
	if p.any {
		return "*"
	}
	if p.origins[values[0]] {
		return values[0]
	}
	return ""
}

var (
	exposedList = strings.Join(exposedHeaders, ", ")
	allowedList = strings.Join(allowedHeaders, ", ")
)

// corsHandler answers preflights from allowed origins and marks every
// other answer for them, around next.
func (p *corsPolicy) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		allow := p.allowOrigin(r.Header.Values("Origin"))
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" && allow != "" {
			h.Set("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Origin", allow)
			h.Set("Access-Control-Allow-Methods", "GET, HEAD")
			h.Set("Access-Control-Allow-Headers", allowedList)
			h.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allow != "" {
			h.Set("Access-Control-Allow-Origin", allow)
			h.Set("Access-Control-Expose-Headers", exposedList)
		}
		next.ServeHTTP(&varyOrigin{ResponseWriter: w}, r)
	})
}

// varyOrigin adds Origin to the Vary header of whatever answer is
// written, after the handler has set (or, for an error, removed) its own.
type varyOrigin struct {
	http.ResponseWriter
	wrote bool
}

func (v *varyOrigin) WriteHeader(status int) {
	if !v.wrote {
		v.wrote = true
		// One line, as openapi.json documents it.
		h := v.Header()
		vary := append(h.Values("Vary"), "Origin")
		h.Set("Vary", strings.Join(vary, ", "))
	}
	v.ResponseWriter.WriteHeader(status)
}

func (v *varyOrigin) Write(b []byte) (int, error) {
	if !v.wrote {
		v.WriteHeader(http.StatusOK)
	}
	return v.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (v *varyOrigin) Unwrap() http.ResponseWriter { return v.ResponseWriter }
