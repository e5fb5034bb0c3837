package pgstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/ratelimit/ratelimittest"
)

// TestRateLimiterContract: the limiter keeps the ratelimit.Limiter
// contract, on the database's clock, with time moved in the table rather
// than waited for. The suite's clauses and this store's own checks share
// one migrated schema, each on keys of its own: prefixed gives each
// clause's keys a prefix, under which alone its clock moves the rows.
func TestRateLimiterContract(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	table := quote(s.Schema()) + ".formsapi_rate_limits"
	t.Run("Suite", func(t *testing.T) {
		t.Parallel()
		ratelimittest.Run(t, func(t *testing.T, clock *ratelimittest.Clock) ratelimit.Limiter {
			l := prefixed{s.RateLimiter(), "clause:" + strings.ToLower(rand.Text()[:12]) + ":"}
			clock.OnAdvance(func(ctx context.Context, d time.Duration) error {
				_, err := pgstore.Pool(s).Exec(ctx, "UPDATE "+table+" SET tat = tat - $1 WHERE starts_with(key, $2)", d.Microseconds(), l.prefix)
				return err
			})
			return l
		}, ratelimittest.WithMaxKey(512-len("clause:")-12-len(":")))
	})
	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		refusesBadInput(t, s.RateLimiter())
	})
	t.Run("RefusalWritesNothing", func(t *testing.T) {
		t.Parallel()
		refusalWritesNothing(t, s, table)
	})
	t.Run("RefusalUnderTheLock", func(t *testing.T) {
		t.Parallel()
		refusalUnderTheLock(t, s, table)
	})
	t.Run("DecidedAfterALaterStart", func(t *testing.T) {
		t.Parallel()
		decidedAfterALaterStart(t, s, table)
	})
	t.Run("Prune", func(t *testing.T) { // deletes every idle row: on a table of its own
		t.Parallel()
		prunes(t, s)
	})
}

// prefixed is the limiter of one clause of ratelimittest.Run among
// others on one table: its keys are the clause's prefix followed by the
// suite's.
type prefixed struct {
	*pgstore.RateLimiter
	prefix string
}

func (l prefixed) Allow(ctx context.Context, key string, p ratelimit.Policy) (ratelimit.Decision, error) {
	return l.RateLimiter.Allow(ctx, l.prefix+key, p)
}

func (l prefixed) Charge(ctx context.Context, key string, p ratelimit.Policy, n int) (ratelimit.Decision, error) {
	return l.RateLimiter.Charge(ctx, l.prefix+key, p, n)
}

// refusesBadInput: keys the table cannot hold (over 512 bytes, with NUL,
// not UTF-8) are errors that do not quote the key, and a policy Validate
// refuses, or a charge of no unit, an error wrapping
// formsapi.ErrInvalidInput (ratelimittest checks that such calls consume
// nothing).
func refusesBadInput(t *testing.T, l *pgstore.RateLimiter) {
	p := ratelimit.Policy{Name: "default", Quota: 1, Window: time.Second}
	for _, k := range []string{strings.Repeat("k", 513), "a\x00b", "\xff"} {
		_, err := l.Allow(ctx, k, p)
		if err == nil {
			t.Errorf("Allow(%.10q…): no error", k)
		} else if strings.Contains(err.Error(), k) {
			t.Errorf("the error quotes the key: %v", err)
		}
	}
	for _, bad := range []ratelimit.Policy{
		{Name: "default", Quota: 0, Window: time.Second},
		{Name: "default", Quota: 1, Window: 0},
		{Name: "bad name", Quota: 1, Window: time.Second},
	} {
		if _, err := l.Allow(ctx, "k", bad); !errors.Is(err, formsapi.ErrInvalidInput) {
			t.Errorf("Allow with %+v: %v, want ErrInvalidInput", bad, err)
		}
	}
	if _, err := l.Charge(ctx, "k", p, 0); !errors.Is(err, formsapi.ErrInvalidInput) {
		t.Errorf("Charge of 0 units: %v, want ErrInvalidInput", err)
	}
}

// refusalWritesNothing: once a bucket is spent, refusals leave its
// row as it was, the very tuple (ctid), written by the same transaction
// (xmin), with the same values: a flood of refused requests costs the
// database reads, not writes.
func refusalWritesNothing(t *testing.T, s *pgstore.Store, table string) {
	is := is.New(t)
	l := s.RateLimiter()
	p := ratelimit.Policy{Name: "default", Quota: 2, Window: time.Hour}
	const key = "account:writes-nothing"
	row := func() string {
		var v string
		err := pgstore.Pool(s).QueryRow(ctx, "SELECT ctid::text || ' ' || xmin::text || ' ' || tat || ' ' || allowed || ' ' || at FROM "+
			table+" WHERE policy = $1 AND key = $2", p.Name, key).Scan(&v)
		is.NoErr(err) // the bucket's row
		return v
	}
	for range p.Quota {
		d, err := l.Allow(ctx, key, p)
		is.NoErr(err)
		is.True(d.Allowed) // the burst
	}
	before := row()
	for range 5 {
		d, err := l.Allow(ctx, key, p)
		is.NoErr(err)
		is.True(!d.Allowed)                                                      // refused
		is.True(d.RetryAfter > 29*time.Minute && d.RetryAfter <= 30*time.Minute) // one interval, less the time gone by
	}
	is.Equal(row(), before) // no write: the same tuple, untouched
}

// refusalUnderTheLock: a request that the statement's first read
// allows, but that finds the last unit taken once it has the row's lock,
// is refused with the RetryAfter of the row as the other request left it,
// and writes nothing. The other request is an UPDATE in a transaction
// held open until the limiter's statement waits for its lock.
func refusalUnderTheLock(t *testing.T, s *pgstore.Store, table string) {
	is := is.New(t)
	l := s.RateLimiter()
	p := ratelimit.Policy{Name: "default", Quota: 2, Window: time.Hour}
	const key = "account:under-the-lock"
	d, err := l.Allow(ctx, key, p)
	is.NoErr(err)
	is.True(d.Allowed) // one unit left
	tx, err := pgstore.Pool(s).Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, "UPDATE "+table+" SET tat = tat + $1 WHERE key = $2", p.Interval().Microseconds(), key)
	is.NoErr(err) // takes the last unit, not yet committed
	got := behind(t, tx, func() (ratelimit.Decision, error) { return l.Allow(ctx, key, p) })
	var ctid string
	is.NoErr(tx.QueryRow(ctx, "SELECT ctid::text FROM "+table+" WHERE key = $1", key).Scan(&ctid))
	is.NoErr(tx.Commit(ctx))
	d = <-got
	is.True(!d.Allowed) // refused under the lock
	// From the row as the UPDATE left it, a whole burst ahead: an
	// interval to wait, less the time gone by (the tat the statement read
	// first would give a microsecond).
	is.True(d.RetryAfter > 29*time.Minute && d.RetryAfter <= 30*time.Minute)
	var after string
	is.NoErr(pgstore.Pool(s).QueryRow(ctx, "SELECT ctid::text FROM "+table+" WHERE key = $1", key).Scan(&after))
	is.Equal(after, ctid) // and nothing written after the UPDATE
}

// decidedAfterALaterStart: a decision (or a charge of one unit) whose
// statement began before another's, and waited for it (the other created
// the bucket's row first), is made at the other's time, not at its own
// earlier start: its Remaining counts both units, and its Reset is two
// intervals. At its own start, it counted one unit too many: two
// decisions racing for a new bucket gave the same Remaining
// (ratelimittest's Concurrent clause, now and then on a loaded machine).
// The other decision is a transaction that inserts the row, holds it
// until the limiter's statement waits for it, then stamps it with the
// time then, as a decision made then would.
func decidedAfterALaterStart(t *testing.T, s *pgstore.Store, table string) {
	l := s.RateLimiter()
	p := ratelimit.Policy{Name: "default", Quota: 3, Window: time.Hour}
	for name, call := range map[string]func(ctx context.Context, key string) (ratelimit.Decision, error){
		"Allow":  func(ctx context.Context, key string) (ratelimit.Decision, error) { return l.Allow(ctx, key, p) },
		"Charge": func(ctx context.Context, key string) (ratelimit.Decision, error) { return l.Charge(ctx, key, p, 1) },
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			key := "account:later-start-" + name
			tx, err := pgstore.Pool(s).Begin(ctx)
			is.NoErr(err)
			defer tx.Rollback(ctx)
			_, err = tx.Exec(ctx, "INSERT INTO "+table+" (policy, key, tat, allowed, at) VALUES ($1, $2, 0, true, 0)", p.Name, key)
			is.NoErr(err) // the other decision's row, not yet committed
			got := behind(t, tx, func() (ratelimit.Decision, error) { return call(ctx, key) })
			_, err = tx.Exec(ctx, "UPDATE "+table+" SET at = n.us, tat = n.us + $3 FROM (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS us) AS n WHERE policy = $1 AND key = $2",
				p.Name, key, p.Interval().Microseconds())
			is.NoErr(err) // the other decision, made after the limiter's statement began
			is.NoErr(tx.Commit(ctx))
			d := <-got
			is.True(d.Allowed)                // the second unit
			is.Equal(d.Remaining, 1)          // of three
			is.Equal(d.Reset, 2*p.Interval()) // two intervals from the time of the decision before it
		})
	}
}

// behind runs call in a goroutine, and returns once its statement waits
// for a lock tx holds; the decision comes on the channel when tx ends.
func behind(t *testing.T, tx pgx.Tx, call func() (ratelimit.Decision, error)) <-chan ratelimit.Decision {
	t.Helper()
	var pid int
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	got := make(chan ratelimit.Decision, 1)
	go func() {
		d, err := call()
		if err != nil {
			t.Error(err)
		}
		got <- d
	}()
	// Asked on a connection of its own: the pool's may all be taken.
	pgtest.WaitForLock(t, pgtest.DSN(t), "$1 = ANY (pg_blocking_pids(pid))", pid)
	return got
}

// prunes ages one row past its window behind the limiter's back, rather
// than waiting for it, in a schema of its own, and then asks the limiter
// of other, on another schema, about the same key: schemas share no state.
func prunes(t *testing.T, other *pgstore.Store) {
	is := is.New(t)
	s := mustOpen(t)
	l := s.RateLimiter()
	p := ratelimit.Policy{Name: "default", Quota: 1, Window: time.Hour}
	_, err := l.Allow(ctx, "idle", p)
	is.NoErr(err) // allow
	_, err = l.Allow(ctx, "busy", p)
	is.NoErr(err) // allow
	_, err = pgstore.Pool(s).Exec(ctx, "UPDATE "+quote(s.Schema())+".formsapi_rate_limits SET tat = tat - $1 WHERE key = 'idle'", int64(2*time.Hour/time.Microsecond))
	is.NoErr(err) // an hour past its window
	n, err := l.Prune(ctx)
	is.NoErr(err)         // prune
	is.Equal(n, int64(1)) // only the idle key's row
	d, _ := l.Allow(ctx, "busy", p)
	is.True(!d.Allowed) // the busy key's state survived
	d, _ = l.Allow(ctx, "idle", p)
	is.True(d.Allowed) // and the idle one starts afresh
	d, err = other.RateLimiter().Allow(ctx, "busy", p)
	is.NoErr(err)
	is.True(d.Allowed) // the same key on another schema: schemas share no state
}

// TestRateLimiterTwoNodes: two stores, each with its own pool, over one
// schema, hammered at once. Together they allow no more than one node
// may: a burst of Quota, then one every interval. Two in-process limiters
// in the same run allow about twice that, which is what sharing prevents.
func TestRateLimiterTwoNodes(t *testing.T) {
	t.Parallel()
	dsn, schema := pooledSchema(t)
	p := ratelimit.Policy{Name: "default", Quota: 10, Window: time.Second}
	var shared, separate []func() (bool, error)
	for i := 0; i < 2; i++ {
		s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		l := s.RateLimiter()
		shared = append(shared, func() (bool, error) {
			d, err := l.Allow(ctx, "account:shared", p)
			return d.Allowed, err
		})
		m := ratelimit.NewMemory()
		separate = append(separate, func() (bool, error) {
			d, err := m.Allow(ctx, "account:shared", p)
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
func hammer(t *testing.T, nodes []func() (bool, error), d time.Duration, p ratelimit.Policy) (allowed, refused, bound int) {
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

// go test -run '^$' -bench RateLimiterAllow -benchmem ./pgstore/ (with FORMSAPI_TEST_POSTGRES)
//
// Allow over 1,000 keys from parallel goroutines, with a policy that
// never refuses. pg-cpu-ns/op is the CPU time the benchmark's own
// PostgreSQL backends spent per decision (from /proc/PID/schedstat of
// the pids pg_stat_activity gives for the benchmark's application_name),
// when PostgreSQL runs on this machine; its background processes are
// left out (the table is UNLOGGED: no WAL to write).
func BenchmarkRateLimiterAllow(b *testing.B) {
	dsn, schema := pgtest.Schema(b)
	app := "formsapi_bench_" + strings.ToLower(rand.Text()[:10])
	s, err := pgstore.Open(ctx, withAppName(dsn, app), pgstore.WithSchema(schema))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l := s.RateLimiter()
	// Open the pool's connections before measuring: as many as the run's
	// goroutines, each warmed up on keys the benchmark asks about.
	p := ratelimit.Policy{Name: "default", Quota: 1 << 30, Window: time.Second}
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range 100 {
				l.Allow(ctx, "account:"+strconv.Itoa(i), p)
			}
		})
	}
	wg.Wait()
	cpu0, ok := backendCPU(b, dsn, app)
	ratelimittest.Benchmark(b, ctx, l, 1000)
	if cpu1, ok1 := backendCPU(b, dsn, app); ok && ok1 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "pg-cpu-ns/op")
	}
}

// withAppName adds application_name to a DSN, URL or key=value.
func withAppName(dsn, app string) string {
	switch {
	case !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://"):
		return dsn + " application_name=" + app
	case strings.Contains(dsn, "?"):
		return dsn + "&application_name=" + app
	}
	return dsn + "?application_name=" + app
}

// backendCPU is pgtest.BackendCPU: the CPU time so far of the
// backends of application app.
func backendCPU(b *testing.B, dsn, app string) (time.Duration, bool) {
	return pgtest.BackendCPU(b, dsn, app)
}
