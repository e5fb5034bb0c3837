package webhook_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/testenv"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/webhook"
)

// TestRotation: during a rotation's overlap every delivery carries a
// signature by the new secret and one by the old, each of which verifies
// alone (with Verify and the official library); after it, the new one
// alone.
func TestRotation(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f1")
	rc := newReceiver(t)
	e := r.endpoint(rc.srv.URL)
	old := e.Secrets[0].Secret
	fresh, err := r.eps.RotateSecret(r.ctx, account, e.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	r.add("f1", "during")
	r.disp.Step(r.ctx)
	r.clock.Advance(time.Hour)
	r.add("f1", "after")
	r.disp.Step(r.ctx)
	ds := rc.deliveries()
	if len(ds) != 2 {
		t.Fatalf("%d deliveries, want 2", len(ds))
	}
	during, after := ds[0], ds[1]
	if n := len(strings.Fields(during.header.Get(webhook.HeaderSignature))); n != 2 {
		t.Errorf("during the overlap: %d signatures, want 2", n)
	}
	for _, s := range []webhook.Secret{old, fresh} {
		if err := official(t, s).Verify(during.body, during.header); err != nil {
			t.Errorf("a delivery during the overlap does not verify with one of the secrets: %v", err)
		}
	}
	if n := len(strings.Fields(after.header.Get(webhook.HeaderSignature))); n != 1 {
		t.Errorf("after the overlap: %d signatures, want 1", n)
	}
	if err := (webhook.Verifier{Secrets: []webhook.Secret{old}, Now: r.clock.Now}).Verify(after.header, after.body); err == nil {
		t.Errorf("after the overlap, the old secret still verifies")
	}
	if err := (webhook.Verifier{Secrets: []webhook.Secret{fresh}, Now: r.clock.Now}).Verify(after.header, after.body); err != nil {
		t.Errorf("after the overlap, the new secret does not verify: %v", err)
	}
	got, _, _ := r.eps.Get(r.ctx, account, e.ID)
	if len(got.Secrets) != 2 || got.Secrets[0].Secret.Reveal() != fresh.Reveal() || !got.Secrets[1].Until.Equal(r.clock.Now()) {
		t.Errorf("stored secrets after the rotation: %d, the first the new one: %v", len(got.Secrets), got.Secrets[0].Secret.Reveal() == fresh.Reveal())
	}
	if _, err := r.eps.RotateSecret(r.ctx, account, e.ID, 0); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := r.eps.Get(r.ctx, account, e.ID); len(got.Secrets) != 1 {
		t.Errorf("a rotation without overlap kept %d secrets", len(got.Secrets))
	}
}

// TestReplay: from a sync token, from a time, and from the start, the
// entries come again from the feed, in order, with the same webhook-ids
// and bodies, and the ones never sent come too.
func TestReplay(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f1")
	rc := newReceiver(t)
	e := r.endpoint(rc.srv.URL)
	r.add("f1", "1")
	r.disp.Step(r.ctx)
	_, afterFirst := r.feed("f1", "start")
	r.clock.Advance(time.Minute)
	since := r.clock.Now()
	r.add("f1", "2")
	r.del("f1", "1")
	r.disp.Step(r.ctx)
	sent := rc.deliveries()
	if len(sent) != 3 {
		t.Fatalf("%d deliveries, want 3", len(sent))
	}
	r.add("f1", "3") // committed, not yet sent: the replay includes it
	check := func(name string, want []delivery) {
		t.Helper()
		n := rc.count()
		r.disp.Step(r.ctx)
		got := rc.deliveries()[n:]
		if len(got) != len(want)+1 {
			t.Fatalf("%s: %d deliveries (%v), want %d and the entry never sent", name, len(got), summary(got), len(want)+1)
		}
		for i, w := range want {
			if got[i].id() != w.id() || !bytes.Equal(got[i].body, w.body) {
				t.Errorf("%s: delivery %d is %s %s, want %s %s again", name, i, got[i].typ, got[i].id(), w.typ, w.id())
			}
		}
		if got[len(want)].sub == nil || !strings.Contains(string(got[len(want)].sub), `"3"`) {
			t.Errorf("%s: the last delivery is %s, want submission 3", name, got[len(want)].body)
		}
	}
	if err := r.eps.Replay(r.ctx, account, e.ID, "f1", afterFirst); err != nil {
		t.Fatal(err)
	}
	check("from the token after the first", sent[1:])
	if err := r.eps.ReplaySince(r.ctx, account, e.ID, "f1", since); err != nil {
		t.Fatal(err)
	}
	check("since the second's createdAt", sent[1:])
	if err := r.eps.Replay(r.ctx, account, e.ID, "f1", ""); err != nil {
		t.Fatal(err)
	}
	// From the start: the first submission is deleted, a gap there, so
	// the feed holds 2, the deletion of 1, then 3.
	check("from the start", sent[1:])
	for _, bad := range []string{"not a token", afterFirst + "x"} {
		if err := r.eps.Replay(r.ctx, account, e.ID, "f1", bad); err == nil {
			t.Errorf("Replay with token %q: no error", bad)
		}
	}
	if err := r.eps.Replay(r.ctx, account, e.ID, "f2", ""); err == nil {
		t.Errorf("Replay of a form that is not the account's: no error")
	}
}

// TestRetentionStopsForResync: an endpoint whose cursor falls behind the
// feed's tombstone retention is stopped for that form, never sent on
// past a forgotten deletion; a replay from the start (a resync) sends the
// form as it is now and resumes.
func TestRetentionStopsForResync(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.store = memstore.New(memstore.WithClock(r.clock.Now), memstore.WithTombstoneRetention(time.Hour))
	if err := r.store.AddKey(r.ctx, r.key, account); err != nil {
		t.Fatal(err)
	}
	r.api = formsapi.NewHandler(r.store, r.store, formsapi.WithCursorSecret(r.secret))
	r.eps = webhook.NewEndpoints(r.store, r.store, r.secret, r.options()...)
	r.disp = webhook.NewDispatcher(r.store, r.store, r.secret, r.options()...)
	t.Cleanup(r.disp.Close)
	for _, f := range []string{"f1", "f2"} {
		if err := r.store.AddForm(r.ctx, account, formsapi.Form{ID: f}); err != nil {
			t.Fatal(err)
		}
	}
	rc := newReceiver(t)
	e := r.endpoint(rc.srv.URL)
	r.add("f1", "1")
	r.add("f1", "2")
	r.disp.Step(r.ctx)
	rc.setAnswer(func(_ int, _ delivery, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
	r.del("f1", "1") // the receiver is down: not delivered
	r.clock.Advance(2 * time.Hour)
	r.add("f1", "3")
	r.del("f1", "3") // forgets the deletion of 1, past retention
	r.add("f2", "x")
	rc.setAnswer(nil)
	n := rc.count()
	r.disp.Step(r.ctx)
	for _, d := range rc.deliveries()[n:] {
		if d.form == "f1" {
			t.Errorf("sent %s of f1 past a forgotten deletion", d.typ)
		}
	}
	_, st, _ := r.eps.Get(r.ctx, account, e.ID)
	var f1 webhook.Stream
	for _, s := range st {
		if s.FormID == "f1" {
			f1 = s
		}
	}
	if !f1.Resync {
		t.Fatalf("f1's stream %+v, want Resync", f1)
	}
	if ds := rc.deliveries()[n:]; len(ds) != 1 || ds[0].form != "f2" {
		t.Errorf("the other form did not go on: %v", summary(ds))
	}
	if err := r.eps.Replay(r.ctx, account, e.ID, "f1", ""); err != nil {
		t.Fatal(err)
	}
	n = rc.count()
	r.disp.Step(r.ctx)
	want, _ := r.feed("f1", "start")
	checkMatches(t, rc.deliveries()[n:], want)
}

// TestFencing: a dispatcher paused past its lease, whose endpoint
// another took over, moves no cursor and sends nothing more once it
// wakes; the one that took over delivers everything, the paused
// attempt's event once more at most.
func TestFencing(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f1")
	rc := newReceiver(t)
	release := make(chan struct{})
	rc.setAnswer(func(n int, _ delivery, _ http.ResponseWriter) {
		if n == 0 {
			<-release // the first dispatcher's first attempt hangs
		}
	})
	e := r.endpoint(rc.srv.URL)
	for i := range 3 {
		r.add("f1", fmt.Sprint(i))
	}
	paused := webhook.NewDispatcher(r.store, r.store, r.secret, r.options()...)
	done := make(chan struct{})
	go func() {
		paused.Step(r.ctx)
		close(done)
	}()
	testenv.WaitFor(t, func() bool { return rc.count() == 1 })
	r.clock.Advance(webhook.DefaultLease + time.Second)
	r.disp.Step(r.ctx) // takes the endpoint over and delivers all three
	close(release)
	<-done
	ds := rc.deliveries()
	if len(ds) != 4 || ds[0].id() != ds[1].id() {
		t.Fatalf("deliveries %v: want the paused attempt's event, then all three from the new holder", summary(ds))
	}
	_, st, _ := r.eps.Get(r.ctx, account, e.ID)
	end, _ := r.feed("f1", "start")
	if len(st) != 1 || st[0].Cursor != 3 || len(end) != 3 {
		t.Errorf("stream %+v: the paused dispatcher moved the cursor back, or not all were delivered", st)
	}
	r.add("f1", "more")
	paused.Step(r.ctx) // it lost the lease: it sends nothing
	if n := rc.count(); n != 4 {
		t.Errorf("the paused dispatcher sent on after losing its lease: %d deliveries", n)
	}
}

// TestBlackHoleIsolation: an endpoint that never answers holds back no
// other: the other endpoint gets every event while the black hole still
// holds its attempt.
func TestBlackHoleIsolation(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f1", "f2")
	hole := newReceiver(t)
	release := make(chan struct{})
	hole.setAnswer(func(int, delivery, http.ResponseWriter) { <-release })
	good := newReceiver(t)
	r.endpoint(hole.srv.URL)
	r.endpoint(good.srv.URL)
	for i := range 10 {
		r.add("f1", fmt.Sprint(i))
		r.add("f2", fmt.Sprint(i))
	}
	done := make(chan struct{})
	go func() {
		r.disp.Step(r.ctx)
		close(done)
	}()
	testenv.WaitFor(t, func() bool { return good.count() == 20 })
	if n := hole.count(); n > webhook.DefaultPerEndpoint {
		t.Errorf("the black hole holds %d attempts at once, more than the per-endpoint cap %d", n, webhook.DefaultPerEndpoint)
	}
	close(release)
	<-done
}

// TestThinEvent: a submission above MaxSubmissionBytes is sent thin, with
// the URL of a feed page that holds it alone; the page answers with the
// submission and the event's ref.
func TestThinEvent(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f1")
	rc := newReceiver(t)
	r.endpoint(rc.srv.URL)
	r.add("f1", "small")
	big := fmt.Sprintf(`{"blob":%q}`, strings.Repeat("x", webhook.MaxSubmissionBytes))
	if err := r.store.AddSubmission(r.ctx, formsapi.Submission{FormID: "f1", Data: []byte(big)}, formsapi.Metadata{}); err != nil {
		t.Fatal(err)
	}
	r.disp.Step(r.ctx)
	ds := rc.deliveries()
	if len(ds) != 2 || ds[0].thin || !ds[1].thin || ds[1].sub != nil || len(ds[1].body) > 1024 {
		t.Fatalf("deliveries: %v, thin %v %v, want the small one whole and the big one thin", summary(ds), ds[0].thin, ds[len(ds)-1].thin)
	}
	path, ok := strings.CutPrefix(ds[1].url, "https://api.example.com")
	if !ok {
		t.Fatalf("thin URL %q is not under the API base", ds[1].url)
	}
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+r.key)
	w := httptest.NewRecorder()
	r.api.ServeHTTP(w, req)
	var p struct {
		Submissions []struct {
			Data json.RawMessage `json:"data"`
		} `json:"submissions"`
		Refs []string `json:"refs"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 200 {
		t.Fatalf("GET the thin URL: %d %.200s", w.Code, w.Body)
	}
	if len(p.Submissions) != 1 || string(p.Submissions[0].Data) != big || p.Refs[0] != ds[1].ref {
		t.Errorf("the thin URL's page holds %d submissions (ref %v), want the big one with ref %s", len(p.Submissions), p.Refs, ds[1].ref)
	}
}
