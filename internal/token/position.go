package token

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
)

// Positions makes and opens the positions an export writes on each of
// its lines, for one list (a form's export): short, deterministic (the
// same line has the same position in every export of the same secret, so
// that resumed exports concatenate to the very bytes of an uninterrupted
// one) and opaque. Each is one AES block, under a key derived from the
// secret, the ExportPosition kind and the list, holding the feed position
// of the line, the feed position the export is as of, the kind and the
// form's incarnation tag (IncarnationTag: 24 bits, 0 for a form of no
// known incarnation): a string this secret did not make for this list
// opens, but for a chance of 2^-8, as nothing, and one that opens has the
// tag of the form it is given for but for a chance of 2^-24, so that the
// handler, which reads the form's incarnation after opening it and
// refuses any other tag, still refuses all but 2^-32 of such strings.
// Feed positions must be below 2^48.
type Positions struct {
	block cipher.Block
}

// PositionLength is the length of a position as Append writes it.
const PositionLength = 22

// MaxPosition is the largest feed position a Positions holds (48 bits).
const MaxPosition = 1<<48 - 1

// Positions returns the export positions of list l.
func (c *Codec) Positions(l List) Positions {
	m := hmac.New(sha256.New, c.refKey[:])
	m.Write([]byte("formsapi export position\x00"))
	m.Write(l.additionalData(ExportPosition))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	return Positions{block: block}
}

// IncarnationTag is the 24 bits of a form's incarnation that its
// export's positions carry: 0 for 0 (an incarnation not known), never 0
// for another. Two incarnations have the same tag with a chance of 2^-24.
func IncarnationTag(inc uint64) uint32 {
	if inc == 0 {
		return 0
	}
	// The top bits of a multiplicative hash: incarnations that differ in
	// any bits (memstore's count up from 1) get tags that differ.
	t := uint32((inc * 0x9e3779b97f4a7c15) >> 40)
	if t == 0 {
		t = 1
	}
	return t
}

// Append appends the position of the line at feed position pos of an
// export as of feed position asOf, of a form of incarnation tag tag
// (IncarnationTag). It panics unless 0 < pos <= asOf < 2^48 and tag <
// 2^24.
func (p Positions) Append(b []byte, pos, asOf int64, tag uint32) []byte {
	if pos <= 0 || pos > asOf || asOf > MaxPosition || tag > 0xffffff {
		panic("token: export position out of range")
	}
	var plain, out [aes.BlockSize]byte
	plain[0] = byte(ExportPosition)
	putUint48(plain[1:7], uint64(pos))
	putUint48(plain[7:13], uint64(asOf))
	plain[13], plain[14], plain[15] = byte(tag>>16), byte(tag>>8), byte(tag)
	p.block.Encrypt(out[:], plain[:])
	return base64.RawURLEncoding.AppendEncode(b, out[:])
}

// Open returns the feed position, the as-of position and the incarnation
// tag of a position Append made for this list, and false for any other
// string (but for a chance of 2^-8: the caller compares the tag with its
// form's, see Positions).
func (p Positions) Open(s string) (pos, asOf int64, tag uint32, ok bool) {
	if len(s) != PositionLength {
		return 0, 0, 0, false
	}
	var raw, plain [aes.BlockSize]byte
	n, err := base64.RawURLEncoding.Strict().Decode(raw[:], []byte(s))
	if err != nil || n != aes.BlockSize {
		return 0, 0, 0, false
	}
	p.block.Decrypt(plain[:], raw[:])
	if plain[0] != byte(ExportPosition) {
		return 0, 0, 0, false
	}
	pos, asOf = int64(uint48(plain[1:7])), int64(uint48(plain[7:13]))
	if pos <= 0 || pos > asOf {
		return 0, 0, 0, false
	}
	return pos, asOf, binary.BigEndian.Uint32(plain[12:16]) & 0xffffff, true
}

func putUint48(b []byte, v uint64) {
	for i := 5; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

func uint48(b []byte) uint64 {
	var v uint64
	for _, c := range b[:6] {
		v = v<<8 | uint64(c)
	}
	return v
}
