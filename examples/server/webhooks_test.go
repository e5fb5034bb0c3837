package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/testenv"
	"github.com/formsapi/formsapi/sqlitestore"
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
	is.True(strings.Contains(out.String(), m[1]+"\t"+rc.URL+"/hook\tevery form\tno filter\tenabled\n"))
	is.True(regexp.MustCompile(`\n  form \S+: delivered up to position [1-9]`).MatchString(out.String())) // a form with deliveries
	is.True(!strings.Contains(out.String(), m[2]))                                                        // the secret is shown only once
}

// TestEndpointFilterFlag: -endpoint-filter gives the new endpoint a
// filter, printed and listed in its canonical text; a filter the list
// would refuse is an error naming the clause, and adds no endpoint.
func TestEndpointFilterFlag(t *testing.T) {
	is := is.New(t)
	db := filepath.Join(t.TempDir(), "forms.db")
	var out bytes.Buffer
	args := []string{"-db", db, "-new-endpoint", "demo", "-endpoint-url", "http://127.0.0.1:9/hook", "-webhook-allow-loopback"}
	err := run(context.Background(), append(args, "-endpoint-filter", "filter[rating][gte]=true"), &out, io.Discard)
	is.True(err != nil)                                                   // a range on true
	is.True(strings.Contains(err.Error(), "invalid filter[rating][gte]")) // the message names the clause
	is.NoErr(run(context.Background(), append(args, "-endpoint-filter", "filter[rating][gte]=4&q=Refund"), &out, io.Discard))
	canon := "filter%5Brating%5D%5Bgte%5D=4&q=refund"
	is.True(strings.Contains(out.String(), "\nfilter: "+canon+"\n")) // shown back, canonical
	out.Reset()
	is.NoErr(run(context.Background(), []string{"-db", db, "-list-endpoints", "demo"}, &out, io.Discard))
	is.Equal(strings.Count(out.String(), "\tfilter "+canon+"\tenabled\n"), 1) // one endpoint, the refused one not added
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

// TestWebhookRefsAreTheFeeds is issue 42's third finding on SQLite (and
// TestPostgresWebhookRefsAreTheFeeds on PostgreSQL): in the server's
// default set-up, without -cursor-secret-file, the dispatcher seals with
// the secret the store keeps, as the handler does. Every event's ref is
// the feed's ref of its submission (0 of 13 were), and a thin event's URL
// answers 200 with it (it answered 400 invalid sync).
func TestWebhookRefsAreTheFeeds(t *testing.T) {
	db := filepath.Join(t.TempDir(), "forms.db")
	checkWebhookRefs(t, []string{"-db", db}, func(t *testing.T) formsapi.Writer {
		s, err := sqlitestore.Open(db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// checkWebhookRefs registers an endpoint of the demo account with the
// server's store args (and no secret), runs the server with -webhooks,
// adds a submission too large for an event to carry through the store
// that open returns, and checks every delivery against the feed.
func checkWebhookRefs(t *testing.T, args []string, open func(t *testing.T) formsapi.Writer) {
	is := is.New(t)
	var mu sync.Mutex
	var got []webhookEvent
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev webhookEvent
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Errorf("a delivery that is not JSON: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ev)
	}))
	t.Cleanup(rc.Close)
	is.NoErr(run(context.Background(), append(args, "-new-endpoint", "demo", "-endpoint-url", rc.URL, "-webhook-allow-loopback"), io.Discard, io.Discard))
	srv := startArgs(t, append(args, "-webhooks", "-webhook-allow-loopback", "-webhook-poll", "20ms")...)
	big := fmt.Sprintf(`{"note":%q}`, strings.Repeat("x", webhook.MaxSubmissionBytes))
	is.NoErr(open(t).AddSubmission(context.Background(), formsapi.Submission{FormID: "contact", Data: []byte(big)}, formsapi.Metadata{}))

	// Every form's refs, in the feed, from its start.
	code, body := srv.get(t, "/v1/forms", srv.key)
	is.Equal(code, 200)
	var forms struct{ Forms []struct{ FormID string } }
	is.NoErr(json.Unmarshal(body, &forms))
	refs := map[string][]string{}
	total := 0
	for _, f := range forms.Forms {
		code, body := srv.get(t, "/v1/forms/"+f.FormID+"/submissions?sync=start&limit=1000", srv.key)
		is.Equal(code, 200)
		var page struct{ Refs []string }
		is.NoErr(json.Unmarshal(body, &page))
		refs[f.FormID] = page.Refs
		total += len(page.Refs)
	}
	is.True(total > 10) // the demo data and the big one
	events := func() []webhookEvent {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	testenv.WaitFor(t, func() bool { return len(events()) >= total })
	thin := 0
	for _, ev := range events() {
		if !slices.Contains(refs[ev.Data.FormID], ev.Data.Ref) {
			t.Errorf("an event of form %s has ref %s, which the feed does not give (%v)", ev.Data.FormID, ev.Data.Ref, refs[ev.Data.FormID])
		}
		if ev.Data.Thin {
			thin++
			code, body := srv.get(t, ev.Data.URL, srv.key)
			var page struct{ Refs []string }
			is.NoErr(json.Unmarshal(body, &page))
			is.Equal(code, 200)                        // the thin event's URL answers
			is.Equal(page.Refs, []string{ev.Data.Ref}) // with its submission alone
		}
	}
	is.NoErr(srv.stop())
	is.Equal(thin, 1) // the big submission's event
}

// webhookEvent is what the tests read of a delivery's body.
type webhookEvent struct {
	Type string
	Data struct {
		FormID string
		Ref    string
		Thin   bool
		URL    string
	}
}
