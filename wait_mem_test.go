package formsapi_test

import (
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/ratelimit"
)

// BenchmarkWaiterMemory measures what a waiting sync request (wait=)
// holds while it waits, in a net/http server over memstore: the Go heap
// and goroutine stacks per waiter, and goroutines per waiter, against
// the same server with none waiting. The waiters' clients are bare
// connections with no goroutine of their own (a request written, the
// answer left unread until the end), so the figures are the server's,
// but for the client ends' few hundred bytes of heap a connection. Each
// iteration starts the waiters, lets three collections shrink the
// stacks (a collection halves a stack at most once, and only one less
// than a quarter used), measures, and ends them.
//
//	go test -run '^$' -bench BenchmarkWaiterMemory -benchtime 3x .
func BenchmarkWaiterMemory(b *testing.B) {
	n := 1000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(2*n+200) {
		n = int(lim.Cur-200) / 2 // both ends of each connection are in this process
	}
	if n < 50 {
		b.Skipf("%d open files allowed: too few for the waiters", lim.Cur)
	}
	var blocked atomic.Int64
	f, _ := waitFixture(b, formsapi.WithWaitTimer(neverTimer), formsapi.WithRateLimit(ratelimit.Options{InFlightPerKey: -1, InFlightPerAccount: -1, BytesInFlight: -1}))
	f.Hook(func() { blocked.Add(1) })
	_, _, first := feedGet(b, f.Handler, f, "sync=start")
	token := first["syncToken"].(string)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: f.Handler}
	go srv.Serve(ln)
	defer srv.Close()
	req := []byte("GET /v1/forms/" + f.FormID + "/submissions?" + url.Values{"sync": {token}, "wait": {"30"}}.Encode() +
		" HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer " + f.Key + "\r\n\r\n")
	measure := func() (ms runtime.MemStats, goroutines int) {
		for range 3 {
			runtime.GC()
		}
		runtime.ReadMemStats(&ms)
		return ms, runtime.NumGoroutine()
	}
	var heap, stack, gs float64
	for b.Loop() {
		before, g0 := measure()
		blocked.Store(0)
		conns := make([]net.Conn, n)
		for i := range conns {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Write(req); err != nil {
				b.Fatal(err)
			}
			conns[i] = c
		}
		for blocked.Load() < int64(n) {
			time.Sleep(time.Millisecond)
		}
		after, g1 := measure()
		heap += (float64(after.HeapInuse) - float64(before.HeapInuse)) / float64(n)
		stack += (float64(after.StackInuse) - float64(before.StackInuse)) / float64(n)
		gs += float64(g1-g0) / float64(n)
		for _, c := range conns {
			c.Close()
		}
		for f.Waiting() > 0 {
			time.Sleep(time.Millisecond)
		}
	}
	b.ReportMetric(heap/float64(b.N), "heap-B/waiter")
	b.ReportMetric(stack/float64(b.N), "stack-B/waiter")
	b.ReportMetric(gs/float64(b.N), "goroutines/waiter")
	b.ReportMetric(0, "ns/op")
}
