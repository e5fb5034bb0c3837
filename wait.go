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
// it blocks wakes it. While it blocks it holds no place in flight, no
// room for a page and no store context: only a place among the handler's
// waiters (maxWaiters, and maxWaitersPerAccount of them for one
// account), its registration, a share of one timer (waitTick) and its
// request on the heap (feedWait). Woken, it looks its key up again
// (which takes its places in flight again, and refuses a key revoked,
// expired or no longer holding the form), reserves a page's room and
// reads the page again: the key's lookup and the page read are the
// statements of a wake-up, none while it sleeps.
//
// What an idle waiter costs a node is mostly net/http's: its
// connection's buffers (4 KiB to read, 4 and 2 to write), the request,
// and two goroutines, the handler's and the one that watches the
// connection for the client's going, whose stacks the runtime sizes by
// what they use when it collects. So the handler's waits block at the
// top of its own frames (feedWait), where the handler's goroutine needs
// 8 KiB of stack, not 16 (BenchmarkWaiterMemory measures it).

import (
	"errors"
	"fmt"
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

// waitTick is the grain of the waits' ends: the waits that end in the
// same tick share one channel and one timer (waiters.end), so a waiter
// holds no timer of its own, and a wait lasts up to a tick longer than
// it was given.
const waitTick = 100 * time.Millisecond

// waiters counts the requests waiting in a handler.
type waiters struct {
	n        atomic.Int64
	accounts *inFlight[string]

	mu        sync.Mutex
	shutdowns map[*http.Server]chan struct{} // closed when the server shuts down
	ends      map[int64]*waitEnd             // by tick (waiters.end)
	epoch     time.Time                      // tick 0, with the monotonic clock's reading
}

// waitEnd is the end of the waits that end in one tick: ch is closed
// when the tick comes, by one timer for all of them.
type waitEnd struct {
	ch    chan struct{}
	tick  int64
	n     int // waits holding it
	timer *time.Timer
}

func newWaiters() *waiters {
	return &waiters{accounts: newInFlight[string](maxWaitersPerAccount), shutdowns: map[*http.Server]chan struct{}{},
		ends: map[int64]*waitEnd{}, epoch: time.Now()}
}

// end returns the end of a wait of d from now: the first tick at or
// after it, shared with the other waits that end in that tick. The
// caller must give it back (endDone) once it no longer waits.
func (ws *waiters) end(d time.Duration) *waitEnd {
	return ws.endAt(time.Since(ws.epoch), d)
}

// endAt is end at now, the time since the epoch.
func (ws *waiters) endAt(now, d time.Duration) *waitEnd {
	tick := int64((now + d + waitTick - 1) / waitTick)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	e := ws.ends[tick]
	if e == nil {
		e = &waitEnd{ch: make(chan struct{}), tick: tick}
		e.timer = time.AfterFunc(time.Until(ws.epoch.Add(time.Duration(tick)*waitTick)), func() {
			ws.mu.Lock()
			defer ws.mu.Unlock()
			close(e.ch)
			if ws.ends[tick] == e {
				delete(ws.ends, tick)
			}
		})
		ws.ends[tick] = e
	}
	e.n++
	return e
}

// endDone gives back a wait's end (end): its timer stops once no wait
// holds it.
func (ws *waiters) endDone(e *waitEnd) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if e.n--; e.n == 0 && ws.ends[e.tick] == e {
		e.timer.Stop()
		delete(ws.ends, e.tick)
	}
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

// watch registers req as a waiter of its form with the store's hub.
func (a *api) watch(req *listRequest) *feedwait.Watch {
	return a.waiter.WatchFeed(req.list.FormID, keyformat.Hash(req.key), req.after)
}

// feedWait is a sync request that may wait (wait=): what it needs to
// read its page, read it again when woken, and answer, on the heap. Its
// goroutine reads and waits from handle (wait), with the frames of its
// authentication and its parameters gone, copies of the request each:
// a collection halves a goroutine's stack only while less than a
// quarter of it is used, so a waiter that blocked under them kept 16 KiB
// of stack under a net/http server, and one that blocks from handle
// keeps 8, with about 1 KiB left for a host's router and middleware
// above the handler. Its first read, from there too, mostly fits in 8.
type feedWait struct {
	req     listRequest
	d       time.Duration   // how long it may wait (waitFor), from its first block
	entered bool            // it holds a place among the waiters
	watch   *feedwait.Watch // held while it reads and blocks; nil once released
	// over is closed when its time is up: end's, which it holds
	// (waiters.end), or the tests' seam's (end nil).
	over <-chan struct{}
	end  *waitEnd
}

// wait reads fw's page and answers it, or, when it is empty, waits for
// the form's next entries: it blocks, and when woken reads the page
// again, until a page has entries, the wait is over (the empty page),
// the client goes away or a step fails. Each turn registers with the
// hub before it reads, so that no write after the read is missed. Kept
// small: what it calls to read and answer returns before it blocks.
func (a *api) wait(w http.ResponseWriter, r *http.Request, fw *feedWait) {
	defer a.endWait(fw)
	for {
		fw.watch = a.watch(&fw.req)
		if a.feedPage(w, r, &fw.req, fw.req.list.FormID, true) {
			return
		}
		if !fw.entered && !a.startWait(w, r, fw) {
			return
		}
		outcome := a.block(r, fw)
		fw.release()
		switch outcome {
		case clientGone:
			return
		case waitOver:
			a.emptyFeedPage(w, r, &fw.req)
			return
		}
		if !a.rejoin(w, r, &fw.req) {
			return
		}
	}
}

// startWait takes fw's place among the waiters and starts its time,
// reporting true; false, with a 429 answered, when no place is left.
func (a *api) startWait(w http.ResponseWriter, r *http.Request, fw *feedWait) bool {
	if !a.waiters.enter(fw.req.account) {
		a.fail(w, r, fmt.Errorf("%w: waiting sync requests", errBusy))
		return false
	}
	fw.entered = true
	if a.cfg.waitTimer != nil {
		fw.over = a.cfg.waitTimer(fw.d)
	} else {
		fw.end = a.waiters.end(fw.d)
		fw.over = fw.end.ch
	}
	return true
}

// endWait ends what fw holds: its registration, its store context, its
// room, its place in flight, and, once it waited, its place among the
// waiters and its time.
func (a *api) endWait(fw *feedWait) {
	fw.release()
	fw.req.cancelStore()
	fw.req.room.release()
	fw.req.leave.end()
	if !fw.entered {
		return
	}
	a.waiters.leave(fw.req.account)
	if fw.end != nil {
		a.waiters.endDone(fw.end)
	}
}

// release ends fw's registration with the hub, if it holds one.
func (fw *feedWait) release() {
	if fw.watch != nil {
		fw.watch.Release()
		fw.watch = nil
	}
}

// waitOutcome is how a block ended.
type waitOutcome int

const (
	wokenUp    waitOutcome = iota // the form's or the key's channel: read again, maybe wait again
	waitOver                      // the wait's time is up, or the node is going away: read again, answer
	clientGone                    // the client went away: answer nothing
)

// block waits, out of flight, without room and without a store context,
// until fw's form or key is woken, its timer fires, the node shuts down
// or the client leaves.
func (a *api) block(r *http.Request, fw *feedWait) waitOutcome {
	fw.req.cancelStore()
	fw.req.room.release()
	fw.req.leave.end()
	fw.watch.Blocked()
	if a.cfg.waitHook != nil {
		a.cfg.waitHook()
	}
	select {
	case <-fw.watch.Form:
		return wokenUp
	case <-fw.watch.Key:
		return wokenUp
	case <-fw.watch.Done:
		return waitOver
	case <-a.waiters.shutdown(r):
		return waitOver
	case <-fw.over:
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
