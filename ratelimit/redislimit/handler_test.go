package redislimit_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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
		nodes = append(nodes, formsapi.NewHandler(s, s, formsapi.WithRateLimit(l, p)))
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

	open := formsapi.NewHandler(s, s, formsapi.WithRateLimit(l, p), formsapi.WithLogger(logger))
	for i := 0; i < 3; i++ {
		w := get(open, "/v1/forms", storetest.KeyA)
		is.Equal(w.Code, 200)                       // served, although over the quota of 1
		is.Equal(w.Header().Get("RateLimit"), "")   // with no limit to show
		is.Equal(w.Header().Get("Retry-After"), "") // nor a refusal
	}
	is.True(strings.Contains(logs.String(), "rate limiter failed"))       // logged
	is.True(strings.Contains(logs.String(), "redislimit: allow"))         // with the limiter's error
	is.True(strings.Contains(logs.String(), "context deadline exceeded")) // ended by the handler's timeout

	closed := formsapi.NewHandler(s, s, formsapi.WithRateLimit(l, p), formsapi.WithRateLimitFailClosed(), formsapi.WithLogger(logger))
	is.Equal(get(closed, "/v1/forms", storetest.KeyA).Code, 503) // failing closed
}
