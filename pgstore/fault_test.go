package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// storeTimeout is the handler's budget in the fault tests; no response
// may take much longer, whatever the database does.
const storeTimeout = 2 * time.Second

// hangLimit is how long past storeTimeout a response may take before the
// test calls it a hang: generous, since the machine may be busy.
const hangLimit = storeTimeout + 5*time.Second

// faultNode is a seeded store whose connections carry an application
// name of their own, so the test can find and kill them, and a handler
// over it.
func faultNode(t *testing.T) (h http.Handler, dsn, schema, app string) {
	t.Helper()
	dsn, schema = pgtest.Schema(t)
	app = "formsapi_fault_" + strings.ToLower(rand.Text()[:10])
	s, err := pgstore.Open(ctx, withParam(dsn, "application_name", app), pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	load(t, s, storetest.DefaultSeed())
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	return formsapi.NewHandler(s, s, formsapi.WithStoreTimeout(storeTimeout), formsapi.WithLogger(logger)), dsn, schema, app
}

var faultTargets = []string{
	"/v1/forms?limit=2",
	"/v1/forms/" + storetest.FormBusy + "/submissions?limit=5",
	"/v1/forms/" + storetest.FormBusy + "/submissions?order=asc&limit=50",
}

// checkFaultResponse fails unless res is a success, or a JSON 500 or 503:
// never a 401 (the key is fine, the database is not), never a hang.
func checkFaultResponse(t *testing.T, target string, res response, took time.Duration) {
	t.Helper()
	if took > hangLimit {
		t.Errorf("GET %s took %v, past the store timeout of %v", target, took, storeTimeout)
	}
	switch res.status {
	case http.StatusOK:
		return
	case http.StatusInternalServerError, http.StatusServiceUnavailable:
	default:
		t.Errorf("GET %s during a database fault: %d %s", target, res.status, res.body)
		return
	}
	var body struct {
		Success *bool `json:"success"`
	}
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || json.Unmarshal(res.body, &body) != nil || body.Success == nil || *body.Success {
		t.Errorf("GET %s: %d with Content-Type %q and body %s, want a JSON error", target, res.status, ct, res.body)
	}
}

// recovered asks each target until it succeeds, allowing a few failures
// for connections that died while idle in the pool, then requires a run
// of successes: the store heals by itself, with nothing restarted.
func recovered(t *testing.T, h http.Handler) {
	t.Helper()
	failures := 0
	for ok := 0; ok < 30; {
		target := faultTargets[(ok+failures)%len(faultTargets)]
		res := get(h, target, storetest.KeyA)
		if res.status == http.StatusOK {
			ok++
			continue
		}
		if ok > 0 || failures > 10 {
			t.Fatalf("GET %s after the fault (%d successes, %d failures before): %d %s", target, ok, failures, res.status, res.body)
		}
		failures++
	}
	if failures > 0 {
		t.Logf("%d requests failed after the fault before the store recovered", failures)
	}
}

// TestTerminatedConnections kills the store's connections with
// pg_terminate_backend again and again while clients make requests: every
// answer is a success or a JSON 500/503, none hangs or says 401, and the
// store recovers on its own once the killing stops. The killing is paced
// by the clients, not a clock: each round waits until a request has
// ended since the last, so the pool has reconnected and clients are
// mid-request again.
func TestTerminatedConnections(t *testing.T) {
	t.Parallel()
	h, dsn, _, app := faultNode(t)
	killer, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(ctx)

	stop := make(chan struct{})
	answered := make(chan struct{}, 1) // a request ended since the killer last looked
	var wg sync.WaitGroup
	var requests, failed atomic.Int64
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				target := faultTargets[i%len(faultTargets)]
				start := time.Now()
				res := get(h, target, storetest.KeyA)
				checkFaultResponse(t, target, res, time.Since(start))
				requests.Add(1)
				if res.status != http.StatusOK {
					failed.Add(1)
				}
				select {
				case answered <- struct{}{}:
				default:
				}
			}
		}()
	}
	killed := 0
	for range 60 {
		<-answered // every request ends within hangLimit, so this comes
		var n int
		err := killer.QueryRow(ctx, "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		killed += n
	}
	close(stop)
	wg.Wait()
	t.Logf("%d connections terminated; %d of %d requests failed meanwhile", killed, failed.Load(), requests.Load())
	if killed == 0 {
		t.Fatal("no connection of the store was terminated: the test tested nothing")
	}
	recovered(t, h)
}

// TestBlockedDatabase holds a lock that every request waits for: each
// request ends in a JSON 503 when the store timeout runs out, not in a
// hang, and once the lock goes the store serves again.
func TestBlockedDatabase(t *testing.T) {
	t.Parallel()
	h, dsn, schema, _ := faultNode(t)
	if get(h, faultTargets[0], storetest.KeyA).status != http.StatusOK {
		t.Fatal("the store does not work before the fault")
	}
	blocker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close(ctx)
	tx, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Every request resolves its key first, so locking the keys table
	// blocks them all.
	if _, err := tx.Exec(ctx, "LOCK TABLE "+quote(schema)+".formsapi_keys IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, target := range faultTargets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			res := get(h, target, storetest.KeyA)
			checkFaultResponse(t, target, res, time.Since(start))
			if res.status != http.StatusServiceUnavailable {
				t.Errorf("GET %s while the database is blocked: %d %s, want 503", target, res.status, res.body)
			}
		}()
	}
	wg.Wait()
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	recovered(t, h)
}
