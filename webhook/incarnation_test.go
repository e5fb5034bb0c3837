package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/formsapi/formsapi/webhook"
)

// storeRig is a store of this module with a handler over it, an API key
// of account, and the host's Endpoints and a Dispatcher, on one clock:
// the rig of the tests that run on every store.
type storeRig struct {
	t     *testing.T
	ctx   context.Context
	clock *storetest.Clock
	store convergenceStore
	api   http.Handler
	key   string
	eps   *webhook.Endpoints
	disp  *webhook.Dispatcher
}

// newStoreRig opens c's store with forms. secret is given to the
// handler, the Endpoints and the Dispatcher alike; nil gives none to
// any of them, as the example server does without -cursor-secret-file.
func newStoreRig(t *testing.T, c storeCase, secret []byte, forms ...string) *storeRig {
	t.Helper()
	r := &storeRig{t: t, ctx: context.Background(), clock: storetest.NewClock(time.Now().UTC().Truncate(time.Second))}
	r.store = c.open(t, r.clock.Now)
	for _, f := range forms {
		r.addForm(f)
	}
	r.key = newKey(t, r.store)
	var apiOpts []formsapi.Option
	if secret != nil {
		apiOpts = append(apiOpts, formsapi.WithCursorSecret(secret))
	}
	r.api = formsapi.NewHandler(r.store, r.store, apiOpts...)
	opts := []webhook.Option{webhook.WithClock(r.clock.Now), webhook.WithEgress(webhook.Egress{AllowHTTP: true, AllowLoopback: true}),
		webhook.WithRand(func() float64 { return 0.5 }), webhook.WithAPIBase("https://api.example.com")}
	r.eps = webhook.NewEndpoints(r.store, r.store, secret, opts...)
	r.disp = webhook.NewDispatcher(r.store, r.store, secret, opts...)
	t.Cleanup(r.disp.Close)
	return r
}

func (r *storeRig) addForm(f string) {
	r.t.Helper()
	if err := r.store.AddForm(r.ctx, account, formsapi.Form{ID: f, Title: f}); err != nil {
		r.t.Fatal(err)
	}
}

// add adds a submission of form whose data is {"id": id}, or, when big,
// one too large for an event to carry (a thin event).
func (r *storeRig) add(form, id string, big bool) {
	r.t.Helper()
	data := fmt.Sprintf(`{"id":%q}`, id)
	if big {
		data = fmt.Sprintf(`{"id":%q,"blob":%q}`, id, strings.Repeat("x", webhook.MaxSubmissionBytes))
	}
	if err := r.store.AddSubmission(r.ctx, formsapi.Submission{FormID: form, Data: []byte(data)}, formsapi.Metadata{ID: id}); err != nil {
		r.t.Fatal(err)
	}
}

// get answers GET path (a path of the API, or a URL under the rig's API
// base) with the rig's key.
func (r *storeRig) get(path string) *httptest.ResponseRecorder {
	r.t.Helper()
	req := httptest.NewRequest("GET", strings.TrimPrefix(path, "https://api.example.com"), nil)
	req.Header.Set("Authorization", "Bearer "+r.key)
	w := httptest.NewRecorder()
	r.api.ServeHTTP(w, req)
	return w
}

// feedRefs returns the refs of form's feed through the API, from its
// start: its submissions' refs in order.
func (r *storeRig) feedRefs(form string) []string {
	r.t.Helper()
	w := r.get("/v1/forms/" + form + "/submissions?limit=1000&sync=start")
	var p struct {
		Refs []string `json:"refs"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 200 {
		r.t.Fatalf("the feed of %s: %d %.300s", form, w.Code, w.Body)
	}
	return p.Refs
}

// idOf returns the "id" of a delivery's submission ("" for none).
func idOf(d delivery) string {
	var s struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	_ = json.Unmarshal(d.sub, &s)
	return s.Data.ID
}

// onEveryStore runs test on each store of everyStore, in parallel.
func onEveryStore(t *testing.T, test func(t *testing.T, c storeCase)) {
	t.Parallel()
	for _, c := range everyStore() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			test(t, c)
		})
	}
}

// TestFormCreatedAgain is issue 42's first finding, on memstore, SQLite
// and PostgreSQL: a form deleted and created again with the same ID is
// another form (RELIABILITY case 101). Two endpoints (one that follows
// every form of the account, one that lists the form) got the old form's
// 7 events, the last one thin; the new form's 9 submissions all reach
// both (the old cursor skipped 7 of them: 2 of 9 were delivered), with
// refs the feed gives the new form and webhook-ids none of the old
// form's events had (they were the old ones, which a receiver that
// de-duplicates drops); the old thin event's URL answers 410, not the new
// form's submission (it answered 200 with it); a replay from the start
// sends the new form's events under their own ids; and a stream written
// before streams kept the incarnation, with a cursor past the new form's
// feed head (7 of the old form against the new form's 5), starts over.
func TestFormCreatedAgain(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c storeCase) {
		r := newStoreRig(t, c, []byte("the re-created form test's cursor secret"), "f")
		every, listing := newReceiver(t), newReceiver(t)
		if _, err := r.eps.Add(r.ctx, account, every.srv.URL, nil); err != nil {
			t.Fatal(err)
		}
		e2, err := r.eps.Add(r.ctx, account, listing.srv.URL, []string{"f"})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 7; i++ {
			r.add("f", fmt.Sprintf("old-%d", i), i == 7)
		}
		r.disp.Step(r.ctx)
		old := map[string]bool{}
		var thinURL string
		for _, rc := range []*receiver{every, listing} {
			ds := rc.deliveries()
			if len(ds) != 7 || !ds[6].thin {
				t.Fatalf("the old form: %d deliveries %v, want 7, the last thin", len(ds), summary(ds))
			}
			for _, d := range ds {
				old[d.id()] = true
			}
			thinURL = ds[6].url
		}
		if w := r.get(thinURL); w.Code != 200 {
			t.Fatalf("the old thin event's URL, before the form was deleted: %d %.200s", w.Code, w.Body)
		}

		if err := r.store.DeleteForm(r.ctx, account, "f"); err != nil {
			t.Fatal(err)
		}
		r.disp.Step(r.ctx) // the form is gone: nothing to send
		r.addForm("f")
		for i := 1; i <= 9; i++ {
			r.add("f", fmt.Sprintf("new-%d", i), false)
		}
		r.disp.Step(r.ctx)
		refs := r.feedRefs("f")
		if len(refs) != 9 {
			t.Fatalf("the new form's feed has %d refs, want 9", len(refs))
		}
		newIDs := map[string]bool{}
		for n, rc := range []*receiver{every, listing} {
			ds := rc.deliveries()[7:]
			got := make([]string, len(ds))
			for i, d := range ds {
				got[i] = idOf(d)
			}
			if want := []string{"new-1", "new-2", "new-3", "new-4", "new-5", "new-6", "new-7", "new-8", "new-9"}; !slices.Equal(got, want) {
				t.Fatalf("endpoint %d got the new form's %v, want all 9 in order", n, got)
			}
			for i, d := range ds {
				if old[d.id()] {
					t.Errorf("endpoint %d: %s has the webhook-id %s of an event of the deleted form", n, idOf(d), d.id())
				}
				if d.ref != refs[i] {
					t.Errorf("endpoint %d: %s has ref %s, the feed gives it %s", n, idOf(d), d.ref, refs[i])
				}
				newIDs[d.id()] = true
			}
		}

		w := r.get(thinURL)
		if w.Code == 200 || strings.Contains(w.Body.String(), "new-7") {
			t.Errorf("the deleted form's thin event URL, on the new form: %d %.200s, want no page of the new form", w.Code, w.Body)
		}
		if w.Code != http.StatusGone {
			t.Errorf("the deleted form's thin event URL, on the new form: %d, want 410 (read again from the start)", w.Code)
		}

		if err := r.eps.Replay(r.ctx, account, e2.ID, "f", ""); err != nil {
			t.Fatal(err)
		}
		n := listing.count()
		r.disp.Step(r.ctx)
		replayed := listing.deliveries()[n:]
		if len(replayed) != 9 {
			t.Fatalf("a replay from the start sent %d events, want the new form's 9", len(replayed))
		}
		for _, d := range replayed {
			if !newIDs[d.id()] || old[d.id()] {
				t.Errorf("the replay sent %s under webhook-id %s, not the one it was first sent with", idOf(d), d.id())
			}
		}

		// A stream as an earlier version wrote it: no incarnation, its
		// cursor at the old form's end, past the new form's.
		if err := r.store.DeleteForm(r.ctx, account, "f"); err != nil {
			t.Fatal(err)
		}
		r.addForm("f")
		for i := 1; i <= 5; i++ {
			r.add("f", fmt.Sprintf("third-%d", i), false)
		}
		legacy := newReceiver(t)
		e3, err := r.eps.Add(r.ctx, account, legacy.srv.URL, []string{"f"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.store.ResetStream(r.ctx, account, e3.ID, webhook.Stream{FormID: "f", Cursor: 7}); err != nil {
			t.Fatal(err)
		}
		r.disp.Step(r.ctx)
		if got := legacy.deliveries(); len(got) != 5 || idOf(got[0]) != "third-1" {
			t.Errorf("a stream of no incarnation with its cursor past the form's head: %v, want the form's 5 from its start", summary(got))
		}
	})
}

// TestStreamKeepsItsIncarnation: a stream is saved with the incarnation
// of the form its cursor is in, on every store: the one the dispatcher
// reads, which is the form's, and another when the form is created again.
func TestStreamKeepsItsIncarnation(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c storeCase) {
		r := newStoreRig(t, c, []byte("the stream incarnation test's cursor secret"), "f")
		rc := newReceiver(t)
		e, err := r.eps.Add(r.ctx, account, rc.srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		incarnation := func() uint64 {
			t.Helper()
			_, sts, err := r.eps.Get(r.ctx, account, e.ID)
			if err != nil || len(sts) != 1 {
				t.Fatalf("Get: %v, %d streams", err, len(sts))
			}
			return sts[0].Incarnation
		}
		first := webhook.IncarnationOf(r.store, account, "f")
		if first == 0 || incarnation() != first {
			t.Fatalf("the stream Add made: incarnation %#x, the form's %#x", incarnation(), first)
		}
		// The stream stopped for a resync (its cursor fell behind the
		// retention): the form created again starts it over all the
		// same, as a new form.
		if err := r.store.ResetStream(r.ctx, account, e.ID, webhook.Stream{FormID: "f", Incarnation: first, Cursor: 3, Floor: 1, Resync: true}); err != nil {
			t.Fatal(err)
		}
		if err := r.store.DeleteForm(r.ctx, account, "f"); err != nil {
			t.Fatal(err)
		}
		r.addForm("f")
		second := webhook.IncarnationOf(r.store, account, "f")
		r.disp.Step(r.ctx) // an empty form: the stream starts over all the same
		if second == first || incarnation() != second {
			t.Errorf("after the form was created again: the stream's incarnation %#x, the form's %#x (was %#x)", incarnation(), second, first)
		}
		r.add("f", "after", false)
		r.disp.Step(r.ctx)
		if got := rc.deliveries(); len(got) != 1 || idOf(got[0]) != "after" {
			t.Errorf("a stream stopped for a resync, its form created again: delivered %v, want the new form's one", summary(got))
		}
	})
}

// TestKeptSecret is issue 42's third finding, on memstore, SQLite and
// PostgreSQL: a handler given no cursor secret seals with the one its
// store keeps, and so do a Dispatcher and Endpoints given none (they took
// none: 0 of 13 refs matched the feed's, thin events' URLs answered 400
// and Replay refused the API's sync tokens). Every event's ref is the
// feed's ref of its submission, a thin event's URL answers 200 with it,
// and Replay takes a sync token the API gave (RELIABILITY case 102).
func TestKeptSecret(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c storeCase) {
		r := newStoreRig(t, c, nil, "f")
		rc := newReceiver(t)
		e, err := r.eps.Add(r.ctx, account, rc.srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			r.add("f", fmt.Sprintf("s-%d", i), i == 3)
		}
		r.disp.Step(r.ctx)
		ds := rc.deliveries()
		refs := r.feedRefs("f")
		if len(ds) != 3 || len(refs) != 3 || !ds[2].thin {
			t.Fatalf("%d deliveries %v and %d refs in the feed, want 3 of each, the last thin", len(ds), summary(ds), len(refs))
		}
		for i, d := range ds {
			if d.ref != refs[i] {
				t.Errorf("%s has ref %s, the feed gives it %s", idOf(d), d.ref, refs[i])
			}
		}
		w := r.get(ds[2].url)
		var p struct{ Refs []string }
		if err := json.Unmarshal(w.Body.Bytes(), &p); w.Code != 200 || err != nil || len(p.Refs) != 1 || p.Refs[0] != ds[2].ref {
			t.Errorf("the thin event's URL: %d %.200s, want its submission with ref %s", w.Code, w.Body, ds[2].ref)
		}
		w = r.get("/v1/forms/f/submissions?sync=start&limit=1")
		var first struct{ SyncToken string }
		if err := json.Unmarshal(w.Body.Bytes(), &first); err != nil || first.SyncToken == "" {
			t.Fatalf("the feed's first page: %d %.200s", w.Code, w.Body)
		}
		if err := r.eps.Replay(r.ctx, account, e.ID, "f", first.SyncToken); err != nil {
			t.Fatalf("Replay of a sync token the API gave: %v", err)
		}
		n := rc.count()
		r.disp.Step(r.ctx)
		if again := rc.deliveries()[n:]; len(again) != 2 || again[0].id() != ds[1].id() || again[1].id() != ds[2].id() {
			t.Errorf("replayed after the first entry: %v, want the second and third again", summary(again))
		}
	})
}

// TestNoSecretAnywherePanics: a Dispatcher or Endpoints given no secret
// over a feed and store that keep none would make refs the API never
// gives: NewDispatcher and NewEndpoints panic, saying what to pass.
func TestNoSecretAnywherePanics(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	feed := struct{ webhook.Feed }{s} // a host's feed: it keeps no secret
	store := struct{ webhook.Store }{s}
	for name, f := range map[string]func(){
		"NewDispatcher": func() { webhook.NewDispatcher(store, feed, nil) },
		"NewEndpoints":  func() { webhook.NewEndpoints(store, feed, nil) },
	} {
		func() {
			defer func() {
				if msg := fmt.Sprint(recover()); !strings.Contains(msg, "WithCursorSecret") {
					t.Errorf("%s without a secret anywhere: panic %q, want one naming WithCursorSecret", name, msg)
				}
			}()
			f()
		}()
	}
	webhook.NewDispatcher(store, feed, []byte("a secret given")).Close() // given one: no panic
}
