package webhook

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
)

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
