package hookstore

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"strings"
)

// SecretPrefix starts the text of every [Secret], as Standard Webhooks
// asks, so that a receiver and a secret scanner can tell one at a glance.
const SecretPrefix = "whsec_"

// Secret lengths in bytes, before base64: Standard Webhooks allows 24 (192
// bits) to 64 (512 bits); [NewSecret] draws secretBytes.
const (
	minSecretBytes = 24
	maxSecretBytes = 64
	secretBytes    = 32
)

// ErrInvalidSecret is wrapped by the error [ParseSecret] returns for text
// that is not a secret, and by webhook.Sign and webhook.Verifier.Verify given a zero
// [Secret]. The error says what is wrong and never quotes the text.
var ErrInvalidSecret = errors.New("webhook: invalid signing secret")

// Secret is an endpoint's signing key. Its zero value is no secret: webhook.Sign
// refuses it. A Secret does not print itself: every verb of fmt, and
// log/slog, show "whsec_[REDACTED]"; [Secret.Reveal] returns the text to
// store or to show its owner once. A Secret is a value, safe to copy and
// to use concurrently.
type Secret struct {
	key []byte
}

// NewSecret returns a fresh secret of 32 bytes from crypto/rand.
func NewSecret() (Secret, error) {
	key := make([]byte, secretBytes)
	if _, err := rand.Read(key); err != nil {
		return Secret{}, fmt.Errorf("webhook: new secret: %w", err)
	}
	return Secret{key: key}, nil
}

// ParseSecret reads a secret's text: [SecretPrefix], then the standard
// base64 (padded, as [Secret.Reveal] writes it) of 24 to 64 bytes.
// Anything else is an error wrapping [ErrInvalidSecret] that names the
// problem and never quotes s.
func ParseSecret(s string) (Secret, error) {
	rest, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return Secret{}, fmt.Errorf("%w: it does not start with %q", ErrInvalidSecret, SecretPrefix)
	}
	// The length check first: no decoding of a megabyte of text.
	if n := base64.StdEncoding.EncodedLen(maxSecretBytes); len(rest) > n {
		return Secret{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalidSecret, maxSecretBytes)
	}
	// Strict still skips \r and \n; a secret has neither.
	key, err := base64.StdEncoding.Strict().DecodeString(rest)
	if err != nil || strings.ContainsAny(rest, "\r\n") {
		// err quotes the offending byte's offset only, but the message
		// stays ours so that it cannot change to quote more.
		return Secret{}, fmt.Errorf("%w: not standard base64 after %q", ErrInvalidSecret, SecretPrefix)
	}
	if len(key) < minSecretBytes {
		return Secret{}, fmt.Errorf("%w: %d bytes, fewer than %d", ErrInvalidSecret, len(key), minSecretBytes)
	}
	if len(key) > maxSecretBytes {
		return Secret{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalidSecret, maxSecretBytes)
	}
	return Secret{key: key}, nil
}

// Reveal returns the secret's text, "whsec_" and the standard base64 of
// its bytes, which [ParseSecret] reads back; "" for the zero Secret. It is
// the only method that shows the secret: call it to store the secret or
// to show it to its owner, never to log it.
func (s Secret) Reveal() string {
	if s.IsZero() {
		return ""
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(s.key)
}

// MAC returns a new HMAC-SHA256 keyed by the secret, with which Standard
// Webhooks signs (webhook.Sign and webhook.Verifier use it); nil for the
// zero Secret, which signs nothing.
func (s Secret) MAC() hash.Hash {
	if s.IsZero() {
		return nil
	}
	return hmac.New(sha256.New, s.key)
}

// IsZero reports whether s is the zero Secret, which signs nothing.
func (s Secret) IsZero() bool { return len(s.key) == 0 }

const redacted = SecretPrefix + "[REDACTED]"

// String returns "whsec_[REDACTED]" (or "" for the zero Secret), so that
// a secret printed by mistake shows nothing of itself.
func (s Secret) String() string {
	if s.IsZero() {
		return ""
	}
	return redacted
}

// GoString is String, for fmt's %#v.
func (s Secret) GoString() string { return "webhook.Secret(" + s.String() + ")" }

// Format writes String for every verb and flag of fmt (GoString for %#v):
// without it, %d or %x of a struct holding a Secret would print its bytes.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprint(f, s.GoString())
		return
	}
	fmt.Fprint(f, s.String())
}

// LogValue is String, for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
