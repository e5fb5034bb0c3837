package formsapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/matryer/is"
)

// manualTimer is a room timer whose waits end only when the test fires
// them, in the order they began.
type manualTimer chan chan time.Time

func (m manualTimer) timer(time.Duration) (<-chan time.Time, func() bool) {
	c := make(chan time.Time, 1)
	m <- c
	return c, func() bool { return true }
}

// TestRoomGrantsInOrder: reservations that do not fit wait, and are
// granted oldest first as room is given back; a large one is not passed
// over by smaller ones behind it; a wait that ends without room gives
// its place to the next.
func TestRoomGrantsInOrder(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	timers := make(manualTimer, 10)
	r := newRoom(10)
	r.timer = timers.timer
	ctx := context.Background()

	a, err := r.reserve(ctx, "a", 6)
	is.NoErr(err)
	is.Equal(r.inUse(), int64(6))

	type result struct {
		h   *roomHold
		err error
	}
	accounts := 0
	reserve := func(n int) (<-chan result, chan time.Time) {
		accounts++
		account := fmt.Sprint("account", accounts) // each its own: no share in the way
		c := make(chan result, 1)
		go func() {
			h, err := r.reserve(ctx, account, n)
			c <- result{h, err}
		}()
		return c, <-timers // it waits
	}
	big, _ := reserve(8)            // does not fit beside a
	small, smallTimer := reserve(2) // would fit, but waits behind big
	is.Equal(r.inUse(), int64(6))

	a.release()
	got := <-big
	is.NoErr(got.err)
	is.Equal(r.inUse(), int64(10)) // big and small both fit now
	is.NoErr((<-small).err)
	smallTimer <- time.Now() // too late: it was granted

	// A wait that runs out is answered errNoRoom and holds nothing.
	late, lateTimer := reserve(5)
	lateTimer <- time.Now()
	is.True(errors.Is((<-late).err, errNoRoom))
	is.Equal(r.inUse(), int64(10))

	// A page larger than promised takes its excess without waiting, and
	// gives back all it took.
	got.h.resize(12)
	is.Equal(r.inUse(), int64(14))
	got.h.grow(1)
	is.Equal(r.inUse(), int64(15))
	got.h.release()
	got.h.release() // a second release gives nothing back twice
	is.Equal(r.inUse(), int64(2))

	// A reservation larger than the room waits for all of it.
	whole, wholeTimer := reserve(50)
	r.add("account2", -2) // small's hold, given back
	w := <-whole
	is.NoErr(w.err)
	is.Equal(r.inUse(), int64(10))
	wholeTimer <- time.Now()
	w.h.release()

	// A canceled request stops waiting with its context's error.
	x, _ := r.reserve(ctx, "x", 10)
	cctx, cancel := context.WithCancel(ctx)
	c := make(chan error, 1)
	go func() { _, err := r.reserve(cctx, "y", 1); c <- err }()
	<-timers
	cancel()
	is.True(errors.Is(<-c, context.Canceled))
	x.release()
	is.Equal(r.inUse(), int64(0))
	is.Equal(r.waiting.Len(), 0)
}

// TestRoomShares: an account holds at most half the room (or one
// reservation when half holds none): its next reservation waits for its
// own pages, while other accounts' go past it.
func TestRoomShares(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	timers := make(manualTimer, 10)
	r := newRoom(10)
	r.timer = timers.timer
	ctx := context.Background()

	a1, err := r.reserve(ctx, "a", 4)
	is.NoErr(err)
	waited := make(chan error, 1)
	var a2 *roomHold
	go func() {
		var err error
		a2, err = r.reserve(ctx, "a", 2) // 6 would pass a's share of 5
		waited <- err
	}()
	a2Timer := <-timers
	b, err := r.reserve(ctx, "b", 5) // goes past a's waiting one
	is.NoErr(err)
	is.Equal(r.inUse(), int64(9))
	a1.release() // a's own page done: its waiting one fits its share
	is.NoErr(<-waited)
	a2Timer <- time.Now()
	is.Equal(r.inUse(), int64(7))

	// A reservation larger than half the room goes alone for its account.
	c, err := r.reserve(ctx, "c", 3)
	is.NoErr(err)
	is.Equal(r.inUse(), int64(10))
	c.release()
	b.release()
	a2.release()
	big, err := r.reserve(ctx, "d", 8)
	is.NoErr(err)
	is.Equal(r.inUse(), int64(8))
	big.release()
	is.Equal(len(r.accounts), 0) // nothing kept of accounts that hold nothing
}

// deadlineWriter records the write deadlines set on it and the bytes
// written, as http.ResponseController sees a connection's writer.
type deadlineWriter struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
	writes    []int
}

func (d *deadlineWriter) SetWriteDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	d.writes = append(d.writes, len(b))
	return d.ResponseRecorder.Write(b)
}

// TestWriteChunkedDeadlines: a body goes out in pieces of writeChunk
// bytes, each under a deadline of the stall timeout and never past the
// server's WriteTimeout, and leaves the
// connection with the server's own deadline (none without a
// WriteTimeout), so that a later request on it is not cut short.
func TestWriteChunkedDeadlines(t *testing.T) {
	t.Parallel()
	body := make([]byte, 2*writeChunk+100)
	for _, tc := range []struct {
		name         string
		writeTimeout time.Duration
		stall        time.Duration
	}{
		{"no WriteTimeout", 0, time.Hour},
		{"a WriteTimeout past the stall timeout", 2 * time.Hour, time.Hour},
		{"a WriteTimeout before it", time.Minute, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			a := &api{cfg: config{access: accessConfig{stall: tc.stall}}}
			r := httptest.NewRequest("GET", "/v1/forms", nil)
			if tc.writeTimeout > 0 {
				r = r.WithContext(context.WithValue(r.Context(), http.ServerContextKey, &http.Server{WriteTimeout: tc.writeTimeout}))
			}
			w := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
			start := time.Now()
			a.writeChunked(w, r, start, body)
			end := time.Now()
			is.Equal(w.writes, []int{writeChunk, writeChunk, 100})
			is.Equal(w.Body.Len(), len(body))
			is.Equal(len(w.deadlines), 4) // one for each piece, and the server's back
			for _, d := range w.deadlines[:3] {
				if tc.writeTimeout > 0 && tc.writeTimeout < tc.stall {
					is.Equal(d, start.Add(tc.writeTimeout)) // the server's bound holds
					continue
				}
				is.True(!d.Before(start.Add(tc.stall)) && !d.After(end.Add(tc.stall)))
			}
			last := w.deadlines[3]
			if tc.writeTimeout == 0 {
				is.True(last.IsZero()) // none, as the server had it
			} else {
				is.Equal(last, start.Add(tc.writeTimeout))
			}
		})
	}

	// No stall timeout, or a HEAD: one write, no deadline.
	is := is.New(t)
	a := &api{}
	w := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
	a.writeChunked(w, httptest.NewRequest("GET", "/", nil), time.Now(), body)
	is.Equal(w.writes, []int{len(body)})
	is.Equal(len(w.deadlines), 0)
}
