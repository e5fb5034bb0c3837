package formsapi

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"sync"

	"github.com/formsapi/formsapi/internal/wire"
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
	tagItemsLabel  = "formsapi etag items v1\x00"
	tagFinalLabel  = "formsapi etag final v1\x00"
	tagExportLabel = "formsapi export etag v1\x00"
)

// A page's items, the bulk of it, are hashed on their own first, under a
// key of their own (items, the same GHASH construction): a 16-byte digest
// that the tag then covers in place of the items. A page that a store's
// read cache serves whole from a page it holds (wire.Page.Digests) keeps
// that digest with the held page, so a repeat of the request hashes a few
// hundred bytes, not the page. The digest is never shown: it goes into the
// tag's GHASH, which is encrypted again as before, and two different item
// runs give the same digest with probability about n/2^128, as before.

// tagger computes page tags; it is safe for concurrent use.
type tagger struct {
	ghash     cipher.AEAD  // AES-256-GCM, used for its tag alone
	items     cipher.AEAD  // the same, under another key, for the items' digest
	final     cipher.Block // AES-256 over that tag
	exportKey [32]byte     // the HMAC key of exports' strong tags
}

func newTagger(cursorSecret []byte) *tagger {
	derive := func(label string) cipher.Block {
		k := sha256.Sum256(append([]byte(label), cursorSecret...))
		b, err := aes.NewCipher(k[:])
		if err != nil {
			panic(err) // a 32-byte key is always valid
		}
		return b
	}
	gcm := func(label string) cipher.AEAD {
		g, err := cipher.NewGCM(derive(label))
		if err != nil {
			panic(err) // AES has a 16-byte block
		}
		return g
	}
	return &tagger{ghash: gcm(tagHashLabel), items: gcm(tagItemsLabel), final: derive(tagFinalLabel),
		exportKey: sha256.Sum256(append([]byte(tagExportLabel), cursorSecret...))}
}

// tagNonce is fixed: the GCM output is never shown, only its tag
// encrypted again (see above).
var tagNonce [12]byte

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// itemsDigest returns the digest of a page's items.
func (t *tagger) itemsDigest(items []byte) [16]byte {
	var out [aes.BlockSize]byte
	// The items go in as additional data, so they are not copied.
	t.items.Seal(out[:0], tagNonce[:], nil, items)
	return out
}

// pageItems says where a page's items are in its body, for its tag: from
// start to the end of the body. held, when not nil, keeps the digest of
// those items, the first n items of a page a store's read cache holds
// (see wire.Page.Digests). The zero value hashes the whole body as the
// items, which is as exact, only not kept.
type pageItems struct {
	start int
	held  *wire.Digests
	n     int
	// sign reports that the items are submissions, whose attachments'
	// URLs WithAttachmentURLs has signed on the way out (attachments.go).
	sign bool
	// window, when not zero, is the start of the signing window (Unix
	// nanoseconds) the answer's URLs are signed in, which the tag covers.
	window int64
}

// pageTag returns the weak ETag of a page. body is the page as encoded up
// to its items, without the sealed cursor, and items says where they are
// in it; next says where the next page begins: the store's own position
// of it ("" on the last page), or whatever else identifies it.
func (a *api) pageTag(req listRequest, next string, body []byte, items pageItems) string {
	start := items.start
	var sum [aes.BlockSize]byte
	switch {
	case start == len(body):
	case items.held == nil:
		sum = a.tags.itemsDigest(body[start:])
	default:
		var ok bool
		if sum, ok = items.held.Load(a.tags, items.n, len(body)-start); !ok {
			sum = a.tags.itemsDigest(body[start:])
			items.held.Store(a.tags, items.n, len(body)-start, sum)
		}
	}
	sp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(sp)
	b := (*sp)[:0]
	for _, s := range []string{req.list.Account, req.list.FormID, next} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(req.q.Limit))
	b = req.q.AppendKey(b)
	b = binary.BigEndian.AppendUint64(b, uint64(start))
	if items.window != 0 {
		b = append(b, "signed"...)
		b = binary.BigEndian.AppendUint64(b, uint64(items.window))
	}
	b = append(b, body[:start]...)
	b = append(b, sum[:]...)
	n0 := len(b)
	// As plaintext, so that GCM's tag covers it with its length; the
	// output goes after it.
	b = a.tags.ghash.Seal(b, tagNonce[:], b[:n0], nil)
	var out [aes.BlockSize]byte
	a.tags.final.Encrypt(out[:], b[len(b)-aes.BlockSize:])
	if cap(b) <= 4<<10 {
		*sp = b
	}
	return weakTag(out[:])
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
