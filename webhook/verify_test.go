package webhook_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi/webhook"
	"github.com/matryer/is"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// message is one signed delivery.
type message struct {
	id     string
	at     time.Time
	body   []byte
	header http.Header
}

// randomMessage signs a random delivery at time at with secrets: an id
// that MessageID made or any valid one, a body of JSON or of any bytes.
func randomMessage(t testing.TB, r *rand.Rand, at time.Time, secrets ...webhook.Secret) message {
	t.Helper()
	var id string
	if r.IntN(2) == 0 {
		id = webhook.MessageID("submission.created", strconv.FormatUint(r.Uint64(), 36))
	} else {
		b := make([]byte, 1+r.IntN(webhook.MaxIDLength))
		for i := range b {
			for b[i] = byte('!' + r.IntN('~'-'!'+1)); b[i] == '.'; b[i] = byte('!' + r.IntN('~'-'!'+1)) {
			}
		}
		id = string(b)
	}
	var body []byte
	switch r.IntN(3) {
	case 0:
		body = fmt.Appendf(nil, `{"type":"submission.created","data":{"n":%d,"s":"a.b\u00e9"}}`, r.Int())
	case 1:
		body = make([]byte, r.IntN(4096))
		for i := range body {
			body[i] = byte(r.UintN(256))
		}
	case 2: // empty
	}
	h := http.Header{}
	if err := webhook.Sign(h, id, at, body, secrets...); err != nil {
		t.Fatal(err)
	}
	return message{id, at, body, h}
}

// official is the Standard Webhooks Go library's verifier of s.
func official(t testing.TB, s webhook.Secret) *standardwebhooks.Webhook {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(s.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

// TestOfficialLibraryVerifiesOurs: every message we sign, with one secret
// or with the two or three of a rotation, verifies with the official
// library under each of those secrets, and under no other. The official
// Verify reads the wall clock, so these messages are signed at time.Now.
func TestOfficialLibraryVerifiesOurs(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r := rand.New(rand.NewPCG(1, 2))
	stranger := official(t, mustSecret(t))
	const n = 600
	verified := 0
	for i := range n {
		secrets := make([]webhook.Secret, 1+i%3)
		for j := range secrets {
			secrets[j] = mustSecret(t)
		}
		m := randomMessage(t, r, time.Now(), secrets...)
		ok := true
		for _, s := range secrets {
			if err := official(t, s).Verify(m.body, m.header); err != nil {
				t.Errorf("message %d (%d secrets): the official library refuses it: %v", i, len(secrets), err)
				ok = false
			}
		}
		is.True(errors.Is(stranger.Verify(m.body, m.header), standardwebhooks.ErrNoMatchingSignature)) // not another secret
		if ok {
			verified++
		}
	}
	is.Equal(verified, n) // 100% verify
}

// TestOfficialLibraryOverHTTP: a delivery signed with Sign and sent over
// loopback verifies on the receiving side with the official library and
// with ours, from the raw body and the headers as net/http delivers them.
func TestOfficialLibraryOverHTTP(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	old, current := mustSecret(t), mustSecret(t)
	got := make(chan error, 3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			got <- err
			return
		}
		got <- official(t, old).Verify(body, r.Header)
		got <- official(t, current).Verify(body, r.Header)
		got <- webhook.Verify(r.Header, body, current)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	body := []byte(`{"type":"submission.deleted","timestamp":"2026-01-02T03:04:05Z","data":{"formId":"contact","ref":"q3vbP0Qm5a0CwR0oI3QJxA"}}`)
	req, err := http.NewRequest("POST", srv.URL, bytes.NewReader(body))
	is.NoErr(err)
	req.Header.Set("Content-Type", "application/json")
	is.NoErr(webhook.Sign(req.Header, webhook.MessageID("submission.deleted", "q3vbP0Qm5a0CwR0oI3QJxA"), time.Now(), body, current, old))
	res, err := srv.Client().Do(req)
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusNoContent)
	for range 3 {
		is.NoErr(<-got) // the old secret, the new one, and ours
	}
}

// TestWeVerifyOfficialLibrarys: messages the official library signs
// verify with Verify, whichever secret of the Verifier's signed them,
// anywhere within the tolerance.
func TestWeVerifyOfficialLibrarys(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		secrets := []webhook.Secret{mustSecret(t), mustSecret(t)}
		signer := secrets[i%2]
		m := randomMessage(t, r, time.Unix(1_600_000_000+r.Int64N(1e9), 0), mustSecret(t)) // for its id and body
		sig, err := official(t, signer).Sign(m.id, m.at, m.body)
		is.NoErr(err)
		h := http.Header{}
		h.Set(standardwebhooks.HeaderWebhookID, m.id)
		h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(m.at.Unix(), 10))
		h.Set(standardwebhooks.HeaderWebhookSignature, sig)
		skew := time.Duration(r.Int64N(int64(2*webhook.DefaultTolerance+time.Second))) - webhook.DefaultTolerance
		now := m.at.Add(skew).Truncate(time.Second)
		v := webhook.Verifier{Secrets: secrets, Now: func() time.Time { return now }}
		if err := v.Verify(h, m.body); err != nil {
			t.Fatalf("message %d (receiver %v from the timestamp): %v", i, skew, err)
		}
		is.NoErr(webhook.Verifier{Secrets: secrets[i%2 : i%2+1], Now: v.Now}.Verify(h, m.body))                                          // the signer's secret alone
		is.True(errors.Is(webhook.Verifier{Secrets: secrets[1-i%2 : 2-i%2], Now: v.Now}.Verify(h, m.body), webhook.ErrNoValidSignature)) // the other alone
	}
	// The official test vector, with its own clock.
	s, err := webhook.ParseSecret(vectorSecret)
	is.NoErr(err)
	h := http.Header{}
	h.Set("webhook-id", vectorID)
	h.Set("webhook-timestamp", strconv.Itoa(vectorTimestamp))
	h.Set("webhook-signature", vectorSignature)
	at := func() time.Time { return time.Unix(vectorTimestamp, 0) }
	is.NoErr(webhook.Verifier{Secrets: []webhook.Secret{s}, Now: at}.Verify(h, []byte(vectorBody)))
}

// tamper changes one thing of a signed message.
type tamper struct {
	name string
	do   func(r *rand.Rand, m *message)
	want error
}

// otherChar returns a visible ASCII byte other than c and ".".
func otherChar(r *rand.Rand, c byte) byte {
	for {
		d := byte('!' + r.IntN('~'-'!'+1))
		if d != c && d != '.' {
			return d
		}
	}
}

var tampers = []tamper{
	{"id: one byte changed", func(r *rand.Rand, m *message) {
		b := []byte(m.id)
		i := r.IntN(len(b))
		b[i] = otherChar(r, b[i])
		m.header.Set("webhook-id", string(b))
	}, webhook.ErrNoValidSignature},
	{"id: a byte added", func(r *rand.Rand, m *message) {
		m.header.Set("webhook-id", m.id[:len(m.id)-1]+"x"+m.id[len(m.id)-1:])
	}, nil}, // ErrNoValidSignature, or ErrMalformedHeader past MaxIDLength
	{"timestamp: one second later", func(r *rand.Rand, m *message) {
		m.header.Set("webhook-timestamp", strconv.FormatInt(m.at.Unix()+1, 10))
	}, webhook.ErrNoValidSignature},
	{"timestamp: one second earlier", func(r *rand.Rand, m *message) {
		m.header.Set("webhook-timestamp", strconv.FormatInt(m.at.Unix()-1, 10))
	}, webhook.ErrNoValidSignature},
	{"body: one bit flipped", func(r *rand.Rand, m *message) {
		if len(m.body) == 0 {
			m.body = []byte{0}
			return
		}
		i := r.IntN(len(m.body))
		m.body = bytes.Clone(m.body)
		m.body[i] ^= 1 << r.IntN(8)
	}, webhook.ErrNoValidSignature},
	{"body: a byte appended", func(r *rand.Rand, m *message) {
		m.body = append(bytes.Clone(m.body), ' ')
	}, webhook.ErrNoValidSignature},
	{"body: last byte cut", func(r *rand.Rand, m *message) {
		if len(m.body) == 0 {
			m.body = []byte("{}")
			return
		}
		m.body = m.body[:len(m.body)-1]
	}, webhook.ErrNoValidSignature},
	{"signature: one bit flipped", func(r *rand.Rand, m *message) {
		_, sig, _ := strings.Cut(m.header.Get("webhook-signature"), ",")
		mac, _ := base64.StdEncoding.DecodeString(sig)
		mac[r.IntN(len(mac))] ^= 1 << r.IntN(8)
		m.header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac))
	}, webhook.ErrNoValidSignature},
	{"signature: version v1a", func(r *rand.Rand, m *message) {
		m.header.Set("webhook-signature", "v1a"+strings.TrimPrefix(m.header.Get("webhook-signature"), "v1"))
	}, webhook.ErrNoValidSignature},
	{"signature: unpadded", func(r *rand.Rand, m *message) {
		m.header.Set("webhook-signature", strings.TrimSuffix(m.header.Get("webhook-signature"), "="))
	}, webhook.ErrNoValidSignature},
	{"signature: truncated", func(r *rand.Rand, m *message) {
		sig := m.header.Get("webhook-signature")
		m.header.Set("webhook-signature", sig[:len(sig)-5]+"=")
	}, webhook.ErrNoValidSignature},
}

// TestTampered: a change to any part of a signed message is refused, by
// us and by the official library, with the sentinel that says why.
func TestTampered(t *testing.T) {
	t.Parallel()
	for k, tc := range tampers {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(uint64(k), 7))
			for i := range 200 {
				s := mustSecret(t)
				now := time.Now().Truncate(time.Second)
				m := randomMessage(t, r, now, s)
				tc.do(r, &m)
				err := webhook.Verifier{Secrets: []webhook.Secret{s}, Now: func() time.Time { return now }}.Verify(m.header, m.body)
				switch {
				case err == nil:
					t.Fatalf("message %d: tampered, and verified", i)
				case tc.want != nil && !errors.Is(err, tc.want):
					t.Fatalf("message %d: %v, want %v", i, err, tc.want)
				}
				if official(t, s).Verify(m.body, m.header) == nil {
					t.Fatalf("message %d: tampered, and the official library verifies it", i)
				}
			}
		})
	}
}

// TestTolerance: within 5 minutes either way a message verifies; one
// second beyond, it is refused as too old or too new, whatever its
// signature (a replay outside the window is refused before any MAC).
func TestTolerance(t *testing.T) {
	t.Parallel()
	s := mustSecret(t)
	r := rand.New(rand.NewPCG(8, 9))
	at := time.Unix(1_700_000_000, 0)
	m := randomMessage(t, r, at, s)
	cases := []struct {
		receiver  time.Time // the receiver's clock
		tolerance time.Duration
		want      error
	}{
		{at, 0, nil},
		{at.Add(5 * time.Minute), 0, nil},
		{at.Add(5*time.Minute + 999*time.Millisecond), 0, nil}, // still second 300
		{at.Add(5*time.Minute + time.Second), 0, webhook.ErrTooOld},
		{at.Add(24 * time.Hour), 0, webhook.ErrTooOld},
		{at.Add(-5 * time.Minute), 0, nil},
		{at.Add(-5*time.Minute - time.Second), 0, webhook.ErrTooNew},
		{at.Add(-365 * 24 * time.Hour), 0, webhook.ErrTooNew},
		{at.Add(30 * time.Second), 30 * time.Second, nil},
		{at.Add(31 * time.Second), 30 * time.Second, webhook.ErrTooOld},
		{at.Add(-31 * time.Second), 30 * time.Second, webhook.ErrTooNew},
		{at.Add(5 * time.Minute), -time.Second, nil}, // below zero: the default
		{at.Add(6 * time.Minute), -time.Second, webhook.ErrTooOld},
	}
	for _, c := range cases {
		is := is.New(t)
		v := webhook.Verifier{Secrets: []webhook.Secret{s}, Tolerance: c.tolerance, Now: func() time.Time { return c.receiver }}
		err := v.Verify(m.header, m.body)
		if c.want == nil {
			is.NoErr(err) // within the tolerance
			continue
		}
		is.True(errors.Is(err, c.want)) // outside it
		// A forged signature gets the same answer: the time is checked first.
		forged := m.header.Clone()
		forged.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32)))
		is.True(errors.Is(v.Verify(forged, m.body), c.want))
	}
	// The wall clock when Now is nil: a message of now verifies, one of
	// an hour ago does not.
	is := is.New(t)
	fresh := randomMessage(t, r, time.Now(), s)
	is.NoErr(webhook.Verify(fresh.header, fresh.body, s))
	old := randomMessage(t, r, time.Now().Add(-time.Hour), s)
	is.True(errors.Is(webhook.Verify(old.header, old.body, s), webhook.ErrTooOld))
}

// TestVerifyHeaders: what Verify makes of headers missing, repeated or
// not of their form, and of signature lists with other entries.
func TestVerifyHeaders(t *testing.T) {
	t.Parallel()
	s, other := mustSecret(t), mustSecret(t)
	at := time.Unix(1_700_000_000, 0)
	body := []byte(`{"ok":true}`)
	signed := http.Header{}
	if err := webhook.Sign(signed, "msg_1", at, body, s); err != nil {
		t.Fatal(err)
	}
	good := signed.Get("webhook-signature")
	otherSig, _ := webhook.Signature("msg_1", at, body, other)
	with := func(name string, values ...string) http.Header {
		h := signed.Clone()
		h.Del(name)
		for _, v := range values {
			h.Add(name, v)
		}
		return h
	}
	lower := http.Header{"webhook-id": {"msg_1"}, "webhook-timestamp": {"1700000000"}, "webhook-signature": {good}}
	cases := []struct {
		name string
		h    http.Header
		want error // nil: verifies
	}{
		{"as signed", signed, nil},
		{"lowercase keys", lower, nil},
		{"no id", with("webhook-id"), webhook.ErrMissingHeader},
		{"no timestamp", with("webhook-timestamp"), webhook.ErrMissingHeader},
		{"no signature", with("webhook-signature"), webhook.ErrMissingHeader},
		{"empty id", with("webhook-id", ""), webhook.ErrMissingHeader},
		{"empty signature", with("webhook-signature", ""), webhook.ErrMissingHeader},
		{"no headers", http.Header{}, webhook.ErrMissingHeader},
		{"two ids", with("webhook-id", "msg_1", "msg_2"), webhook.ErrMalformedHeader},
		{"two timestamps", with("webhook-timestamp", "1700000000", "1700000000"), webhook.ErrMalformedHeader},
		{"two signature headers", with("webhook-signature", good, good), webhook.ErrMalformedHeader},
		{"id with a full stop", with("webhook-id", "msg.1"), webhook.ErrMalformedHeader},
		{"id too long", with("webhook-id", strings.Repeat("a", webhook.MaxIDLength+1)), webhook.ErrMalformedHeader},
		{"timestamp with a plus", with("webhook-timestamp", "+1700000000"), webhook.ErrMalformedHeader},
		{"timestamp negative", with("webhook-timestamp", "-1700000000"), webhook.ErrMalformedHeader},
		{"timestamp with a leading zero", with("webhook-timestamp", "01700000000"), webhook.ErrMalformedHeader},
		{"timestamp with a fraction", with("webhook-timestamp", "1700000000.5"), webhook.ErrMalformedHeader},
		{"timestamp in milliseconds", with("webhook-timestamp", "1700000000000"), webhook.ErrMalformedHeader},
		{"timestamp as a date", with("webhook-timestamp", "2023-11-14T22:13:20Z"), webhook.ErrMalformedHeader},
		{"timestamp with a space", with("webhook-timestamp", " 1700000000"), webhook.ErrMalformedHeader},
		{"timestamp huge", with("webhook-timestamp", "99999999999999999999"), webhook.ErrMalformedHeader},
		{"another secret's signature", with("webhook-signature", otherSig), webhook.ErrNoValidSignature},
		{"ours among others", with("webhook-signature", "v1a,abc v2,xyz v1, v1,!!!! junk "+otherSig+" "+good+" v1,"), nil},
		{"spaces around", with("webhook-signature", "  "+good+"  "), nil},
		{"version v2 with our MAC", with("webhook-signature", "v2"+strings.TrimPrefix(good, "v1")), webhook.ErrNoValidSignature},
		{"no comma", with("webhook-signature", strings.Replace(good, ",", "", 1)), webhook.ErrNoValidSignature},
		{"MAC only", with("webhook-signature", strings.TrimPrefix(good, "v1,")), webhook.ErrNoValidSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			v := webhook.Verifier{Secrets: []webhook.Secret{s}, Now: func() time.Time { return at }}
			err := v.Verify(c.h, body)
			if c.want == nil {
				is.NoErr(err) // verifies
				return
			}
			is.True(errors.Is(err, c.want)) // the sentinel
			for _, value := range c.h {
				for _, text := range value {
					if len(text) > 8 {
						is.True(!strings.Contains(err.Error(), text)) // no header quoted
					}
				}
			}
		})
	}
	t.Run("secrets", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		now := func() time.Time { return at }
		is.True(errors.Is(webhook.Verifier{Now: now}.Verify(signed, body), webhook.ErrNoValidSignature))                                  // none
		is.True(errors.Is(webhook.Verifier{Secrets: []webhook.Secret{s, {}}, Now: now}.Verify(signed, body), webhook.ErrInvalidSecret))   // a zero one
		is.NoErr(webhook.Verifier{Secrets: []webhook.Secret{other, s}, Now: now}.Verify(signed, body))                                    // the second of two
		is.NoErr(webhook.Verifier{Secrets: []webhook.Secret{other}, Now: now}.Verify(with("webhook-signature", good+" "+otherSig), body)) // a rotation's
	})
}
