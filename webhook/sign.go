package webhook

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/textproto"
	"strconv"
	"time"

	"github.com/formsapi/formsapi/webhook/receiver"
)

// The Standard Webhooks headers of a delivery, as [receiver.HeaderID] and
// the others name them. [Sign] sets them with http.Header.Set, so Go writes
// them as Webhook-Id and so on: header names are case-insensitive, and
// receivers in every language match them so.
const (
	// HeaderID carries the event's identity, the same on every attempt
	// (see [MessageID]): receivers de-duplicate by it.
	HeaderID = receiver.HeaderID
	// HeaderTimestamp carries the attempt's time in Unix seconds.
	HeaderTimestamp = receiver.HeaderTimestamp
	// HeaderSignature carries one "v1,<base64 HMAC-SHA256>" per signing
	// secret, separated by spaces.
	HeaderSignature = receiver.HeaderSignature
)

// MaxIDLength bounds a webhook-id in bytes, on both sides: [Sign] refuses
// a longer id and [Verifier.Verify] a longer header.
const MaxIDLength = receiver.MaxIDLength

// ErrMalformedHeader is wrapped by the error of [Sign] given an id or a
// time that could not go in the headers, and of [Verifier.Verify] given a
// webhook header that is repeated or not of its form
// ([receiver.ErrMalformedHeader]).
var ErrMalformedHeader = receiver.ErrMalformedHeader

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

// Signature returns the value of the webhook-signature header of the
// attempt at time at of the message id with this body, or Signature's
// errors: it is [receiver.Signature].
func Signature(id string, at time.Time, body []byte, secrets ...Secret) (string, error) {
	return receiver.Signature(id, at, body, secrets...)
}

// Sign sets the three Standard Webhooks headers of one attempt on h (a
// request's Header): [HeaderID] to id, [HeaderTimestamp] to at in Unix
// seconds, and [HeaderSignature] as [Signature] makes it, replacing any
// values they had. It returns Signature's errors and then leaves h
// unchanged. The body sent must be these very bytes: a receiver verifies
// the bytes it reads, and any change, a re-encoding of the JSON included,
// fails the check.
func Sign(h http.Header, id string, at time.Time, body []byte, secrets ...Secret) error {
	sig, err := receiver.Signature(id, at, body, secrets...)
	if err != nil {
		return err
	}
	// h.Set with the keys canonical already: no canonicalizing per call.
	h[canonicalID] = []string{id}
	h[canonicalTimestamp] = []string{strconv.FormatInt(at.Unix(), 10)}
	h[canonicalSignature] = []string{sig}
	return nil
}

// The header names as http.Header keeps them.
var (
	canonicalID        = textproto.CanonicalMIMEHeaderKey(HeaderID)
	canonicalTimestamp = textproto.CanonicalMIMEHeaderKey(HeaderTimestamp)
	canonicalSignature = textproto.CanonicalMIMEHeaderKey(HeaderSignature)
)
