package formsapi

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
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
	tagHashLabel   = "formsapi etag ghash v1\x00"
	tagFinalLabel  = "formsapi etag final v1\x00"
	tagExportLabel = "formsapi export etag v1\x00"
)

// tagger computes page tags; it is safe for concurrent use.
type tagger struct {
	ghash     cipher.AEAD  // AES-256-GCM, used for its tag alone
	final     cipher.Block // AES-256 over that tag
	exportKey [32]byte     // the HMAC key of exports' strong tags
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
	return tagger{ghash: g, final: derive(tagFinalLabel), exportKey: sha256.Sum256(append([]byte(tagExportLabel), cursorSecret...))}
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
	for _, s := range []string{req.list.Account, req.list.FormID, next} {
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
