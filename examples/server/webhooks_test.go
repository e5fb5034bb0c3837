package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/formsapi/formsapi/internal/testenv"
	"github.com/formsapi/formsapi/webhook"
	"github.com/matryer/is"
)

// TestWebhookFlags registers an endpoint with -new-endpoint (for every
// form of the demo account, before the server seeded them), runs the
// server with -webhooks, and checks the receiver gets the seeded
// submissions, each verifying with the secret printed once, and that
// -list-endpoints shows the endpoint and its forms' state.
func TestWebhookFlags(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "forms.db")
	var mu sync.Mutex
	var got []*http.Request
	var bodies [][]byte
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got, bodies = append(got, r), append(bodies, b)
	}))
	t.Cleanup(rc.Close)
	var out bytes.Buffer
	err := run(context.Background(), []string{"-db", db, "-new-endpoint", "demo", "-endpoint-url", rc.URL + "/hook"}, &out, io.Discard)
	is.True(err != nil)                                                     // a loopback URL without -webhook-allow-loopback
	is.True(strings.Contains(err.Error(), "needs -webhook-allow-loopback")) // which the message names
	is.NoErr(run(context.Background(), []string{"-db", db, "-new-endpoint", "demo", "-endpoint-url", rc.URL + "/hook", "-webhook-allow-loopback"}, &out, io.Discard))
	m := regexp.MustCompile(`new webhook endpoint (ep_\S+) for account "demo"\nsigning secret \(shown once\): (whsec_\S+)\n`).FindStringSubmatch(out.String())
	is.True(m != nil) // the ID and the secret, once
	secret, err := webhook.ParseSecret(m[2])
	is.NoErr(err)

	srv := start(t, db, "-webhooks", "-webhook-allow-loopback", "-webhook-poll", "20ms")
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	testenv.WaitFor(t, func() bool { return count() >= 6 })
	is.NoErr(srv.stop())
	mu.Lock()
	for i, r := range got {
		is.NoErr(webhook.Verify(r.Header, bodies[i], secret)) // every delivery verifies
		is.True(bytes.Contains(bodies[i], []byte(`"type":"submission.created"`)))
		is.True(!bytes.Contains(bodies[i], []byte("198.51.100."))) // no internal metadata
	}
	mu.Unlock()
	is.True(!strings.Contains(srv.out.String(), m[2])) // the secret is never logged

	out.Reset()
	is.NoErr(run(context.Background(), []string{"-db", db, "-list-endpoints", "demo"}, &out, io.Discard))
	is.True(strings.Contains(out.String(), m[1]+"\t"+rc.URL+"/hook\tevery form\tenabled\n"))
	is.True(regexp.MustCompile(`\n  form \S+: delivered up to position [1-9]`).MatchString(out.String())) // a form with deliveries
	is.True(!strings.Contains(out.String(), m[2]))                                                        // the secret is shown only once
}

// TestEndpointURLMessages: a refused -endpoint-url says why; the message
// names -webhook-allow-loopback for a receiver on this machine (http or
// https, by address or as localhost), which the flag would let through,
// and only for one.
func TestEndpointURLMessages(t *testing.T) {
	db := filepath.Join(t.TempDir(), "forms.db")
	for url, hint := range map[string]bool{
		"http://127.0.0.1:8081/hook":       true,
		"https://127.0.0.1/hook":           true,
		"http://localhost:3000/hook":       true,
		"http://[::1]:3000/hook":           true,
		"http://hooks.example.com/hook":    false, // public but plain http: the flag is no answer
		"https://10.0.0.8/hook":            false, // private, not this machine
		"https://user@hooks.example.com/x": false,
	} {
		_, err := command("-db", db, "-new-endpoint", "demo", "-endpoint-url", url)
		if err == nil {
			t.Errorf("-endpoint-url %s: accepted", url)
			continue
		}
		if got := strings.Contains(err.Error(), "-webhook-allow-loopback"); got != hint {
			t.Errorf("-endpoint-url %s: %v; names -webhook-allow-loopback: %v, want %v", url, err, got, hint)
		}
		if !strings.HasPrefix(err.Error(), "-endpoint-url: ") {
			t.Errorf("-endpoint-url %s: %v; want the flag named first", url, err)
		}
	}
}
