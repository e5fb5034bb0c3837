// Command exactness checks what issue 38 promises of nodes that follow
// the change log, from outside, over real HTTP: every answer is at least
// as new as every write committed before the request arrived (exact
// mode, the default, and shared rounds), or than every write committed
// a bound before it (bounded staleness), and no request of a revoked key
// is accepted after its revocation committed.
//
// It opens a schema's writer and N nodes (pgstore.Open with WithFollow,
// and WithSharedRounds or WithStaleness by -mode), each behind its own
// HTTP server, then for -dur runs, at once: a writer that adds
// submissions to one form, newest last (each stamped with the time its
// AddSubmission returned, after its commit); a deleter that deletes the
// submission 50 behind the newest after each of the writer's writes
// (stamped when the deletion returned); a revoker that adds keys, lets
// the readers use them, and revokes them (stamped likewise); readers
// that each stamp a request's arrival, send it to a node at random and
// check its answer (the form's newest 100 submissions) against the
// stamps; and, halfway, a restart of one node (its server and store
// closed and opened again). A request that finds its node restarting is
// counted, not checked.
//
//	go run ./internal/cmd/exactness -nodes 3 -dur 30s                  # exact mode
//	go run ./internal/cmd/exactness -nodes 3 -dur 30s -mode bounded -bound 10ms
//	go run ./internal/cmd/exactness -nodes 3 -dur 30s -mode shared     # needs FORMSAPI_TEST_REDIS
//
// It needs FORMSAPI_TEST_POSTGRES, and creates (and drops) a schema of
// its own. Its test runs it for a second or two in each mode in CI.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/pgstore/redisround"
)

func main() {
	var c config
	flag.IntVar(&c.Nodes, "nodes", 3, "nodes that follow the change log")
	flag.DurationVar(&c.Duration, "dur", 10*time.Second, "how long the writer, deleter, revoker and readers run")
	flag.StringVar(&c.Mode, "mode", "exact", "exact, shared (rounds shared through Redis) or bounded")
	flag.DurationVar(&c.Bound, "bound", 10*time.Millisecond, "the staleness bound of -mode bounded")
	flag.IntVar(&c.Readers, "readers", 8, "concurrent readers")
	flag.StringVar(&c.Replica, "replica", "", "a DSN of a hot standby of FORMSAPI_TEST_POSTGRES's server: the nodes' rounds read it (pgstore.WithReplica, WithReplicaRounds)")
	flag.Parse()
	c.DSN = os.Getenv("FORMSAPI_TEST_POSTGRES")
	if c.DSN == "" {
		log.Fatal("exactness: set FORMSAPI_TEST_POSTGRES")
	}
	ctx := context.Background()
	c.Schema = fmt.Sprintf("exactness_%d", os.Getpid())
	if c.Mode == "shared" {
		opt, err := redis.ParseURL(os.Getenv("FORMSAPI_TEST_REDIS"))
		if err != nil {
			log.Fatalf("exactness: -mode shared needs FORMSAPI_TEST_REDIS: %v", err)
		}
		c.Redis = redis.NewClient(opt)
		defer c.Redis.Close()
		c.RedisPrefix = "formsapi:exactness:" + strconv.Itoa(os.Getpid()) + ":"
	}
	defer dropSchema(ctx, c.DSN, c.Schema)
	r, err := run(ctx, c)
	if err != nil {
		log.Fatalf("exactness: %v", err)
	}
	fmt.Println(r)
	if r.Violations() > 0 {
		os.Exit(1)
	}
}

// config is one run's.
type config struct {
	DSN, Schema string
	Nodes       int
	Duration    time.Duration
	Mode        string
	Bound       time.Duration
	Readers     int
	// Behind is how far behind the newest write the deleter deletes
	// (default 50), PageSize the submissions a request reads (default
	// 100: the deleted one within its page, never first), KeyUses the
	// readers' uses of a key before the revoker revokes it (default 20).
	Behind, PageSize, KeyUses int
	// Until, when longer than Duration, lets a run go on past Duration
	// until every check has been made (an answer checked against an
	// earlier write and an earlier deletion, a revoked key refused, the
	// restart done), and no longer than Until: on a loaded machine two
	// seconds may answer too few requests to make them all.
	Until time.Duration
	// Replica, when set, is a DSN of a hot standby of DSN's server: each
	// node gets a pool on it with WithReplicaRounds.
	Replica     string
	Redis       redis.UniversalClient
	RedisPrefix string
	// wrap, when set, wraps each node's handler: the test's seam for a
	// node that answers stale pages, which the checks must catch.
	wrap func(http.Handler) http.Handler
}

// report counts what a run checked and what it found.
type report struct {
	Mode               string
	Nodes, Writes      int
	Deletions, Revoked int
	Requests           int   // answered by a node
	Unavailable        int   // found no node (a restart), or a status other than 200 and 401
	Checked            int   // answers with a write committed before them (before them less the bound)
	CheckedDeleted     int   // answers that could have shown a deletion committed before them
	RefusedRevoked     int   // requests of a revoked key refused after the revocation
	Restarts           int   // nodes restarted mid-run
	Stale              int64 // answers missing a write committed before them
	Resurrected        int64 // answers showing a submission deleted before them
	RevokedAccepted    int64 // requests of a revoked key accepted after the revocation
	UnexpectedRefusal  int64 // a live key refused
	// OnReplica and OffReplica are the nodes' rounds on the replica and
	// those that read the primary instead (-replica), the restarted
	// node's last life only.
	OnReplica, OffReplica int64
	firstViolationDetail  string
}

// Violations is the number of answers that broke a promise.
func (r report) Violations() int64 {
	return r.Stale + r.Resurrected + r.RevokedAccepted + r.UnexpectedRefusal
}

func (r report) String() string {
	s := fmt.Sprintf("mode %s, %d nodes, %d restarts: %d writes, %d deletions, %d keys revoked; %d requests answered (%d found no node); checked %d answers against earlier writes, %d against earlier deletions, %d refusals of revoked keys; violations: %d stale, %d resurrected, %d revoked keys accepted, %d live keys refused",
		r.Mode, r.Nodes, r.Restarts, r.Writes, r.Deletions, r.Revoked, r.Requests, r.Unavailable, r.Checked, r.CheckedDeleted, r.RefusedRevoked, r.Stale, r.Resurrected, r.RevokedAccepted, r.UnexpectedRefusal)
	if r.OnReplica+r.OffReplica > 0 {
		s += fmt.Sprintf("; rounds on the replica %d, on the primary instead %d", r.OnReplica, r.OffReplica)
	}
	if r.firstViolationDetail != "" {
		s += "; first: " + r.firstViolationDetail
	}
	return s
}

const (
	account = "acct-exactness"
	form    = "exactness"
)

// stamps are the times writes, deletions and revocations returned.
type stamps struct {
	mu       sync.Mutex
	commits  []time.Time // commits[i-1]: write i
	deleted  map[int]time.Time
	revoked  map[string]time.Time
	revoking map[string]bool // revocations begun
}

// committedBefore is the newest write that returned before t.
func (s *stamps) committedBefore(t time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sort.Search(len(s.commits), func(i int) bool { return !s.commits[i].Before(t) })
}

func (s *stamps) deletedBefore(w int, t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.deleted[w]
	return ok && at.Before(t)
}

func (s *stamps) revokedAt(key string) (at time.Time, ok, begun bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok = s.revoked[key]
	return at, ok, s.revoking[key]
}

// node is one node: a store and its server, replaced by a restart.
type node struct {
	mu    sync.Mutex
	url   string
	store *pgstore.Store
	srv   *httptest.Server
}

func (n *node) base() string { n.mu.Lock(); defer n.mu.Unlock(); return n.url }

func openNode(ctx context.Context, c config) (*pgstore.Store, *httptest.Server, error) {
	opts := []pgstore.Option{pgstore.WithSchema(c.Schema), pgstore.WithFollow(time.Millisecond)}
	switch c.Mode {
	case "exact":
	case "bounded":
		opts = append(opts, pgstore.WithStaleness(c.Bound))
	case "shared":
		if c.Redis == nil {
			return nil, nil, errors.New("mode shared needs a Redis client")
		}
		opts = append(opts, pgstore.WithSharedRounds(redisround.New(c.Redis, redisround.WithPrefix(c.RedisPrefix))))
	default:
		return nil, nil, fmt.Errorf("unknown mode %q", c.Mode)
	}
	var replica *pgxpool.Pool // closed with the process: a store never closes it
	if c.Replica != "" {
		var err error
		if replica, err = pgxpool.New(ctx, c.Replica); err != nil {
			return nil, nil, fmt.Errorf("the replica: %w", err)
		}
		opts = append(opts, pgstore.WithReplica(replica), pgstore.WithReplicaRounds())
	}
	s, err := pgstore.Open(ctx, c.DSN, opts...)
	if err != nil {
		if replica != nil {
			replica.Close()
		}
		return nil, nil, fmt.Errorf("open a node: %w", err)
	}
	var h http.Handler = formsapi.NewHandler(s, s)
	if c.wrap != nil {
		h = c.wrap(h)
	}
	return s, httptest.NewServer(h), nil
}

// run runs c and reports what it found.
func run(ctx context.Context, c config) (report, error) {
	r := report{Mode: c.Mode, Nodes: c.Nodes}
	if c.Behind == 0 {
		c.Behind = 50
	}
	if c.PageSize == 0 {
		c.PageSize = 2 * c.Behind
	}
	if c.KeyUses == 0 {
		c.KeyUses = 20
	}
	behind := c.Behind
	writer, err := pgstore.Open(ctx, c.DSN, pgstore.WithSchema(c.Schema))
	if err != nil {
		return r, fmt.Errorf("open the writer: %w", err)
	}
	defer writer.Close()
	if err := writer.AddForm(ctx, account, formsapi.Form{ID: form, Title: "Exactness"}); err != nil {
		return r, fmt.Errorf("add the form: %w", err)
	}
	mainKey, err := formsapi.NewKey()
	if err != nil {
		return r, err
	}
	if err := writer.AddKey(ctx, mainKey, account); err != nil {
		return r, fmt.Errorf("add a key: %w", err)
	}
	nodes := make([]*node, c.Nodes)
	for i := range nodes {
		s, srv, err := openNode(ctx, c)
		if err != nil {
			return r, err
		}
		nodes[i] = &node{url: srv.URL, store: s, srv: srv}
	}
	defer func() {
		for _, n := range nodes {
			n.mu.Lock()
			n.srv.Close()
			n.store.Close()
			n.mu.Unlock()
		}
	}()

	st := &stamps{deleted: map[int]time.Time{}, revoked: map[string]time.Time{}, revoking: map[string]bool{}}
	var (
		keysMu    sync.Mutex
		keys      []string                 // revocable keys, live and revoked
		used      = make(chan struct{}, 1) // a revocable key's use, for the revoker
		stale     atomic.Int64
		resurrect atomic.Int64
		accepted  atomic.Int64
		refused   atomic.Int64
		firstMu   sync.Mutex
		first     string
	)
	note := func(format string, args ...any) {
		firstMu.Lock()
		if first == "" {
			first = fmt.Sprintf(format, args...)
		}
		firstMu.Unlock()
	}
	runCtx, stop := context.WithTimeout(ctx, max(c.Duration, c.Until))
	defer stop()
	var wg sync.WaitGroup
	var workErr error
	var workErrMu sync.Mutex
	fail := func(err error) {
		workErrMu.Lock()
		if workErr == nil {
			workErr = err
		}
		workErrMu.Unlock()
		stop()
	}
	t0 := time.Now().Add(-24 * time.Hour).UTC().Truncate(time.Millisecond)
	deletions := make(chan int, 1<<16)

	// The writer: submission w is {"w": w}, created t0 + w ms, so the
	// newest first page begins with the newest write.
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(deletions)
		for w := 1; runCtx.Err() == nil; w++ {
			sub := formsapi.Submission{FormID: form, Data: []byte(`{"w":` + strconv.Itoa(w) + `}`), CreatedAt: t0.Add(time.Duration(w) * time.Millisecond)}
			if err := writer.AddSubmission(ctx, sub, formsapi.Metadata{ID: "w-" + strconv.Itoa(w)}); err != nil {
				fail(fmt.Errorf("write %d: %w", w, err))
				return
			}
			st.mu.Lock()
			st.commits = append(st.commits, time.Now())
			st.mu.Unlock()
			if w > behind {
				deletions <- w - behind
			}
		}
	}()
	// The deleter.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for w := range deletions {
			if runCtx.Err() != nil {
				continue
			}
			if err := writer.DeleteSubmission(ctx, account, form, "w-"+strconv.Itoa(w)); err != nil {
				fail(fmt.Errorf("delete %d: %w", w, err))
				return
			}
			st.mu.Lock()
			st.deleted[w] = time.Now()
			st.mu.Unlock()
		}
	}()
	// The revoker: a key is revoked after the readers used it KeyUses times.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for runCtx.Err() == nil {
			key, err := formsapi.NewKey()
			if err != nil {
				fail(err)
				return
			}
			if err := writer.AddKey(ctx, key, account); err != nil {
				fail(fmt.Errorf("add a key: %w", err))
				return
			}
			keysMu.Lock()
			keys = append(keys, key)
			keysMu.Unlock()
			for uses := 0; uses < c.KeyUses && runCtx.Err() == nil; {
				select {
				case <-used:
					uses++
				case <-runCtx.Done():
				}
			}
			st.mu.Lock()
			st.revoking[key] = true // a refusal from now on may be the revocation in flight
			st.mu.Unlock()
			if err := writer.RevokeKey(ctx, key); err != nil {
				fail(fmt.Errorf("revoke a key: %w", err))
				return
			}
			st.mu.Lock()
			st.revoked[key] = time.Now()
			st.mu.Unlock()
		}
	}()
	// The restart, halfway through the run (the run is a span of real
	// time: the load it puts on the nodes is what is checked).
	wg.Add(1)
	var restarted atomic.Int64
	go func() {
		defer wg.Done()
		select {
		case <-runCtx.Done():
			return
		case <-time.After(c.Duration / 2):
		}
		n := nodes[0]
		n.mu.Lock()
		n.srv.Close()
		n.store.Close()
		n.url = "" // requests find no node until it is back
		n.mu.Unlock()
		s, srv, err := openNode(ctx, c)
		if err != nil {
			fail(err)
			return
		}
		n.mu.Lock()
		n.store, n.srv, n.url = s, srv, srv.URL
		n.mu.Unlock()
		restarted.Add(1)
	}()
	// The readers.
	var mu sync.Mutex // guards r's counts below
	// The end: at Duration, or past it once every check is made.
	go func() {
		select {
		case <-runCtx.Done():
			return
		case <-time.After(c.Duration):
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			mu.Lock()
			made := r.Checked > 0 && r.CheckedDeleted > 0
			mu.Unlock()
			if made && refused.Load() > 0 && restarted.Load() > 0 {
				stop()
				return
			}
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: c.Readers}}
	for range c.Readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				key := mainKey
				revocable := rand.IntN(4) == 0
				if revocable {
					keysMu.Lock()
					if len(keys) > 0 {
						// The newest keys mostly: the live one and the few revoked before it.
						key = keys[max(0, len(keys)-1-rand.IntN(min(len(keys), 4)))]
					}
					keysMu.Unlock()
				}
				n := nodes[rand.IntN(len(nodes))]
				base := n.base()
				arrived := time.Now()
				if base == "" {
					mu.Lock()
					r.Unavailable++
					mu.Unlock()
					continue
				}
				req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/forms/"+form+"/submissions?limit="+strconv.Itoa(c.PageSize), nil)
				if err != nil {
					fail(err)
					return
				}
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := client.Do(req)
				if err != nil {
					mu.Lock()
					r.Unavailable++ // the node closed under it (the restart)
					mu.Unlock()
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if key != mainKey {
					select {
					case used <- struct{}{}:
					default:
					}
				}
				since := arrived
				if c.Mode == "bounded" {
					since = arrived.Add(-c.Bound)
				}
				revokedAt, wasRevoked, revoking := st.revokedAt(key) // read after the answer
				revokedBefore := wasRevoked && revokedAt.Before(since)
				switch {
				case err != nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized):
					mu.Lock()
					r.Unavailable++
					mu.Unlock()
					continue
				case resp.StatusCode == http.StatusUnauthorized:
					if revokedBefore {
						refused.Add(1)
					} else if !revoking {
						note("a live key refused")
						mu.Lock()
						r.UnexpectedRefusal++
						mu.Unlock()
					}
					mu.Lock()
					r.Requests++
					mu.Unlock()
					continue
				}
				if revokedBefore {
					accepted.Add(1)
					note("a key revoked %s before the request's arrival was accepted", arrived.Sub(revokedAt))
				}
				var page struct {
					Submissions []struct {
						Data struct{ W int } `json:"data"`
					} `json:"submissions"`
				}
				if err := json.Unmarshal(body, &page); err != nil {
					fail(fmt.Errorf("a page: %w", err))
					return
				}
				mu.Lock()
				r.Requests++
				mu.Unlock()
				need := st.committedBefore(since)
				if need > 0 {
					mu.Lock()
					r.Checked++
					mu.Unlock()
					if len(page.Submissions) == 0 || page.Submissions[0].Data.W < need {
						stale.Add(1)
						got := 0
						if len(page.Submissions) > 0 {
							got = page.Submissions[0].Data.W
						}
						st.mu.Lock()
						lag := arrived.Sub(st.commits[need-1])
						st.mu.Unlock()
						note("an answer's newest write %d, write %d returned %s before the request arrived", got, need, lag)
					}
				}
				if need > behind {
					mu.Lock()
					r.CheckedDeleted++
					mu.Unlock()
				}
				for _, s := range page.Submissions {
					if st.deletedBefore(s.Data.W, since) {
						resurrect.Add(1)
						note("an answer holds write %d, deleted before the request arrived", s.Data.W)
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	if workErr != nil {
		return r, workErr
	}
	st.mu.Lock()
	r.Writes, r.Deletions, r.Revoked = len(st.commits), len(st.deleted), len(st.revoked)
	st.mu.Unlock()
	r.Restarts = int(restarted.Load())
	for _, n := range nodes {
		n.mu.Lock()
		st := n.store.FollowStats()
		n.mu.Unlock()
		r.OnReplica, r.OffReplica = r.OnReplica+st.OnReplica, r.OffReplica+st.OffReplica
	}
	r.Stale, r.Resurrected, r.RevokedAccepted = stale.Load(), resurrect.Load(), accepted.Load()
	r.RefusedRevoked = int(refused.Load())
	r.firstViolationDetail = first
	return r, nil
}

// dropSchema drops the run's schema.
func dropSchema(ctx context.Context, dsn, schema string) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		log.Printf("exactness: drop the schema: %v", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		log.Printf("exactness: drop the schema: %v", err)
	}
}
