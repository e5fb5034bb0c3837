package formsapi

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"

	"github.com/formsapi/formsapi/internal/keyformat"
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

// NewKey returns a fresh random API key from crypto/rand: "fapi_", then
// 32 random base62 characters (190 bits) and 6 base62 characters of CRC32
// over the random part, like GitHub's tokens, so that secret scanners can
// recognise a leaked key and a typo is rejected before any store lookup:
// a key that starts with "fapi_" is refused unless its checksum holds.
// Keys in a host's own format work too, as long as they are RFC 6750
// tokens of at most 256 characters. Register it with a store's AddKey
// and show it to its owner once: stores keep only its hash.
func NewKey() (string, error) {
	b := make([]byte, 0, keyformat.Len)
	b = append(b, keyformat.Prefix...)
	var buf [64]byte
	for len(b) < len(keyformat.Prefix)+keyformat.RandomLen {
		if _, err := rand.Read(buf[:]); err != nil {
			return "", fmt.Errorf("formsapi: new key: %w", err)
		}
		for _, c := range buf {
			// 248 = 4*62: rejecting larger bytes keeps every character
			// equally likely.
			if c < 248 && len(b) < len(keyformat.Prefix)+keyformat.RandomLen {
				b = append(b, keyformat.Base62[c%62])
			}
		}
	}
	return string(keyformat.AppendChecksum(b, b[len(keyformat.Prefix):])), nil
}

// checkKey returns an error wrapping [ErrInvalidInput] if key could never
// authenticate a request: it is empty, longer than 256 characters, has a
// character outside the RFC 6750 token alphabet, or starts with
// "fapi_" (see [NewKey]) but fails its checksum.
func checkKey(key string) error {
	if msg := keyformat.Problem(key); msg != "" {
		return fmt.Errorf("%w: %s", ErrInvalidInput, msg)
	}
	return nil
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
	if !keyformat.Token(token) || strings.HasPrefix(token, keyformat.Prefix) && !keyformat.ChecksumOK(token) {
		return "", badToken
	}
	return token, tokenPresent
}
