// Package token makes what the API hands out from its cursor secret: the
// sealed cursors of lists, the sync tokens of a form's feed, and the refs
// of feed entries. Any package of the module that has the handler's
// secret (the handler itself, a webhook dispatcher, an export) makes
// exactly the cursors, tokens and refs the others make and accept: New
// derives every key from the secret alone, the same way on every node.
//
// Cursors and sync tokens are sealed with AES-256-GCM: encryption keeps
// the store's position (an internal row number, say) private, and the
// authentication tag, computed also over the list (account and form), means
// a token this secret did not seal for this very list is refused rather
// than interpreted. Refs are an HMAC-SHA256, cut to 128 bits: stable, and
// revealing nothing.
package token

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"math"
)

// List names one list: the forms of an account (FormID "") or the
// submissions of one of its forms, and a form's feed. A token is valid for
// one list only.
type List struct {
	Account, FormID string
}

// Codec seals and opens cursors and sync tokens and makes refs, all keyed
// by one secret. It is safe for concurrent use.
type Codec struct {
	aead   cipher.AEAD
	refKey [32]byte
}

// MaxLength is the length of the longest token Open and OpenSync accept:
// longer ones are refused before any decoding.
const MaxLength = 1024

// New returns the codec of secret. Codecs of equal secrets seal and open
// the same tokens and make the same refs.
func New(secret []byte) *Codec {
	key := sha256.Sum256(append([]byte("formsapi cursor key\x00"), secret...))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return &Codec{
		aead:   aead,
		refKey: sha256.Sum256(append([]byte("formsapi submission ref key\x00"), secret...)),
	}
}

// cursorVersion starts the plaintext of every cursor.
const cursorVersion = 1

func (l List) additionalData() []byte {
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(l.Account)+len(l.FormID))
	b = binary.AppendUvarint(b, uint64(len(l.Account)))
	b = append(b, l.Account...)
	b = binary.AppendUvarint(b, uint64(len(l.FormID)))
	return append(b, l.FormID...)
}

// SealCursor returns the cursor of list l that carries payload (what the
// caller needs to resume the list: its parameters and the store's
// position, say).
func (c *Codec) SealCursor(l List, payload []byte) string {
	plain := make([]byte, 0, 1+len(payload))
	plain = append(append(plain, cursorVersion), payload...)
	return c.seal(l.additionalData(), plain)
}

// OpenCursor returns the payload of a cursor SealCursor made for l, and
// false for any other string.
func (c *Codec) OpenCursor(l List, tok string) ([]byte, bool) {
	plain, ok := c.unseal(l.additionalData(), tok)
	if !ok || len(plain) < 1 || plain[0] != cursorVersion {
		return nil, false
	}
	return plain[1:], true
}

// Sync is what a sync token carries: the feed position after which the
// next read starts, and the reader's floor, the store's Purged when the
// reader began at sync=start (0 for tokens from before deletions were
// fed), below which forgotten deletions cannot concern its copy.
type Sync struct {
	Pos, Floor int64
}

// Sync tokens are sealed with the same key as cursors, and neither is ever
// taken for the other: a token's additional data carries one more field,
// "sync", and its plaintext starts with syncVersion or syncFloorVersion,
// which no cursor does.
const (
	syncVersion      = 0x81 // the position alone: floor 0
	syncFloorVersion = 0x82 // the position, then a floor above 0
)

func (l List) syncAdditionalData() []byte {
	b := l.additionalData()
	b = binary.AppendUvarint(b, uint64(len("sync")))
	return append(b, "sync"...)
}

// SealSync returns the sync token of s in l's feed. Pos and Floor must not
// be negative.
func (c *Codec) SealSync(l List, s Sync) string {
	plain := binary.AppendUvarint([]byte{syncVersion}, uint64(s.Pos))
	if s.Floor > 0 {
		plain[0] = syncFloorVersion
		plain = binary.AppendUvarint(plain, uint64(s.Floor))
	}
	return c.seal(l.syncAdditionalData(), plain)
}

// OpenSync returns what a sync token SealSync made for l's feed carries,
// and false for any other string.
func (c *Codec) OpenSync(l List, tok string) (Sync, bool) {
	plain, ok := c.unseal(l.syncAdditionalData(), tok)
	if !ok || len(plain) < 2 || plain[0] != syncVersion && plain[0] != syncFloorVersion {
		return Sync{}, false
	}
	p, n := binary.Uvarint(plain[1:])
	if n <= 0 || p > math.MaxInt64 {
		return Sync{}, false
	}
	rest := plain[1+n:]
	if plain[0] == syncVersion {
		return Sync{Pos: int64(p)}, len(rest) == 0
	}
	f, m := binary.Uvarint(rest)
	if m != len(rest) || f > math.MaxInt64 || f == 0 {
		return Sync{}, false
	}
	return Sync{Pos: int64(p), Floor: int64(f)}, true
}

func (c *Codec) seal(ad, plain []byte) string {
	out := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(plain)+c.aead.Overhead())
	rand.Read(out) // never fails (crypto/rand docs)
	out = c.aead.Seal(out, out, plain, ad)
	return base64.RawURLEncoding.EncodeToString(out)
}

// unseal returns the plaintext of tok if this codec sealed it with ad.
func (c *Codec) unseal(ad []byte, tok string) ([]byte, bool) {
	if len(tok) > MaxLength {
		return nil, false
	}
	// Strict: the unused bits of the last character must be zero, so each
	// cursor or token has exactly one spelling.
	raw, err := base64.RawURLEncoding.Strict().DecodeString(tok)
	if err != nil || len(raw) < c.aead.NonceSize() {
		return nil, false
	}
	n := c.aead.NonceSize()
	plain, err := c.aead.Open(nil, raw[:n], raw[n:], ad)
	return plain, err == nil
}

// RefBytes is the length of a ref before base64: 128 bits, enough that no
// two submissions of a form share one.
const RefBytes = 16

// AppendRef appends to b the ref of the submission at position pos of
// l's feed, unquoted: the base64url (no padding) of an HMAC-SHA256 of the
// account, the form and the position, cut to RefBytes. The sync feed gives
// it for each submission, and for each deletion the ref of the submission
// it deleted. It is stable (the same submission has the same ref on every
// page and every node that shares the secret) and reveals nothing: not the
// position, not how many submissions the form has, and it cannot be
// turned back into either. Consumers key their copy by it.
func (c *Codec) AppendRef(b []byte, l List, pos int64) []byte {
	m := hmac.New(sha256.New, c.refKey[:])
	m.Write(l.additionalData())
	m.Write(binary.BigEndian.AppendUint64(nil, uint64(pos)))
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.AppendEncode(b, m.Sum(sum[:0])[:RefBytes])
}
