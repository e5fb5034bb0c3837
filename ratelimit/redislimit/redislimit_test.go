package redislimit_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
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

// advance moves a bucket d into the future, as if d had passed: it takes
// d from the time the bucket's key holds, if it holds one (no key is a
// full quota, which time does not change). The tests use policies whose
// interval is far longer than they run, so the real time that passes
// meanwhile changes no decision.
func advance(t *testing.T, c *redis.Client, rkey string, d time.Duration) {
	t.Helper()
	const shift = `local v = redis.call('GET', KEYS[1])
if v then redis.call('SET', KEYS[1], string.format('%d', tonumber(v) - tonumber(ARGV[1])), 'KEEPTTL') end
return 0`
	if err := c.Eval(ctx, shift, []string{rkey}, d.Microseconds()).Err(); err != nil {
		t.Fatalf("advance: %v", err)
	}
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

func TestBurstThenRate(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, c, prefix := newLimiter(t)
	p := ratelimit.Policy{Name: "default", Quota: 3, Window: time.Hour} // one every 20 minutes
	rkey := prefix + "default:account:a"
	for i := 0; i < 3; i++ {
		d, err := l.Allow(ctx, "account:a", p)
		if err != nil || !d.Allowed || d.Remaining != 2-i || d.RetryAfter != 0 || d.Policy != p {
			t.Errorf("request %d of a burst: %+v, %v", i, d, err)
		}
		if want := time.Duration(i+1) * 20 * time.Minute; !within(d.Reset, want) {
			t.Errorf("request %d: Reset %s, want about %s", i, d.Reset, want)
		}
	}
	is.True(stored(t, c, rkey) != "") // the key is prefix, policy name, ":" and key
	ttl, err := c.PTTL(ctx, rkey).Result()
	is.NoErr(err)
	is.True(within(ttl, time.Hour)) // and expires when the quota is full again

	d, err := l.Allow(ctx, "account:a", p)
	is.NoErr(err)
	is.True(!d.Allowed)                           // the fourth at once is refused
	is.Equal(d.Remaining, 0)                      // with nothing left
	is.True(within(d.RetryAfter, 20*time.Minute)) // one interval to wait
	is.True(within(d.Reset, time.Hour))           // a window until the quota is full
	before := stored(t, c, rkey)
	for i := 0; i < 5; i++ {
		d, err := l.Allow(ctx, "account:a", p)
		is.NoErr(err)
		is.True(!d.Allowed) // and so are the next ones
	}
	is.Equal(stored(t, c, rkey), before) // refusals wrote nothing

	advance(t, c, rkey, d.RetryAfter-time.Minute) // just before RetryAfter...
	d, _ = l.Allow(ctx, "account:a", p)
	is.True(!d.Allowed) // ...still refused
	advance(t, c, rkey, time.Minute)
	d, _ = l.Allow(ctx, "account:a", p)
	is.True(d.Allowed)       // at RetryAfter one more fits: the refusals cost nothing
	is.Equal(d.Remaining, 0) // and no more
	d, _ = l.Allow(ctx, "account:a", p)
	is.True(!d.Allowed) // two are never allowed after one interval
	advance(t, c, rkey, 2*time.Hour)
	d, _ = l.Allow(ctx, "account:a", p)
	is.True(d.Allowed)       // after a long idle time
	is.Equal(d.Remaining, 2) // the burst is back, and no more than it

	d, _ = l.Allow(ctx, "account:b", p)
	is.True(d.Allowed)       // another key
	is.Equal(d.Remaining, 2) // has its own budget
}

// TestCharge: a charge takes its units whatever is left, on Redis's
// clock, in the key Allow uses, so the bucket owes units and Allow
// refuses until they have come back; the key expires when the quota is
// whole again, debt included.
func TestCharge(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, c, prefix := newLimiter(t)
	p := ratelimit.Policy{Name: "default", Quota: 3, Window: time.Hour} // one every 20 minutes
	rkey := prefix + "default:account:a"
	_, err := l.Allow(ctx, "account:a", p)
	is.NoErr(err)
	d, err := l.Charge(ctx, "account:a", p, 1)
	is.NoErr(err)
	is.True(d.Allowed)                       // never refused
	is.Equal(d.Remaining, 1)                 // 1 + 1 of 3 taken
	is.True(within(d.Reset, 40*time.Minute)) // two intervals
	d, err = l.Charge(ctx, "account:a", p, 3)
	is.NoErr(err)
	is.Equal(d.Remaining, 0)                  // owing two units
	is.True(within(d.Reset, 100*time.Minute)) // five intervals
	ttl, err := c.PTTL(ctx, rkey).Result()
	is.NoErr(err)
	is.True(within(ttl, 100*time.Minute)) // the key lasts as long as the debt
	d, err = l.Allow(ctx, "account:a", p)
	is.NoErr(err)
	is.True(!d.Allowed)                      // refused while it owes
	is.True(within(d.RetryAfter, time.Hour)) // the debt and one unit
	advance(t, c, rkey, time.Hour)
	d, _ = l.Allow(ctx, "account:a", p)
	is.True(d.Allowed) // then served
	d, err = l.Charge(ctx, "account:b", p, 2)
	is.NoErr(err)
	is.Equal(d.Remaining, 1) // a bucket never seen is charged from a whole quota
	_, err = l.Charge(ctx, "account:a", p, 0)
	is.True(err != nil) // at least one unit
}

// TestStaysWithinBound: requests at random times, four times as fast as
// the rate, with time moved in Redis rather than waited for: no more are
// allowed than a burst and the steady rate over the time that passed, and
// not many fewer.
func TestStaysWithinBound(t *testing.T) {
	t.Parallel()
	l, c, prefix := newLimiter(t)
	for _, p := range []ratelimit.Policy{
		{Name: "a", Quota: 20, Window: 20 * time.Hour},
		{Name: "b", Quota: 7, Window: 7*time.Hour + time.Second}, // an interval that is no whole number of microseconds
		{Name: "c", Quota: 1, Window: time.Hour},
	} {
		rkey := prefix + p.Name + ":k"
		r := rand.New(rand.NewPCG(1, 2))
		start := time.Now()
		var moved time.Duration
		allowed := 0
		for i := 0; i < 300; i++ {
			step := time.Duration(r.Int64N(int64(p.Interval() / 2)))
			advance(t, c, rkey, step)
			moved += step
			d, err := l.Allow(ctx, "k", p)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				allowed++
			}
			elapsed := moved + time.Since(start)
			if bound := p.Quota + int(int64(p.Quota)*int64(elapsed)/int64(p.Window)); allowed > bound {
				t.Errorf("%+v: %d allowed in %s, bound %d", p, allowed, elapsed, bound)
				break
			}
		}
		if least := int(int64(p.Quota) * int64(moved) / int64(p.Window) * 3 / 4); allowed < least {
			t.Errorf("%+v: only %d allowed, the rate gives %d", p, allowed, least)
		}
	}
}

// TestTwoNodesShareTheBudget: two limiters, each with its own client, as
// two API nodes, on one Redis and prefix, asked about one bucket from
// eight goroutines at once. Together they allow exactly the burst, each
// allowed request seeing a different Remaining (the decisions are made
// one after another), then exactly as many as the time moved gives back.
func TestTwoNodesShareTheBudget(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	prefix := redistest.Prefix(t)
	nodes := []*redislimit.Limiter{
		redislimit.New(redistest.Client(t), redislimit.WithPrefix(prefix)),
		redislimit.New(redistest.Client(t), redislimit.WithPrefix(prefix)),
	}
	c := redistest.Client(t)
	p := ratelimit.Policy{Name: "default", Quota: 50, Window: 50 * time.Hour} // one an hour

	flood := func() (remaining []int, refused int) {
		var (
			mu sync.Mutex
			wg sync.WaitGroup
		)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 25; i++ {
					d, err := nodes[g%2].Allow(ctx, "account:shared", p)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if d.Allowed {
						remaining = append(remaining, d.Remaining)
					} else {
						refused++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		slices.Sort(remaining)
		return remaining, refused
	}

	remaining, refused := flood()
	want := make([]int, 50)
	for i := range want {
		want[i] = i
	}
	is.Equal(remaining, want) // the burst, once: 49 left, 48, …, 0
	is.Equal(refused, 150)    // and the rest refused

	advance(t, c, prefix+"default:account:shared", 5*time.Hour)
	remaining, refused = flood()
	is.Equal(len(remaining), 5) // five hours give back five
	is.Equal(refused, 195)

	m := []ratelimit.Limiter{ratelimit.NewMemory(), ratelimit.NewMemory()}
	allowed := 0
	for i := 0; i < 200; i++ {
		if d, _ := m[i%2].Allow(ctx, "account:shared", p); d.Allowed {
			allowed++
		}
	}
	is.Equal(allowed, 100) // two unshared limiters would have allowed a burst each
}

// TestPoliciesAreSeparate: the policy travels with each call; the same key
// under two names is two budgets, each with its own quota.
func TestPoliciesAreSeparate(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, _, _ := newLimiter(t)
	a := ratelimit.Policy{Name: "a", Quota: 1, Window: time.Minute}
	b := ratelimit.Policy{Name: "b", Quota: 3, Window: time.Minute}
	d, _ := l.Allow(ctx, "k", a)
	is.True(d.Allowed) // a's first
	d, _ = l.Allow(ctx, "k", b)
	is.True(d.Allowed)       // b's first, although a used the key
	is.Equal(d.Remaining, 2) // from b's own quota
	is.Equal(d.Policy, b)    // under b
	d, _ = l.Allow(ctx, "k", a)
	is.True(!d.Allowed) // a's second is refused
}

// TestPrefixesAreSeparate: limiters with different prefixes on one Redis
// share nothing; the default prefix is formsapi:rl:.
func TestPrefixesAreSeparate(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	p := ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour}
	a, _, _ := newLimiter(t)
	b, _, _ := newLimiter(t)
	d, _ := a.Allow(ctx, "account:x", p)
	is.True(d.Allowed)
	d, _ = b.Allow(ctx, "account:x", p)
	is.True(d.Allowed) // another prefix, another bucket
	is.Equal(redislimit.DefaultPrefix, "formsapi:rl:")
}

func TestRefusesBadInputConsumingNothing(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, c, prefix := newLimiter(t)
	p := ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour}
	for _, bad := range []ratelimit.Policy{
		{Name: "default", Quota: 0, Window: time.Hour},
		{Name: "default", Quota: 1, Window: 0},
		{Name: "default", Quota: 1, Window: 1500 * time.Millisecond},
		{Name: "bad name", Quota: 1, Window: time.Hour},
	} {
		_, err := l.Allow(ctx, "k", bad)
		if err == nil || !strings.HasPrefix(err.Error(), "redislimit: allow: ") {
			t.Errorf("Allow with %+v: %v, want an error", bad, err)
		}
	}
	long := strings.Repeat("k", 513)
	_, err := l.Allow(ctx, long, p)
	is.True(err != nil)                               // a key too long
	is.True(!strings.Contains(err.Error(), long[:8])) // is refused without quoting it
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.Allow(canceled, "k", p)
	is.True(errors.Is(err, context.Canceled)) // so is a done ctx

	keys, err := redistest.Keys(ctx, c, prefix)
	is.NoErr(err)
	is.Equal(len(keys), 0) // none of them wrote anything
	d, err := l.Allow(ctx, "k", p)
	is.NoErr(err)
	is.True(d.Allowed) // the key's quota is whole
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
	p := ratelimit.Policy{Name: "default", Quota: 1 << 30, Window: time.Second}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "account:" + strconv.Itoa(i)
	}
	cpu0 := serverCPU(b, c)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if _, err := l.Allow(ctx, keys[i%len(keys)], p); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
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
