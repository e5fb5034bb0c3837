package redislimit_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/redis/go-redis/v9"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/redistest"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/ratelimit/redislimit"
	"github.com/formsapi/formsapi/storetest"
)

// seeded returns a memstore with the store tests' seed.
func seeded(t *testing.T) *memstore.Store {
	t.Helper()
	s := memstore.New()
	if err := storetest.Load(ctx, s, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	return s
}

// get sends GET target with key to h.
func get(h http.Handler, target, key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", target, nil)
	r.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestHandlerTwoNodes: two API nodes, each a handler over its own
// memstore with its own Redis client and limiter on one prefix, take
// requests of one account in turn. The account's quota holds over both:
// 200s until it is spent, then 429s with Retry-After on either node.
func TestHandlerTwoNodes(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	prefix := redistest.Prefix(t)
	p := ratelimit.Policy{Name: "default", Quota: 4, Window: time.Hour}
	var nodes []http.Handler
	for i := 0; i < 2; i++ {
		s := seeded(t)
		l := redislimit.New(redistest.Client(t), redislimit.WithPrefix(prefix))
		nodes = append(nodes, formsapi.NewHandler(s, s, formsapi.WithRateLimit(ratelimit.Options{Limiter: l, Policy: p})))
	}
	for i := 0; i < 4; i++ {
		w := get(nodes[i%2], "/v1/forms", storetest.KeyA)
		is.Equal(w.Code, 200)                                                                        // within the quota, on either node
		is.Equal(w.Header().Get("RateLimit-Policy"), `"default";q=4;w=3600`)                         // the policy
		is.True(strings.HasPrefix(w.Header().Get("RateLimit"), fmt.Sprintf(`"default";r=%d;`, 3-i))) // one fewer left each time
	}
	for i := 0; i < 4; i++ {
		w := get(nodes[i%2], "/v1/forms", storetest.KeyA2)
		is.Equal(w.Code, 429) // the account's budget is spent on both nodes, for its every key
		retry, err := strconv.Atoi(w.Header().Get("Retry-After"))
		is.NoErr(err)                      // with when to come back
		is.True(retry > 0 && retry <= 900) // one interval (15 minutes) at most
	}
	is.Equal(get(nodes[1], "/v1/forms", storetest.KeyB).Code, 200) // another account has its own budget
}

// TestHandlerFailsOpenOnHangingRedis: a Redis that accepts connections
// and never answers, behind a client with go-redis's default timeouts
// (seconds): the handler's limiter timeout ends each call, and the
// requests are served without RateLimit fields and the failure logged;
// failing closed, they are 503s.
func TestHandlerFailsOpenOnHangingRedis(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	redistest.URL(t)
	addr, _ := hangingServer(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	l := redislimit.New(c)
	p := ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour}
	s := seeded(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	open := formsapi.NewHandler(s, s, formsapi.WithRateLimit(ratelimit.Options{Limiter: l, Policy: p}), formsapi.WithLogger(logger))
	for i := 0; i < 3; i++ {
		w := get(open, "/v1/forms", storetest.KeyA)
		is.Equal(w.Code, 200)                       // served, although over the quota of 1
		is.Equal(w.Header().Get("RateLimit"), "")   // with no limit to show
		is.Equal(w.Header().Get("Retry-After"), "") // nor a refusal
	}
	is.True(strings.Contains(logs.String(), "rate limiter failed"))       // logged
	is.True(strings.Contains(logs.String(), "redislimit: allow"))         // with the limiter's error
	is.True(strings.Contains(logs.String(), "context deadline exceeded")) // ended by the handler's timeout

	closed := formsapi.NewHandler(s, s, formsapi.WithRateLimit(ratelimit.Options{Limiter: l, Policy: p, FailClosed: true}), formsapi.WithLogger(logger))
	is.Equal(get(closed, "/v1/forms", storetest.KeyA).Code, 503) // failing closed
}

// TestHandlerRefusesWhatWaitedInTheQueue: a decision that waits in the
// node's queue behind a round trip in flight (here another handler's,
// whose timeout is an hour, held by the test) past its own handler's
// limiter timeout is refused with 429, failing open or closed: the wait
// is this node's, not a failed Redis, and a flood must not be served for
// it. Before, the timeout ran in the queue and a fail-open handler served
// the request unlimited.
func TestHandlerRefusesWhatWaitedInTheQueue(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	client := redistest.Client(t)
	hook := &holdHook{holding: make(chan struct{}), release: make(chan struct{})}
	client.AddHook(hook)
	l := redislimit.New(client, redislimit.WithPrefix(redistest.Prefix(t)))
	p := ratelimit.Policy{Name: "default", Quota: 100, Window: time.Hour}
	s := seeded(t)
	logger := slog.New(slog.DiscardHandler)
	slow := formsapi.NewHandler(s, s, formsapi.WithRateLimit(ratelimit.Options{Limiter: l, Policy: p, Timeout: time.Hour}), formsapi.WithLogger(logger))
	first := make(chan int, 1)
	go func() { first <- get(slow, "/v1/forms", storetest.KeyB).Code }()
	<-hook.holding // its decision is in flight, and may take an hour
	for _, closed := range []bool{false, true} {
		o := ratelimit.Options{Limiter: l, Policy: p, Timeout: 20 * time.Millisecond, FailClosed: closed}
		w := get(formsapi.NewHandler(s, s, formsapi.WithRateLimit(o), formsapi.WithLogger(logger)), "/v1/forms", storetest.KeyA)
		is.Equal(w.Code, 429)                        // refused, never served unlimited
		is.Equal(w.Header().Get("Retry-After"), "1") // soon
		is.Equal(w.Header().Get("RateLimit"), "")    // undecided
	}
	close(hook.release)
	is.Equal(<-first, 200) // the decision in flight was made
}

// TestHandlerRedisDown: a Redis that refuses connections is a failed
// limiter: failing open the request is served, failing closed it is a
// 503, never a 429.
func TestHandlerRedisDown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	redistest.URL(t)
	c := redis.NewClient(&redis.Options{Addr: closedPort(t)})
	t.Cleanup(func() { c.Close() })
	l := redislimit.New(c)
	p := ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour}
	s := seeded(t)
	logger := slog.New(slog.DiscardHandler)
	open := formsapi.NewHandler(s, s, formsapi.WithRateLimit(ratelimit.Options{Limiter: l, Policy: p}), formsapi.WithLogger(logger))
	closed := formsapi.NewHandler(s, s, formsapi.WithRateLimit(ratelimit.Options{Limiter: l, Policy: p, FailClosed: true}), formsapi.WithLogger(logger))
	for range 3 {
		is.Equal(get(open, "/v1/forms", storetest.KeyA).Code, 200)   // served
		is.Equal(get(closed, "/v1/forms", storetest.KeyA).Code, 503) // or refused as unavailable
	}
}

// lateHook, when late is set, answers each command with a read
// timeout (os.ErrDeadlineExceeded, as go-redis's ReadTimeout or a
// connection deadline ends a read): a Redis that is up but whose answer
// comes too late, as on a node whose CPU a flood took.
type lateHook struct{ late atomic.Bool }

// errLate is the read timeout lateHook answers.
var errLate = fmt.Errorf("read tcp: i/o timeout: %w", os.ErrDeadlineExceeded)

func (h *lateHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.late.Load() {
			cmd.SetErr(errLate)
			return errLate
		}
		return next(ctx, cmd)
	}
}

func (h *lateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.late.Load() {
			for _, c := range cmds {
				c.SetErr(errLate)
			}
			return errLate
		}
		return next(ctx, cmds)
	}
}

// TestHandlerRefusesALateAnswer (issue 42; RELIABILITY 107): a decision
// sent to a Redis that answered the handler's previous one, and whose
// answer comes too late (a read timeout), is refused with 429,
// failing open or closed: Redis is up, the node (or Redis) is slow, and
// failing open served the 4,000-connection flood of issue 42 up to 95
// answers where 70 were allowed. A handler whose limiter never answered
// (a Redis that hangs from the start) still fails open.
func TestHandlerRefusesALateAnswer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	client := redistest.Client(t)
	hook := &lateHook{}
	client.AddHook(hook)
	l := redislimit.New(client, redislimit.WithPrefix(redistest.Prefix(t)))
	p := ratelimit.Policy{Name: "default", Quota: 100, Window: time.Hour}
	s := seeded(t)
	logger := slog.New(slog.DiscardHandler)
	for _, closed := range []bool{false, true} {
		o := ratelimit.Options{Limiter: l, Policy: p, Timeout: time.Minute, FailClosed: closed}
		h := formsapi.NewHandler(s, s, formsapi.WithRateLimit(o), formsapi.WithLogger(logger))
		hook.late.Store(false)
		is.Equal(get(h, "/v1/forms", storetest.KeyA).Code, 200) // Redis answers
		hook.late.Store(true)
		w := get(h, "/v1/forms", storetest.KeyA)
		is.Equal(w.Code, 429)                        // late: refused, never served unlimited
		is.Equal(w.Header().Get("Retry-After"), "1") // soon
		is.Equal(w.Header().Get("RateLimit"), "")    // undecided
	}
	o := ratelimit.Options{Limiter: l, Policy: p, Timeout: time.Minute}
	fresh := formsapi.NewHandler(s, s, formsapi.WithRateLimit(o), formsapi.WithLogger(logger))
	is.Equal(get(fresh, "/v1/forms", storetest.KeyA).Code, 200) // no answer yet: down, failing open
}
