// Package token makes what the API hands out from its cursor secret: the
// sealed cursors of lists, the sync tokens of a form's feed, and the refs
// of feed entries. Any package of the module that has the handler's
// secret (the handler itself, a webhook dispatcher, an export) makes
// exactly the cursors, tokens and refs the others make and accept: New
// derives every key from the secret alone, the same way on every node.
//
// Cursors and sync tokens are sealed with AES-256-GCM: encryption keeps
// the store's position (an internal row number, say) and the form's
// incarnation private, and the authentication tag, computed also over the
// token's Kind and its List (account and form), means a token this secret
// did not seal as this kind for this very list is refused rather than
// interpreted. Refs are an HMAC-SHA256, cut to 128 bits: stable, and
// revealing nothing.
//
// The API, in short: New(secret) gives a Codec; Seal and Open a token of
// a Kind (a cursor: the caller's payload, the form's incarnation), SealSync
// and OpenSync a sync token (position, floor, incarnation), AppendRef the
// ref of a feed position of a form's incarnation.
package token

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
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
	aead     cipher.AEAD
	refKey   [32]byte
	nonceKey [32]byte // SealSyncStable's
}

// MaxLength is the length of the longest token Open and OpenSync accept:
// longer ones are refused before any decoding. A submissions cursor seals
// its list's parameters: with every one at its documented limit (8
// clauses of 64-byte names, each an in list of 32 values of 256 bytes,
// 32 projected names of 64 bytes, a search term, since and until) it is
// about 91,700 characters with the store's position
// (TestLongestOperatorCursorOpens), so the bound leaves room for a
// position of many kilobytes. (It was 1,024, then 8,192 before the
// operators' in lists, and each time the handler handed out cursors it
// then refused.) Opening one that long costs a base64 decoding and an
// AES-GCM open of 96 KiB, some tens of microseconds.
const MaxLength = 128 << 10

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
		aead:     aead,
		refKey:   sha256.Sum256(append([]byte("formsapi submission ref key\x00"), secret...)),
		nonceKey: sha256.Sum256(append([]byte("formsapi stable token nonce\x00"), secret...)),
	}
}

// Kind is what a token is for: the list or route that issues it, and
// the only one that accepts it. It is authenticated with the token, so a
// token of one kind opens as no other, whatever its list. A new route
// that hands out tokens gets a Kind of its own; the values are never
// reused or renumbered, since tokens in clients' hands carry them.
type Kind uint8

// The kinds of token.
const (
	// FormsCursor is the cursor of an account's forms list, GET /v1/forms.
	FormsCursor Kind = 1
	// SubmissionsCursor is the cursor of a form's list of submissions,
	// GET /v1/forms/{formId}/submissions.
	SubmissionsCursor Kind = 2
	// SyncToken is the token of a form's sync feed,
	// GET /v1/forms/{formId}/submissions?sync=.
	SyncToken Kind = 3
	// ExportPosition is the position of a line of a form's export, GET
	// /v1/forms/{formId}/export, taken back by its after parameter (see
	// Positions).
	ExportPosition Kind = 4
)

var kindNames = [...]string{FormsCursor: "forms cursor", SubmissionsCursor: "submissions cursor", SyncToken: "sync token", ExportPosition: "export position"}

// String names k, for messages and tests.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("token kind %d", uint8(k))
}

// The tokens this package seals have additional data that starts with
// adPrefix and the kind, then the list as tokens of earlier versions had
// it (List.legacyAD), and a plaintext that starts with the form's
// incarnation, then the caller's payload. No earlier token's additional
// data starts that way (it began with the length of the account, and an
// empty account and form were followed by nothing or by "sync"), so a
// token of either format opens only as what it was sealed for.
var adPrefix = []byte{0x00, 0x00, 0xff, 0x02}

func (l List) additionalData(k Kind) []byte {
	b := make([]byte, 0, len(adPrefix)+1+2*binary.MaxVarintLen64+len(l.Account)+len(l.FormID))
	b = append(append(b, adPrefix...), byte(k))
	return l.appendLegacyAD(b)
}

// Seal returns a token of kind k for list l that carries inc, the
// incarnation of l's form (0 when unknown; see Open), and payload (what the
// caller needs to resume: the list's parameters and the store's position,
// say). It panics for the zero Kind.
func (c *Codec) Seal(k Kind, l List, inc uint64, payload []byte) string {
	if k == 0 {
		panic("token: Seal with the zero Kind")
	}
	plain := make([]byte, 0, binary.MaxVarintLen64+len(payload))
	plain = append(binary.AppendUvarint(plain, inc), payload...)
	return c.seal(l.additionalData(k), plain)
}

// Open returns the incarnation and the payload of tok if this secret
// sealed it as a token of kind k for list l, and false for any other
// string. A form's incarnation changes when the form is deleted and
// created again with the same ID, so a caller that knows the form's
// current one tells a token of an earlier form of that ID (a different
// incarnation, neither 0) from one of this form.
//
// Cursors and sync tokens sealed before tokens had kinds open too, with
// incarnation 0, as the kind they were: a cursor of a list without a form
// as a FormsCursor, one of a form's list as a SubmissionsCursor, a sync
// token as a SyncToken (its payload then as SealSync makes it).
func (c *Codec) Open(k Kind, l List, tok string) (inc uint64, payload []byte, ok bool) {
	if k == 0 {
		return 0, nil, false
	}
	if plain, ok := c.unseal(l.additionalData(k), tok); ok {
		inc, n := binary.Uvarint(plain)
		if n <= 0 {
			return 0, nil, false
		}
		return inc, plain[n:], true
	}
	switch {
	case k == FormsCursor && l.FormID == "", k == SubmissionsCursor && l.FormID != "":
		payload, ok = c.openLegacyCursor(l, tok)
	case k == SyncToken:
		var s Sync
		if s, ok = c.openLegacySync(l, tok); ok {
			payload = s.appendPayload(nil)
		}
	}
	return 0, payload, ok
}

// Sync is what a sync token carries: the feed position after which the
// next read starts, the reader's floor (the store's Purged when the reader
// began at sync=start, 0 for tokens from before deletions were fed, below
// which forgotten deletions cannot concern its copy), and the form's
// incarnation (see Open).
type Sync struct {
	Pos, Floor  int64
	Incarnation uint64
}

func (s Sync) appendPayload(b []byte) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(b, uint64(s.Pos)), uint64(s.Floor))
}

// SealSync returns the SyncToken of s in l's feed. Pos and Floor must not
// be negative.
func (c *Codec) SealSync(l List, s Sync) string {
	return c.Seal(SyncToken, l, s.Incarnation, s.appendPayload(nil))
}

// OpenSync returns what a SyncToken of l's feed carries (see Open), and
// false for any other string.
func (c *Codec) OpenSync(l List, tok string) (Sync, bool) {
	return c.openSync(l, tok)
}

// SealSyncStable returns a sync token of s in l's feed, as SealSync does,
// but the same one every time: its nonce is an HMAC of what it seals
// rather than random, so that a webhook event that links to a feed page
// has the same bytes on every attempt. Sealing one plaintext under one
// nonce reveals only that two such tokens are equal; OpenSync opens it
// like any other.
func (c *Codec) SealSyncStable(l List, s Sync) string {
	ad := l.additionalData(SyncToken)
	plain := append(binary.AppendUvarint(nil, s.Incarnation), s.appendPayload(nil)...)
	m := hmac.New(sha256.New, c.nonceKey[:])
	m.Write(ad)
	m.Write(plain)
	out := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(plain)+c.aead.Overhead())
	copy(out, m.Sum(nil))
	out = c.aead.Seal(out, out, plain, ad)
	return base64.RawURLEncoding.EncodeToString(out)
}

func (c *Codec) openSync(l List, tok string) (Sync, bool) {
	inc, payload, ok := c.Open(SyncToken, l, tok)
	if !ok {
		return Sync{}, false
	}
	p, n := binary.Uvarint(payload)
	if n <= 0 || p > math.MaxInt64 {
		return Sync{}, false
	}
	f, m := binary.Uvarint(payload[n:])
	if m <= 0 || n+m != len(payload) || f > math.MaxInt64 {
		return Sync{}, false
	}
	return Sync{Pos: int64(p), Floor: int64(f), Incarnation: inc}, true
}

// Tokens of earlier versions, before kinds and incarnations: a cursor's
// additional data was the list alone and its plaintext cursorVersion and
// the payload; a sync token's additional data carried one more field,
// "sync", and its plaintext started with syncVersion or syncFloorVersion,
// which no cursor did.
const (
	cursorVersion    = 1
	syncVersion      = 0x81 // the position alone: floor 0
	syncFloorVersion = 0x82 // the position, then a floor above 0
)

func (l List) appendLegacyAD(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(l.Account)))
	b = append(b, l.Account...)
	b = binary.AppendUvarint(b, uint64(len(l.FormID)))
	return append(b, l.FormID...)
}

func (c *Codec) openLegacyCursor(l List, tok string) ([]byte, bool) {
	plain, ok := c.unseal(l.appendLegacyAD(nil), tok)
	if !ok || len(plain) < 1 || plain[0] != cursorVersion {
		return nil, false
	}
	return plain[1:], true
}

func (c *Codec) openLegacySync(l List, tok string) (Sync, bool) {
	ad := l.appendLegacyAD(nil)
	ad = binary.AppendUvarint(ad, uint64(len("sync")))
	plain, ok := c.unseal(append(ad, "sync"...), tok)
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
// l's feed, of a form of incarnation inc, unquoted: the base64url (no
// padding) of an HMAC-SHA256 of the account, the form and the position,
// and of inc when inc is a RefIncarnation, cut to RefBytes. The sync feed
// gives it for each submission, and for each deletion the ref of the
// submission it deleted. It is stable (the same submission has the same
// ref on every page and every node that shares the secret) and reveals
// nothing: not the position, not how many submissions the form has, and
// it cannot be turned back into either. Consumers key their copy by it.
//
// A form created again with a deleted form's ID starts its feed over at
// position 1: with an incarnation that is a RefIncarnation (every form
// this module's stores made since they mark them), its refs are not the
// deleted form's, so no ref, and no webhook-id made from one, names two
// submissions (RELIABILITY case 101). A form of an incarnation that is
// not one (made before, or of a store that tells none: 0) keeps the refs
// it always had, those of its account, form and position alone.
func (c *Codec) AppendRef(b []byte, l List, inc uint64, pos int64) []byte {
	return c.Refs(l, inc).Append(b, pos)
}

// RefIncarnation is the bit that marks an incarnation whose form's refs
// carry it (see AppendRef): this module's stores give it to every form
// they make (memstore always; sqlitestore from migration 0016, pgstore
// from migration 0022), and forms made before keep incarnations without
// it, and so the refs their consumers hold.
const RefIncarnation uint64 = 1 << 63

// Refs makes the refs of one list's feed, as AppendRef does, with one
// keyed hash reset for each ref instead of a new one: for a stream of
// many refs of one form (the export), where AppendRef's key schedule and
// allocations were most of a JSON Lines line's cost. A Refs is not safe
// for concurrent use; make one per stream.
type Refs struct {
	m   hash.Hash
	ad  []byte
	inc []byte // hashed after the position, for a RefIncarnation
}

// Refs returns the ref maker of l's feed, of a form of incarnation inc.
func (c *Codec) Refs(l List, inc uint64) *Refs {
	r := &Refs{m: hmac.New(sha256.New, c.refKey[:]), ad: l.appendLegacyAD(nil)}
	if inc&RefIncarnation != 0 {
		// The list names itself with lengths and the position has 8
		// bytes, so a hash of 8 more bytes is never one of a ref
		// without them.
		r.inc = binary.BigEndian.AppendUint64(nil, inc)
	}
	return r
}

// Append appends to b the ref of the submission at position pos, the
// same bytes as the Codec's AppendRef for the same list and incarnation.
func (r *Refs) Append(b []byte, pos int64) []byte {
	r.m.Reset()
	r.m.Write(r.ad)
	var p [8]byte
	binary.BigEndian.PutUint64(p[:], uint64(pos))
	r.m.Write(p[:])
	r.m.Write(r.inc)
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.AppendEncode(b, r.m.Sum(sum[:0])[:RefBytes])
}
