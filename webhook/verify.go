package webhook

import (
	"net/http"

	"github.com/formsapi/formsapi/webhook/receiver"
)

// DefaultTolerance is how far a delivery's webhook-timestamp may be from
// the receiver's clock for [Verify] to accept it: [receiver.DefaultTolerance].
const DefaultTolerance = receiver.DefaultTolerance

// The errors of [Verifier.Verify] (the same values as package receiver's,
// so errors.Is matches either): see [receiver.ErrMissingHeader] and the
// others for what each means. A delivery that gets one is not to be
// trusted.
var (
	// ErrMissingHeader: a webhook header is absent or empty.
	ErrMissingHeader = receiver.ErrMissingHeader
	// ErrNoValidSignature: no signature of the header verifies.
	ErrNoValidSignature = receiver.ErrNoValidSignature
	// ErrTooOld: the timestamp is more than the tolerance before now.
	ErrTooOld = receiver.ErrTooOld
	// ErrTooNew: the timestamp is more than the tolerance after now.
	ErrTooNew = receiver.ErrTooNew
)

// Verifier checks deliveries against a receiver's secrets: it is
// [receiver.Verifier], which a receiver can import alone (package
// receiver links none of the dispatcher).
type Verifier = receiver.Verifier

// Verify checks a delivery, from the headers and the raw body bytes as
// received (before any JSON decoding), against secrets within
// [DefaultTolerance]: it is [receiver.Verify].
func Verify(h http.Header, body []byte, secrets ...Secret) error {
	return receiver.Verify(h, body, secrets...)
}
