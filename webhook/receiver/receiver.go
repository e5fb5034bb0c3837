// Package receiver verifies webhook deliveries, for a program that
// receives them: [Verify] (or a [Verifier]) checks a delivery's Standard
// Webhooks headers and raw body against the endpoint's secrets, which
// [ParseSecret] reads from the "whsec_" text the host gave. It imports
// nothing of the module but the secret's type (package hookstore), so a
// receiver links neither the dispatcher nor its outbound client (package
// webhook, which names all of this again for senders and hosts).
package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/formsapi/formsapi/webhook/hookstore"
)

// Secret is an endpoint's signing secret (see [ParseSecret]).
type Secret = hookstore.Secret

// ErrInvalidSecret is wrapped by the errors of [ParseSecret] given text
// that is not a secret, and of [Verifier.Verify] and [Signature] given the
// zero Secret.
var ErrInvalidSecret = hookstore.ErrInvalidSecret

// ParseSecret reads a secret from the text the host was given for the
// endpoint ("whsec_" and the standard base64 of 24 to 64 bytes), as
// [hookstore.ParseSecret] does.
func ParseSecret(s string) (Secret, error) { return hookstore.ParseSecret(s) }

// The Standard Webhooks headers of a delivery. webhook.Sign sets them with
// http.Header.Set, so Go writes them as Webhook-Id and so on: header names
// are case-insensitive, and receivers in every language match them so.
const (
	// HeaderID carries the event's identity, the same on every attempt
	// (see webhook.MessageID): receivers de-duplicate by it.
	HeaderID = "webhook-id"
	// HeaderTimestamp carries the attempt's time in Unix seconds.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature carries one "v1,<base64 HMAC-SHA256>" per signing
	// secret, separated by spaces.
	HeaderSignature = "webhook-signature"
)

// MaxIDLength bounds a webhook-id in bytes, on both sides: [Signature] refuses
// a longer id and [Verifier.Verify] a longer header (a receiver keeps ids
// to de-duplicate, so it should not be made to keep large ones).
const MaxIDLength = 256

// ErrMalformedHeader is wrapped by the error of [Signature] given an id or a
// time that could not go in the headers, and of [Verifier.Verify] given a
// webhook header that is repeated or not of its form.
var ErrMalformedHeader = errors.New("webhook: malformed webhook header")

// checkID returns an error wrapping ErrMalformedHeader unless id is 1 to
// MaxIDLength bytes of visible ASCII other than ".": Standard Webhooks
// forbids the full stop, which separates the signed content's parts, and
// the rest keeps the id a plain token in every receiver's store.
func checkID(id string) error {
	if id == "" || len(id) > MaxIDLength {
		return fmt.Errorf("%w: %s must be 1 to %d bytes", ErrMalformedHeader, HeaderID, MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '.' {
			return fmt.Errorf("%w: %s may hold visible ASCII other than \".\" only", ErrMalformedHeader, HeaderID)
		}
	}
	return nil
}

// Signature returns the value of the webhook-signature header of the
// attempt at time at (its Unix seconds) of the message id with this body:
// for each secret, in the order given, "v1," and the standard base64 of
// the HMAC-SHA256 of id, ".", the timestamp in decimal, "." and body,
// separated by single spaces. During a rotation pass the new secret and
// the old one, so that a receiver holding either verifies the delivery.
//
// It returns an error wrapping [ErrInvalidSecret] when no secret is given
// or one is the zero Secret, and one wrapping [ErrMalformedHeader] for an
// id that is empty, longer than [MaxIDLength] or has a byte other than
// visible ASCII (or a "."), and for a time before 1970.
func Signature(id string, at time.Time, body []byte, secrets ...Secret) (string, error) {
	if err := checkSigning(id, at, secrets); err != nil {
		return "", err
	}
	return signature(id, strconv.FormatInt(at.Unix(), 10), body, secrets), nil
}

func checkSigning(id string, at time.Time, secrets []Secret) error {
	if len(secrets) == 0 {
		return fmt.Errorf("%w: no secret to sign with", ErrInvalidSecret)
	}
	for _, s := range secrets {
		if s.IsZero() {
			return fmt.Errorf("%w: the zero Secret signs nothing", ErrInvalidSecret)
		}
	}
	if err := checkID(id); err != nil {
		return err
	}
	if at.Unix() < 0 {
		return fmt.Errorf("%w: %s before 1970", ErrMalformedHeader, HeaderTimestamp)
	}
	return nil
}

// signature joins the "v1,<mac>" of each secret, checked already.
func signature(id, ts string, body []byte, secrets []Secret) string {
	var b strings.Builder
	b.Grow(len(secrets) * (len("v1,") + base64.StdEncoding.EncodedLen(sha256.Size) + 1))
	var sum [sha256.Size]byte
	for i, s := range secrets {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(mac(s, id, ts, body, sum[:0])))
	}
	return b.String()
}

// mac appends to b the HMAC-SHA256 under s of "id.ts.body", written in
// two parts so that the body is never copied.
func mac(s Secret, id, ts string, body, b []byte) []byte {
	m := s.MAC()
	prefix := make([]byte, 0, len(id)+len(ts)+2)
	prefix = append(append(append(append(prefix, id...), '.'), ts...), '.')
	m.Write(prefix)
	m.Write(body)
	return m.Sum(b)
}

// DefaultTolerance is how far a delivery's webhook-timestamp may be from
// the receiver's clock, in the past or the future, for [Verify] to accept
// it: the 5 minutes Standard Webhooks' libraries use. A captured delivery
// replayed later than that is refused; within it, a receiver that
// de-duplicates by webhook-id processes a replay no more than the
// original.
const DefaultTolerance = 5 * time.Minute

// The errors of [Verifier.Verify], beside [ErrMalformedHeader] (a header
// repeated or not of its form) and [ErrInvalidSecret] (a zero Secret
// among the Verifier's). Whichever it returns, the delivery is not to be
// trusted, and a receiver answers it with a 4xx status (400 or 401) and
// does not act on it. None of them quotes a header or the body.
var (
	// ErrMissingHeader: webhook-id, webhook-timestamp or
	// webhook-signature is absent or empty.
	ErrMissingHeader = errors.New("webhook: missing webhook header")
	// ErrNoValidSignature: no "v1" signature of the header is that of
	// these id, timestamp and body under one of the secrets (a wrong
	// secret, or an id, timestamp, body or signature changed on the way),
	// or the Verifier has no secret.
	ErrNoValidSignature = errors.New("webhook: no valid signature")
	// ErrTooOld: the timestamp is more than the tolerance before now.
	ErrTooOld = errors.New("webhook: timestamp too old")
	// ErrTooNew: the timestamp is more than the tolerance after now.
	ErrTooNew = errors.New("webhook: timestamp too far in the future")
)

// maxTimestampDigits bounds webhook-timestamp: 12 digits reach the year
// 33658, and ParseInt never overflows on them.
const maxTimestampDigits = 12

// Verifier checks deliveries against a receiver's secrets. Its zero
// values are the defaults, so Verifier{Secrets: s} is [Verify] with s. It
// is safe for concurrent use as long as its fields are not changed.
type Verifier struct {
	// Secrets are those the receiver accepts: the endpoint's one, or
	// during a rotation the old and the new. A delivery signed with any
	// of them verifies.
	Secrets []Secret
	// Tolerance is how far the timestamp may be from Now, before or
	// after; zero or less means DefaultTolerance.
	Tolerance time.Duration
	// Now is the receiver's clock (a seam for tests); nil means time.Now.
	Now func() time.Time
}

// Verify checks a delivery, from the headers and the raw body bytes as
// received (before any JSON decoding), against secrets within
// [DefaultTolerance]. See [Verifier.Verify].
func Verify(h http.Header, body []byte, secrets ...Secret) error {
	return Verifier{Secrets: secrets}.Verify(h, body)
}

// Verify returns nil when the delivery is authentic and fresh: h has one
// webhook-id (1 to [MaxIDLength] bytes of visible ASCII other than "."),
// one webhook-timestamp (Unix seconds in decimal, no sign or leading zero)
// within the tolerance of now, and one webhook-signature among whose
// space-separated entries a "v1,<base64>" is the HMAC-SHA256 of
// "id.timestamp.body" under one of the secrets. Entries of other versions
// (such as Standard Webhooks' asymmetric "v1a") are skipped. Signatures
// are compared in constant time.
//
// Otherwise it returns an error wrapping, checked in this order,
// [ErrInvalidSecret] (a zero Secret in v.Secrets), [ErrMissingHeader],
// [ErrMalformedHeader], [ErrTooOld] or [ErrTooNew] (the signature is not
// computed for a delivery outside the tolerance), or
// [ErrNoValidSignature]. Header names are matched without regard to case,
// in canonical form (as net/http stores them) or all lowercase (as a
// header map built by hand from another source may hold them).
//
// A verified delivery may still be one the receiver has processed: a
// retry, or a replay within the tolerance. Keep the webhook-id of each
// processed delivery for longer than the tolerance and skip those seen.
func (v Verifier) Verify(h http.Header, body []byte) error {
	for _, s := range v.Secrets {
		if s.IsZero() {
			return fmt.Errorf("%w: the zero Secret verifies nothing", ErrInvalidSecret)
		}
	}
	id, err := header(h, HeaderID)
	if err != nil {
		return err
	}
	ts, err := header(h, HeaderTimestamp)
	if err != nil {
		return err
	}
	sigs, err := header(h, HeaderSignature)
	if err != nil {
		return err
	}
	if err := checkID(id); err != nil {
		return err
	}
	at, err := parseTimestamp(ts)
	if err != nil {
		return err
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	tolerance := v.Tolerance
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// In whole seconds, as the header is: a delivery exactly at the
	// tolerance passes, one second more does not.
	nowSec := now().Unix()
	tolSec := int64(tolerance / time.Second)
	switch {
	case at < nowSec-tolSec:
		return fmt.Errorf("%w: more than %v before now", ErrTooOld, tolerance)
	case at > nowSec+tolSec:
		return fmt.Errorf("%w: more than %v after now", ErrTooNew, tolerance)
	}
	if len(v.Secrets) == 0 {
		return fmt.Errorf("%w: the Verifier has no secret", ErrNoValidSignature)
	}
	// Each secret's MAC once, then every v1 entry against each.
	want := make([][]byte, len(v.Secrets))
	for i, s := range v.Secrets {
		want[i] = mac(s, id, ts, body, nil)
	}
	var got [sha256.Size + 1]byte // DecodedLen of 44 characters is 33
	for entry := range strings.SplitSeq(sigs, " ") {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" || len(sig) != base64.StdEncoding.EncodedLen(sha256.Size) {
			continue
		}
		n, err := base64.StdEncoding.Strict().Decode(got[:], []byte(sig))
		if err != nil || n != sha256.Size {
			continue
		}
		for _, w := range want {
			if hmac.Equal(got[:n], w) {
				return nil
			}
		}
	}
	return ErrNoValidSignature
}

// header returns the one value of the header name in h, looked up in
// canonical and in lowercase form.
func header(h http.Header, name string) (string, error) {
	vs := h.Values(name)
	if len(vs) == 0 {
		vs = h[name] // the constants are lowercase
	}
	switch {
	case len(vs) == 0 || vs[0] == "":
		return "", fmt.Errorf("%w: %s", ErrMissingHeader, name)
	case len(vs) > 1:
		return "", fmt.Errorf("%w: %s repeated", ErrMalformedHeader, name)
	}
	return vs[0], nil
}

// parseTimestamp reads webhook-timestamp: decimal digits without a sign
// or a leading zero, which is how every sender writes Unix seconds, so
// that the text signed and the number checked cannot differ.
func parseTimestamp(ts string) (int64, error) {
	bad := len(ts) > maxTimestampDigits || len(ts) > 1 && ts[0] == '0'
	for i := 0; i < len(ts) && !bad; i++ {
		bad = ts[i] < '0' || ts[i] > '9'
	}
	if bad {
		return 0, fmt.Errorf("%w: %s must be Unix seconds in decimal", ErrMalformedHeader, HeaderTimestamp)
	}
	return strconv.ParseInt(ts, 10, 64)
}
