// Package mount serves the forms API under a path prefix in front of a
// host's own router, in one line:
//
//	srv := &http.Server{Handler: mount.Prefix("/api", api, mux)}
//
// The router (a net/http ServeMux with method patterns such as "GET /",
// chi, or any other) never sees the API's requests, so no pattern of the
// host's can conflict with the API's, take its CORS preflights or its
// 405s, or redirect its non-canonical paths: under the prefix every
// answer, for every method and path, is the handler's own JSON. See
// docs/embedding.md for the other mounts and what each router does.
package mount

import (
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// Prefix returns a handler that passes every request whose path is prefix,
// or starts with prefix followed by "/", to api with prefix removed from
// the front of the path (as http.StripPrefix does, in r.URL.Path and
// r.URL.RawPath alike), and every other request to host unchanged. So
// with prefix "/api", /api/v1/forms reaches api as /v1/forms, and
// /api//v1/forms as //v1/forms, which the forms API answers with its JSON
// 404; /apix and / go to host. The prefix is matched segment by segment
// on the path as the client escaped it, the rule the forms API and a
// ServeMux apply on their side: an escaped slash (%2F) is part of a
// segment, so /api%2Fv1/forms, whose first segment is "api/v1", goes to
// host as /apix does, and /api/v1%2Fforms reaches api as /v1%2Fforms, the
// 404 the API at the root gives; escaped letters (/%61pi) are the prefix.
//
// prefix is a clean absolute path such as "/api"; a trailing slash is
// dropped ("/api/" is "/api"). Prefix panics if prefix is "" or "/" (then
// the API needs no mount: serve it as the server's handler), is not
// absolute or not clean, or if api or host is nil: all mistakes of a
// program's setup, caught when it starts.
func Prefix(prefix string, api, host http.Handler) http.Handler {
	p := strings.TrimSuffix(prefix, "/")
	if p == "" || p == "/" || p[0] != '/' || path.Clean(p) != p {
		panic("mount: prefix must be a clean absolute path such as /api, not " + strconv.Quote(prefix))
	}
	if api == nil || host == nil {
		panic("mount: Prefix needs the API's handler and the host's")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, p)
		raw := ""
		if ok && r.URL.RawPath != "" {
			raw, ok = stripRaw(r.URL.RawPath, p)
		}
		if !ok || (rest != "" && rest[0] != '/') {
			host.ServeHTTP(w, r)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		r2.URL = new(url.URL)
		*r2.URL = *r.URL
		r2.URL.Path = rest
		r2.URL.RawPath = raw
		api.ServeHTTP(w, r2)
	})
}

// stripRaw returns what follows the escaped form of prefix in raw, the
// path as the client escaped it, and whether raw starts with the prefix's
// segments: segments that unescape to the prefix's, split by as many real
// slashes. An escaped slash (%2F) is part of a segment, as the forms API
// and a ServeMux read it, so "/api%2Fv1/forms" does not start with "/api"
// (its first segment is "api/v1"), while "/%61pi/v1" does.
func stripRaw(raw, prefix string) (string, bool) {
	for i := len(prefix); i <= len(raw); i++ {
		if i < len(raw) && raw[i] != '/' {
			continue
		}
		head, err := url.PathUnescape(raw[:i])
		if err != nil || len(head) > len(prefix) {
			return "", false
		}
		if head == prefix {
			return raw[i:], strings.Count(raw[:i], "/") == strings.Count(prefix, "/")
		}
	}
	return "", false
}
