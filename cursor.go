package formsapi

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
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

// syncFloorVersion starts a token that carries a floor after its
// position: the store's Purged when its reader began at sync=start, below
// which forgotten deletions cannot concern that reader's copy (see
// listFeed). Tokens of syncVersion, from before deletions were fed, have
// floor 0.
const syncFloorVersion = 0x82

// sealSync returns the sync token of position pos in l's feed, for a
// reader whose floor is floor.
func (c cursorCodec) sealSync(l listID, pos, floor int64) string {
	plain := binary.AppendUvarint([]byte{syncVersion}, uint64(pos))
	if floor > 0 {
		plain[0] = syncFloorVersion
		plain = binary.AppendUvarint(plain, uint64(floor))
	}
	return c.sealBytes(l.syncAdditionalData(), plain)
}

// openSync returns the position and the floor a sync token of l's feed
// carries.
func (c cursorCodec) openSync(l listID, tok string) (pos, floor int64, ok bool) {
	plain, ok := c.unseal(l.syncAdditionalData(), tok)
	if !ok || len(plain) < 2 || plain[0] != syncVersion && plain[0] != syncFloorVersion {
		return 0, 0, false
	}
	p, n := binary.Uvarint(plain[1:])
	if n <= 0 || p > math.MaxInt64 {
		return 0, 0, false
	}
	rest := plain[1+n:]
	if plain[0] == syncVersion {
		return int64(p), 0, len(rest) == 0
	}
	f, m := binary.Uvarint(rest)
	if m != len(rest) || f > math.MaxInt64 || f == 0 {
		return 0, 0, false
	}
	return int64(p), int64(f), true
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

// refCodec makes the opaque reference ("ref") that the sync feed gives
// each submission, and each deletion for the submission it deleted: an
// HMAC-SHA256 of the account, the form and the submission's feed
// position, under a key derived from the cursor secret, cut to 128 bits.
// It is stable (the same submission has the same ref on every page and
// every node that shares the secret) and reveals nothing: not the
// position, not how many submissions the form has, and it cannot be
// turned back into either. Consumers key their copy by it.
type refCodec struct {
	key [32]byte
}

func newRefCodec(secret []byte) refCodec {
	return refCodec{key: sha256.Sum256(append([]byte("formsapi submission ref key\x00"), secret...))}
}

// refBytes is the length of a ref before base64: 128 bits, enough that
// no two submissions of a form share one.
const refBytes = 16

// appendRef appends the JSON string of the ref of the submission at
// position pos of l's feed.
func (c refCodec) appendRef(b []byte, l listID, pos int64) []byte {
	m := hmac.New(sha256.New, c.key[:])
	m.Write(l.additionalData())
	m.Write(binary.BigEndian.AppendUint64(nil, uint64(pos)))
	var sum [sha256.Size]byte
	b = append(b, '"')
	b = base64.RawURLEncoding.AppendEncode(b, m.Sum(sum[:0])[:refBytes])
	return append(b, '"')
}
