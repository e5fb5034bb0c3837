// Command hookcrash is the crash run of issue 26: it starts -nodes
// example servers with their webhook dispatchers over one PostgreSQL
// schema, five receivers on loopback (two that answer at once, one of
// them for three forms only; one that fails the first attempt of every
// event, half its requests; one that stalls one request in 20 past the
// attempt timeout; one for half the forms that answers 429 to one in
// 10), writes -n additions and deletions over -forms forms while it
// SIGKILLs a random node every -kill and starts it again, then waits for
// quiescence and checks: every endpoint received every entry of its
// forms' feeds (0 missing), every repeat of an event had the same
// webhook-id and body bytes, positions strictly increase per (endpoint,
// form) in first-delivery order; and it counts events answered 2xx more
// than once (duplicates from cursor writes a kill lost, or answers a
// timeout lost). It exits 1 if a check fails.
//
// bench/hookcrash.sh builds and runs it:
//
//	hookcrash -server ./server -dsn "$DSN" [-n 10000] [-forms 20] [-nodes 3] [-kill 2s] [-rate 250] [-retry-scale 0.01] [-quiet-timeout 15m]
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/token"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/webhook"
)

const account = "crash"

// receiver records what one endpoint got.
type receiver struct {
	srv    *httptest.Server
	forms  []string
	answer func(rnd *mrand.Rand, firstTry bool) int // 0: stall until the sender gives up

	mu     sync.Mutex
	rnd    *mrand.Rand
	order  map[string][]event // by form: first deliveries, in order
	bodies map[string][]byte  // by webhook-id
	ok     map[string]int     // 2xx answers by webhook-id
	reqs   int
	log    map[string][]string // by form: every request, for a report on a stream that never caught up
}

type event struct{ typ, ref string }

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	id := r.Header.Get(webhook.HeaderID)
	var ev struct {
		Type string `json:"type"`
		Data struct {
			FormID string `json:"formId"`
			Ref    string `json:"ref"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &ev)
	rc.mu.Lock()
	rc.reqs++
	prev, seen := rc.bodies[id]
	if seen && !bytes.Equal(prev, body) {
		log.Printf("FAIL: %s repeated with other body bytes", id)
		failed.Store(true)
	}
	if !seen {
		rc.bodies[id] = body
		rc.order[ev.Data.FormID] = append(rc.order[ev.Data.FormID], event{ev.Type, ev.Data.Ref})
	}
	status := rc.answer(rc.rnd, !seen)
	if status == 200 {
		rc.ok[id]++
	}
	rc.log[ev.Data.FormID] = append(rc.log[ev.Data.FormID], fmt.Sprintf("%s %s %s first=%v status=%d", time.Now().Format("15:04:05.000"), id, ev.Type, !seen, status))
	rc.mu.Unlock()
	if status == 0 {
		<-r.Context().Done()
		return
	}
	w.WriteHeader(status)
}

// failed is set by any check that fails.
var failed atomic.Bool

// fatal is what check and fail panic with, so that main's deferred
// cleanups (the nodes, the schema) run before it exits.
type fatal string

func main() {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			log.Print(f)
			os.Exit(1)
		}
	}()
	server := flag.String("server", "", "the example server's binary")
	dsn := flag.String("dsn", os.Getenv("FORMSAPI_POSTGRES"), "PostgreSQL DSN")
	n := flag.Int("n", 10000, "additions and deletions to write")
	nforms := flag.Int("forms", 20, "forms")
	nodes := flag.Int("nodes", 3, "example servers")
	every := flag.Duration("kill", 2*time.Second, "SIGKILL a random node this often while writing; 0 never")
	rate := flag.Int("rate", 250, "writes a second")
	retryScale := flag.String("retry-scale", "0.01", "the nodes' -webhook-retry-scale")
	quietFor := flag.Duration("quiet-timeout", 15*time.Minute, "how long after the last write every stream must have caught up")
	flag.Parse()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "hookcrash")
	check(err)
	defer func() {
		if failed.Load() {
			log.Printf("the nodes' logs are kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	schema := fmt.Sprintf("hookcrash_%d", os.Getpid())
	store, err := pgstore.Open(ctx, *dsn, pgstore.WithSchema(schema))
	check(err)
	defer func() {
		store.Close()
		if conn, err := pgx.Connect(ctx, *dsn); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			conn.Close(ctx)
		}
	}()
	var raw [32]byte
	rand.Read(raw[:])
	secret := []byte(base64.StdEncoding.EncodeToString(raw[:]))
	secretFile := filepath.Join(dir, "secret")
	check(os.WriteFile(secretFile, secret, 0o600))

	var forms []string
	for i := range *nforms {
		forms = append(forms, fmt.Sprintf("form-%02d", i))
		check(store.AddForm(ctx, account, formsapi.Form{ID: forms[i]}))
	}
	ok := func(*mrand.Rand, bool) int { return 200 }
	receivers := []*receiver{
		{answer: ok},
		{answer: ok, forms: forms[:3]},
		{answer: func(_ *mrand.Rand, first bool) int { return map[bool]int{true: 500, false: 200}[first] }},
		{answer: func(r *mrand.Rand, _ bool) int { return oneIn(r, 20, 0) }},
		{answer: func(r *mrand.Rand, _ bool) int { return oneIn(r, 10, 429) }, forms: forms[:len(forms)/2]},
	}
	eps := webhook.NewEndpoints(store, store, secret, webhook.WithEgress(webhook.Egress{AllowHTTP: true, AllowLoopback: true}))
	for i, rc := range receivers {
		rc.rnd = mrand.New(mrand.NewPCG(uint64(i), 1))
		rc.order, rc.bodies, rc.ok, rc.log = map[string][]event{}, map[string][]byte{}, map[string]int{}, map[string][]string{}
		rc.srv = httptest.NewServer(rc)
		defer rc.srv.Close()
		_, err := eps.Add(ctx, account, rc.srv.URL, rc.forms)
		check(err)
	}

	// The nodes.
	args := func(i int) []string {
		return []string{"-postgres", *dsn, "-schema", schema, "-addr", "127.0.0.1:0", "-access-log=false", "-rate-limit", "0",
			"-cursor-secret-file", secretFile, "-demo-key-file", filepath.Join(dir, fmt.Sprintf("key%d", i)),
			"-webhooks", "-webhook-allow-loopback", "-webhook-poll", "100ms", "-webhook-timeout", "1s", "-webhook-retry-scale", *retryScale}
	}
	procs := make([]*exec.Cmd, *nodes)
	startNode := func(i int) {
		cmd := exec.Command(*server, args(i)...)
		logf, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("node%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		check(err)
		cmd.Stdout, cmd.Stderr = logf, logf
		check(cmd.Start())
		procs[i] = cmd
		go func() { _ = cmd.Wait(); logf.Close() }()
	}
	for i := range procs {
		startNode(i)
	}
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
	}()

	// The writer, and the killer while it writes.
	start := time.Now()
	kills := 0
	stopKilling := make(chan struct{})
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		if *every <= 0 {
			return
		}
		t := time.NewTicker(*every)
		defer t.Stop()
		for {
			select {
			case <-stopKilling:
				return
			case <-t.C:
				i := mrand.IntN(*nodes)
				_ = procs[i].Process.Signal(syscall.SIGKILL)
				kills++
				startNode(i)
			}
		}
	}()
	rnd := mrand.New(mrand.NewPCG(7, 7))
	live := map[string][]string{}
	tick := time.NewTicker(time.Second / time.Duration(*rate))
	for w := range *n {
		<-tick.C
		f := forms[rnd.IntN(len(forms))]
		if len(live[f]) > 0 && rnd.IntN(3) == 0 {
			i := rnd.IntN(len(live[f]))
			check(store.DeleteSubmission(ctx, account, f, live[f][i]))
			live[f] = append(live[f][:i], live[f][i+1:]...)
			continue
		}
		id := fmt.Sprintf("s%d", w)
		check(store.AddSubmission(ctx, formsapi.Submission{FormID: f, Data: []byte(fmt.Sprintf(`{"n":%d}`, w))}, formsapi.Metadata{ID: id}))
		live[f] = append(live[f], id)
	}
	tick.Stop()
	written := time.Since(start)
	close(stopKilling)
	<-killed

	// Quiescence: every stream of every endpoint at its form's end.
	end := map[string]int64{}
	for _, f := range forms {
		p, err := store.SyncSubmissions(ctx, account, f, 0, 1_000_000)
		check(err)
		end[f] = p.Next
	}
	deadline := time.Now().Add(*quietFor)
	lastReport := time.Now()
	log.Printf("written in %.1f s with %d kills; waiting for every stream to catch up", time.Since(start).Seconds(), kills)
	for {
		caughtUp, behind, streams := true, int64(0), 0
		list, err := store.Endpoints(ctx, account)
		check(err)
		for _, e := range list {
			if e.Disabled {
				fail("FAIL: endpoint %s disabled: %s", e.URL, e.DisabledReason)
			}
			_, sts, err := store.Endpoint(ctx, account, e.ID)
			check(err)
			at := map[string]int64{}
			for _, s := range sts {
				at[s.FormID] = s.Cursor
			}
			fs := e.Forms
			if len(fs) == 0 {
				fs = forms
			}
			for _, f := range fs {
				if end[f] > 0 && at[f] != end[f] {
					caughtUp = false
					behind += end[f] - at[f]
					streams++
				}
			}
		}
		if caughtUp {
			break
		}
		if time.Since(lastReport) >= 30*time.Second {
			log.Printf("waiting: %d streams behind, by %d positions in all", streams, behind)
			lastReport = time.Now()
		}
		if time.Now().After(deadline) {
			stuck(ctx, store, receivers, forms, end)
			fail("FAIL: not caught up %s after the last write", *quietFor)
		}
		time.Sleep(500 * time.Millisecond) // waiting on other processes
	}
	quiet := time.Since(start)

	// The checks, against the final feed.
	codec := token.New(secret)
	ref := func(f string, pos int64) string {
		_, inc, err := store.FeedHead(ctx, account, f, nil) // refs are of the form's incarnation
		check(err)
		return string(codec.AppendRef(nil, token.List{Account: account, FormID: f}, inc, pos))
	}
	pos := map[string]map[event]int64{}
	for _, f := range forms {
		pos[f] = map[event]int64{}
		p, err := store.SyncSubmissions(ctx, account, f, 0, 1_000_000)
		check(err)
		for _, at := range p.Positions {
			pos[f][event{webhook.EventCreated, ref(f, at)}] = at
		}
		for i, of := range p.Deleted {
			pos[f][event{webhook.EventDeleted, ref(f, of)}] = p.DeletedAt[i]
		}
		for at := int64(1); at <= end[f]; at++ {
			if _, ok := pos[f][event{webhook.EventCreated, ref(f, at)}]; !ok {
				pos[f][event{webhook.EventCreated, ref(f, at)}] = -at // a gap: added, then deleted
			}
		}
	}
	total, dups := 0, 0
	for i, rc := range receivers {
		rc.mu.Lock()
		follows := rc.forms
		if len(follows) == 0 {
			follows = forms
		}
		missing, disorder := 0, 0
		for _, f := range follows {
			got := map[event]bool{}
			last := int64(0)
			for _, e := range rc.order[f] {
				got[e] = true
				p, ok := pos[f][e]
				if !ok {
					log.Printf("FAIL: endpoint %d got an event of %s that is no entry of its feed", i, f)
					failed.Store(true)
					continue
				}
				if p < 0 {
					p = -p
				}
				if p <= last {
					disorder++
				}
				last = p
			}
			for e, p := range pos[f] {
				if p > 0 && !got[e] {
					missing++
				}
			}
			total += len(rc.order[f])
		}
		d := 0
		for _, k := range rc.ok {
			d += k - 1
		}
		dups += d
		fmt.Printf("endpoint %d: %d forms, %d events, %d requests, missing %d, out of order %d, answered 2xx more than once %d\n",
			i, len(follows), len(rc.bodies), rc.reqs, missing, disorder, d)
		if missing > 0 || disorder > 0 {
			failed.Store(true)
		}
		rc.mu.Unlock()
	}
	fmt.Printf("hookcrash: nodes=%d writes=%d forms=%d kills=%d written_s=%.1f quiescent_s=%.1f events=%d duplicates_2xx=%d failed=%v\n",
		*nodes, *n, len(forms), kills, written.Seconds(), quiet.Seconds(), total, dups, failed.Load())
	if failed.Load() {
		panic(fatal("FAIL: see above"))
	}
}

// oneIn answers status to one request in n at random, 200 to the rest.
func oneIn(r *mrand.Rand, n, status int) int {
	if r.IntN(n) == 0 {
		return status
	}
	return 200
}

// stuck prints each stream that is behind its form's end, with the last
// requests its receiver got for that form.
func stuck(ctx context.Context, store *pgstore.Store, receivers []*receiver, forms []string, end map[string]int64) {
	list, err := store.Endpoints(ctx, account)
	check(err)
	for _, e := range list {
		i := slices.IndexFunc(receivers, func(rc *receiver) bool { return rc.srv.URL == e.URL })
		_, sts, err := store.Endpoint(ctx, account, e.ID)
		check(err)
		for _, s := range sts {
			if s.Cursor == end[s.FormID] {
				continue
			}
			fmt.Printf("endpoint %d form %s: cursor %d of %d, attempts %d, next at %s, failing since %s, resync %v\n",
				i, s.FormID, s.Cursor, end[s.FormID], s.Attempts, s.NextAt.Format(time.RFC3339Nano), s.FailingSince.Format(time.RFC3339Nano), s.Resync)
			rc := receivers[i]
			rc.mu.Lock()
			l := rc.log[s.FormID]
			for _, line := range l[max(0, len(l)-8):] {
				fmt.Println("   ", line)
			}
			rc.mu.Unlock()
		}
	}
}

func check(err error) {
	if err != nil {
		failed.Store(true)
		panic(fatal(err.Error()))
	}
}

func fail(format string, args ...any) {
	failed.Store(true)
	panic(fatal(fmt.Sprintf(format, args...)))
}
