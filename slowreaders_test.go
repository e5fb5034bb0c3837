//go:build unix

package formsapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/ratelimit"
)

// firstWrite wraps a handler's ResponseWriter and calls mark once: at
// its first Write (before the write, which may block for good on a
// client that reads nothing) or when the handler returns, whichever
// comes first. Once every request has been marked, every page the
// handler will build for them is built.
type firstWrite struct {
	http.ResponseWriter
	once sync.Once
	mark func()
}

func (f *firstWrite) Write(b []byte) (int, error) {
	f.once.Do(f.mark)
	return f.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (f *firstWrite) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// marking serves h and says on marked when each request has begun its
// answer or ended, and on done when each has ended.
func marking(h http.Handler, marked, done chan<- int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := 0
		fw := &firstWrite{ResponseWriter: w}
		fw.mark = func() { marked <- status }
		rec := &statusOf{ResponseWriter: fw, status: &status}
		h.ServeHTTP(rec, r)
		fw.once.Do(fw.mark)
		done <- status
	})
}

// statusOf records the status its handler writes.
type statusOf struct {
	http.ResponseWriter
	status *int
}

func (s *statusOf) WriteHeader(code int) {
	*s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusOf) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// stalledClient opens a connection to addr with a 4 KiB receive buffer,
// sends one GET of target with key, and never reads.
func stalledClient(t *testing.T, addr, target, key string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer %s\r\n\r\n", target, key); err != nil {
		t.Fatal(err)
	}
	return c
}

// smallSendBuffers serves h over TCP with a send buffer of 64 KiB on
// every connection, so that what a client does not read stays in the
// handler, not in the kernel, whatever the kernel's own tuning (Linux
// lets a send buffer grow to 4 MiB).
func smallSendBuffers(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = sendBuffered{srv.Listener}
	srv.Start()
	return srv
}

type sendBuffered struct{ net.Listener }

func (l sendBuffered) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}

// liveHeap returns the bytes of live heap objects after a full
// collection (two, so that sync.Pool's victim cache is dropped too).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// stallRun has n clients of key k that never read ask h, over real TCP,
// for a page of form big, and returns the live heap the pages added
// once every request has its page built (or was refused), and the
// statuses of the requests that were answered by then.
func stallRun(t *testing.T, h http.Handler, n int) (grown int64, refused int) {
	t.Helper()
	marked, done := make(chan int, n), make(chan int, n)
	srv := smallSendBuffers(marking(h, marked, done))
	before := liveHeap()
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = stalledClient(t, srv.Listener.Addr().String(), "/v1/forms/big/submissions?limit=1000", "k")
	}
	for range n {
		if st := <-marked; st == http.StatusServiceUnavailable {
			refused++
		}
	}
	grown = int64(liveHeap()) - int64(before)
	for _, c := range conns {
		c.Close()
	}
	for range n {
		<-done // every handler returns once its client is gone
	}
	srv.Close()
	return grown, refused
}

// TestStalledClientsHoldBoundedMemory: clients that send a request for a
// large page and read nothing (real TCP, a 4 KiB receive buffer) pin
// their pages while the writes wait. Without a bound (as before issue
// 24) the live heap grows by about a page per client; with one, by at
// most the room, and the requests past it are answered 503 without a
// page. Not parallel: it measures the heap.
func TestStalledClientsHoldBoundedMemory(t *testing.T) {
	is := is.New(t)
	const (
		pageBytes = 1 << 20
		room      = 8 << 20
		clients   = 24 // within the default bound of a key's requests in flight
	)
	store := bigForm(t, 8, 240<<10) // four submissions to a page
	immediate := formsapi.WithRoomTimer(func(time.Duration) (<-chan time.Time, func() bool) {
		c := make(chan time.Time)
		close(c) // no wait for room: a request that finds none is refused at once
		return c, func() bool { return false }
	})

	// As before: no bound, no stall timeout (httptest's server has no
	// WriteTimeout either).
	open := formsapi.NewHandler(store, store, formsapi.WithPageBytes(pageBytes),
		formsapi.WithRateLimit(ratelimit.Options{BytesInFlight: -1, StallTimeout: -1}))
	grownOpen, refusedOpen := stallRun(t, open, clients)
	t.Logf("unbounded: live heap +%d KiB, %d refused", grownOpen>>10, refusedOpen)
	is.Equal(refusedOpen, 0)                   // nothing refused
	is.True(grownOpen > clients*pageBytes*3/4) // each stalled client pins about a page

	var held func() int64
	bounded := formsapi.NewHandler(store, store, formsapi.WithPageBytes(pageBytes), immediate, formsapi.WithRoomProbe(&held),
		formsapi.WithRateLimit(ratelimit.Options{BytesInFlight: room, StallTimeout: -1})) // no cut-off: the room alone (TestStalledClientIsCutOff)
	grown, refused := stallRun(t, bounded, clients)
	t.Logf("bounded by %d KiB: live heap +%d KiB, %d refused", room>>10, grown>>10, refused)
	fit := room / 2 / formsapi.RoomReservation(pageBytes) // one account's share: half the room
	is.Equal(refused, clients-fit)                        // all but the pages that fit are refused
	is.True(grown < 2*room)                               // the pages held stay within the room (and a margin for the rest)
	is.Equal(held(), int64(0))                            // every page's bytes are given back once its client is gone
}

// TestStalledClientIsCutOff: a client that reads nothing of a large
// answer is cut off once a piece of it has waited StallTimeout, and its
// page's bytes are given back, while the server has no WriteTimeout at
// all; a client that reads gets the whole page, written in pieces.
func TestStalledClientIsCutOff(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	store := bigForm(t, 8, 240<<10)
	var held func() int64
	h := formsapi.NewHandler(store, store, formsapi.WithPageBytes(1<<20), formsapi.WithRoomProbe(&held),
		formsapi.WithRateLimit(ratelimit.Options{StallTimeout: 20 * time.Millisecond}))
	marked, done := make(chan int, 2), make(chan int, 2)
	srv := smallSendBuffers(marking(h, marked, done))
	defer srv.Close()

	c := stalledClient(t, srv.Listener.Addr().String(), "/v1/forms/big/submissions?limit=1000", "k")
	defer c.Close()
	is.Equal(<-marked, 200) // its page is built and being written
	is.Equal(<-done, 200)   // and the handler returns though the client never reads
	is.Equal(held(), int64(0))
	// The connection was closed: what the client finally reads ends
	// before the page does.
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	is.NoErr(err)
	n, err := io.Copy(io.Discard, res.Body)
	is.True(err != nil)                // cut short
	is.True(n < res.ContentLength)     // of the page
	is.True(res.ContentLength > 1<<19) // a page of many pieces

	// A client that reads gets all of it, in pieces, on a connection it
	// then uses again. (A handler of its own, whose stall timeout no
	// reader on a loaded machine comes near.)
	h = formsapi.NewHandler(store, store, formsapi.WithPageBytes(1<<20), formsapi.WithRoomProbe(&held),
		formsapi.WithRateLimit(ratelimit.Options{StallTimeout: time.Minute}))
	reading := smallSendBuffers(marking(h, marked, done))
	defer reading.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	for range 2 {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", reading.URL+"/v1/forms/big/submissions?limit=1000", nil)
		req.Header.Set("Authorization", "Bearer k")
		res, err := client.Do(req)
		is.NoErr(err)
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		is.NoErr(err)
		is.Equal(res.StatusCode, 200)
		is.Equal(int64(len(body)), res.ContentLength)
		<-marked
		<-done
	}
	is.Equal(held(), int64(0))
}

// TestNoRoomAnswers503: an account holds at most half the room; with
// its share full of pages being read, its next request waits for room,
// and past its wait is answered 503 with Retry-After: 1 without a store
// call, while another account's are served; with the whole room full,
// every account's wait; a request that waits while room is given back
// is served.
func TestNoRoomAnswers503(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := newHeldStore()
	keys := &countingKeys{accounts: map[string]string{"a": "acct-a", "b": "acct-b", "c": "acct-c"}}
	waits := make(chan chan time.Time, 10)
	timer := formsapi.WithRoomTimer(func(d time.Duration) (<-chan time.Time, func() bool) {
		if d != time.Second {
			t.Errorf("waits for room %s, want 1s", d)
		}
		c := make(chan time.Time, 1)
		waits <- c
		return c, func() bool { return true }
	})
	var held func() int64
	page := int64(formsapi.RoomReservation(formsapi.DefaultPageBytes))
	h := formsapi.NewHandler(s.store(), keys, timer, formsapi.WithRoomProbe(&held),
		formsapi.WithRateLimit(ratelimit.Options{BytesInFlight: int(4 * page)}))
	refused := func(key string) {
		t.Helper()
		got := make(chan response, 1)
		go func() { got <- do(t, h, "GET", "/v1/forms", bearer(key)...) }()
		(<-waits) <- time.Now() // it waits, and its wait ends
		res := <-got
		is.Equal(res.status, http.StatusServiceUnavailable)
		is.Equal(string(res.body), `{"success":false,"message":"service unavailable: the server is busy sending other answers, retry after the number of seconds in Retry-After"}`)
		is.Equal(res.header.Get("Retry-After"), "1")
	}

	waitA := hold(t, h, s, "a", 2) // account a's share is full
	is.Equal(held(), 2*page)
	refused("a")
	is.Equal(s.reads.Load(), int64(2)) // no store call for it
	waitB := hold(t, h, s, "b", 2)     // b is served beside a
	is.Equal(held(), 4*page)
	refused("c") // the room is full
	is.Equal(s.reads.Load(), int64(4))

	got := make(chan response, 1)
	go func() { got <- do(t, h, "GET", "/v1/forms", bearer("c")...) }()
	<-waits          // it waits, and its wait never ends by time
	close(s.release) // the pages are done: their room is given back
	for _, st := range append(waitA(), waitB()...) {
		is.Equal(st, 200)
	}
	is.Equal((<-got).status, 200) // and the one that waited has it
	is.Equal(held(), int64(0))
}
