// Package keyformat is the format of API keys, shared by the handler, the
// stores of this module and formsclient: which tokens can be keys at all,
// the checksum of the keys formsapi.NewKey makes, and the hash stores
// keep instead of a key.
package keyformat

import (
	"crypto/sha256"
	"hash/crc32"
	"strings"
)

// A key from formsapi.NewKey reads Prefix + 32 random base62 characters
// (190 bits) + 6 base62 characters of CRC32 over the random part, like
// GitHub's tokens: secret scanners can recognise a leaked key, and a typo
// is rejected before any store lookup.
const (
	// Prefix starts every key formsapi.NewKey returns.
	Prefix = "fapi_"
	// MaxLen is the longest key the handler looks up; longer tokens are
	// refused without a store call.
	MaxLen = 256
	// RandomLen and ChecksumLen are the lengths of a key's two parts
	// after Prefix.
	RandomLen   = 32
	ChecksumLen = 6
	// Len is the length of a key from formsapi.NewKey.
	Len = len(Prefix) + RandomLen + ChecksumLen
	// Base62 is the alphabet of a key's random part and checksum.
	Base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// AppendChecksum appends the checksum of random, a key's random part.
func AppendChecksum(dst, random []byte) []byte {
	sum := crc32.ChecksumIEEE(random)
	var digits [ChecksumLen]byte
	for i := ChecksumLen - 1; i >= 0; i-- {
		digits[i] = Base62[sum%62]
		sum /= 62
	}
	return append(dst, digits[:]...)
}

// ChecksumOK reports whether key, which starts with Prefix, has the
// length and checksum of a key from formsapi.NewKey.
func ChecksumOK(key string) bool {
	if len(key) != Len {
		return false
	}
	random := key[len(Prefix) : len(Prefix)+RandomLen]
	var buf [ChecksumLen]byte
	return string(AppendChecksum(buf[:0], []byte(random))) == key[len(Prefix)+RandomLen:]
}

// Token reports whether tok matches RFC 6750's b64token and is at most
// MaxLen long: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func Token(tok string) bool {
	if tok == "" || len(tok) > MaxLen {
		return false
	}
	end := len(strings.TrimRight(tok, "="))
	if end == 0 {
		return false
	}
	for i := 0; i < end; i++ {
		c := tok[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return true
}

// Problem says why key could never authenticate a request, or returns ""
// if it could: it must be a token (see Token), and a key that starts
// with Prefix must pass its checksum. Keys in a host's own format pass as
// long as they are tokens.
func Problem(key string) string {
	if !Token(key) {
		return "an API key must be 1 to 256 characters of A-Z a-z 0-9 - . _ ~ + / followed by optional ="
	}
	if strings.HasPrefix(key, Prefix) && !ChecksumOK(key) {
		return `the API key starts with "` + Prefix + `" but its checksum is wrong`
	}
	return ""
}

// Hash returns the SHA-256 of key: what a store keeps instead of the key
// itself. A fast hash suits keys with over 128 bits of entropy; slow
// password hashes exist for guessable secrets and would only cost latency.
func Hash(key string) [sha256.Size]byte {
	return sha256.Sum256([]byte(key))
}
