package formsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/ratelimit"
)

// testClock is a clock the test moves by hand, safe for concurrent use.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// logLines parses JSON log lines and returns them by message.
func logLines(t *testing.T, b []byte) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	for d.More() {
		var line map[string]any
		if err := d.Decode(&line); err != nil {
			t.Fatalf("log line: %v", err)
		}
		msg, _ := line["msg"].(string)
		out[msg] = append(out[msg], line)
	}
	return out
}

// TestFailureLogsAreThrottled: 1,000 requests that find both the rate
// limiter and the store down, from several goroutines within one second,
// write one line for each failure, not 2,000; the first line of each a
// second later counts the 999 held back.
func TestFailureLogsAreThrottled(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var logs bytes.Buffer // slog's handler serializes its writes
	clock := newTestClock()
	store := fakeStore{forms: func(context.Context) (formsapi.Page[formsapi.Form], error) {
		return formsapi.Page[formsapi.Form]{}, errors.New("disk on fire")
	}}
	limiter := &recordingLimiter{Limiter: ratelimit.NewMemory(), err: errLimiterDown}
	h := formsapi.NewHandler(store, okKey,
		formsapi.WithRateLimit(ratelimit.Options{Limiter: limiter, Policy: hourly}),
		formsapi.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))),
		formsapi.WithCursorSecret([]byte("a secret of this test, not the store's")), // or the handler warns it has none
		formsapi.WithClock(clock.now))

	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				if res := do(t, h, "GET", "/v1/forms", bearer("k")...); res.status != 500 {
					t.Errorf("status %d, want 500 (served unlimited, then the store failed)", res.status)
					return
				}
			}
		}()
	}
	wg.Wait()
	const limiterMsg, storeMsg = "formsapi: rate limiter failed; request served unlimited", "formsapi: store failed"
	lines := logLines(t, logs.Bytes())
	is.Equal(len(lines[limiterMsg]), 1) // one line of each kind
	is.Equal(len(lines[storeMsg]), 1)
	is.Equal(len(lines), 2) // and nothing else
	_, counted := lines[storeMsg][0]["suppressed"]
	is.True(!counted) // the first line has nothing to count

	clock.advance(formsapi.LogInterval)
	logs.Reset()
	do(t, h, "GET", "/v1/forms", bearer("k")...)
	lines = logLines(t, logs.Bytes())
	is.Equal(len(lines[limiterMsg]), 1)                              // a second later, one line each again
	is.Equal(len(lines[storeMsg]), 1)                                //
	is.Equal(lines[limiterMsg][0]["suppressed"], json.Number("999")) // counting the lines held back
	is.Equal(lines[storeMsg][0]["suppressed"], json.Number("999"))
	is.Equal(lines[storeMsg][0]["err"], "disk on fire") // with the cause, as before
}
