package webhook

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers of a delivery. [Sign] sets them with
// http.Header.Set, so Go writes them as Webhook-Id and so on: header names
// are case-insensitive, and receivers in every language match them so.
const (
	// HeaderID carries the event's identity, the same on every attempt
	// (see [MessageID]): receivers de-duplicate by it.
	HeaderID = "webhook-id"
	// HeaderTimestamp carries the attempt's time in Unix seconds.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature carries one "v1,<base64 HMAC-SHA256>" per signing
	// secret, separated by spaces.
	HeaderSignature = "webhook-signature"
)

// MaxIDLength bounds a webhook-id in bytes, on both sides: [Sign] refuses
// a longer id and [Verifier.Verify] a longer header (a receiver keeps ids
// to de-duplicate, so it should not be made to keep large ones).
const MaxIDLength = 256

// ErrMalformedHeader is wrapped by the error of [Sign] given an id or a
// time that could not go in the headers, and of [Verifier.Verify] given a
// webhook header that is repeated or not of its form.
var ErrMalformedHeader = errors.New("webhook: malformed webhook header")

// idPrefix and idHashBytes make MessageID's ids the shape of Svix's: "msg_"
// and 27 characters.
const (
	idPrefix    = "msg_"
	idHashBytes = 20
)

// MessageID returns the webhook-id of the event of type eventType (such as
// "submission.created") about the submission whose feed ref is ref (the
// opaque ref the sync feed gives it, which binds account, form and feed
// position): "msg_" and the unpadded base64url of the first 20 bytes
// (160 bits) of SHA-256 over the length of eventType as a big-endian
// uint64, eventType, then ref. That is 31 characters of A-Z, a-z, 0-9,
// "_" and "-", with no "." (which the signed content uses as its
// separator).
//
// The same type and ref give the same id on every attempt, every node and
// every endpoint, and across versions of this package (a test pins it):
// a receiver that keeps the ids it processed never processes an event
// twice. The creation and the deletion of one submission share its ref
// and differ by type, so their ids differ.
func MessageID(eventType, ref string) string {
	h := sha256.New()
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(eventType))))
	h.Write([]byte(eventType))
	h.Write([]byte(ref))
	var sum [sha256.Size]byte
	b := make([]byte, 0, len(idPrefix)+base64.RawURLEncoding.EncodedLen(idHashBytes))
	b = append(b, idPrefix...)
	return string(base64.RawURLEncoding.AppendEncode(b, h.Sum(sum[:0])[:idHashBytes]))
}

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

// Sign sets the three Standard Webhooks headers of one attempt on h (a
// request's Header): [HeaderID] to id, [HeaderTimestamp] to at in Unix
// seconds, and [HeaderSignature] as [Signature] makes it, replacing any
// values they had. It returns Signature's errors and then leaves h
// unchanged. The body sent must be these very bytes: a receiver verifies
// the bytes it reads, and any change, a re-encoding of the JSON included,
// fails the check.
func Sign(h http.Header, id string, at time.Time, body []byte, secrets ...Secret) error {
	if err := checkSigning(id, at, secrets); err != nil {
		return err
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	// h.Set with the keys canonical already: no canonicalizing per call.
	h[canonicalID] = []string{id}
	h[canonicalTimestamp] = []string{ts}
	h[canonicalSignature] = []string{signature(id, ts, body, secrets)}
	return nil
}

// The header names as http.Header keeps them.
var (
	canonicalID        = textproto.CanonicalMIMEHeaderKey(HeaderID)
	canonicalTimestamp = textproto.CanonicalMIMEHeaderKey(HeaderTimestamp)
	canonicalSignature = textproto.CanonicalMIMEHeaderKey(HeaderSignature)
)

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
