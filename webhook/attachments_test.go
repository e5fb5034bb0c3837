package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/webhook"
)

// TestAttachmentURLsInEvents: on memstore, SQLite and PostgreSQL, a
// dispatcher given WithAttachmentURLs sends each submission.created
// event's attachments with URLs the signer made (which its own check
// accepts) as of the attempt's time, and signs a retry afresh: an hour
// later, the retry's URLs expire an hour later than the first attempt's,
// under the same webhook-id; the data is sent as stored, and an
// attachment-less submission's event is as without the option.
func TestAttachmentURLsInEvents(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c storeCase) {
		r := newStoreRig(t, c, []byte("the attachment test's cursor secret"), "f")
		key := []byte("signing key")
		const lifetime = 10 * time.Minute
		mac := func(account, form, u string, exp int64) string {
			m := hmac.New(sha256.New, key)
			fmt.Fprintf(m, "%s\x00%s\x00%s\x00%d", account, form, u, exp)
			return hex.EncodeToString(m.Sum(nil))
		}
		sign := func(_ context.Context, account, form string, a formsapi.Attachment, at time.Time) (string, error) {
			exp := at.Add(lifetime).Unix()
			return a.FileURL + "?exp=" + strconv.FormatInt(exp, 10) + "&sig=" + mac(account, form, a.FileURL, exp), nil
		}
		// verify returns the stored URL and the expiry of a URL sign made.
		verify := func(u string) (string, int64) {
			stored, q, _ := strings.Cut(u, "?exp=")
			exp, sig, _ := strings.Cut(q, "&sig=")
			e, err := strconv.ParseInt(exp, 10, 64)
			if err != nil || !hmac.Equal([]byte(sig), []byte(mac(account, "f", stored, e))) {
				t.Fatalf("URL %q: not one the signer made", u)
			}
			return stored, e
		}
		disp := webhook.NewDispatcher(r.store, r.store, []byte("the attachment test's cursor secret"),
			webhook.WithClock(r.clock.Now), webhook.WithEgress(webhook.Egress{AllowHTTP: true, AllowLoopback: true}),
			webhook.WithRand(func() float64 { return 0.5 }), webhook.WithAPIBase("https://api.example.com"),
			webhook.WithAttachmentURLs(sign))
		t.Cleanup(disp.Close)
		rc := newReceiver(t)
		rc.setAnswer(func(n int, _ delivery, w http.ResponseWriter) {
			if n == 0 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		if _, err := r.eps.Add(r.ctx, account, rc.srv.URL, nil); err != nil {
			t.Fatal(err)
		}
		stored := "https://files.example.com/f/1.pdf?x=1&y=2"
		data := `{"note":{"attachments":[{"fileUrl":"https://evil.example/steal"}]}}`
		sub := formsapi.Submission{FormID: "f", Data: []byte(data), Attachments: []formsapi.Attachment{{FieldName: "cv", FileURL: stored, FileSize: 3, MIMEType: "application/pdf"}}}
		if err := r.store.AddSubmission(r.ctx, sub, formsapi.Metadata{ID: "with"}); err != nil {
			t.Fatal(err)
		}
		r.add("f", "without", false)

		first := r.clock.Now()
		disp.Step(r.ctx) // the first attempt fails
		r.clock.Advance(time.Hour)
		disp.Step(r.ctx) // the retry, and the next entry
		ds := rc.deliveries()
		if len(ds) != 3 {
			t.Fatalf("%d deliveries %v, want 3", len(ds), summary(ds))
		}
		var exps []int64
		for i, d := range ds[:2] {
			var s formsapi.Submission
			if err := json.Unmarshal(d.sub, &s); err != nil {
				t.Fatal(err)
			}
			if len(s.Attachments) != 1 || string(s.Data) != data {
				t.Fatalf("delivery %d: %s", i, d.sub)
			}
			u, exp := verify(s.Attachments[0].FileURL)
			if u != stored {
				t.Fatalf("delivery %d: signed %q, stored %q", i, u, stored)
			}
			exps = append(exps, exp)
		}
		if ds[0].id() != ds[1].id() {
			t.Fatalf("the retry's webhook-id %q, the first's %q", ds[1].id(), ds[0].id())
		}
		if want := first.Add(lifetime).Unix(); exps[0] != want || exps[1] != want+3600 {
			t.Fatalf("expiries %v, want %d and %d: signed as of each attempt", exps, want, want+3600)
		}
		if strings.Contains(string(ds[2].sub), "exp=") || !strings.Contains(string(ds[2].sub), `"attachments":[]`) {
			t.Fatalf("the attachment-less event: %s", ds[2].sub)
		}
	})
}

// TestSlowEventIsSentNextPass: an event whose making outlasts the pass's
// poll interval (here a signer that takes two of them on the clock; in
// CI, a 256 KiB submission encoded under -race beside a 20 ms poll) is
// not attempted with settings read longer ago than the interval, and is
// sent by the next pass as made, not made again: before, every pass made
// it anew, ran out of time again, and the event was never sent.
func TestSlowEventIsSentNextPass(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f")
	const poll = time.Second
	signs := 0
	sign := func(_ context.Context, _, _ string, a formsapi.Attachment, _ time.Time) (string, error) {
		signs++
		r.clock.Advance(2 * poll)
		return a.FileURL + "?signed", nil
	}
	disp := webhook.NewDispatcher(r.store, r.store, r.secret, r.options(webhook.WithAttachmentURLs(sign), webhook.WithPollInterval(poll))...)
	t.Cleanup(disp.Close)
	rc := newReceiver(t)
	r.endpoint(rc.srv.URL + "/hook")
	sub := formsapi.Submission{FormID: "f", Data: []byte(`{}`), Attachments: []formsapi.Attachment{{FieldName: "cv", FileURL: "https://files.example.com/1.pdf", FileSize: 3, MIMEType: "application/pdf"}}}
	if err := r.store.AddSubmission(r.ctx, sub, formsapi.Metadata{}); err != nil {
		t.Fatal(err)
	}
	disp.Step(r.ctx)
	if n := rc.count(); n != 0 {
		t.Fatalf("%d deliveries after a pass whose time ran out making the event, want 0", n)
	}
	disp.Step(r.ctx)
	ds := rc.deliveries()
	if len(ds) != 1 {
		t.Fatalf("%d deliveries after the next pass, want the event made by the first", len(ds))
	}
	if signs != 1 {
		t.Errorf("the attachment was signed %d times, want once", signs)
	}
	if !strings.Contains(string(ds[0].body), `https://files.example.com/1.pdf?signed`) {
		t.Errorf("the event sent is not the one made: %s", ds[0].body)
	}
}
