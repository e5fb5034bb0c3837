package redislimit_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/redis/go-redis/v9"

	"github.com/formsapi/formsapi/internal/redistest"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/ratelimit/ratelimittest"
	"github.com/formsapi/formsapi/ratelimit/redislimit"
)

var ctx = context.Background()

// newLimiter returns a limiter of its own client with a prefix of the
// test's own, and a client to look at and move its state with.
func newLimiter(t *testing.T) (*redislimit.Limiter, *redis.Client, string) {
	t.Helper()
	prefix := redistest.Prefix(t)
	return redislimit.New(redistest.Client(t), redislimit.WithPrefix(prefix)), redistest.Client(t), prefix
}

// advance moves every bucket under prefix d into the future, as if d had
// passed: it takes d from the time each bucket's key holds (no key is a
// full quota, which time does not change). The tests use policies whose
// interval is far longer than they run, so the real time that passes
// meanwhile changes no decision.
func advance(ctx context.Context, c *redis.Client, prefix string, d time.Duration) error {
	const shift = `for _, k in ipairs(KEYS) do
  local v = redis.call('GET', k)
  if v then redis.call('SET', k, string.format('%d', tonumber(v) - tonumber(ARGV[1])), 'KEEPTTL') end
end
return 0`
	keys, err := redistest.Keys(ctx, c, prefix)
	if err != nil || len(keys) == 0 {
		return err
	}
	return c.Eval(ctx, shift, keys, d.Microseconds()).Err()
}

// TestContract: the limiter keeps the ratelimit.Limiter contract, on the
// Redis server's clock, each clause on a prefix of its own, with time
// moved in Redis rather than waited for.
func TestContract(t *testing.T) {
	t.Parallel()
	ratelimittest.Run(t, func(t *testing.T, clock *ratelimittest.Clock) ratelimit.Limiter {
		l, c, prefix := newLimiter(t)
		clock.OnAdvance(func(ctx context.Context, d time.Duration) error { return advance(ctx, c, prefix, d) })
		return l
	}, ratelimittest.WithMaxKey(512))
}

// TestTwoNodesShareTheBudget: two limiters, each with its own client, as
// two API nodes, on one Redis and prefix, keep the contract together,
// asked in turn: one burst and one rate for each bucket (among the
// clauses, 200 calls from eight goroutines at once allow exactly the
// burst, each with a Remaining of its own, then exactly what the time
// moved gives back), where two nodes that shared nothing would allow a
// burst each (ratelimittest's own tests).
func TestTwoNodesShareTheBudget(t *testing.T) {
	t.Parallel()
	ratelimittest.Run(t, func(t *testing.T, clock *ratelimittest.Clock) ratelimit.Limiter {
		prefix := redistest.Prefix(t)
		c := redistest.Client(t)
		clock.OnAdvance(func(ctx context.Context, d time.Duration) error { return advance(ctx, c, prefix, d) })
		return ratelimittest.Nodes(redislimit.New(redistest.Client(t), redislimit.WithPrefix(prefix)), redislimit.New(redistest.Client(t), redislimit.WithPrefix(prefix)))
	}, ratelimittest.WithMaxKey(512))
}

// stored is the time a bucket's key holds, or "" for no key.
func stored(t *testing.T, c *redis.Client, rkey string) string {
	t.Helper()
	v, err := c.Get(ctx, rkey).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// within reports whether d is in (want-slack, want]: a decision made on
// Redis's clock some time after the moment want was computed for.
func within(d, want time.Duration) bool {
	const slack = time.Minute
	return want-slack < d && d <= want
}

// TestKeyNameAndTTL: a bucket is one key, the prefix, the policy's name,
// ":" and the bucket's key, which expires when its quota is full again,
// a debt of charged units included, and refusals leave it as it was. The
// default prefix is formsapi:rl:.
func TestKeyNameAndTTL(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, c, prefix := newLimiter(t)
	p := ratelimit.Policy{Name: "default", Quota: 3, Window: time.Hour}
	rkey := prefix + "default:account:a"
	for range p.Quota {
		d, err := l.Allow(ctx, "account:a", p)
		is.NoErr(err)
		is.True(d.Allowed) // the burst
	}
	ttl, err := c.PTTL(ctx, rkey).Result()
	is.NoErr(err)
	is.True(within(ttl, time.Hour)) // the bucket's key, expiring when the quota is full again
	before := stored(t, c, rkey)
	for range 5 {
		d, err := l.Allow(ctx, "account:a", p)
		is.NoErr(err)
		is.True(!d.Allowed) // refused
	}
	is.Equal(stored(t, c, rkey), before) // refusals wrote nothing
	_, err = l.Charge(ctx, "account:a", p, 2)
	is.NoErr(err)
	ttl, err = c.PTTL(ctx, rkey).Result()
	is.NoErr(err)
	is.True(within(ttl, 100*time.Minute)) // the key lasts as long as the debt
	is.Equal(redislimit.DefaultPrefix, "formsapi:rl:")
}

// TestBadInputWritesNothing: an invalid policy, a key over 512 bytes and
// a done context are errors that start with "redislimit: allow: " and
// never quote the key, and write nothing to Redis (ratelimittest checks
// that they consume nothing).
func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, c, prefix := newLimiter(t)
	p := ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour}
	long := "account:" + strings.Repeat("secret", 100)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for _, bad := range []struct {
		ctx context.Context
		key string
		p   ratelimit.Policy
	}{
		{ctx, "k", ratelimit.Policy{Name: "default", Quota: 0, Window: time.Hour}},
		{ctx, long, p},
		{canceled, "k", p},
	} {
		_, err := l.Allow(bad.ctx, bad.key, bad.p)
		if err == nil || !strings.HasPrefix(err.Error(), "redislimit: allow: ") || strings.Contains(err.Error(), "secret") {
			t.Errorf("Allow(%.12q…, %+v): %v, want an error that starts with redislimit: allow: and does not quote the key", bad.key, bad.p, err)
		}
	}
	keys, err := redistest.Keys(ctx, c, prefix)
	is.NoErr(err)
	is.Equal(len(keys), 0) // none of them wrote anything
}

// TestNotATime: a key under the prefix that holds something else is an
// error, not a fresh quota.
func TestNotATime(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, c, prefix := newLimiter(t)
	is.NoErr(c.Set(ctx, prefix+"default:k", "soon", time.Minute).Err())
	_, err := l.Allow(ctx, "k", ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour})
	is.True(err != nil) // refused
	is.True(strings.HasPrefix(err.Error(), "redislimit: allow: "))
}

// closedPort returns an address on which nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestRedisDown: a client of a port nothing listens on fails by itself,
// well before a generous deadline, with a wrapped error.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	redistest.URL(t) // a Redis test like the others: skipped, or failing in CI, alike
	c := redis.NewClient(&redis.Options{Addr: closedPort(t)})
	t.Cleanup(func() { c.Close() })
	l := redislimit.New(c)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := l.Allow(ctx, "account:secret-account", ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour})
	is.True(err != nil)                                            // no decision
	is.True(errors.Is(err, syscall.ECONNREFUSED))                  // the cause, wrapped
	is.True(!errors.Is(err, context.DeadlineExceeded))             // not a deadline it waited out
	is.True(strings.HasPrefix(err.Error(), "redislimit: allow: ")) // naming the operation
	is.True(!strings.Contains(err.Error(), "secret-account"))      // and not the key
}

// hangingServer accepts connections and never answers; accepted tells of
// each connection's first bytes. Its connections close when the test
// ends, which ends the client's calls still waiting on them.
func hangingServer(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	ch := make(chan struct{}, 100)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			go func() {
				if _, err := conn.Read(make([]byte, 1)); err == nil {
					select {
					case ch <- struct{}{}:
					default:
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), ch
}

// TestHangingRedisEndsWithCtx: a Redis that accepts and never answers,
// through a client that would wait for it forever: Allow returns when its
// ctx is canceled, with an error wrapping context.Canceled (go-redis
// alone would wait out its own timeouts, whatever the ctx).
func TestHangingRedisEndsWithCtx(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	redistest.URL(t)
	addr, accepted := hangingServer(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: -1, WriteTimeout: -1, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	l := redislimit.New(c)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := l.Allow(ctx, "account:a", ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour})
		done <- err
	}()
	<-accepted // the call reached the server
	cancel()
	select {
	case err := <-done:
		is.True(errors.Is(err, context.Canceled)) // ended by the ctx
		is.True(strings.HasPrefix(err.Error(), "redislimit: allow: "))
	case <-time.After(time.Minute):
		t.Fatal("Allow still waits for a Redis that never answers after its ctx was canceled")
	}
}

func TestNewPanicsOnNil(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("New(nil): no panic")
		}
	}()
	redislimit.New(nil)
}

// go test -run '^$' -bench Allow -benchmem ./ratelimit/redislimit/ (with FORMSAPI_TEST_REDIS)
//
// Allow over 10,000 keys from parallel goroutines, with a policy that
// never refuses, as BenchmarkMemoryAllow and pgstore's
// BenchmarkRateLimiterAllow; with a context that has a deadline, as the
// handler's calls do (so Allow waits for Redis in a goroutine of its own),
// and without. redis-cpu-ns/op is the Redis server's CPU time (INFO cpu,
// user and system) per decision over the run: every other client of the
// server counts too.
func BenchmarkAllow(b *testing.B) {
	deadline, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"deadline", deadline}, {"background", ctx}} {
		b.Run(c.name, func(b *testing.B) { benchmarkAllow(b, c.ctx) })
	}
}

func benchmarkAllow(b *testing.B, ctx context.Context) {
	prefix := redistest.Prefix(b)
	c := redistest.Client(b)
	l := redislimit.New(c, redislimit.WithPrefix(prefix))
	cpu0 := serverCPU(b, c)
	ratelimittest.Benchmark(b, ctx, l, 10_000)
	b.ReportMetric(float64(serverCPU(b, c)-cpu0)/float64(b.N), "redis-cpu-ns/op")
}

// serverCPU is the CPU time the Redis server has used, from INFO cpu.
func serverCPU(b *testing.B, c *redis.Client) time.Duration {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			s, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %s: %v", line, err)
			}
			total += time.Duration(s * float64(time.Second))
		}
	}
	return total
}

// TestPoolTimeoutIsOverloaded: a decision that finds every connection of
// the client's pool taken for longer than the client's PoolTimeout
// returns an error wrapping ErrOverloaded (the node's own queue, and
// nothing sent), which the handler refuses with 429 rather than serve
// unlimited when failing open.
func TestPoolTimeoutIsOverloaded(t *testing.T) {
	t.Parallel()
	u := redistest.URL(t)
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	opt.PoolSize, opt.PoolTimeout = 1, time.Millisecond
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	held := c.Conn() // takes the pool's one connection once used
	t.Cleanup(func() { held.Close() })
	if err := held.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	l := redislimit.New(c, redislimit.WithPrefix(redistest.Prefix(t)))
	cctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	_, err = l.Allow(cctx, "account:a", ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour})
	if !errors.Is(err, ratelimit.ErrOverloaded) || !errors.Is(err, redis.ErrPoolTimeout) {
		t.Fatalf("Allow with the pool taken: %v, want ErrOverloaded wrapping the pool's timeout", err)
	}
}
