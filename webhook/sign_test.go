package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi/webhook"
	"github.com/matryer/is"
)

// The official library's test vector (libraries/go/webhook_test.go,
// TestWebhookSign), shared by its libraries in every language.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignatureVector(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s, err := webhook.ParseSecret(vectorSecret)
	is.NoErr(err)
	sig, err := webhook.Signature(vectorID, time.Unix(vectorTimestamp, 0), []byte(vectorBody), s)
	is.NoErr(err)
	is.Equal(sig, vectorSignature) // the Standard Webhooks test vector
}

// TestSignatureIsHMAC recomputes each signature of a rotation from the
// spec's definition.
func TestSignatureIsHMAC(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	secrets := []webhook.Secret{mustSecret(t), mustSecret(t), mustSecret(t)}
	at := time.Unix(1_700_000_000, 999_999_999) // sub-second part dropped
	body := []byte(`{"type":"submission.created","data":{"x":"a.b.c"}}`)
	sig, err := webhook.Signature("msg_abc", at, body, secrets...)
	is.NoErr(err)
	entries := strings.Split(sig, " ")
	is.Equal(len(entries), 3) // one per secret, space-separated
	for i, s := range secrets {
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(s.Reveal(), "whsec_"))
		m := hmac.New(sha256.New, key)
		m.Write([]byte("msg_abc.1700000000." + string(body)))
		is.Equal(entries[i], "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil))) // in the order given
	}
}

func TestSignSetsHeaders(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustSecret(t)
	h := http.Header{}
	h.Set("Webhook-Id", "stale")
	h.Add("Content-Type", "application/json")
	at := time.Unix(1_700_000_123, 0)
	body := []byte(`{}`)
	is.NoErr(webhook.Sign(h, "msg_1", at, body, s))
	is.Equal(h.Values("webhook-id"), []string{"msg_1"}) // replaced, not added
	is.Equal(h.Get("webhook-timestamp"), "1700000123")
	want, _ := webhook.Signature("msg_1", at, body, s)
	is.Equal(h.Get("webhook-signature"), want)
	is.Equal(h.Get("Content-Type"), "application/json") // others untouched
}

func TestSignRefuses(t *testing.T) {
	t.Parallel()
	s := mustSecret(t)
	now := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name    string
		id      string
		at      time.Time
		secrets []webhook.Secret
		want    error
	}{
		{"no secret", "msg_1", now, nil, webhook.ErrInvalidSecret},
		{"zero secret", "msg_1", now, []webhook.Secret{s, {}}, webhook.ErrInvalidSecret},
		{"empty id", "", now, []webhook.Secret{s}, webhook.ErrMalformedHeader},
		{"id with a full stop", "msg.1", now, []webhook.Secret{s}, webhook.ErrMalformedHeader},
		{"id with a space", "msg 1", now, []webhook.Secret{s}, webhook.ErrMalformedHeader},
		{"id with a newline", "msg\n1", now, []webhook.Secret{s}, webhook.ErrMalformedHeader},
		{"id with non-ASCII", "msg_é", now, []webhook.Secret{s}, webhook.ErrMalformedHeader},
		{"id too long", strings.Repeat("a", webhook.MaxIDLength+1), now, []webhook.Secret{s}, webhook.ErrMalformedHeader},
		{"before 1970", "msg_1", time.Unix(-1, 0), []webhook.Secret{s}, webhook.ErrMalformedHeader},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			h := http.Header{}
			err := webhook.Sign(h, c.id, c.at, []byte("{}"), c.secrets...)
			is.True(errors.Is(err, c.want)) // refused with the sentinel
			is.Equal(len(h), 0)             // and h unchanged
			_, err = webhook.Signature(c.id, c.at, []byte("{}"), c.secrets...)
			is.True(errors.Is(err, c.want))
		})
	}
	is := is.New(t)
	_, err := webhook.Signature(strings.Repeat("a", webhook.MaxIDLength), now, nil, s)
	is.NoErr(err) // the longest id
}

var idShape = regexp.MustCompile(`^msg_[A-Za-z0-9_-]{27}$`)

func TestMessageID(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	// Pinned: receivers keep these ids, so the derivation must never
	// change. The value is recomputed from the documented construction
	// too.
	id := webhook.MessageID("submission.created", "q3vbP0Qm5a0CwR0oI3QJxA")
	is.Equal(id, docID("submission.created", "q3vbP0Qm5a0CwR0oI3QJxA"))
	is.Equal(id, "msg_7snBAN4NpngWC_s7mbsCCQmfTL8") // pinned
	seen := map[string]string{}
	for _, typ := range []string{"submission.created", "submission.deleted", "submission.create", ""} {
		for _, ref := range []string{"q3vbP0Qm5a0CwR0oI3QJxA", "q3vbP0Qm5a0CwR0oI3QJxB", "dsubmission.deleted", "", "x"} {
			id := webhook.MessageID(typ, ref)
			is.True(idShape.MatchString(id))          // 31 characters, no "."
			is.Equal(id, webhook.MessageID(typ, ref)) // stable
			is.Equal(seen[id], "")                    // and distinct
			seen[id] = typ + "|" + ref
			_, err := webhook.Signature(id, time.Unix(0, 0), nil, mustSecret(t))
			is.NoErr(err) // Sign takes every id MessageID makes
		}
	}
	// Moving a byte between type and ref changes the id.
	is.True(webhook.MessageID("ab", "c") != webhook.MessageID("a", "bc"))
}

// docID is MessageID as its doc comment describes it.
func docID(typ, ref string) string {
	h := sha256.New()
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(typ))))
	h.Write([]byte(typ + ref))
	return "msg_" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:20])
}
