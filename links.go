package formsapi

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// The next-page Link carries an absolute URL, because common clients
// (Python requests, Go's http.Get, Node's fetch, curl scripts) hand the
// header's URL straight to a request function, which refuses a relative
// one. The URL is built from, in this order of preference:
//
//   - the base URL of WithBaseURL, alone;
//   - otherwise the request: https when it came over TLS, its Host header
//     once checked to be a plain host name or IP literal with an optional
//     port, and the mount prefix a wrapper such as http.StripPrefix removed
//     from the path;
//   - otherwise (no usable Host) the path alone, which a client resolves
//     against the URL it asked for.
//
// X-Forwarded-* and Forwarded headers are never read: any client can send
// them.

// WithBaseURL sets the URL the handler is reached at from outside, such as
// "https://forms.example.com/api", for a host behind a proxy that
// terminates TLS or rewrites paths. The next-page Link header is then
// built from it alone (base + "/v1/forms?cursor=..."), and the request's
// Host and path are not used. Without it, the link uses the request's
// scheme, its Host header and the mount prefix http.StripPrefix removed.
// X-Forwarded-* headers are never used: clients can set them.
//
// It panics unless base is an absolute http or https URL with a host and
// no user name, query or fragment; a trailing slash is dropped.
func WithBaseURL(base string) Option {
	b, err := parseBaseURL(base)
	if err != nil {
		// The value is not echoed: it may hold credentials.
		panic("formsapi: WithBaseURL: " + err.Error())
	}
	return func(c *config) { c.baseURL = b }
}

// path is the path below the mount point that the Link of req's route
// points at.
func (req request) path() string {
	return req.route.link(req.list.FormID)
}

// next seals the store's cursor for the client and sets the Link header;
// it returns "" when the store says the list ends here.
func (a *api) next(w http.ResponseWriter, r *http.Request, req listRequest, storeNext string) string {
	if storeNext == "" {
		return ""
	}
	next := a.tokens.seal(req.cursorKind(), req.list, req.inc, req.q, storeNext)
	w.Header()["Link"] = []string{nextLink(a.linkBase(r)+req.path(), next, req.limit)}
	return next
}

// nextLink is the Link header's value for the page at page with the query
// that url.Values{"cursor": {cursor}, "limit": {limit}}.Encode() writes
// (limit left out when ""), built in one concatenation rather than
// through the map, its sort and a builder on every page.
func nextLink(page, cursor, limit string) string {
	if limit == "" {
		return "<" + page + "?cursor=" + url.QueryEscape(cursor) + `>; rel="next"`
	}
	return "<" + page + "?cursor=" + url.QueryEscape(cursor) + "&limit=" + url.QueryEscape(limit) + `>; rel="next"`
}

// parseBaseURL checks a WithBaseURL argument and returns it as the handler
// uses it: scheme and host, then the escaped path without a trailing slash.
func parseBaseURL(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New("need an absolute http:// or https:// URL")
	case u.Opaque != "" || u.Host == "":
		return "", errors.New("need a host after the scheme")
	case u.User != nil:
		return "", errors.New("must not carry a user name or password")
	case u.RawQuery != "" || u.ForceQuery:
		return "", errors.New("must not have a query")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "", errors.New("must not have a fragment")
	case !validHost(u.Host):
		return "", errors.New("the host must be a DNS name or an IP literal, with an optional port")
	}
	p := strings.TrimRight(u.EscapedPath(), "/")
	if p != "" && path.Clean(p) != p {
		return "", errors.New("the path must not contain empty, . or .. segments")
	}
	return u.Scheme + "://" + u.Host + p, nil
}

// linkBase is what the next-page Link puts before /v1/...: the base URL
// of WithBaseURL, or the scheme, host and mount prefix of r, or only the
// mount prefix when r has no usable Host.
func (a *api) linkBase(r *http.Request) string {
	if a.cfg.baseURL != "" {
		return a.cfg.baseURL
	}
	prefix := mountPrefix(r)
	if !validHost(r.Host) {
		return prefix
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + prefix
}

// mountPrefix recovers what a wrapper removed from the front of the path
// (http.StripPrefix trims r.URL.Path and r.URL.RawPath but leaves
// r.RequestURI as the client sent it). It is "" at the root, when the
// path was rewritten in some other way, and for requests that did not
// come from a server (RequestURI empty).
func mountPrefix(r *http.Request) string {
	raw := r.RequestURI
	if raw == "" {
		return ""
	}
	if raw[0] != '/' {
		// Absolute form ("GET http://host/api/v1/forms HTTP/1.1"), which a
		// server must accept too.
		u, err := url.ParseRequestURI(raw)
		if err != nil {
			return ""
		}
		raw = u.EscapedPath()
	} else if i := strings.IndexByte(raw, '?'); i >= 0 {
		raw = raw[:i]
	}
	p, ok := strings.CutSuffix(raw, r.URL.EscapedPath())
	if !ok || p == "" || p[0] != '/' || strings.HasSuffix(p, "/") {
		return ""
	}
	return escapePrefix(p)
}

// escapePrefix percent-encodes any byte of a raw path that may not stand
// as it is in a URI (RFC 3986 pchar and "/"), so that nothing a client put
// in its request line can break out of the Link header's <...>. Existing
// percent-escapes are kept.
func escapePrefix(p string) string {
	ok := func(i int) bool {
		c := p[i]
		switch {
		case isUnreserved(c), c == '/', c == ':', c == '@':
			return true
		case strings.IndexByte("!$&'()*+,;=", c) >= 0:
			return true
		case c == '%':
			return i+2 < len(p) && isHex(p[i+1]) && isHex(p[i+2])
		}
		return false
	}
	clean := true
	for i := 0; i < len(p); i++ {
		if !ok(i) {
			clean = false
			break
		}
	}
	if clean {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if ok(i) {
			b.WriteByte(p[i])
			continue
		}
		b.WriteByte('%')
		b.WriteByte("0123456789ABCDEF"[p[i]>>4])
		b.WriteByte("0123456789ABCDEF"[p[i]&0xf])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validHost reports whether h (a Host header, or the host of a base URL)
// is safe and sensible to write into a URL: a DNS name or IPv4 address of
// letters, digits, '-', '_' and '.', or an IPv6 literal in brackets
// without a zone, each with an optional port 1-65535. net/http already
// refuses most malformed Host headers; this also refuses the characters
// it lets through (",", ";", "'", "%", "*", ...) and empty ports.
func validHost(h string) bool {
	if h == "" || len(h) > 300 {
		return false
	}
	host, port := h, ""
	if h[0] == '[' {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return false
		}
		addr, err := netip.ParseAddr(h[1:end])
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return false
		}
		host, port = "", h[end+1:]
		if port != "" {
			if port[0] != ':' {
				return false
			}
			port = port[1:]
			if port == "" {
				return false
			}
		}
	} else if i := strings.IndexByte(h, ':'); i >= 0 {
		host, port = h[:i], h[i+1:]
		if port == "" {
			return false
		}
	}
	if port != "" {
		if len(port) > 5 {
			return false
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '+' || port[0] == '-' {
			return false
		}
	}
	if h[0] == '[' {
		return true
	}
	if host == "" || len(host) > 253 || host[0] == '.' || host[0] == '-' || strings.Contains(host, "..") {
		return false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
