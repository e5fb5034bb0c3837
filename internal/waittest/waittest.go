// Package waittest holds every store's waiting sync requests (wait=,
// the root's wait.go) to the same clauses, through the real handler: a
// waiter is woken by a write made after it began waiting, by its own
// store's or another process's (after the store's check); a write
// between its read and its block is not lost; a revoked key ends it with
// 401; a client that goes away frees it; a waiter holds no place in
// flight. (A server shutting down ends waiters: the root's
// TestWaitEndsAtShutdown, with a wait timer that never fires.)
package waittest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/feedwait"
	"github.com/formsapi/formsapi/ratelimit"
)

// Fixture is one store under test with a form and a key.
type Fixture struct {
	// Handler serves the store, made with the options given to New.
	Handler http.Handler
	Key     string
	FormID  string
	// Write adds one submission to the form, through the handler's own
	// store, or through another process's or node's when Check is set.
	Write func(t testing.TB)
	// Revoke revokes Key, the same way.
	Revoke func(t testing.TB)
	// Hook sets f to be called as a waiter blocks: after its read found
	// nothing, before it waits.
	Hook func(f func())
	// Check stands for the store's check interval passing: what another
	// process wrote wakes its waiters then. Nil when Write and Revoke go
	// through the handler's own store, which wakes them itself.
	Check func(t testing.TB)
	// Waiting returns how many waiters the store's hub holds.
	Waiting func() int
}

// Writer is what a fixture of a store of this module writes through:
// the store itself, or another process's or node's over the same data.
type Writer interface {
	AddKey(ctx context.Context, key, accountID string) error
	AddForm(ctx context.Context, accountID string, f formsapi.Form) error
	AddSubmission(ctx context.Context, s formsapi.Submission, m formsapi.Metadata) error
	RevokeKey(ctx context.Context, key string) error
}

// StoreFixture is the fixture of a store of this module served by h,
// whose waiters are hub's: a key of account "acct" and its form "live",
// added through writer, which writes and revokes too. With other, writer
// is another process's or node's, and Check runs hub's check.
func StoreFixture(t *testing.T, h http.Handler, hub *feedwait.Hub, writer Writer, other bool) Fixture {
	t.Helper()
	ctx := context.Background()
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.AddKey(ctx, key, "acct"); err != nil {
		t.Fatal(err)
	}
	if err := writer.AddForm(ctx, "acct", formsapi.Form{ID: "live", Title: "Live"}); err != nil {
		t.Fatal(err)
	}
	f := Fixture{
		Handler: h,
		Key:     key, FormID: "live",
		Write: func(t testing.TB) {
			if err := writer.AddSubmission(ctx, formsapi.Submission{FormID: "live", Data: json.RawMessage(`{"a":1}`)}, formsapi.Metadata{}); err != nil {
				t.Error(err)
			}
		},
		Revoke: func(t testing.TB) {
			if err := writer.RevokeKey(ctx, key); err != nil {
				t.Error(err)
			}
		},
		Hook: func(f func()) { hub.SetBlockedHook(f) },
		Waiting: func() int {
			n, _ := hub.Waiting()
			return n
		},
	}
	if other {
		f.Check = func(t testing.TB) {
			if err := hub.Check(ctx); err != nil {
				t.Error(err)
			}
		}
	}
	return f
}

// New makes a fixture whose handler has opts.
type New func(t *testing.T, opts ...formsapi.Option) Fixture

// Run runs every clause, each on a fixture of its own.
func Run(t *testing.T, newFixture New) {
	t.Run("WokenByALaterWrite", func(t *testing.T) { t.Parallel(); wokenByALaterWrite(t, newFixture) })
	t.Run("NoLostWakeUp", func(t *testing.T) { t.Parallel(); noLostWakeUp(t, newFixture) })
	t.Run("RevokedKeyEnds", func(t *testing.T) { t.Parallel(); revokedKeyEnds(t, newFixture) })
	t.Run("CancelFrees", func(t *testing.T) { t.Parallel(); cancelFrees(t, newFixture) })
	t.Run("IdleWaiterHoldsNoPlaceInFlight", func(t *testing.T) { t.Parallel(); holdsNoPlace(t, newFixture) })
}

// page is what a test reads of a feed page.
type page struct {
	status  int
	items   int
	token   string
	message string
}

// get sends one request of the feed to h under ctx and reads its answer.
func get(ctx context.Context, h http.Handler, f Fixture, query string) page {
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/forms/"+f.FormID+"/submissions?"+query, nil)
	r.Header.Set("Authorization", "Bearer "+f.Key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return parse(w.Code, w.Body.Bytes())
}

func parse(status int, body []byte) page {
	var b struct {
		Submissions []json.RawMessage `json:"submissions"`
		SyncToken   string            `json:"syncToken"`
		Message     string            `json:"message"`
	}
	json.Unmarshal(body, &b)
	return page{status: status, items: len(b.Submissions), token: b.SyncToken, message: b.Message}
}

// head reads the feed to its end and returns the token there.
func head(t *testing.T, f Fixture) string {
	t.Helper()
	p := get(context.Background(), f.Handler, f, "sync=start&limit=1000")
	if p.status != http.StatusOK || p.token == "" {
		t.Fatalf("sync=start: %d %q", p.status, p.message)
	}
	return p.token
}

// waitQuery is the query of a wait from token: the longest wait, so that
// a lost wake-up shows as an empty page after it, never a pass.
func waitQuery(token string) string {
	return url.Values{"sync": {token}, "wait": {"30"}}.Encode()
}

// blockedSignal sets the fixture's hook to signal each block.
func blockedSignal(f Fixture) <-chan struct{} {
	c := make(chan struct{}, 16)
	f.Hook(func() { c <- struct{}{} })
	return c
}

// start sends a waiting request in the background.
func start(ctx context.Context, f Fixture, token string) <-chan page {
	c := make(chan page, 1)
	go func() { c <- get(ctx, f.Handler, f, waitQuery(token)) }()
	return c
}

func checked(t testing.TB, f Fixture) {
	if f.Check != nil {
		f.Check(t)
	}
}

func wokenByALaterWrite(t *testing.T, newFixture New) {
	f := newFixture(t)
	token := head(t, f)
	blocked := blockedSignal(f)
	res := start(context.Background(), f, token)
	<-blocked
	f.Write(t)
	checked(t, f)
	p := <-res
	if p.status != http.StatusOK || p.items != 1 || p.token == token {
		t.Fatalf("woken by a write: %d, %d items, token moved %t (%q); want 200, the one submission, a new token", p.status, p.items, p.token != token, p.message)
	}
	if n := f.Waiting(); n != 0 {
		t.Errorf("%d waiters left in the hub after the answer", n)
	}
}

func noLostWakeUp(t *testing.T, newFixture New) {
	f := newFixture(t)
	token := head(t, f)
	var once sync.Once
	// The write commits after the waiter's read found nothing and before
	// it blocks: the waiter registered before its read, so it holds the
	// channel the write (or the check after it) closes.
	f.Hook(func() {
		once.Do(func() {
			f.Write(t)
			checked(t, f)
		})
	})
	p := <-start(context.Background(), f, token)
	if p.status != http.StatusOK || p.items != 1 {
		t.Fatalf("a write between the read and the block: %d, %d items (%q); want 200 and the submission: the wake-up was lost", p.status, p.items, p.message)
	}
}

func revokedKeyEnds(t *testing.T, newFixture New) {
	f := newFixture(t)
	token := head(t, f)
	blocked := blockedSignal(f)
	res := start(context.Background(), f, token)
	<-blocked
	f.Revoke(t)
	checked(t, f)
	if p := <-res; p.status != http.StatusUnauthorized {
		t.Fatalf("a waiter whose key was revoked: %d (%q), want 401", p.status, p.message)
	}
}

func cancelFrees(t *testing.T, newFixture New) {
	f := newFixture(t)
	token := head(t, f)
	blocked := blockedSignal(f)
	ctx, cancel := context.WithCancel(context.Background())
	res := start(ctx, f, token)
	<-blocked
	if n := f.Waiting(); n != 1 {
		t.Fatalf("%d waiters in the hub while one waits", n)
	}
	cancel()
	<-res // the handler returned
	if n := f.Waiting(); n != 0 {
		t.Fatalf("%d waiters in the hub after the client went away, want 0", n)
	}
	// The handler's places are free too: the key's next wait blocks, and
	// a write wakes it.
	res = start(context.Background(), f, token)
	<-blocked
	f.Write(t)
	checked(t, f)
	if p := <-res; p.status != http.StatusOK || p.items != 1 {
		t.Fatalf("a wait after a canceled one: %d, %d items (%q)", p.status, p.items, p.message)
	}
}

func holdsNoPlace(t *testing.T, newFixture New) {
	// One request of the key in flight at most: a waiter that held its
	// place would have the key's other requests refused with 429.
	f := newFixture(t, formsapi.WithRateLimit(ratelimit.Options{InFlightPerKey: 1}))
	token := head(t, f)
	blocked := blockedSignal(f)
	res := start(context.Background(), f, token)
	<-blocked
	for range 3 {
		if p := get(context.Background(), f.Handler, f, url.Values{"sync": {token}}.Encode()); p.status != http.StatusOK {
			t.Fatalf("a request of the key beside its idle waiter: %d (%q), want 200", p.status, p.message)
		}
	}
	f.Write(t)
	checked(t, f)
	if p := <-res; p.status != http.StatusOK || p.items != 1 {
		t.Fatalf("the waiter: %d, %d items (%q)", p.status, p.items, p.message)
	}
}
