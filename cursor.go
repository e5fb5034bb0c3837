package formsapi

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"math"
	"time"
)

// listID names one list: the forms of an account (formID "") or the
// submissions of one of its forms. A cursor is valid for one list only.
type listID struct {
	account, formID string
}

// cursorCodec seals cursors with AES-GCM. Encryption keeps the store's
// position (an internal row number, say) private; the authentication tag,
// computed also over the list and account, means a cursor this handler did
// not issue for this very list is refused rather than interpreted.
type cursorCodec struct {
	aead cipher.AEAD
}

const (
	cursorVersion   = 1
	maxCursorLength = 1024
)

func newCursorCodec(secret []byte) cursorCodec {
	key := sha256.Sum256(append([]byte("formsapi cursor key\x00"), secret...))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return cursorCodec{aead: aead}
}

func (l listID) additionalData() []byte {
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(l.account)+len(l.formID))
	b = binary.AppendUvarint(b, uint64(len(l.account)))
	b = append(b, l.account...)
	b = binary.AppendUvarint(b, uint64(len(l.formID)))
	return append(b, l.formID...)
}

// seal returns the cursor of the page of l at the store's position pos,
// carrying what selects the list in q (Query.AppendKey), so the next page
// keeps every parameter of this one.
func (c cursorCodec) seal(l listID, q Query, pos string) string {
	plain := make([]byte, 0, 2+2*13+len(pos))
	plain = q.AppendKey(append(plain, cursorVersion))
	plain = append(plain, pos...)
	return c.sealBytes(l.additionalData(), plain)
}

func (c cursorCodec) sealBytes(ad, plain []byte) string {
	out := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(plain)+c.aead.Overhead())
	rand.Read(out) // never fails (crypto/rand docs)
	out = c.aead.Seal(out, out, plain, ad)
	return base64.RawURLEncoding.EncodeToString(out)
}

// Sync tokens are sealed by the same codec as cursors, for a form's feed:
// the position after which the next read starts. Neither is ever taken
// for the other: a token's authenticated data carries one more field,
// "sync", and its plaintext starts with syncVersion, which no cursor does.
const syncVersion = 0x81

func (l listID) syncAdditionalData() []byte {
	b := l.additionalData()
	b = binary.AppendUvarint(b, uint64(len("sync")))
	return append(b, "sync"...)
}

// sealSync returns the sync token of position pos in l's feed.
func (c cursorCodec) sealSync(l listID, pos int64) string {
	plain := binary.AppendUvarint([]byte{syncVersion}, uint64(pos))
	return c.sealBytes(l.syncAdditionalData(), plain)
}

// openSync returns the position a sync token of l's feed carries.
func (c cursorCodec) openSync(l listID, tok string) (int64, bool) {
	plain, ok := c.unseal(l.syncAdditionalData(), tok)
	if !ok || len(plain) < 2 || plain[0] != syncVersion {
		return 0, false
	}
	pos, n := binary.Uvarint(plain[1:])
	if n != len(plain)-1 || pos > math.MaxInt64 {
		return 0, false
	}
	return int64(pos), true
}

// unseal returns the plaintext of tok if this codec sealed it with ad.
func (c cursorCodec) unseal(ad []byte, tok string) ([]byte, bool) {
	if len(tok) > maxCursorLength {
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

// open returns the order and filters a cursor of l carries, with the
// store's position in q.Cursor.
func (c cursorCodec) open(l listID, tok string) (Query, bool) {
	plain, ok := c.unseal(l.additionalData(), tok)
	if !ok || len(plain) < 1 || plain[0] != cursorVersion {
		return Query{}, false
	}
	var q Query
	rest, ok := readKey(plain[1:], &q)
	if !ok {
		return Query{}, false
	}
	q.Cursor = string(rest)
	return q, true
}

// appendTime encodes t as a presence byte, then Unix seconds and
// nanoseconds, which covers every year time.Parse accepts.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(t.Unix()))
	return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
}

func readTime(b []byte, t *time.Time) ([]byte, bool) {
	if len(b) < 1 {
		return nil, false
	}
	if b[0] == 0 {
		return b[1:], true
	}
	if len(b) < 13 {
		return nil, false
	}
	*t = time.Unix(int64(binary.BigEndian.Uint64(b[1:9])), int64(binary.BigEndian.Uint32(b[9:13]))).UTC()
	return b[13:], true
}
