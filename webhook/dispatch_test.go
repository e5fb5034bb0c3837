package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/formsapi/formsapi/webhook"
)

const account = "acct-1"

// rig is one store with forms, a handler over it that gives the feed's
// refs and tokens, the host's Endpoints and a Dispatcher, all on one
// clock the test moves.
type rig struct {
	t      *testing.T
	ctx    context.Context
	clock  *storetest.Clock
	store  *memstore.Store
	secret []byte
	api    http.Handler
	key    string
	eps    *webhook.Endpoints
	disp   *webhook.Dispatcher
	rnd    float64
}

func newRig(t *testing.T, forms ...string) *rig {
	t.Helper()
	r := &rig{t: t, ctx: context.Background(), clock: storetest.NewClock(time.Now().UTC().Truncate(time.Second)), secret: []byte("cursor secret of the test"), rnd: 0.5}
	r.store = memstore.New(memstore.WithClock(r.clock.Now))
	for _, f := range forms {
		if err := r.store.AddForm(r.ctx, account, formsapi.Form{ID: f, Title: f}); err != nil {
			t.Fatal(err)
		}
	}
	r.key = newKey(t, r.store)
	r.api = formsapi.NewHandler(r.store, r.store, formsapi.WithCursorSecret(r.secret))
	opts := r.options()
	r.eps = webhook.NewEndpoints(r.store, r.store, r.secret, opts...)
	r.disp = webhook.NewDispatcher(r.store, r.store, r.secret, opts...)
	t.Cleanup(r.disp.Close)
	return r
}

// newKey adds an API key of account to store and returns it.
func newKey(t *testing.T, store interface {
	AddKey(ctx context.Context, key, accountID string) error
}) string {
	t.Helper()
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := store.AddKey(context.Background(), key, account); err != nil {
		t.Fatal(err)
	}
	return key
}

func (r *rig) options(more ...webhook.Option) []webhook.Option {
	return append([]webhook.Option{
		webhook.WithClock(r.clock.Now),
		webhook.WithEgress(webhook.Egress{AllowHTTP: true, AllowLoopback: true}),
		webhook.WithRand(func() float64 { return r.rnd }),
		webhook.WithAPIBase("https://api.example.com"),
	}, more...)
}

// add adds a submission with the given data to form, and a metadata ID
// of the same text, by which del deletes it.
func (r *rig) add(form, id string) {
	r.t.Helper()
	data := fmt.Sprintf(`{"id":%q}`, id)
	m := formsapi.Metadata{ID: id, ClientIP: storetest.Canary, UserAgent: storetest.Canary}
	if err := r.store.AddSubmission(r.ctx, formsapi.Submission{FormID: form, Data: []byte(data)}, m); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) del(form, id string) {
	r.t.Helper()
	if err := r.store.DeleteSubmission(r.ctx, account, form, id); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) endpoint(url string, forms ...string) webhook.Endpoint {
	r.t.Helper()
	e, err := r.eps.Add(r.ctx, account, url, forms)
	if err != nil {
		r.t.Fatalf("Add: %v", err)
	}
	return e
}

// feedEntry is one entry of the feed as the API gives it.
type feedEntry struct {
	typ, ref string
	sub      json.RawMessage
}

// feed reads form's feed through the API from token ("start" for the
// beginning), in commit order within each page (the API lists a page's
// items, then its deletions; the tests keep deletions after the
// additions they follow).
func (r *rig) feed(form, token string) ([]feedEntry, string) {
	r.t.Helper()
	var out []feedEntry
	for {
		req := httptest.NewRequest("GET", "/v1/forms/"+form+"/submissions?limit=1000&sync="+token, nil)
		req.Header.Set("Authorization", "Bearer "+r.key)
		w := httptest.NewRecorder()
		r.api.ServeHTTP(w, req)
		var p struct {
			Submissions []json.RawMessage `json:"submissions"`
			Refs        []string          `json:"refs"`
			Deleted     []string          `json:"deleted"`
			SyncToken   string            `json:"syncToken"`
			HasMore     bool              `json:"hasMore"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 200 {
			r.t.Fatalf("feed: %d %s", w.Code, w.Body)
		}
		for i, s := range p.Submissions {
			out = append(out, feedEntry{webhook.EventCreated, p.Refs[i], s})
		}
		for _, ref := range p.Deleted {
			out = append(out, feedEntry{typ: webhook.EventDeleted, ref: ref})
		}
		token = p.SyncToken
		if !p.HasMore {
			return out, token
		}
	}
}

// delivery is one request a receiver got.
type delivery struct {
	header http.Header
	body   []byte
	typ    string
	ref    string
	form   string
	sub    json.RawMessage
	thin   bool
	url    string
	ctx    context.Context // the request's: done when the sender gave up
}

func (d delivery) id() string { return d.header.Get(webhook.HeaderID) }

// receiver is an endpoint on loopback that records every request and
// answers as answer says (200 unless set).
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	got    []delivery
	answer func(n int, d delivery, w http.ResponseWriter) // n counts requests from 0
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{t: t}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ev struct {
			Type string `json:"type"`
			Data struct {
				FormID     string          `json:"formId"`
				Ref        string          `json:"ref"`
				Submission json.RawMessage `json:"submission"`
				Thin       bool            `json:"thin"`
				URL        string          `json:"url"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("a body that is not JSON: %v", err)
		}
		d := delivery{ctx: req.Context(), header: req.Header.Clone(), body: body, typ: ev.Type, ref: ev.Data.Ref, form: ev.Data.FormID, sub: ev.Data.Submission, thin: ev.Data.Thin, url: ev.Data.URL}
		rc.mu.Lock()
		n := len(rc.got)
		rc.got = append(rc.got, d)
		answer := rc.answer
		rc.mu.Unlock()
		if answer != nil {
			answer(n, d, w)
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

func (rc *receiver) setAnswer(f func(n int, d delivery, w http.ResponseWriter)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = f
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

// checkMatches checks that ds are exactly the feed's entries want, in
// order: type, ref and the submission as the API returns it.
func checkMatches(t *testing.T, ds []delivery, want []feedEntry) {
	t.Helper()
	if len(ds) != len(want) {
		t.Fatalf("got %d deliveries, want %d: %v", len(ds), len(want), summary(ds))
	}
	for i, w := range want {
		d := ds[i]
		if d.typ != w.typ || d.ref != w.ref {
			t.Errorf("delivery %d: %s of %s, want %s of %s", i, d.typ, d.ref, w.typ, w.ref)
		}
		if w.typ == webhook.EventCreated && !bytes.Equal(d.sub, w.sub) {
			t.Errorf("delivery %d: submission %s, want the API's %s", i, d.sub, w.sub)
		}
		if d.id() != webhook.MessageID(w.typ, w.ref) {
			t.Errorf("delivery %d: webhook-id %s, want MessageID(type, ref)", i, d.id())
		}
		if bytes.Contains(d.body, []byte(storetest.Canary)) {
			t.Errorf("delivery %d carries internal metadata: %s", i, d.body)
		}
	}
}

func summary(ds []delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = strings.TrimPrefix(d.typ, "submission.") + ":" + d.ref[:4]
	}
	return out
}

// TestDeliversTheFeedInOrder: an endpoint gets every entry committed
// after it was added, of the forms it follows, in commit order, each
// event exactly as the feed gives it (the submission as the API returns
// it, the deletion's ref), verified by Verify and the official Standard
// Webhooks library; and nothing of what came before it.
func TestDeliversTheFeedInOrder(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f1", "f2", "f3")
	r.add("f1", "old-1")
	r.add("f1", "old-2")
	rc := newReceiver(t)
	e := r.endpoint(rc.srv.URL+"/hook", "f1", "f2")
	_, start := r.feed("f1", "start")
	_, start2 := r.feed("f2", "start")
	r.add("f1", "a")
	r.add("f2", "x")
	r.del("f1", "old-1")
	r.add("f1", "b")
	r.del("f1", "a")
	r.add("f3", "not followed")
	r.disp.Step(r.ctx)

	want, _ := r.feed("f1", start)
	// a was deleted before the dispatcher read the feed, so its addition
	// is a gap there as in the API's feed: the page's items [b], its
	// deletions [old-1, a], in commit order delete old-1, b, delete a.
	want = []feedEntry{want[1], want[0], want[2]}
	var got1, got2 []delivery
	for _, d := range rc.deliveries() {
		switch d.form {
		case "f1":
			got1 = append(got1, d)
		case "f2":
			got2 = append(got2, d)
		default:
			t.Errorf("a delivery of form %q, which the endpoint does not follow", d.form)
		}
	}
	checkMatches(t, got1, want)
	want2, _ := r.feed("f2", start2)
	checkMatches(t, got2, want2)
	official := official(t, e.Secrets[0].Secret)
	for _, d := range rc.deliveries() {
		if err := webhook.Verify(d.header, d.body, e.Secrets[0].Secret); err != nil {
			t.Errorf("Verify: %v", err)
		}
		if err := official.Verify(d.body, d.header); err != nil {
			t.Errorf("the official library: %v", err)
		}
	}
	r.disp.Step(r.ctx)
	if n := rc.count(); n != 4 {
		t.Errorf("a second step sent more: %d deliveries, want 4", n)
	}
}

// TestEveryFormOfTheAccount: an endpoint without a list follows every
// form of its account, one created later from its first entry.
func TestEveryFormOfTheAccount(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f1")
	r.add("f1", "before")
	rc := newReceiver(t)
	r.endpoint(rc.srv.URL)
	r.add("f1", "after")
	if err := r.store.AddForm(r.ctx, account, formsapi.Form{ID: "later"}); err != nil {
		t.Fatal(err)
	}
	r.add("later", "l1")
	if err := r.store.AddForm(r.ctx, "acct-other", formsapi.Form{ID: "theirs"}); err != nil {
		t.Fatal(err)
	}
	r.add("theirs", "t1")
	r.disp.Step(r.ctx)
	var forms []string
	for _, d := range rc.deliveries() {
		forms = append(forms, d.form+":"+string(d.sub))
	}
	slices.Sort(forms)
	want := []string{`f1:{"formId":"f1","data":{"id":"after"},"attachments":[],"createdAt":"` + r.clock.Now().Format(time.RFC3339) + `"}`,
		`later:{"formId":"later","data":{"id":"l1"},"attachments":[],"createdAt":"` + r.clock.Now().Format(time.RFC3339) + `"}`}
	if !slices.Equal(forms, want) {
		t.Errorf("got %v, want %v", forms, want)
	}
}

// TestRetriesInOrder: a failed event holds back the form's next ones
// (one in flight), is tried again only when its wait is over, with the
// same webhook-id and body bytes and a new timestamp, and the other
// forms go on meanwhile.
func TestRetriesInOrder(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f1", "f2")
	rc := newReceiver(t)
	r.endpoint(rc.srv.URL, "f1", "f2")
	failing := ""
	rc.setAnswer(func(n int, d delivery, w http.ResponseWriter) {
		if d.form == "f1" && (failing == "" || failing == d.id()) && n < 3 {
			failing = d.id()
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	r.add("f1", "1")
	r.add("f1", "2")
	r.add("f2", "x")
	r.disp.Step(r.ctx)
	ds := rc.deliveries()
	if len(ds) != 2 {
		t.Fatalf("first step: %d deliveries (%v), want f1's first (failing) and f2's", len(ds), summary(ds))
	}
	r.clock.Advance(3 * time.Second) // the wait is 5 s
	r.disp.Step(r.ctx)
	if n := rc.count(); n != 2 {
		t.Fatalf("an attempt before the wait ended: %d deliveries", n)
	}
	r.clock.Advance(2 * time.Second)
	r.disp.Step(r.ctx) // the second attempt fails too: 5 min
	r.clock.Advance(5*time.Minute - time.Second)
	r.disp.Step(r.ctx)
	if n := rc.count(); n != 3 {
		t.Fatalf("after the second failure: %d deliveries, want 3", n)
	}
	r.clock.Advance(time.Second)
	r.disp.Step(r.ctx) // succeeds, and the next follows
	var f1 []delivery
	for _, d := range rc.deliveries() {
		if d.form == "f1" {
			f1 = append(f1, d)
		}
	}
	if len(f1) != 4 || f1[0].id() != f1[1].id() || f1[1].id() != f1[2].id() || f1[3].id() == f1[0].id() {
		t.Fatalf("f1's deliveries %v: want the first three times, then the second", summary(f1))
	}
	for i := 1; i < 3; i++ {
		if !bytes.Equal(f1[i].body, f1[0].body) {
			t.Errorf("attempt %d's body differs from the first's", i+1)
		}
		if f1[i].header.Get(webhook.HeaderTimestamp) == f1[0].header.Get(webhook.HeaderTimestamp) {
			t.Errorf("attempt %d has the first attempt's timestamp", i+1)
		}
	}
}

// TestSchedule follows an event that always fails through the whole
// schedule, on the clock: each attempt comes exactly when its wait (with
// the jitter the test fixes) ends, never before.
func TestSchedule(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f1")
	rc := newReceiver(t)
	rc.setAnswer(func(_ int, _ delivery, w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) })
	e := r.endpoint(rc.srv.URL)
	r.add("f1", "1")
	r.rnd = 0.25 // every wait is 90% of its step
	r.disp.Step(r.ctx)
	waits := append(webhook.Schedule[:], 10*time.Hour)
	for i, step := range waits {
		wait := step * 9 / 10
		r.clock.Advance(wait - time.Second)
		r.disp.Step(r.ctx)
		if n := rc.count(); n != i+1 {
			t.Fatalf("attempt %d came before its wait of %s ended", i+2, wait)
		}
		r.clock.Advance(time.Second)
		r.disp.Step(r.ctx)
		if n := rc.count(); n != i+2 {
			t.Fatalf("attempt %d did not come when its wait of %s ended (%d attempts)", i+2, wait, n)
		}
	}
	_, st, _ := r.eps.Get(r.ctx, account, e.ID)
	if len(st) != 1 || st[0].Attempts != len(waits)+1 || st[0].Cursor != 0 {
		t.Errorf("stream after %d failures: %+v", len(waits)+1, st)
	}
}

// TestThrottled: a 429 or a timeout waits at least a minute; a
// Retry-After is honoured within [the wait, twice it].
func TestThrottled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		status     int
		retryAfter string
		wait       time.Duration
	}{
		{"429", 429, "", time.Minute},
		{"429, Retry-After 100", 429, "100", 100 * time.Second},
		{"429, Retry-After 1000", 429, "1000", 2 * time.Minute},
		{"503, Retry-After 1", 503, "1", 5 * time.Second},
		{"503, Retry-After 8", 503, "8", 8 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, "f1")
			rc := newReceiver(t)
			rc.setAnswer(func(n int, _ delivery, w http.ResponseWriter) {
				if n == 0 {
					if c.retryAfter != "" {
						w.Header().Set("Retry-After", c.retryAfter)
					}
					w.WriteHeader(c.status)
				}
			})
			r.endpoint(rc.srv.URL)
			r.add("f1", "1")
			r.disp.Step(r.ctx)
			r.clock.Advance(c.wait - time.Second)
			r.disp.Step(r.ctx)
			if n := rc.count(); n != 1 {
				t.Fatalf("retried before %s", c.wait)
			}
			r.clock.Advance(time.Second)
			r.disp.Step(r.ctx)
			if n := rc.count(); n != 2 {
				t.Fatalf("not retried at %s", c.wait)
			}
		})
	}
}

// TestRedirectIsAFailure: a 3xx is never followed; the event is retried
// at the endpoint's own URL.
func TestRedirectIsAFailure(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f1")
	elsewhere := newReceiver(t)
	rc := newReceiver(t)
	rc.setAnswer(func(n int, _ delivery, w http.ResponseWriter) {
		if n == 0 {
			w.Header().Set("Location", elsewhere.srv.URL)
			w.WriteHeader(http.StatusTemporaryRedirect)
		}
	})
	r.endpoint(rc.srv.URL)
	r.add("f1", "1")
	r.disp.Step(r.ctx)
	r.clock.Advance(6 * time.Second)
	r.disp.Step(r.ctx)
	if n := elsewhere.count(); n != 0 {
		t.Errorf("the redirect was followed: %d requests elsewhere", n)
	}
	if ds := rc.deliveries(); len(ds) != 2 || ds[0].id() != ds[1].id() {
		t.Errorf("the endpoint got %v, want the event twice", summary(ds))
	}
}

// TestGoneDisables: a 410 disables the endpoint at once, with a reason
// the host sees; nothing more is sent until the host enables it, and
// then delivery resumes at the event that got the 410.
func TestGoneDisables(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f1")
	rc := newReceiver(t)
	rc.setAnswer(func(n int, _ delivery, w http.ResponseWriter) {
		if n == 0 {
			w.WriteHeader(http.StatusGone)
		}
	})
	e := r.endpoint(rc.srv.URL)
	r.add("f1", "1")
	r.add("f1", "2")
	r.disp.Step(r.ctx)
	got, _, _ := r.eps.Get(r.ctx, account, e.ID)
	if !got.Disabled || !strings.Contains(got.DisabledReason, "410") || !got.DisabledAt.Equal(r.clock.Now()) {
		t.Fatalf("after a 410: %+v, want disabled with a reason", got)
	}
	r.clock.Advance(time.Hour)
	r.disp.Step(r.ctx)
	if n := rc.count(); n != 1 {
		t.Fatalf("a disabled endpoint got %d deliveries", n)
	}
	if err := r.eps.Enable(r.ctx, account, e.ID); err != nil {
		t.Fatal(err)
	}
	r.disp.Step(r.ctx)
	if ds := rc.deliveries(); len(ds) != 3 || ds[1].id() != ds[0].id() {
		t.Errorf("after Enable: %v, want the 410's event again, then the next", summary(ds))
	}
}

// TestFiveDaysDisable: an endpoint that has failed without a success for
// five days is disabled, and the host can see why and enable it again.
func TestFiveDaysDisable(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f1")
	rc := newReceiver(t)
	rc.setAnswer(func(_ int, _ delivery, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	e := r.endpoint(rc.srv.URL)
	r.add("f1", "1")
	r.disp.Step(r.ctx)
	for elapsed := time.Duration(0); elapsed < webhook.FailingLimit-time.Hour; elapsed += time.Hour {
		r.clock.Advance(time.Hour)
		r.disp.Step(r.ctx)
	}
	if got, _, _ := r.eps.Get(r.ctx, account, e.ID); got.Disabled {
		t.Fatalf("disabled before five days: %q", got.DisabledReason)
	}
	r.clock.Advance(time.Hour)
	r.disp.Step(r.ctx)
	got, _, _ := r.eps.Get(r.ctx, account, e.ID)
	if !got.Disabled || !strings.Contains(got.DisabledReason, "no successful delivery") {
		t.Fatalf("after five days of failures: %+v", got)
	}
	rc.setAnswer(nil)
	if err := r.eps.Enable(r.ctx, account, e.ID); err != nil {
		t.Fatal(err)
	}
	r.disp.Step(r.ctx)
	if _, st, _ := r.eps.Get(r.ctx, account, e.ID); len(st) != 1 || st[0].Cursor == 0 || st[0].Attempts != 0 {
		t.Errorf("after Enable: streams %+v, want the event delivered", st)
	}
}
