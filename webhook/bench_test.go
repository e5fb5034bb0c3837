package webhook_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/formsapi/formsapi/webhook"
)

// benchBody is a delivery's body of n bytes.
func benchBody(n int) []byte {
	return bytes.Repeat([]byte(`{"k":"v"},`), n/10+1)[:n]
}

// BenchmarkSign signs one attempt (the three headers), with one secret and
// with the two of a rotation. The baseline is the least any signer does:
// one HMAC-SHA256 of id.timestamp.body and its base64, without headers.
func BenchmarkSign(b *testing.B) {
	s1, s2 := mustSecret(b), mustSecret(b)
	key, _ := base64.StdEncoding.DecodeString(s1.Reveal()[len("whsec_"):])
	id := webhook.MessageID("submission.created", "q3vbP0Qm5a0CwR0oI3QJxA")
	at := time.Unix(1_767_225_600, 0)
	for _, size := range []int{1 << 10, 256 << 10} {
		body := benchBody(size)
		name := strconv.Itoa(size>>10) + "KiB"
		b.Run(name+"/baseline", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				m := hmac.New(sha256.New, key)
				m.Write([]byte(id + "." + strconv.FormatInt(at.Unix(), 10) + "."))
				m.Write(body)
				_ = "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
			}
		})
		b.Run(name+"/one-secret", func(b *testing.B) {
			b.SetBytes(int64(size))
			h := http.Header{}
			for b.Loop() {
				if err := webhook.Sign(h, id, at, body, s1); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/rotation", func(b *testing.B) {
			b.SetBytes(int64(size))
			h := http.Header{}
			for b.Loop() {
				if err := webhook.Sign(h, id, at, body, s1, s2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerify verifies one delivery against the baseline of
// BenchmarkSign (one HMAC, no parsing).
func BenchmarkVerify(b *testing.B) {
	s := mustSecret(b)
	id := webhook.MessageID("submission.created", "q3vbP0Qm5a0CwR0oI3QJxA")
	at := time.Unix(1_767_225_600, 0)
	v := webhook.Verifier{Secrets: []webhook.Secret{s}, Now: func() time.Time { return at }}
	for _, size := range []int{1 << 10, 256 << 10} {
		body := benchBody(size)
		h := http.Header{}
		if err := webhook.Sign(h, id, at, body, s); err != nil {
			b.Fatal(err)
		}
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if err := v.Verify(h, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClient posts a 1 KiB delivery to a loopback receiver over a
// kept-alive connection, with the Egress client and, as the baseline, a
// plain http.Client: the difference is the URL check per request and
// the rest of the Egress client's settings (the dial check runs only
// when a connection is made).
func BenchmarkClient(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	body := benchBody(1 << 10)
	run := func(b *testing.B, c *http.Client) {
		for b.Loop() {
			res, err := c.Post(srv.URL, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
	b.Run("baseline", func(b *testing.B) { run(b, &http.Client{Transport: &http.Transport{}}) })
	b.Run("egress", func(b *testing.B) { run(b, webhook.Egress{AllowHTTP: true, AllowLoopback: true}.Client()) })
}
