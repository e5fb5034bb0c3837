package formsapi

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
	"sync"
)

// Conditional requests. Every page carries a weak ETag computed from what
// the page says (its items, exactly as encoded, and where the next page
// starts) together with the account, the list, its order, filters and
// page size, and the cursor secret. A request whose If-None-Match names
// it gets 304 with no body. Because the tag is a function of the answer
// itself, it is exact: any change a client could see (a new or changed
// item on the page, a next page that appears) changes it, and nothing
// else does. Authentication and the query are checked first, so a revoked
// key gets 401 before any 304.
//
// The tag is weak because the same page is never sent twice byte for
// byte: its nextCursor is sealed with a fresh nonce each time. Any of
// those cursors leads to the same next page, so a client that keeps its
// old body after a 304 keeps a cursor that works. The cursor secret takes
// part so that tags change when it does, and a client never keeps a body
// whose cursor the server would no longer accept. The same tag is sent
// with and without gzip: the decoded bodies are equivalent, which is
// what a weak tag promises.

// The tag of a page is a keyed 128-bit MAC of the page, built from AES as
// the standard library has it in hardware: GHASH, through AES-GCM with the
// page as additional data, then one more AES block encryption under a
// second key. GHASH is a universal hash: two different pages collide with
// probability about n/2^128 for n 16-byte blocks, over the choice of the
// key. Encrypting its output keeps the GHASH key from ever showing in a
// tag (a bare GMAC with a fixed nonce would reveal it), so collisions
// cannot be aimed at either. It runs at several GB/s where SHA-256 runs at
// about 1.5, which matters for pages the store hands over ready-made in a
// few microseconds. Keys derive from the cursor secret, so replicas that
// share it give the same tags.

// Labels that separate the secret's uses for tags from its use for cursors.
const (
	tagHashLabel  = "formsapi etag ghash v1\x00"
	tagFinalLabel = "formsapi etag final v1\x00"
)

// tagger computes page tags; it is safe for concurrent use.
type tagger struct {
	ghash cipher.AEAD  // AES-256-GCM, used for its tag alone
	final cipher.Block // AES-256 over that tag
}

func newTagger(cursorSecret []byte) tagger {
	derive := func(label string) cipher.Block {
		k := sha256.Sum256(append([]byte(label), cursorSecret...))
		b, err := aes.NewCipher(k[:])
		if err != nil {
			panic(err) // a 32-byte key is always valid
		}
		return b
	}
	g, err := cipher.NewGCM(derive(tagHashLabel))
	if err != nil {
		panic(err) // AES has a 16-byte block
	}
	return tagger{ghash: g, final: derive(tagFinalLabel)}
}

// tagNonce is fixed: the GCM output is never shown, only its tag
// encrypted again (see above).
var tagNonce [12]byte

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// pageTag returns the weak ETag of a page. body is the page as encoded up
// to its items, without the sealed cursor; next says where the next page
// begins: the store's own position of it ("" on the last page), or
// whatever else identifies it.
func (a *api) pageTag(req request, next string, body []byte) string {
	sp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(sp)
	b := (*sp)[:0]
	for _, s := range []string{req.list.account, req.list.formID, next} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(req.q.Limit))
	b = req.q.AppendKey(b)
	n := len(b)
	// The fields go in as plaintext and the page as additional data, so
	// the page is not copied; GCM's tag covers both, with their lengths.
	b = a.tags.ghash.Seal(b, tagNonce[:], b[:n], body)
	var sum [aes.BlockSize]byte
	a.tags.final.Encrypt(sum[:], b[len(b)-aes.BlockSize:])
	if cap(b) <= 4<<10 {
		*sp = b
	}
	return weakTag(sum[:])
}

// weakTag formats a digest as a weak entity tag.
func weakTag(d []byte) string {
	var b [3 + 32 + 1]byte
	out := append(b[:0], `W/"`...)
	out = base64.RawURLEncoding.AppendEncode(out, d)
	return string(append(out, '"'))
}

// staticTag is the weak ETag of a body that never changes.
func staticTag(body []byte) string {
	sum := sha256.Sum256(body)
	return weakTag(sum[:16])
}

// noneMatch reports whether the If-None-Match header fields vals name
// tag, comparing weakly (RFC 9110 §13.1.2: If-None-Match ignores W/), or
// are "*". A malformed field matches nothing from where it breaks, so it
// costs a full answer, never a wrong 304.
func noneMatch(vals []string, tag string) bool {
	want := opaqueTag(tag)
	for _, v := range vals {
		for {
			v = strings.TrimLeft(v, " \t,")
			if v == "" {
				break
			}
			if v[0] == '*' {
				return true
			}
			v = strings.TrimPrefix(v, "W/")
			if v == "" || v[0] != '"' {
				break
			}
			end := strings.IndexByte(v[1:], '"')
			if end < 0 {
				break
			}
			if v[:end+2] == want {
				return true
			}
			v = v[end+2:]
		}
	}
	return false
}

// opaqueTag is tag without its W/ prefix.
func opaqueTag(tag string) string {
	return strings.TrimPrefix(tag, "W/")
}

// writeNotModified answers a GET or HEAD whose If-None-Match matched: the
// status, the tag, and the caching headers the 200 would have carried (RFC
// 9110 §15.4.5), with no body and no Content-Type or Content-Length.
func writeNotModified(w http.ResponseWriter, tag, cacheControl, vary string) {
	h := w.Header()
	h.Del("Link")
	h.Set("ETag", tag)
	h.Set("Cache-Control", cacheControl)
	h.Set("Vary", vary)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNotModified)
}

// Caching headers. Pages depend on the API key and change as submissions
// arrive: "private" keeps them out of shared caches, "no-cache" lets the
// key holder's client keep a page but makes it ask (If-None-Match) before
// every reuse, and Vary names what else the answer depends on. Errors
// are not worth keeping: "no-store".
const (
	cachePage     = "private, no-cache"
	varyPage      = "Authorization, Accept-Encoding"
	cacheDocument = "no-cache"
	varyDocument  = "Accept-Encoding"
	cacheError    = "no-store"
)

// respondPage finishes a page whose body holds everything up to its last
// item: a 304 if the request's If-None-Match names the page's tag,
// otherwise the whole page with its cursor (from the store's storeNext),
// Link and tag. tagNext is what the tag says of where the next page
// begins. It returns the body's buffer for reuse.
func (a *api) respondPage(w http.ResponseWriter, r *http.Request, req request, body []byte, storeNext, tagNext string) []byte {
	tag := a.pageTag(req, tagNext, body)
	if notModified(w, r, tag) {
		return body
	}
	body = appendNext(body, a.next(w, r, req, storeNext))
	writePage(w, r, tag, body)
	return body
}

// notModified answers 304, and reports true, when the request's
// If-None-Match names tag. The request counts against a rate limit like
// any other: it cost the store a full page read.
func notModified(w http.ResponseWriter, r *http.Request, tag string) bool {
	if !noneMatch(r.Header.Values("If-None-Match"), tag) {
		return false
	}
	writeNotModified(w, tag, cachePage, varyPage)
	return true
}

// writePage writes a finished page with its tag and the page headers.
func writePage(w http.ResponseWriter, r *http.Request, tag string, body []byte) {
	h := w.Header()
	setJSONHeaders(h, cachePage)
	h.Set("ETag", tag)
	h.Set("Vary", varyPage)
	writeBody(w, body, acceptsGzip(r.Header.Values("Accept-Encoding")))
}

// setJSONHeaders sets the headers every JSON answer carries.
func setJSONHeaders(h http.Header, cacheControl string) {
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", cacheControl)
	h.Set("X-Content-Type-Options", "nosniff")
}
