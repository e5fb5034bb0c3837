// Command waitbench measures the live feed (sync requests with wait=,
// issue 38) on PostgreSQL: N idle waiters on one node, what they cost it
// (memory per waiter, the node's CPU, statements per second and the
// PostgreSQL backends' CPU while idle) against the same node with none,
// in the same run; then the time from a write's commit to a waiter's
// answer (its headers), for writes through the waiters' own node (woken
// at once) and through another node (found by the node's check, or its
// round when it follows the log).
//
//	go run ./internal/cmd/waitbench -n 1000,10000
//	go run ./internal/cmd/waitbench -n 10000 -apart -follow -notify -writer-every 3ms
//
// With -apart, the waiters' client is a process of its own, so the
// node's memory and CPU are its own (without it, both ends of every
// connection count, and 10,000 waiters need 20,000 open files in one
// process). With -writer-every, a writer of its own adds submissions to other
// forms while the writes are timed (the goal's "beside the writer").
//
// Memory per waiter is reported three ways: the Go heap and stacks in
// use (what the waiters hold), the resident set (which also holds what
// the runtime keeps free for later use: the stacks the waiters' first
// reads grew into, all at once, and left), and the resident set once
// that free memory is returned (debug.FreeOSMemory). -profile writes the
// node's heap profile and goroutines.
//
// It needs FORMSAPI_TEST_POSTGRES, and creates (and drops) a database of
// its own, waitbench, so that pg_stat_database counts its statements
// alone. The waiters are real HTTP connections to a net/http server in
// this process, so memory per waiter counts the server's connection and
// the client's, and the node's CPU counts both sides.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/ratelimit"
)

func main() {
	ns := flag.String("n", "1000,10000", "waiter counts to measure, each against none")
	forms := flag.Int("forms", 100, "forms the waiters wait on, as many waiters each")
	idle := flag.Duration("idle", 10*time.Second, "the idle window measured (under the 30 s wait)")
	writes := flag.Int("writes", 40, "writes timed, per kind")
	follow := flag.Bool("follow", false, "the waiters' node follows the change log (pgstore.WithFollow)")
	interval := flag.Duration("interval", pgstore.DefaultWaitCheck, "the node's check interval (pgstore.WithWaitCheck)")
	notify := flag.Bool("notify", false, "the waiters' node listens for notices of changes (pgstore.WithNotify)")
	writerEvery := flag.Duration("writer-every", 0, "while the writes are timed, a writer beside them adds a submission every this often (0: none) through a third store, to forms no one waits on")
	apart := flag.Bool("apart", false, "the waiters' client runs in a process of its own (this command, re-run), so the node's memory and CPU are its own and the waiters' connections count once against each process's open-file limit")
	clientMode := flag.Bool("client", false, "internal: run as -apart's client process (its orders on stdin)")
	profile := flag.String("profile", "", "a directory: after each idle window with waiters, the node's heap profile (heap-N.pprof, go tool pprof -sample_index=inuse_space) and goroutines (goroutines-N.txt) are written there")
	flag.Parse()
	if *clientMode {
		runClient()
		return
	}
	if *profile != "" {
		runtime.MemProfileRate = 4096 // a finer heap profile than the default 512 KiB
	}
	dsn := os.Getenv("FORMSAPI_TEST_POSTGRES")
	if dsn == "" {
		log.Fatal("waitbench: set FORMSAPI_TEST_POSTGRES")
	}
	ctx := context.Background()
	benchDSN, drop := database(ctx, dsn)
	defer drop()

	opts := []pgstore.Option{pgstore.WithWaitCheck(*interval)}
	if *follow {
		opts = append(opts, pgstore.WithFollow(0))
	}
	if *notify {
		opts = append(opts, pgstore.WithNotify(""))
	}
	node, err := pgstore.Open(ctx, withApp(benchDSN, "waitbench-node"), opts...)
	check(err)
	defer node.Close()
	other, err := pgstore.Open(ctx, withApp(benchDSN, "waitbench-other"))
	check(err)
	defer other.Close()
	// An account and a key per form: a node keeps at most 1,024 waiters
	// of one account.
	ids := make([]string, *forms)
	keys := map[string]string{}
	for i := range ids {
		ids[i] = fmt.Sprintf("form-%d", i)
		acct := fmt.Sprintf("acct-%d", i)
		key, err := formsapi.NewKey()
		check(err)
		check(node.AddKey(ctx, key, acct))
		keys[ids[i]] = key
		check(node.AddForm(ctx, acct, formsapi.Form{ID: ids[i], Title: ids[i]}))
	}

	var active atomic.Int64
	// No bound on requests or page bytes in flight: the waiters start
	// all at once, each in flight, with a page's room, until it blocks.
	h := formsapi.NewHandler(node, node, formsapi.WithRateLimit(ratelimit.Options{InFlightPerKey: -1, InFlightPerAccount: -1, BytesInFlight: -1}))
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateActive:
			active.Add(1)
		case http.StateIdle, http.StateClosed, http.StateHijacked:
			// counted by the waiters themselves below
		}
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 20000, DisableCompression: true}}

	// The token at the end of each form's feed.
	tokens := map[string]string{}
	for _, id := range ids {
		p := get(ctx, client, base, keys[id], id, url.Values{"sync": {"start"}})
		tokens[id] = p.token
	}

	fmt.Printf("waitbench: %d forms, check interval %s, follow %t, notify %t, client apart %t, idle window %s, GOMAXPROCS %d\n", *forms, *interval, *follow, *notify, *apart, *idle, runtime.GOMAXPROCS(0))
	for _, f := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(f)
		check(err)
		base0 := measureIdle(ctx, benchDSN, *idle)
		var w *waiters
		if *apart {
			w = startWaitersApart(base, keys, ids, tokens, n)
		} else {
			w = startWaiters(ctx, client, base, keys, ids, tokens, n)
		}
		loaded := measureIdle(ctx, benchDSN, *idle)
		fmt.Printf("n=%d: memory per waiter %.1f KiB (heap+stacks), %.1f KiB (RSS); node CPU %.2f%% of a core (none waiting: %.2f%%); statements %.2f/s (none waiting: %.2f/s); PostgreSQL backends' CPU %.2f%% of a core (none waiting: %.2f%%)\n",
			n, float64(loaded.heap-base0.heap)/float64(n)/1024, float64(loaded.rss-base0.rss)/float64(n)/1024,
			100*loaded.cpu, 100*base0.cpu, loaded.stmts, base0.stmts, 100*loaded.pgCPU, 100*base0.pgCPU)
		perWaiter := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(n) }
		fmt.Printf("n=%d: per waiter: heap in use %.1f KiB, stacks %.1f KiB, goroutines %.2f (%d against %d), heap objects %.1f; RSS once the free memory is returned (debug.FreeOSMemory) %.1f KiB\n",
			n, perWaiter(loaded.ms.HeapInuse, base0.ms.HeapInuse)/1024, perWaiter(loaded.ms.StackInuse, base0.ms.StackInuse)/1024,
			perWaiter(uint64(loaded.goroutines), uint64(base0.goroutines)), loaded.goroutines, base0.goroutines,
			perWaiter(loaded.ms.HeapObjects, base0.ms.HeapObjects), float64(loaded.rssReturned-base0.rssReturned)/float64(n)/1024)
		if *profile != "" {
			writeProfiles(*profile, n)
		}
		stopWriter := startWriter(ctx, benchDSN, node, *writerEvery)
		for _, kind := range []struct {
			name  string
			store *pgstore.Store
		}{{"own node", node}, {"other node", other}} {
			lat := w.latencies(ctx, kind.store, ids, *writes)
			slices.Sort(lat)
			fmt.Printf("n=%d: write to a waiter's answer, through the %s: median %s, p99 %s (%d answers of %d writes)\n",
				n, kind.name, lat[len(lat)/2].Round(100*time.Microsecond), lat[len(lat)*99/100].Round(100*time.Microsecond), len(lat), *writes)
		}
		if r := stopWriter(); *writerEvery > 0 {
			fmt.Printf("n=%d: the writer beside them: %s\n", n, wrote(r))
		}
		w.stop()
		refused.Range(func(k, v any) bool {
			fmt.Printf("n=%d: %d answers of status %d\n", n, v.(*atomic.Int64).Load(), k)
			return true
		})
	}
}

// startWriter starts, when every is positive, a writer that adds a
// submission every every through a store of its own to one of 20 forms
// no waiter waits on (made through node), until the func it returns is
// called; that func returns what the writer did.
func startWriter(ctx context.Context, dsn string, node *pgstore.Store, every time.Duration) func() writerResult {
	if every <= 0 {
		return func() writerResult { return writerResult{} }
	}
	store, err := pgstore.Open(ctx, withApp(dsn, "waitbench-writer"))
	check(err)
	var ids []string
	for i := range 20 {
		id := fmt.Sprintf("busy-%d", i)
		if err := node.AddForm(ctx, "busy", formsapi.Form{ID: id, Title: id}); err != nil && !errors.Is(err, formsapi.ErrFormExists) {
			check(err)
		}
		ids = append(ids, id)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan writerResult)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		start, n := time.Now(), 0
		for {
			select {
			case <-ctx.Done():
				done <- writerResult{n: n, d: time.Since(start)}
				return
			case <-t.C:
			}
			if err := store.AddSubmission(ctx, formsapi.Submission{FormID: ids[n%len(ids)], Data: json.RawMessage(`{"busy":true}`)}, formsapi.Metadata{}); err != nil && ctx.Err() == nil {
				check(err)
			}
			n++
		}
	}()
	return func() writerResult {
		cancel()
		r := <-done
		store.Close()
		return r
	}
}

// writerResult is what the writer beside the timed writes did.
type writerResult struct {
	n int
	d time.Duration
}

func wrote(r writerResult) string {
	return fmt.Sprintf("%d submissions in %s (%.0f a second)", r.n, r.d.Round(time.Millisecond), float64(r.n)/r.d.Seconds())
}

// idleStats is what one idle window cost.
type idleStats struct {
	heap, rss int64   // after it, bytes
	cpu       float64 // the process's CPU per second of it
	stmts     float64 // statements (transactions) per second of it, in the bench's database
	pgCPU     float64 // the node's PostgreSQL backends' CPU per second

	ms         runtime.MemStats // after it and a GC
	goroutines int
	// rssReturned is the resident set once the runtime has returned its
	// free memory to the system (debug.FreeOSMemory): what the live heap
	// and stacks hold, without what a burst left free for later use.
	rssReturned int64
}

// writeProfiles writes the process's heap profile and its goroutines,
// grouped by stack, into dir, named after n.
func writeProfiles(dir string, n int) {
	check(os.MkdirAll(dir, 0o755))
	runtime.GC()
	for _, p := range []struct {
		name, file string
		debug      int
	}{{"heap", fmt.Sprintf("heap-%d.pprof", n), 0}, {"goroutine", fmt.Sprintf("goroutines-%d.txt", n), 1}} {
		f, err := os.Create(filepath.Join(dir, p.file))
		check(err)
		check(pprof.Lookup(p.name).WriteTo(f, p.debug))
		check(f.Close())
	}
}

func measureIdle(ctx context.Context, dsn string, d time.Duration) idleStats {
	conn, err := pgx.Connect(ctx, dsn)
	check(err)
	defer conn.Close(ctx)
	xacts := func() int64 {
		var n int64
		_, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()")
		check(err)
		check(conn.QueryRow(ctx, "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()").Scan(&n))
		return n
	}
	pids := func() []int {
		rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = 'waitbench-node'")
		check(err)
		ps, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		check(err)
		var out []int
		for _, p := range ps {
			out = append(out, int(p))
		}
		return out
	}
	pgCPU := func(ps []int) float64 {
		t := 0.0
		for _, p := range ps {
			c, err := cpuOf(p)
			if err == nil {
				t += c
			}
		}
		return t
	}
	// PostgreSQL's backends report their counts when idle 10 s at the
	// latest: the statements of the waiters' start must not land in the
	// window.
	time.Sleep(12 * time.Second)
	ps := pids()
	x0, c0, p0, t0 := xacts(), mustCPU(os.Getpid()), pgCPU(ps), time.Now()
	time.Sleep(d)
	x1, c1, p1 := xacts(), mustCPU(os.Getpid()), pgCPU(ps)
	el := time.Since(t0).Seconds()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	// One statement of ours in each xacts() read, and the two of
	// pg_stat_clear_snapshot: four in all, not the node's.
	st := idleStats{heap: int64(ms.HeapInuse + ms.StackInuse), rss: rss(), cpu: (c1 - c0) / el, stmts: float64(x1-x0-2) / el, pgCPU: (p1 - p0) / el,
		ms: ms, goroutines: runtime.NumGoroutine()}
	debug.FreeOSMemory()
	st.rssReturned = rss()
	return st
}

// waiters is N goroutines, each waiting on a form's feed, again and
// again, and reporting when an answer with entries arrives.
type waiters struct {
	cancel context.CancelFunc
	proc   *exec.Cmd // -apart: the client process, which cancel ends
	wg     sync.WaitGroup
	n      int
	mu     sync.Mutex
	got    map[string][]time.Time // answers with entries, by form
}

func startWaiters(ctx context.Context, client *http.Client, base string, keys map[string]string, ids []string, tokens map[string]string, n int) *waiters {
	ctx, cancel := context.WithCancel(ctx)
	w := &waiters{cancel: cancel, n: n, got: map[string][]time.Time{}}
	var started sync.WaitGroup
	started.Add(n)
	for i := range n {
		id := ids[i%len(ids)]
		token, key := tokens[id], keys[id]
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			first := true
			for ctx.Err() == nil {
				p, at := waitOnce(ctx, client, base, key, id, token, first, &started)
				first = false
				if p.status == 0 {
					return // canceled
				}
				if p.token == "" {
					continue // refused (counted): ask again
				}
				if p.items > 0 {
					w.mu.Lock()
					w.got[id] = append(w.got[id], at)
					w.mu.Unlock()
				}
				token = p.token
			}
		}()
	}
	started.Wait()
	time.Sleep(2 * time.Second) // the last requests reach their block
	return w
}

// waitOnce sends one waiting request and returns its page and when its
// headers came.
func waitOnce(ctx context.Context, client *http.Client, base, key, id, token string, first bool, started *sync.WaitGroup) (page, time.Time) {
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/forms/"+id+"/submissions?"+url.Values{"sync": {token}, "wait": {"30"}}.Encode(), nil)
	r.Header.Set("Authorization", "Bearer "+key)
	if first {
		started.Done()
	}
	resp, err := client.Do(r)
	if err != nil {
		return page{}, time.Time{}
	}
	at := time.Now()
	defer resp.Body.Close()
	return readPage(resp), at
}

// latencies makes writes through store, one at a time to a form in
// turn, and returns the time from each write's return to each answer of
// the form's waiters.
func (w *waiters) latencies(ctx context.Context, store *pgstore.Store, ids []string, writes int) []time.Duration {
	var out []time.Duration
	per := w.n / len(ids)
	if per == 0 {
		per = 1
	}
	for i := range writes {
		id := ids[i%len(ids)]
		w.mu.Lock()
		before := len(w.got[id])
		w.mu.Unlock()
		check(store.AddSubmission(ctx, formsapi.Submission{FormID: id, Data: json.RawMessage(`{"n":1}`)}, formsapi.Metadata{}))
		t0 := time.Now()
		deadline := t0.Add(5 * time.Second)
		for time.Now().Before(deadline) {
			w.mu.Lock()
			n := len(w.got[id]) - before
			w.mu.Unlock()
			if n >= per {
				break
			}
			time.Sleep(time.Millisecond)
		}
		w.mu.Lock()
		for _, at := range w.got[id][before:] {
			out = append(out, at.Sub(t0))
		}
		w.mu.Unlock()
		time.Sleep(100 * time.Millisecond) // the answered waiters wait again
	}
	return out
}

func (w *waiters) stop() {
	w.cancel()
	w.wg.Wait()
	if w.proc != nil {
		w.proc.Wait()
	}
}

// orders are what -apart's client process is told on its stdin.
type orders struct {
	Base   string
	N      int
	IDs    []string
	Keys   map[string]string
	Tokens map[string]string
}

// startWaitersApart starts the waiters in a client process of their
// own (this command with -client), which reports each answer with
// entries as a line "<form> <unix nanoseconds>" on its stdout; closing
// its stdin ends it.
func startWaitersApart(base string, keys map[string]string, ids []string, tokens map[string]string, n int) *waiters {
	self, err := os.Executable()
	check(err)
	cmd := exec.Command(self, "-client")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	check(err)
	out, err := cmd.StdoutPipe()
	check(err)
	check(cmd.Start())
	check(json.NewEncoder(in).Encode(orders{Base: base, N: n, IDs: ids, Keys: keys, Tokens: tokens}))
	ready := make(chan struct{})
	w := &waiters{n: n, got: map[string][]time.Time{}, proc: cmd, cancel: func() { in.Close() }}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			id, at, ok := strings.Cut(sc.Text(), " ")
			if id == "ready" {
				close(ready)
				continue
			}
			ns, err := strconv.ParseInt(at, 10, 64)
			if !ok || err != nil {
				continue
			}
			w.mu.Lock()
			w.got[id] = append(w.got[id], time.Unix(0, ns))
			w.mu.Unlock()
		}
	}()
	<-ready
	return w
}

// runClient is -apart's client process: the waiters its orders ask for,
// each answer with entries reported on stdout, until stdin closes.
func runClient() {
	var o orders
	dec := json.NewDecoder(os.Stdin)
	check(dec.Decode(&o))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 20000, DisableCompression: true, Proxy: nil}}
	ctx, cancel := context.WithCancel(context.Background())
	w := startWaiters(ctx, client, o.Base, o.Keys, o.IDs, o.Tokens, o.N)
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	done := make(chan struct{})
	go func() {
		seen := map[string]int{}
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			w.mu.Lock()
			for id, ts := range w.got {
				for _, at := range ts[seen[id]:] {
					fmt.Fprintf(out, "%s %d\n", id, at.UnixNano())
				}
				seen[id] = len(ts)
			}
			out.Flush()
			w.mu.Unlock()
		}
	}()
	io.Copy(io.Discard, os.Stdin) // until the parent closes it
	close(done)
	cancel()
	w.stop()
}

type page struct {
	status int
	items  int
	token  string
}

// refused counts the waiters' answers other than 200, by status.
var refused sync.Map

func get(ctx context.Context, client *http.Client, base, key, id string, q url.Values) page {
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/forms/"+id+"/submissions?"+q.Encode(), nil)
	r.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(r)
	check(err)
	defer resp.Body.Close()
	return readPage(resp)
}

func readPage(resp *http.Response) page {
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Submissions []json.RawMessage `json:"submissions"`
		SyncToken   string            `json:"syncToken"`
	}
	json.Unmarshal(b, &body)
	if resp.StatusCode != http.StatusOK {
		c, _ := refused.LoadOrStore(resp.StatusCode, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
	}
	return page{status: resp.StatusCode, items: len(body.Submissions), token: body.SyncToken}
}

// database creates the bench's own database and returns its DSN and
// what drops it.
func database(ctx context.Context, dsn string) (string, func()) {
	conn, err := pgx.Connect(ctx, dsn)
	check(err)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS waitbench WITH (FORCE)")
	check(err)
	_, err = conn.Exec(ctx, "CREATE DATABASE waitbench")
	check(err)
	u, err := url.Parse(dsn)
	check(err)
	u.Path = "/waitbench"
	return u.String(), func() {
		conn.Exec(ctx, "DROP DATABASE IF EXISTS waitbench WITH (FORCE)")
		conn.Close(ctx)
	}
}

func withApp(dsn, app string) string {
	u, err := url.Parse(dsn)
	check(err)
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}

func mustCPU(pid int) float64 {
	c, err := cpuOf(pid)
	check(err)
	return c
}

// cpuOf is the CPU seconds (utime + stime, /proc/PID/stat) of pid.
func cpuOf(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q %q", pid, f[11], f[12])
	}
	return (ut + st) / 100, nil
}

// rss is the process's resident set, bytes.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func check(err error) {
	if err != nil {
		log.Fatal("waitbench: ", err)
	}
}
