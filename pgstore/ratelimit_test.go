package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
)

func limiter(t *testing.T, s *pgstore.Store, p formsapi.RateLimitPolicy) *pgstore.RateLimiter {
	t.Helper()
	l, err := s.RateLimiter(p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRateLimiterDecisions(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	p := formsapi.RateLimitPolicy{Name: "default", Quota: 3, Window: time.Minute}
	l := limiter(t, mustOpen(t), p)
	for i := 0; i < 3; i++ {
		d, err := l.Allow(ctx, "account:a")
		is.NoErr(err)                   // allow
		is.True(d.Allowed)              // within the burst
		is.Equal(d.Remaining, 2-i)      // one fewer each time
		is.Equal(d.Policy, p)           // the policy
		is.True(d.Reset <= time.Minute) // never more than the window
	}
	d, err := l.Allow(ctx, "account:a")
	is.NoErr(err)                                                            // allow
	is.True(!d.Allowed)                                                      // the fourth is refused
	is.Equal(d.Remaining, 0)                                                 // nothing left
	is.True(d.RetryAfter > 15*time.Second && d.RetryAfter <= 20*time.Second) // one interval, less the time the test took
	d, err = l.Allow(ctx, "account:b")
	is.NoErr(err)            // another key
	is.True(d.Allowed)       // has its own budget
	is.Equal(d.Remaining, 2) // untouched by a's
	other := limiter(t, mustOpen(t), p)
	d, err = other.Allow(ctx, "account:a")
	is.NoErr(err)      // same key, another schema
	is.True(d.Allowed) // schemas do not share state

	is.NoErr(l.Refund(ctx, "account:a")) // give one back
	d, err = l.Allow(ctx, "account:a")
	is.NoErr(err)      // allow
	is.True(d.Allowed) // the refunded unit is spent
}

func TestRateLimiterPoliciesAreSeparate(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t)
	a := limiter(t, s, formsapi.RateLimitPolicy{Name: "a", Quota: 1, Window: time.Minute})
	b := limiter(t, s, formsapi.RateLimitPolicy{Name: "b", Quota: 1, Window: time.Minute})
	d, _ := a.Allow(ctx, "k")
	is.True(d.Allowed) // a's first
	d, _ = b.Allow(ctx, "k")
	is.True(d.Allowed) // b's first, although a used the key
	d, _ = a.Allow(ctx, "k")
	is.True(!d.Allowed) // a's second is refused
}

func TestRateLimiterRefusesBadKeys(t *testing.T) {
	t.Parallel()
	l := limiter(t, mustOpen(t), formsapi.RateLimitPolicy{Name: "default", Quota: 1, Window: time.Second})
	for _, k := range []string{strings.Repeat("k", 513), "a\x00b", "\xff"} {
		_, err := l.Allow(ctx, k)
		if err == nil {
			t.Errorf("Allow(%.10q…): no error", k)
		} else if strings.Contains(err.Error(), k) {
			t.Errorf("the error quotes the key: %v", err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Allow(cctx, "k"); err == nil {
		t.Error("Allow with a canceled context: no error")
	}
}

func TestRateLimiterPrune(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l := limiter(t, mustOpen(t), formsapi.RateLimitPolicy{Name: "default", Quota: 1, Window: time.Second})
	_, err := l.Allow(ctx, "idle")
	is.NoErr(err) // allow
	time.Sleep(1100 * time.Millisecond)
	_, err = l.Allow(ctx, "busy")
	is.NoErr(err) // allow
	n, err := l.Prune(ctx)
	is.NoErr(err)         // prune
	is.Equal(n, int64(1)) // only the idle key's row
	d, _ := l.Allow(ctx, "busy")
	is.True(!d.Allowed) // the busy key's state survived
}

// TestRateLimiterTwoNodes: two stores, each with its own pool, over one
// schema, hammered at once. Together they allow no more than one node
// may: a burst of Quota, then one every interval. Two in-process limiters
// in the same run allow about twice that, which is what sharing prevents.
func TestRateLimiterTwoNodes(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
	p := formsapi.RateLimitPolicy{Name: "default", Quota: 10, Window: time.Second}
	var shared, separate []func() (bool, error)
	for i := 0; i < 2; i++ {
		s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		l := limiter(t, s, p)
		shared = append(shared, func() (bool, error) {
			d, err := l.Allow(ctx, "account:shared")
			return d.Allowed, err
		})
		m := formsapi.NewMemoryRateLimiter(p)
		separate = append(separate, func() (bool, error) {
			d, err := m.Allow(ctx, "account:shared")
			return d.Allowed, err
		})
	}
	allowed, refused, bound := hammer(t, shared, 1500*time.Millisecond, p)
	t.Logf("shared: %d allowed (bound %d), %d refused", allowed, bound, refused)
	if allowed > bound {
		t.Errorf("%d requests allowed over both nodes; the policy allows at most %d", allowed, bound)
	}
	if allowed < p.Quota {
		t.Errorf("only %d requests allowed; the burst alone is %d", allowed, p.Quota)
	}
	if refused == 0 {
		t.Errorf("no request refused: the load never reached the limit, so the test proves nothing")
	}
	allowed, _, bound = hammer(t, separate, 1500*time.Millisecond, p)
	t.Logf("separate: %d allowed (bound %d)", allowed, bound)
	if allowed <= bound {
		t.Errorf("two unshared limiters allowed only %d, within the bound %d: the test cannot tell sharing from not", allowed, bound)
	}
}

// hammer calls each node's allow from four goroutines for about d, and
// returns how many calls were allowed and refused, and the most p allows
// over the time the calls took: Quota + elapsed/interval, rounded up.
func hammer(t *testing.T, nodes []func() (bool, error), d time.Duration, p formsapi.RateLimitPolicy) (allowed, refused, bound int) {
	t.Helper()
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	start := time.Now()
	stop := start.Add(d)
	for _, allow := range nodes {
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					ok, err := allow()
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if ok {
						allowed++
					} else {
						refused++
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	bound = p.Quota + int((elapsed+p.Interval()-1)/p.Interval())
	return allowed, refused, bound
}

// go test -run '^$' -bench RateLimiter ./pgstore/ (with FORMSAPI_TEST_POSTGRES)
func BenchmarkRateLimiterAllow(b *testing.B) {
	dsn, schema := pgtest.Schema(b)
	s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l, err := s.RateLimiter(formsapi.RateLimitPolicy{Name: "default", Quota: 1 << 30, Window: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("account:%d", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if _, err := l.Allow(ctx, keys[i%len(keys)]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
