package formsapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/waittest"
	"github.com/formsapi/formsapi/memstore"
)

// waitFixture is a memstore with a form and a key, and a handler over it
// with opts and a hook the fixture sets.
func waitFixture(t testing.TB, opts ...formsapi.Option) (waittest.Fixture, *memstore.Store) {
	t.Helper()
	ctx := context.Background()
	s := memstore.New()
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddKey(ctx, key, "acct"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "live", Title: "Live"}); err != nil {
		t.Fatal(err)
	}
	var hook atomic.Pointer[func()]
	var waiting func() int
	opts = append(opts, formsapi.WithWaitHook(func() {
		if f := hook.Load(); f != nil {
			(*f)()
		}
	}), formsapi.WithWaitProbe(&waiting))
	f := waittest.Fixture{
		Handler: formsapi.NewHandler(s, s, opts...),
		Key:     key, FormID: "live",
		Write: func(t testing.TB) {
			if err := s.AddSubmission(ctx, formsapi.Submission{FormID: "live", Data: json.RawMessage(`{"a":1}`)}, formsapi.Metadata{}); err != nil {
				t.Error(err)
			}
		},
		Revoke: func(t testing.TB) {
			if err := s.RevokeKey(ctx, key); err != nil {
				t.Error(err)
			}
		},
		Hook: func(f func()) { hook.Store(&f) },
	}
	f.Waiting = func() int { return waiting() }
	return f, s
}

// TestWaitMemstore holds memstore's waits to waittest's clauses: every
// write is its own, and wakes its waiters directly.
func TestWaitMemstore(t *testing.T) {
	t.Parallel()
	waittest.Run(t, func(t *testing.T, opts ...formsapi.Option) waittest.Fixture {
		f, _ := waitFixture(t, opts...)
		return f
	})
}

// neverTimer is a wait timer that never fires: a test that passes with it
// ended its wait by something else.
func neverTimer(time.Duration) <-chan struct{} {
	return nil
}

// manualTimers hands the test each wait's timer.
type manualTimers chan chan struct{}

func (m manualTimers) timer(time.Duration) <-chan struct{} {
	c := make(chan struct{}, 1)
	m <- c
	return c
}

func feedGet(t testing.TB, h http.Handler, f waittest.Fixture, query string) (int, http.Header, map[string]any) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/v1/forms/"+f.FormID+"/submissions?"+query, nil)
	r.Header.Set("Authorization", "Bearer "+f.Key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var body map[string]any
	json.Unmarshal(w.Body.Bytes(), &body)
	return w.Code, w.Result().Header, body
}

// TestWaitEndsAtShutdown: a server that begins to shut down ends its
// waiters with the empty page at once, so Shutdown is not held back. The
// wait's timer never fires, so without it the test would hang.
func TestWaitEndsAtShutdown(t *testing.T) {
	t.Parallel()
	f, _ := waitFixture(t, formsapi.WithWaitTimer(neverTimer))
	blocked := make(chan struct{}, 1)
	f.Hook(func() { blocked <- struct{}{} })
	_, _, first := feedGet(t, f.Handler, f, "sync=start")
	token := first["syncToken"].(string)
	srv := httptest.NewServer(f.Handler)
	defer srv.Close()
	type answer struct {
		status int
		body   map[string]any
	}
	res := make(chan answer, 1)
	go func() {
		r, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/forms/live/submissions?"+url.Values{"sync": {token}, "wait": {"30"}}.Encode(), nil)
		r.Header.Set("Authorization", "Bearer "+f.Key)
		resp, err := srv.Client().Do(r)
		if err != nil {
			res <- answer{}
			return
		}
		defer resp.Body.Close()
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		res <- answer{resp.StatusCode, body}
	}()
	<-blocked
	if err := srv.Config.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := <-res
	if got.status != http.StatusOK || len(got.body["submissions"].([]any)) != 0 || got.body["syncToken"] == "" {
		t.Fatalf("a waiter at shutdown: %d %v, want 200 and the empty page", got.status, got.body)
	}
}

// TestWaitEndsWithTheEmptyPage: a wait that ends with nothing answers
// what an empty sync page is without wait: the same position (the same
// ETag), a token that reads on from it.
func TestWaitEndsWithTheEmptyPage(t *testing.T) {
	t.Parallel()
	timers := make(manualTimers, 1)
	f, _ := waitFixture(t, formsapi.WithWaitTimer(timers.timer))
	_, _, first := feedGet(t, f.Handler, f, "sync=start")
	token := first["syncToken"].(string)
	_, now, _ := feedGet(t, f.Handler, f, url.Values{"sync": {token}}.Encode())
	type answer struct {
		status int
		header http.Header
		body   map[string]any
	}
	res := make(chan answer, 1)
	go func() {
		status, h, body := feedGet(t, f.Handler, f, url.Values{"sync": {token}, "wait": {"5"}}.Encode())
		res <- answer{status, h, body}
	}()
	(<-timers) <- struct{}{}
	got := <-res
	if got.status != http.StatusOK || len(got.body["submissions"].([]any)) != 0 || got.body["hasMore"] != false {
		t.Fatalf("a wait that ran out: %d %v", got.status, got.body)
	}
	if got.header.Get("ETag") != now.Get("ETag") {
		t.Errorf("the waited empty page's ETag %q, the immediate one's %q", got.header.Get("ETag"), now.Get("ETag"))
	}
	// Its token reads on from the same position.
	f.Write(t)
	_, _, next := feedGet(t, f.Handler, f, url.Values{"sync": {got.body["syncToken"].(string)}}.Encode())
	if n := len(next["submissions"].([]any)); n != 1 {
		t.Errorf("after the waited page's token: %d submissions, want the 1 written since", n)
	}
}

// TestWaitEndsAtExpiry: a key that expires while it waits ends the wait
// at its expiry (the timer is set for it) with 401.
func TestWaitEndsAtExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	timers := make(manualTimers, 1)
	var asked atomic.Int64
	f, s := waitFixture(t, formsapi.WithClock(func() time.Time { return time.Unix(0, clock.Load()) }),
		formsapi.WithWaitTimer(func(d time.Duration) <-chan struct{} {
			asked.Store(int64(d))
			return timers.timer(d)
		}))
	key, _ := formsapi.NewKey()
	exp := now.Add(10 * time.Second)
	if err := s.AddKeyWith(ctx, key, "acct", formsapi.KeyOptions{ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	f.Key = key
	_, _, first := feedGet(t, f.Handler, f, "sync=start")
	res := make(chan int, 1)
	go func() {
		status, _, _ := feedGet(t, f.Handler, f, url.Values{"sync": {first["syncToken"].(string)}, "wait": {"30"}}.Encode())
		res <- status
	}()
	timer := <-timers
	if d := time.Duration(asked.Load()); d > 10*time.Second {
		t.Errorf("a key expiring in 10 s waits %s, past its expiry", d)
	}
	clock.Store(exp.UnixNano())
	timer <- struct{}{}
	if status := <-res; status != http.StatusUnauthorized {
		t.Fatalf("a waiter whose key expired: %d, want 401", status)
	}
}

// TestWaitParameter: wait takes whole seconds up to MaxWait, and only
// beside sync.
func TestWaitParameter(t *testing.T) {
	t.Parallel()
	f, _ := waitFixture(t)
	for _, c := range []struct {
		query  string
		status int
	}{
		{"sync=start&wait=0", http.StatusOK},
		{"sync=start&wait=31", http.StatusBadRequest},
		{"sync=start&wait=-1", http.StatusBadRequest},
		{"sync=start&wait=1.5", http.StatusBadRequest},
		{"sync=start&wait=1&wait=2", http.StatusBadRequest},
		{"wait=5", http.StatusBadRequest},
	} {
		if status, _, body := feedGet(t, f.Handler, f, c.query); status != c.status {
			t.Errorf("%s: %d %v, want %d", c.query, status, body["message"], c.status)
		}
	}
	if formsapi.MaxWait != 30 {
		t.Errorf("MaxWait %d: the docs say 30", formsapi.MaxWait)
	}
}

// waitOnce sends one waiting sync request after token to h, in a
// goroutine of its own, and returns a channel with its status and body.
func waitOnce(h http.Handler, f waittest.Fixture, token string) <-chan map[string]any {
	res := make(chan map[string]any, 1)
	go func() {
		r := httptest.NewRequest(http.MethodGet, "/v1/forms/"+f.FormID+"/submissions?"+url.Values{"sync": {token}, "wait": {"30"}}.Encode(), nil)
		r.Header.Set("Authorization", "Bearer "+f.Key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var body map[string]any
		json.Unmarshal(w.Body.Bytes(), &body)
		body["status"] = w.Code
		res <- body
	}()
	return res
}

// TestWaitHoldsNoStoreContext: by the time a waiting request blocks, the
// store context its key's lookup and its page read ran under (with
// WithStoreTimeout, a deadline and its timer) has ended, so a waiter
// holds none; woken, it looks its key up again under a new one.
func TestWaitHoldsNoStoreContext(t *testing.T) {
	t.Parallel()
	f, s := waitFixture(t)
	var mu sync.Mutex
	var lookups []context.Context // the context of each key lookup
	keys := formsapi.KeyResolverFunc(func(ctx context.Context, key string) (string, error) {
		mu.Lock()
		lookups = append(lookups, ctx)
		mu.Unlock()
		return s.ResolveKey(ctx, key)
	})
	atBlock := make(chan error, 1)
	h := formsapi.NewHandler(s, keys, formsapi.WithStoreTimeout(time.Hour), formsapi.WithWaitTimer(neverTimer), formsapi.WithWaitHook(func() {
		mu.Lock()
		last := lookups[len(lookups)-1]
		mu.Unlock()
		atBlock <- last.Err()
	}))
	_, _, first := feedGet(t, h, f, "sync=start")
	res := waitOnce(h, f, first["syncToken"].(string))
	if err := <-atBlock; err == nil {
		t.Error("the waiter blocked holding the store context of its key's lookup and its page read, still live")
	}
	f.Write(t)
	got := <-res
	if got["status"] != http.StatusOK || len(got["submissions"].([]any)) != 1 {
		t.Fatalf("the woken waiter answered %v, want 200 and the one submission written", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lookups) != 3 || lookups[2] == lookups[1] {
		t.Errorf("%d key lookups, the woken waiter's under the context it blocked with: %t; want 3 (sync=start, the wait, its wake-up), the last under a new context", len(lookups), len(lookups) == 3 && lookups[2] == lookups[1])
	}
}

// TestWaitBlocksAtTheHandlersTop: a waiting request blocks with none of
// its route's frames on its goroutine's stack (its parse, its room, its
// first read, the page's buffer), only the keyed handler's and the
// wait's own. A goroutine's stack shrinks at a collection only while less
// than a quarter of it is used, so those frames, copies of the request
// each, kept every waiter's stack at 16 KiB under net/http instead of 8
// (BenchmarkWaiterMemory measures it).
func TestWaitBlocksAtTheHandlersTop(t *testing.T) {
	t.Parallel()
	f, _ := waitFixture(t, formsapi.WithWaitTimer(neverTimer))
	stack := make(chan []string, 1)
	f.Hook(func() {
		pcs := make([]uintptr, 64)
		frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
		var names []string
		for {
			fr, more := frames.Next()
			names = append(names, fr.Function)
			if !more {
				break
			}
		}
		stack <- names
	})
	_, _, first := feedGet(t, f.Handler, f, "sync=start")
	res := waitOnce(f.Handler, f, first["syncToken"].(string))
	names := <-stack
	f.Write(t)
	<-res
	var ours []string // the handler's frames, from the wait up to handle's
	for _, n := range names {
		if strings.HasPrefix(n, "github.com/formsapi/formsapi.") {
			ours = append(ours, strings.TrimPrefix(n, "github.com/formsapi/formsapi."))
		}
		if strings.Contains(n, "(*api).handle.func") {
			break
		}
	}
	for _, n := range ours {
		for _, deep := range []string{"serveKeyed", "keyed", "serveSubmissions", "listFeed", "feedPage", "withBuffer", "authenticate"} {
			if strings.Contains(n, deep) {
				t.Fatalf("a waiter blocks inside %s: the handler's frames over the hook are %q", deep, ours)
			}
		}
	}
	if len(ours) == 0 || !strings.Contains(ours[len(ours)-1], "(*api).handle.func") {
		t.Fatalf("a waiter's stack does not reach handle's closure: %q", names)
	}
}
