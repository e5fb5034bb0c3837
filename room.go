package formsapi

// Bytes in flight. A page is built whole in memory (its tag, its length
// and a clean 500 need all of it) and then written; a client that sends
// its request and reads nothing keeps the page in memory while the write
// waits. Requests in flight are bounded per key and per account
// (concurrency.go), but not the bytes they hold: 32 requests of one key
// under the default budget pin over 128 MiB, and every key together
// more. So the handler holds the pages of all its requests within one
// bound, the room:
//
//   - a request reserves its page's byte budget (and some slack) before
//     the store reads anything, waiting at most roomWait for room, and is
//     answered 503 with Retry-After: 1 if none comes; an account holds
//     at most half the room, so that one account's stalled clients
//     cannot take it all from the others;
//   - once the page is built, its reservation becomes what the page
//     takes (its buffer's capacity, and its gzip coding's), given back in
//     part or taken beyond the estimate without waiting, since the
//     memory is in use already;
//   - the body is written in pieces of writeChunk bytes, each under a
//     write deadline of the stall timeout (http.ResponseController), so a
//     client that stops reading is cut off within that time and its page
//     freed; the reservation is given back when the write ends.
//
// The reservation is given back only when the page's buffer is, not as
// each piece is written: the buffer is one allocation, freed whole, and
// counting its written part as free would let the bound be passed by as
// much as stalled clients hold. The bound is per handler, per process.

import (
	"container/list"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

const (
	// roomWait is the longest a request waits for room before its 503.
	roomWait = time.Second
	// writeChunk is the piece of a body written under one deadline.
	writeChunk = 64 << 10
	// roomSlack is what a page may take beyond its byte budget: the
	// envelope, the feed's refs and token, a cursor.
	roomSlack = 64 << 10
)

// errNoRoom refuses a request that found no room for its page within
// roomWait: 503 with Retry-After: 1.
var errNoRoom = errors.New("no room for the page: too many bytes in flight")

// room bounds the bytes of the pages the handler holds, and each
// account's share of them: an account holds at most half the room (or
// one page, if half holds none), so that one account's stalled clients
// leave the other half to everyone else. Waiting reservations are
// granted in the order they came, so that a large one is not passed over
// forever by smaller ones; one that waits only for its own account's
// share lets those behind it go first.
type room struct {
	max int64 // the bound; 0: none

	mu       sync.Mutex
	held     int64
	accounts map[string]int64 // bytes held by each account holding any
	waiting  list.List        // of *roomWaiter, oldest first

	// timer starts the wait of a reservation: a channel that fires once d
	// has passed, and a function that stops it. Tests set it.
	timer func(d time.Duration) (<-chan time.Time, func() bool)
}

type roomWaiter struct {
	account string
	n       int64
	ready   chan struct{} // closed once granted
}

func newRoom(max int) *room {
	return &room{max: int64(max), accounts: map[string]int64{}, timer: func(d time.Duration) (<-chan time.Time, func() bool) {
		t := time.NewTimer(d)
		return t.C, t.Stop
	}}
}

// fits reports whether n more bytes of account fit: within the room and
// within the account's share. r.mu is held.
func (r *room) fits(account string, n int64) (room, share bool) {
	mine := r.accounts[account]
	return r.held+n <= r.max, mine == 0 || mine+n <= r.max/2
}

// take counts n more bytes of account. r.mu is held.
func (r *room) take(account string, n int64) {
	r.held += n
	if m := r.accounts[account] + n; m > 0 {
		r.accounts[account] = m
	} else {
		delete(r.accounts, account)
	}
}

// reserve takes n bytes of room for account, waiting for them at most
// roomWait or until ctx ends, and returns the hold that gives them back.
// A reservation larger than the whole bound waits for all of it. It
// returns errNoRoom when the wait ran out and ctx's error when ctx
// ended.
func (r *room) reserve(ctx context.Context, account string, n int) (*roomHold, error) {
	h := &roomHold{r: r, account: account}
	if r.max <= 0 {
		return h, nil
	}
	want := min(int64(n), r.max)
	r.mu.Lock()
	if room, share := r.fits(account, want); room && share && r.waiting.Len() == 0 {
		r.take(account, want)
		r.mu.Unlock()
		h.n = want
		return h, nil
	}
	w := &roomWaiter{account: account, n: want, ready: make(chan struct{})}
	e := r.waiting.PushBack(w)
	r.grant() // it may go at once, past ones that wait for their share alone
	r.mu.Unlock()

	fire, stop := r.timer(roomWait)
	defer stop()
	var err error
	select {
	case <-w.ready:
		h.n = want
		return h, nil
	case <-fire:
		err = errNoRoom
	case <-ctx.Done():
		err = ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-w.ready: // granted as the wait ended: the page goes ahead
		h.n = want
		return h, nil
	default:
	}
	r.waiting.Remove(e)
	r.grant() // the ones behind it may go now
	return nil, err
}

// grant hands room to the waiting reservations that fit, oldest first:
// it stops at the first that the room cannot take, and passes over those
// that wait for their account's share alone. r.mu is held.
func (r *room) grant() {
	for e := r.waiting.Front(); e != nil; {
		w := e.Value.(*roomWaiter)
		room, share := r.fits(w.account, w.n)
		if !room {
			return
		}
		next := e.Next()
		if share {
			r.take(w.account, w.n)
			r.waiting.Remove(e)
			close(w.ready)
		}
		e = next
	}
}

// add changes the bytes account holds by d: taken without waiting when d
// is positive (the memory is in use already), given back when negative.
func (r *room) add(account string, d int64) {
	if r.max <= 0 || d == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.take(account, d)
	if d < 0 {
		r.grant()
	}
}

// inUse returns the bytes held now.
func (r *room) inUse() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// roomHold is one request's share of the room. A nil *roomHold holds
// nothing, and its methods do nothing: for answers that reserved none.
type roomHold struct {
	r       *room
	account string
	n       int64
}

// resize makes the hold n bytes: the page as built, whether more or less
// than was reserved for it.
func (h *roomHold) resize(n int) {
	if h == nil {
		return
	}
	h.r.add(h.account, int64(n)-h.n)
	h.n = int64(n)
}

// grow adds n bytes to the hold: a page's gzip coding, made beside it.
func (h *roomHold) grow(n int) {
	if h == nil {
		return
	}
	h.r.add(h.account, int64(n))
	h.n += int64(n)
}

// release gives the whole hold back. It may be called more than once.
func (h *roomHold) release() {
	if h == nil {
		return
	}
	h.r.add(h.account, -h.n)
	h.n = 0
}

// pageReservation is what a page reserves before it is read: its byte
// budget and slack, or with no budget (WithPageBytes(0)) that of the
// default budget, an estimate that the page's real size then corrects.
func (a *api) pageReservation() int {
	b := a.cfg.pageBytes
	if b <= 0 {
		b = DefaultPageBytes
	}
	return b + b/8 + roomSlack
}

// reservePage reserves room for a page of req, before any store read:
// it returns false, having answered 503 (or the client's departure),
// when there was none.
func (a *api) reservePage(w http.ResponseWriter, r *http.Request, req *request) bool {
	h, err := a.room.reserve(req.ctx, req.account, a.pageReservation())
	if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
		err = errNoRoom // the store timeout ran out while waiting: still no room
	}
	if err != nil {
		a.fail(w, r, err)
		return false
	}
	req.room = h
	return true
}

// writeChunked writes body, whose headers and status are set, in pieces
// of writeChunk bytes, each under a write deadline of the stall timeout
// from its start, and never past the deadline the server's WriteTimeout
// set at start (when the request began). Then it sets the connection's
// deadline back to the server's (none without a WriteTimeout), so that
// the next request on the connection is not cut short by a deadline of
// this one. A writer that
// cannot take deadlines gets the body in one write. It stops at the first
// failed write: the connection is closed then, and nothing more can go.
func (a *api) writeChunked(w http.ResponseWriter, r *http.Request, start time.Time, body []byte) {
	stall := a.cfg.access.stall
	if stall <= 0 || r.Method == http.MethodHead {
		w.Write(body)
		return
	}
	var hostEnd time.Time
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.WriteTimeout > 0 {
		hostEnd = start.Add(srv.WriteTimeout)
	}
	rc := http.NewResponseController(w)
	deadline := func() time.Time {
		d := time.Now().Add(stall)
		if !hostEnd.IsZero() && hostEnd.Before(d) {
			d = hostEnd
		}
		return d
	}
	if err := rc.SetWriteDeadline(deadline()); err != nil {
		w.Write(body) // no deadlines here (a recorder, a writer without Unwrap)
		return
	}
	for len(body) > 0 {
		n := min(len(body), writeChunk)
		if _, err := w.Write(body[:n]); err != nil {
			return
		}
		body = body[n:]
		if len(body) > 0 {
			rc.SetWriteDeadline(deadline())
		}
	}
	// What the connection's buffer still holds (a few KiB) goes once
	// the handler returns, as for any answer, after whatever observes the
	// request has seen it end.
	rc.SetWriteDeadline(hostEnd)
}
