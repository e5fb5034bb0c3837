package webhook

import "github.com/formsapi/formsapi/webhook/hookstore"

// SecretPrefix starts the text of every [Secret], as Standard Webhooks
// asks, so that a receiver and a secret scanner can tell one at a glance.
const SecretPrefix = hookstore.SecretPrefix

// ErrInvalidSecret is wrapped by the error [ParseSecret] returns for text
// that is not a secret, and by [Sign] and [Verifier.Verify] given a zero
// [Secret]. The error says what is wrong and never quotes the text.
var ErrInvalidSecret = hookstore.ErrInvalidSecret

// Secret is an endpoint's signing key ([hookstore.Secret], kept by the
// stores). Its zero value is no secret: [Sign] refuses it. A Secret does
// not print itself: every verb of fmt, and log/slog, show
// "whsec_[REDACTED]"; its Reveal method returns the text to store or to
// show its owner once. A Secret is a value, safe to copy and to use
// concurrently.
type Secret = hookstore.Secret

// NewSecret returns a fresh secret of 32 bytes from crypto/rand.
func NewSecret() (Secret, error) { return hookstore.NewSecret() }

// ParseSecret reads a secret's text: [SecretPrefix], then the standard
// base64 (padded, as Reveal writes it) of 24 to 64 bytes. Anything else
// is an error wrapping [ErrInvalidSecret] that names the problem and
// never quotes s.
func ParseSecret(s string) (Secret, error) { return hookstore.ParseSecret(s) }
