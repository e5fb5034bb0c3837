package formsapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"hash/crc32"
	"strings"
)

// KeyResolver maps an API key to the account that owns it.
type KeyResolver interface {
	// ResolveKey returns the account that owns key, or ErrInvalidKey.
	// Any other error means the resolver could not answer (an outage); the
	// handler then answers 500, never 401, so clients keep good keys.
	ResolveKey(ctx context.Context, key string) (accountID string, err error)
}

// KeyResolverFunc lets an ordinary function serve as a KeyResolver.
type KeyResolverFunc func(ctx context.Context, key string) (string, error)

// ResolveKey calls f(ctx, key).
func (f KeyResolverFunc) ResolveKey(ctx context.Context, key string) (string, error) {
	return f(ctx, key)
}

// Key format. A key from NewKey reads "fapi_" + 32 random base62 characters
// (190 bits) + 6 base62 characters of CRC32 over the random part, like
// GitHub's tokens: secret scanners can recognise a leaked key, and a typo is
// rejected before any store lookup.
const (
	// KeyPrefix starts every key NewKey returns.
	KeyPrefix = "fapi_"
	// MaxKeyLen is the longest key the handler will look up; longer
	// tokens are refused without a store call.
	MaxKeyLen = 256

	keyRandomLen   = 32
	keyChecksumLen = 6
	keyLen         = len(KeyPrefix) + keyRandomLen + keyChecksumLen
	base62         = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// NewKey returns a fresh random API key from crypto/rand in the format
// described at [KeyPrefix]. Register it with a store's AddKey and show it to
// its owner once: stores keep only its hash.
func NewKey() (string, error) {
	b := make([]byte, 0, keyLen)
	b = append(b, KeyPrefix...)
	var buf [64]byte
	for len(b) < len(KeyPrefix)+keyRandomLen {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", fmt.Errorf("formsapi: new key: %w", err)
		}
		for _, c := range buf {
			// 248 = 4*62: rejecting larger bytes keeps every character
			// equally likely.
			if c < 248 && len(b) < len(KeyPrefix)+keyRandomLen {
				b = append(b, base62[c%62])
			}
		}
	}
	return string(appendChecksum(b, b[len(KeyPrefix):])), nil
}

func appendChecksum(dst, random []byte) []byte {
	sum := crc32.ChecksumIEEE(random)
	var digits [keyChecksumLen]byte
	for i := keyChecksumLen - 1; i >= 0; i-- {
		digits[i] = base62[sum%62]
		sum /= 62
	}
	return append(dst, digits[:]...)
}

// checksumOK reports whether key, which starts with KeyPrefix, has the
// length and checksum of a key from NewKey.
func checksumOK(key string) bool {
	if len(key) != keyLen {
		return false
	}
	random := key[len(KeyPrefix) : len(KeyPrefix)+keyRandomLen]
	var buf [keyChecksumLen]byte
	return string(appendChecksum(buf[:0], []byte(random))) == key[len(KeyPrefix)+keyRandomLen:]
}

// CheckKey returns an error wrapping [ErrInvalidInput] if key could never
// authenticate a request: it is empty, longer than [MaxKeyLen], has a
// character outside the RFC 6750 token alphabet, or starts with [KeyPrefix]
// but fails its checksum. Keys in a host's own format pass as long as they
// are tokens. Stores call it in AddKey.
func CheckKey(key string) error {
	if !validToken(key) {
		return fmt.Errorf("%w: an API key must be 1 to %d characters of A-Z a-z 0-9 - . _ ~ + / followed by optional =", ErrInvalidInput, MaxKeyLen)
	}
	if strings.HasPrefix(key, KeyPrefix) && !checksumOK(key) {
		return fmt.Errorf("%w: the API key starts with %q but its checksum is wrong", ErrInvalidInput, KeyPrefix)
	}
	return nil
}

// HashKey returns the SHA-256 of key: what a store keeps instead of the key
// itself. A fast hash suits keys with over 128 bits of entropy; slow
// password hashes exist for guessable secrets and would only cost latency.
func HashKey(key string) [sha256.Size]byte {
	return sha256.Sum256([]byte(key))
}

// validToken reports whether tok matches RFC 6750's b64token and is at most
// MaxKeyLen long: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func validToken(tok string) bool {
	if tok == "" || len(tok) > MaxKeyLen {
		return false
	}
	end := len(strings.TrimRight(tok, "="))
	if end == 0 {
		return false
	}
	for i := 0; i < end; i++ {
		if c := tok[i]; !isUnreserved(c) && c != '+' && c != '/' {
			return false
		}
	}
	return true
}

// credentials is what a request's Authorization header amounts to.
type credentials int

const (
	noCredentials credentials = iota // no header, or a scheme other than Bearer
	badToken                         // Bearer with a token that cannot be a key
	tokenPresent                     // Bearer with a well-formed token
)

// parseAuthorization extracts the Bearer token from the request's
// Authorization header values. Exactly one header must be present; the
// scheme is case-insensitive and followed by one or more spaces (RFC 6750
// §2.1). Keys with our prefix and a bad checksum are refused here so that a
// typo never reaches the store.
func parseAuthorization(values []string) (string, credentials) {
	switch len(values) {
	case 0:
		return "", noCredentials
	case 1:
	default:
		return "", badToken
	}
	v := strings.Trim(values[0], " \t")
	scheme, token, found := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "bearer") {
		return "", noCredentials
	}
	if !found {
		return "", badToken
	}
	token = strings.TrimLeft(token, " ")
	if !validToken(token) || strings.HasPrefix(token, KeyPrefix) && !checksumOK(token) {
		return "", badToken
	}
	return token, tokenPresent
}
