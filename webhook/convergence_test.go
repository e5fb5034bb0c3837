package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/formsapi/formsapi/webhook"
)

// convergenceStore is a store the convergence test writes to, reads the
// feed of and keeps endpoints in.
type convergenceStore interface {
	webhook.Feed
	webhook.Store
	AddForm(ctx context.Context, accountID string, f formsapi.Form) error
	AddSubmission(ctx context.Context, s formsapi.Submission, m formsapi.Metadata) error
	DeleteSubmission(ctx context.Context, accountID, formID, id string) error
	DeleteForm(ctx context.Context, accountID, formID string) error
	formsapi.KeyResolver
	AddKey(ctx context.Context, key, accountID string) error
}

// TestConvergence is the done-when of issue 26 without kills, on
// memstore (two dispatchers claiming over one store), PostgreSQL (three)
// and SQLite (one):
// 20 forms, additions and deletions by a writer racing the dispatchers,
// five receivers (two that answer at once, one that fails half its
// requests, one that stalls a third of them past the attempt timeout, one
// that follows half the forms and answers 429 to a quarter). After
// quiescence each endpoint has every entry of its forms' feeds (0
// missing), no event was answered 2xx twice, every repeat has the same
// webhook-id and body bytes, and the positions of each (endpoint, form)
// are strictly increasing in first-delivery order.
func TestConvergence(t *testing.T) {
	t.Parallel()
	dispatchers := map[string]int{"memstore": 2, "postgres": 3, "sqlite": 1}
	for _, c := range everyStore() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			converge(t, c.open, dispatchers[c.name], 200)
		})
	}
}

// storeCase is a store of this module, opened on a clock.
type storeCase struct {
	name string
	open func(t *testing.T, now func() time.Time) convergenceStore
}

// everyStore returns memstore, PostgreSQL (a schema of its own for each
// open) and SQLite (a file in the test's directory).
func everyStore() []storeCase {
	return []storeCase{
		{"memstore", func(t *testing.T, now func() time.Time) convergenceStore {
			return memstore.New(memstore.WithClock(now))
		}},
		{"postgres", func(t *testing.T, now func() time.Time) convergenceStore {
			dsn, schema := pgtest.Schema(t)
			s, err := pgstore.Open(context.Background(), dsn, pgstore.WithSchema(schema), pgstore.WithClock(now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"sqlite", func(t *testing.T, now func() time.Time) convergenceStore {
			s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "forms.db"), sqlitestore.WithClock(now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	}
}

// lostAnswers keeps the webhook-ids of attempts whose answer the
// dispatcher did not get (a timeout, a connection cut): a receiver may
// have answered 2xx to those, and a repeat after one is at-least-once
// working, not a lost cursor update.
type lostAnswers struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (l *lostAnswers) Attempt(_ context.Context, a observe.Attempt) {
	if a.Outcome == string(webhook.OutcomeTimeout) || a.Outcome == string(webhook.OutcomeNetwork) {
		l.mu.Lock()
		l.ids[a.MessageID] = true
		l.mu.Unlock()
	}
}

func (l *lostAnswers) EndpointChanged(context.Context, observe.EndpointChange) {}

func (l *lostAnswers) had(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ids[id]
}

// answering is how a convergence receiver answers a delivery: a status,
// or 0 to stall until the dispatcher gives up.
type answering func(rnd *rand.Rand) int

func converge(t *testing.T, open func(t *testing.T, now func() time.Time) convergenceStore, dispatchers, writes int) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Now().UTC().Truncate(time.Second))
	store := open(t, clock.Now)
	secret := []byte("the convergence test's cursor secret")
	const forms = 20
	var all []string
	for i := range forms {
		f := fmt.Sprintf("form-%02d", i)
		all = append(all, f)
		if err := store.AddForm(ctx, account, formsapi.Form{ID: f}); err != nil {
			t.Fatal(err)
		}
	}
	ok := func(*rand.Rand) int { return 200 }
	receivers := []struct {
		answer answering
		forms  []string
	}{
		{ok, nil},
		{ok, all[:3]},
		{func(rnd *rand.Rand) int { return []int{200, 500}[rnd.IntN(2)] }, nil},
		{func(rnd *rand.Rand) int { return []int{0, 200, 200}[rnd.IntN(3)] }, nil},
		{func(rnd *rand.Rand) int { return []int{200, 200, 200, 429}[rnd.IntN(4)] }, all[:forms/2]},
	}
	lost := &lostAnswers{ids: map[string]bool{}}
	opts := []webhook.Option{webhook.WithClock(clock.Now), webhook.WithObserver(lost),
		webhook.WithEgress(webhook.Egress{AllowHTTP: true, AllowLoopback: true, Timeout: 500 * time.Millisecond})}
	eps := webhook.NewEndpoints(store, store, secret, opts...)
	type endpoint struct {
		rc     *receiver
		forms  []string
		mu     sync.Mutex
		okIDs  map[string]int // webhook-ids answered 2xx
		bodies map[string][]byte
	}
	var endpoints []*endpoint
	for i, r := range receivers {
		rc := newReceiver(t)
		ep := &endpoint{rc: rc, forms: r.forms, okIDs: map[string]int{}, bodies: map[string][]byte{}}
		rnd := rand.New(rand.NewPCG(uint64(i), 7))
		var rndMu sync.Mutex
		rc.setAnswer(func(_ int, d delivery, w http.ResponseWriter) {
			rndMu.Lock()
			status := r.answer(rnd)
			rndMu.Unlock()
			ep.mu.Lock()
			defer ep.mu.Unlock()
			if b, seen := ep.bodies[d.id()]; seen && !bytes.Equal(b, d.body) {
				t.Errorf("endpoint %d: a repeat of %s with other body bytes", i, d.id())
			}
			ep.bodies[d.id()] = d.body
			if status == 200 {
				ep.okIDs[d.id()]++
			}
			if status == 0 {
				<-d.ctx.Done() // stalls until the dispatcher gives up
				return
			}
			w.WriteHeader(status)
		})
		endpoints = append(endpoints, ep)
		if _, err := eps.Add(ctx, account, rc.srv.URL, r.forms); err != nil {
			t.Fatal(err)
		}
	}
	ds := make([]*webhook.Dispatcher, dispatchers)
	for i := range ds {
		ds[i] = webhook.NewDispatcher(store, store, secret, opts...)
		t.Cleanup(ds[i].Close)
	}
	step := func() {
		var wg sync.WaitGroup
		for _, d := range ds {
			wg.Add(1)
			go func() { defer wg.Done(); d.Step(ctx) }()
		}
		wg.Wait()
	}
	// The writer races the dispatchers: additions and deletions over the
	// forms, in one goroutine, while steps run.
	done := make(chan struct{})
	go func() {
		defer close(done)
		rnd := rand.New(rand.NewPCG(1, 2))
		live := map[string][]string{}
		for n := range writes {
			f := all[rnd.IntN(forms)]
			if len(live[f]) > 0 && rnd.IntN(3) == 0 {
				i := rnd.IntN(len(live[f]))
				if err := store.DeleteSubmission(ctx, account, f, live[f][i]); err != nil {
					t.Error(err)
					return
				}
				live[f] = append(live[f][:i], live[f][i+1:]...)
				continue
			}
			id := fmt.Sprintf("s%d", n)
			if err := store.AddSubmission(ctx, formsapi.Submission{FormID: f, Data: []byte(fmt.Sprintf(`{"n":%d}`, n))}, formsapi.Metadata{ID: id}); err != nil {
				t.Error(err)
				return
			}
			live[f] = append(live[f], id)
		}
	}()
	for writing := true; writing; {
		select {
		case <-done:
			writing = false
		default:
		}
		step()
		clock.Advance(10 * time.Second)
	}
	// Quiescence: step, an hour apart so every retry comes due, until
	// every endpoint's every stream is at its feed's end.
	end := map[string]int64{}
	for _, f := range all {
		p, err := store.SyncSubmissions(ctx, account, f, 0, 100000)
		if err != nil {
			t.Fatal(err)
		}
		end[f] = p.Next
	}
	for round := 0; ; round++ {
		step()
		caughtUp := true
		list, err := store.Endpoints(ctx, account)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list {
			if e.Disabled {
				t.Fatalf("endpoint %s was disabled: %s", e.URL, e.DisabledReason)
			}
			_, sts, _ := store.Endpoint(ctx, account, e.ID)
			at := map[string]int64{}
			for _, s := range sts {
				at[s.FormID] = s.Cursor
			}
			fs := e.Forms
			if len(fs) == 0 {
				fs = all
			}
			for _, f := range fs {
				if at[f] != end[f] && end[f] > 0 {
					caughtUp = false
				}
			}
		}
		if caughtUp {
			break
		}
		if round == 500 {
			t.Fatal("not caught up after 500 rounds")
		}
		clock.Advance(time.Hour)
	}

	// Every entry of the final feed, as (type, ref), with its position.
	type key struct{ typ, ref string }
	pos := map[string]map[key]int64{}
	for _, f := range all {
		pos[f] = map[key]int64{}
		inc := webhook.IncarnationOf(store, account, f)
		p, _ := store.SyncSubmissions(ctx, account, f, 0, 100000)
		for _, at := range p.Positions {
			pos[f][key{webhook.EventCreated, webhook.RefOf(secret, account, f, inc, at)}] = at
		}
		for i, of := range p.Deleted {
			pos[f][key{webhook.EventDeleted, webhook.RefOf(secret, account, f, inc, of)}] = p.DeletedAt[i]
		}
		// Additions since deleted are gaps of the final feed, but may have
		// been sent before their deletion: their positions by their refs.
		for at := int64(1); at <= end[f]; at++ {
			k := key{webhook.EventCreated, webhook.RefOf(secret, account, f, inc, at)}
			if _, ok := pos[f][k]; !ok {
				pos[f][k] = -at // not in the final feed
			}
		}
	}
	for i, ep := range endpoints {
		follows := ep.forms
		if len(follows) == 0 {
			follows = all
		}
		got := map[string]map[key]bool{}
		last := map[string]int64{}
		seen := map[string]bool{}
		for _, d := range ep.rc.deliveries() {
			k := key{d.typ, d.ref}
			if got[d.form] == nil {
				got[d.form] = map[key]bool{}
			}
			got[d.form][k] = true
			if seen[d.id()] {
				continue
			}
			seen[d.id()] = true
			p, ok := pos[d.form][k]
			if !ok {
				t.Fatalf("endpoint %d: an event %s of %s that is no entry of its feed", i, d.typ, d.form)
			}
			if p < 0 {
				p = -p
			}
			if p <= last[d.form] {
				t.Errorf("endpoint %d, form %s: position %d first delivered after %d", i, d.form, p, last[d.form])
			}
			last[d.form] = p
		}
		missing := 0
		for _, f := range follows {
			for k, p := range pos[f] {
				if p > 0 && !got[f][k] {
					missing++
				}
			}
		}
		if missing > 0 {
			t.Errorf("endpoint %d: %d entries of its forms' feeds never delivered", i, missing)
		}
		ep.mu.Lock()
		for id, n := range ep.okIDs {
			if n > 1 && !lost.had(id) {
				t.Errorf("endpoint %d: %s answered 2xx %d times, and no answer of it was lost", i, id, n)
			}
		}
		ep.mu.Unlock()
	}
}
