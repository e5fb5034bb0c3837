package formsapi

// The live feed: a sync request with wait=<seconds> whose page is empty
// waits for the form's next entries instead of answering at once
// (docs/api.md, "Waiting for the next entries"). A long poll, not
// Server-Sent Events: the answer is the very page a poll gets (its
// token, its ETag, its 304), so every client, proxy and rate limit that
// handles a poll handles a wait, and the key is checked again before
// every answer, as for any request.
//
// A waiter registers with its store's hub (internal/feedwait) before it
// reads the page, so a write committed between that read and the moment
// it blocks wakes it. While it blocks it holds no place in flight and no
// room for a page: only a place among the handler's waiters (maxWaiters,
// and maxWaitersPerAccount of them for one account). Woken, it looks its
// key up again (which takes its places in flight again, and refuses a
// key revoked, expired or no longer holding the form), reserves a page's
// room and reads the page again: the key's lookup and the page read are
// the statements of a wake-up, none while it sleeps.

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formsapi/formsapi/internal/feedwait"
	"github.com/formsapi/formsapi/internal/keyformat"
)

// maxWait is the longest wait a request may ask for, in seconds: under
// the idle timeouts of common proxies and load balancers (60 s), so that
// a wait ends with an answer rather than a cut connection.
const maxWait = 30

// maxWaiters bounds the requests waiting at once in one handler, and
// maxWaitersPerAccount those of one account; past either, a request that
// would wait is answered 429 with Retry-After: 1, as past the bounds in
// flight.
const (
	maxWaiters           = 16384
	maxWaitersPerAccount = 1024
)

// writeMargin is what a wait leaves of the server's WriteTimeout for the
// answer to be written.
const writeMargin = 2 * time.Second

// waiters counts the requests waiting in a handler.
type waiters struct {
	n        atomic.Int64
	accounts *inFlight[string]

	mu        sync.Mutex
	shutdowns map[*http.Server]chan struct{} // closed when the server shuts down
}

func newWaiters() *waiters {
	return &waiters{accounts: newInFlight[string](maxWaitersPerAccount), shutdowns: map[*http.Server]chan struct{}{}}
}

// enter takes a waiter's place for account, reporting false when none is
// left.
func (ws *waiters) enter(account string) bool {
	if ws.n.Add(1) > maxWaiters {
		ws.n.Add(-1)
		return false
	}
	if !ws.accounts.enter(account) {
		ws.n.Add(-1)
		return false
	}
	return true
}

func (ws *waiters) leave(account string) {
	ws.accounts.leave(account)
	ws.n.Add(-1)
}

// shutdown returns a channel closed when the net/http server serving r
// begins to shut down (http.Server.Shutdown runs its RegisterOnShutdown
// functions first), or nil when r did not come through one: waiters end
// then, as their waits would hold Shutdown back to their end.
func (ws *waiters) shutdown(r *http.Request) <-chan struct{} {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok {
		return nil
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ch, ok := ws.shutdowns[srv]
	if !ok {
		ch = make(chan struct{})
		ws.shutdowns[srv] = ch
		srv.RegisterOnShutdown(func() {
			ws.mu.Lock()
			defer ws.mu.Unlock()
			close(ch)
			delete(ws.shutdowns, srv)
		})
	}
	return ch
}

// waitEnd returns how long req may wait, from now: what it asked, cut to
// its key's expiry by the handler's clock and to the server's
// WriteTimeout less writeMargin; 0 when it may not wait.
func (a *api) waitFor(r *http.Request, req *listRequest) time.Duration {
	d := req.wait
	if d <= 0 || a.waiter == nil {
		return 0
	}
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.WriteTimeout > 0 {
		d = min(d, time.Until(req.start.Add(srv.WriteTimeout-writeMargin)))
	}
	if exp := req.grant.ExpiresAt; !exp.IsZero() {
		d = min(d, exp.Sub(a.now()))
	}
	return max(d, 0)
}

// waitTimer returns a channel that receives once d has passed, and its
// stop: a timer, or the tests' seam.
func (a *api) waitTimer(d time.Duration) (<-chan time.Time, func() bool) {
	if a.cfg.waitTimer != nil {
		return a.cfg.waitTimer(d)
	}
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// watch registers req as a waiter of its form with the store's hub.
func (a *api) watch(req *listRequest) *feedwait.Watch {
	return a.waiter.WatchFeed(req.list.FormID, keyformat.Hash(req.key), req.after)
}

// waitOutcome is how a block ended.
type waitOutcome int

const (
	wokenUp    waitOutcome = iota // the form's or the key's channel: read again, maybe wait again
	waitOver                      // the wait's time is up, or the node is going away: read again, answer
	clientGone                    // the client went away: answer nothing
)

// block waits, out of flight and without room, until watch's form or key
// is woken, the timer fires, the node shuts down or the client leaves.
func (a *api) block(r *http.Request, req *listRequest, watch *feedwait.Watch, timer <-chan time.Time) waitOutcome {
	req.room.release()
	req.leave.end()
	watch.Blocked()
	if a.cfg.waitHook != nil {
		a.cfg.waitHook()
	}
	select {
	case <-watch.Form:
		return wokenUp
	case <-watch.Key:
		return wokenUp
	case <-watch.Done:
		return waitOver
	case <-a.waiters.shutdown(r):
		return waitOver
	case <-timer:
		return waitOver
	case <-r.Context().Done():
		return clientGone
	}
}

// rejoin makes a request that blocked a request again: a fresh store
// deadline, its key looked up again (in flight again, and refused as any
// request would be: revoked, expired, busy, the form out of its scope)
// with the form as it is now, and a page's room. On failure it has
// answered.
func (a *api) rejoin(w http.ResponseWriter, r *http.Request, req *listRequest) bool {
	req.cancelStore()
	ctx, cancel := a.storeContext(req.request)
	req.ctx, req.cancelStore = ctx, cancel
	g, fd, done, err := a.authorize(ctx, req.key, req.list.FormID, req.route.exact)
	if err != nil {
		if !errors.Is(err, errBusy) {
			err = errors.Join(errRejoin, err)
		}
		a.fail(w, r, err)
		return false
	}
	req.leave.set(done)
	if g.AccountID != req.account || !g.Allows(req.list.FormID) {
		a.fail(w, r, ErrFormNotFound)
		return false
	}
	req.grant, req.form = g, fd.form
	return a.reservePage(w, r, &req.request)
}

// errRejoin marks the error of a waiter's key looked up again.
var errRejoin = errors.New("the waiting request's key looked up again")

// leaver ends a request's count in flight once, and takes the count of
// its lookup again after a wait.
type leaver struct {
	mu sync.Mutex
	f  func()
}

func (l *leaver) end() {
	l.mu.Lock()
	f := l.f
	l.f = nil
	l.mu.Unlock()
	if f != nil {
		f()
	}
}

func (l *leaver) set(f func()) {
	l.end()
	l.mu.Lock()
	l.f = f
	l.mu.Unlock()
}
