package main

// Signed attachment URLs for the demo (-attachment-secret-file): the
// demo's attachments are stored as https://files.example.com/… URLs of a
// bucket nobody can reach. With a secret, the API and the webhook events
// send each as a URL of this server's own /files route instead, signed
// with HMAC-SHA256 and valid for -attachment-url-lifetime; the route
// checks the signature and the expiry and serves a small stand-in for the
// file. A host with a real private bucket gives the handler and the
// dispatcher its bucket's presigner instead (docs/api.md, "Attachment
// URLs"); this one needs no dependency and verifies its own URLs.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/formsapi/formsapi"
)

// filesPath is the route of the demo's signed files.
const filesPath = "/files"

// fileSigner signs attachments as URLs of the /files route and serves
// the URLs it signed.
type fileSigner struct {
	key      []byte
	base     string // the server's public URL, the signed URLs' start
	lifetime time.Duration
	now      func() time.Time
}

// readFileSecret reads the signing secret from path: at least 32
// characters, white space around them dropped.
func readFileSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-attachment-secret-file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) < 32 {
		return nil, fmt.Errorf("-attachment-secret-file %s: the secret has %d characters, want at least 32", path, len(s))
	}
	return []byte(s), nil
}

// mac is the signature of stored (an attachment's stored URL) of form of
// account, until exp (Unix seconds).
func (f *fileSigner) mac(account, form, stored string, exp int64) string {
	m := hmac.New(sha256.New, f.key)
	for _, s := range []string{account, form, stored} {
		m.Write([]byte(strconv.Itoa(len(s)) + ":" + s + "|"))
	}
	m.Write([]byte(strconv.FormatInt(exp, 10)))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sign is the formsapi.AttachmentSigner of the handler and the
// dispatcher: a URL of the /files route naming the stored URL, valid
// until at plus the lifetime.
func (f *fileSigner) sign(_ context.Context, account, form string, a formsapi.Attachment, at time.Time) (string, error) {
	exp := at.Add(f.lifetime + time.Second - 1).Unix() // whole seconds, never before at+lifetime
	q := url.Values{"a": {account}, "f": {form}, "u": {a.FileURL}, "exp": {strconv.FormatInt(exp, 10)}, "sig": {f.mac(account, form, a.FileURL, exp)}}
	return f.base + filesPath + "?" + q.Encode(), nil
}

// Why a signed URL is refused.
var (
	errBadSignature = errors.New("the signature does not match")
	errExpired      = errors.New("the URL has expired")
)

// verify checks a signed URL's query as the route gets it, and returns
// the stored URL it names.
func (f *fileSigner) verify(q url.Values) (string, error) {
	exp, err := strconv.ParseInt(q.Get("exp"), 10, 64)
	if err != nil {
		return "", errBadSignature
	}
	want := f.mac(q.Get("a"), q.Get("f"), q.Get("u"), exp)
	if !hmac.Equal([]byte(q.Get("sig")), []byte(want)) {
		return "", errBadSignature
	}
	if !f.now().Before(time.Unix(exp, 0)) {
		return "", errExpired
	}
	return q.Get("u"), nil
}

// ServeHTTP serves a signed URL: 403 for a signature that does not match
// or has expired, else a stand-in for the stored file (the demo has no
// files), named after it.
func (f *fileSigner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	stored, err := f.verify(r.URL.Query())
	if err != nil {
		http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff") // the stored URL shown is a submitter's text
	w.Header().Set("Cache-Control", "private, no-store")
	fmt.Fprintf(w, "the demo's stand-in for %s\n", stored)
}

// withFiles serves the /files route with f, and everything else with
// next.
func withFiles(next http.Handler, f *fileSigner) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == filesPath {
			f.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
