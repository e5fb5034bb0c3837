// Command hookbench measures webhook delivery in one process: a store
// (memstore, SQLite or PostgreSQL), a writer adding submissions to its
// forms at a steady rate, a dispatcher (webhook.Dispatcher.Run) and
// receivers on loopback. It reports events delivered per second and the
// time from each submission's commit (AddSubmission's return) to its
// first attempt's arrival, p50, p99 and the maximum, with and without a
// black-hole endpoint (-blackhole: one more endpoint on the same forms
// that accepts connections and never answers), or beside -dead endpoints
// of another account that never answer (RELIABILITY case 106: they hold
// that account's share of the attempt slots, not the others'), or beside
// -own-dead such endpoints of the bench account itself (they hold its
// share: -account-slots sets it, webhook.WithAccountConcurrency).
//
//	hookbench -store sqlite -n 3000 -rate 500 [-blackhole] [-dead 20]
//	cpuwatch -pg "$DSN" -pg-app hookbench -- hookbench -store postgres -dsn "$DSN&application_name=hookbench" ...
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/webhook"
)

type store interface {
	webhook.Feed
	webhook.Store
	formsapi.Writer
}

func main() {
	kind := flag.String("store", "memstore", "memstore, sqlite or postgres")
	dsn := flag.String("dsn", os.Getenv("FORMSAPI_POSTGRES"), "PostgreSQL DSN, for -store postgres (a fresh schema is made and dropped)")
	n := flag.Int("n", 2000, "submissions to add")
	forms := flag.Int("forms", 20, "forms to spread them over")
	rate := flag.Int("rate", 500, "submissions a second the writer adds; 0 as fast as it can")
	poll := flag.Duration("poll", 50*time.Millisecond, "the dispatcher's poll interval")
	blackhole := flag.Bool("blackhole", false, "add an endpoint that never answers")
	dead := flag.Int("dead", 0, "endpoints of another account that never answer, each following that account's -forms forms, each with a submission waiting")
	ownDead := flag.Int("own-dead", 0, "endpoints of the bench account itself that never answer, each following its -forms forms")
	accountSlots := flag.Int("account-slots", 0, "webhook.WithAccountConcurrency; 0 keeps the default")
	flag.Parse()
	ctx := context.Background()

	var s store
	switch *kind {
	case "memstore":
		s = memstore.New()
	case "sqlite":
		dir, err := os.MkdirTemp("", "hookbench")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(dir)
		lite, err := sqlitestore.Open(filepath.Join(dir, "forms.db"))
		if err != nil {
			log.Fatal(err)
		}
		defer lite.Close()
		s = lite
	case "postgres":
		schema := fmt.Sprintf("hookbench_%d", os.Getpid())
		pg, err := pgstore.Open(ctx, *dsn, pgstore.WithSchema(schema))
		if err != nil {
			log.Fatal(err)
		}
		defer func() {
			pg.Close()
			if conn, err := pgx.Connect(ctx, *dsn); err == nil {
				_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
				conn.Close(ctx)
			}
		}()
		s = pg
	default:
		log.Fatalf("-store %q: memstore, sqlite or postgres", *kind)
	}
	for i := range *forms {
		if err := s.AddForm(ctx, "bench", formsapi.Form{ID: fmt.Sprintf("form-%02d", i)}); err != nil {
			log.Fatal(err)
		}
		if *dead > 0 {
			if err := s.AddForm(ctx, "dead", formsapi.Form{ID: fmt.Sprintf("dead-%02d", i)}); err != nil {
				log.Fatal(err)
			}
		}
	}

	var mu sync.Mutex
	first := map[string]time.Time{} // by webhook-id: the first arrival
	got := make(chan struct{}, *n)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		var ev struct {
			Data struct {
				Submission struct {
					Data struct {
						N int `json:"n"`
					} `json:"data"`
				} `json:"submission"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		id := r.Header.Get(webhook.HeaderID)
		mu.Lock()
		if _, ok := first[id]; !ok {
			first[id] = at
			arrived[ev.Data.Submission.Data.N] = at
			got <- struct{}{}
		}
		mu.Unlock()
	}))
	defer rc.Close()
	hole := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The body is read first: only then does the server watch the
		// connection, and cancel r's context when the sender gives up.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer func() { hole.CloseClientConnections(); hole.Close() }()

	secret := []byte("hookbench cursor secret, 32 bytes or more")
	opts := []webhook.Option{webhook.WithEgress(webhook.Egress{AllowHTTP: true, AllowLoopback: true}), webhook.WithPollInterval(*poll)}
	if *accountSlots > 0 {
		opts = append(opts, webhook.WithAccountConcurrency(*accountSlots))
	}
	eps := webhook.NewEndpoints(s, s, secret, opts...)
	if *ownDead > 0 {
		// As -dead's: each has an event of every form to attempt, added
		// before the bench's endpoint, which starts after them.
		for range *ownDead {
			if _, err := eps.Add(ctx, "bench", hole.URL, nil); err != nil {
				log.Fatal(err)
			}
		}
		for i := range *forms {
			sub := formsapi.Submission{FormID: fmt.Sprintf("form-%02d", i), Data: []byte(`{"n":-1}`)}
			if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
				log.Fatal(err)
			}
		}
	}
	if _, err := eps.Add(ctx, "bench", rc.URL, nil); err != nil {
		log.Fatal(err)
	}
	if *blackhole {
		if _, err := eps.Add(ctx, "bench", hole.URL, nil); err != nil {
			log.Fatal(err)
		}
	}
	for range *dead {
		if _, err := eps.Add(ctx, "dead", hole.URL, nil); err != nil {
			log.Fatal(err)
		}
	}
	if *dead > 0 {
		// Each dead endpoint has an event of every form to attempt: it
		// wants its 4 slots all the time (a timeout's retry waits 60 s,
		// by when its other forms have had their turns).
		for i := range *forms {
			sub := formsapi.Submission{FormID: fmt.Sprintf("dead-%02d", i), Data: []byte(`{"n":-1}`)}
			if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
				log.Fatal(err)
			}
		}
	}
	d := webhook.NewDispatcher(s, s, secret, opts...)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = d.Run(runCtx); close(done) }()

	committed := make([]time.Time, *n)
	arrived = make([]time.Time, *n)
	var cpu0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &cpu0)
	start := time.Now()
	var tick <-chan time.Time
	if *rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(*rate))
		defer t.Stop()
		tick = t.C
	}
	for i := range *n {
		if tick != nil {
			<-tick
		}
		sub := formsapi.Submission{FormID: fmt.Sprintf("form-%02d", i%*forms), Data: []byte(fmt.Sprintf(`{"n":%d,"email":"p%d@example.com"}`, i, i))}
		if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
			log.Fatal(err)
		}
		mu.Lock()
		committed[i] = time.Now()
		mu.Unlock()
	}
	written := time.Since(start)
	for range *n {
		<-got
	}
	elapsed := time.Since(start)
	var cpu1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &cpu1)
	stop()
	<-done
	lat := make([]time.Duration, *n)
	mu.Lock()
	for i := range lat {
		lat[i] = arrived[i].Sub(committed[i])
	}
	mu.Unlock()
	slices.Sort(lat)
	cpu := time.Duration(cpu1.Utime.Nano()+cpu1.Stime.Nano()-cpu0.Utime.Nano()-cpu0.Stime.Nano()) * time.Nanosecond
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	fmt.Printf("hookbench: store=%s n=%d forms=%d rate=%d blackhole=%v dead=%d own_dead=%d account_slots=%d write_s=%.2f events_per_s=%.0f p50_ms=%.1f p99_ms=%.1f max_ms=%.1f process_cpu_us_per_event=%.0f\n",
		*kind, *n, *forms, *rate, *blackhole, *dead, *ownDead, *accountSlots, written.Seconds(), float64(*n)/elapsed.Seconds(),
		ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1]),
		float64(cpu.Microseconds())/float64(*n))
}

var arrived []time.Time
