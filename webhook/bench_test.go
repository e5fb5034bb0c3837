package webhook_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
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

// BenchmarkDispatchFilter is the dispatcher's CPU per feed entry (the
// process's user and system time, syscall.Getrusage, as cpu-ns/entry;
// the loopback receiver's share included, the same in each), over
// memstore, for an endpoint without a filter (the baseline: every entry
// sent) and with a filter of two clauses (an equality and a range) that
// keeps every addition (each one checked, then sent), half of them, or
// none (checked and passed over, a cursor write a batch). Submissions are
// of about 400 bytes, added before the timer starts; one Step sends
// them all.
//
//	go test -run '^$' -bench BenchmarkDispatchFilter -benchtime 5000x -count 5 ./webhook
func BenchmarkDispatchFilter(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	for _, c := range []struct{ name, filter string }{
		{"unfiltered", ""},
		{"keeps-all", "filter[kind][in]=keep,half&filter[n][gte]=0"},
		{"keeps-half", "filter[kind]=keep&filter[n][gte]=0"},
		{"keeps-none", "filter[kind]=other&filter[n][gte]=0"},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			clock := storetest.NewClock(time.Unix(1_767_225_600, 0))
			s := memstore.New(memstore.WithClock(clock.Now))
			if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "f", Title: "f"}); err != nil {
				b.Fatal(err)
			}
			secret := []byte("the dispatch benchmark's cursor secret")
			opts := []webhook.Option{webhook.WithClock(clock.Now), webhook.WithEgress(webhook.Egress{AllowHTTP: true, AllowLoopback: true})}
			eps := webhook.NewEndpoints(s, s, secret, opts...)
			e, err := eps.AddFiltered(ctx, "acct", srv.URL, nil, c.filter)
			if err != nil {
				b.Fatal(err)
			}
			msg := strings.Repeat("lorem ipsum dolor sit amet ", 10)
			for i := range b.N {
				kind := "keep"
				if i%2 == 1 {
					kind = "half"
				}
				data := fmt.Sprintf(`{"id":"%d","kind":%q,"n":%d,"email":"user%d@example.com","message":%q}`, i, kind, i, i, msg)
				if err := s.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(data)}, formsapi.Metadata{}); err != nil {
					b.Fatal(err)
				}
			}
			d := webhook.NewDispatcher(s, s, secret, opts...)
			defer d.Close()
			before := cpuTime()
			b.ResetTimer()
			d.Step(ctx)
			b.StopTimer()
			used := cpuTime() - before
			_, streams, err := eps.Get(ctx, "acct", e.ID)
			if err != nil || len(streams) != 1 || streams[0].Cursor != int64(b.N) {
				b.Fatalf("after the step: %+v, %v; want the cursor at %d", streams, err, b.N)
			}
			b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/entry")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
