package pgstore_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestRateLimitTwoHandlers: two API nodes, each a handler over its own
// store and pool on one schema, with pgstore's limiter, take requests of
// one account at once over HTTP. The 200s they give together stay within
// the policy's bound, the rest are 429s with Retry-After, and both carry
// the RateLimit fields.
func TestRateLimitTwoHandlers(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
	p := formsapi.RateLimitPolicy{Name: "default", Quota: 10, Window: time.Second}
	var nodes []func() (bool, error)
	for i := 0; i < 2; i++ {
		s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		if i == 0 {
			load(t, s, storetest.DefaultSeed())
		}
		srv := httptest.NewServer(formsapi.NewHandler(s, s, formsapi.WithRateLimiter(limiter(t, s, p))))
		t.Cleanup(srv.Close)
		nodes = append(nodes, func() (bool, error) {
			req, _ := http.NewRequest("GET", srv.URL+"/v1/forms?limit=1", nil)
			req.Header.Set("Authorization", "Bearer "+storetest.KeyA)
			res, err := srv.Client().Do(req)
			if err != nil {
				return false, err
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.Header.Get("RateLimit-Policy") != `"default";q=10;w=1` || res.Header.Get("RateLimit") == "" {
				return false, fmt.Errorf("status %d without the RateLimit fields: %v", res.StatusCode, res.Header)
			}
			switch res.StatusCode {
			case 200:
				return true, nil
			case 429:
				if res.Header.Get("Retry-After") == "" {
					return false, errors.New("a 429 without Retry-After")
				}
				return false, nil
			}
			return false, fmt.Errorf("status %d", res.StatusCode)
		})
	}
	allowed, refused, bound := hammer(t, nodes, 1500*time.Millisecond, p)
	t.Logf("%d served, %d refused (bound %d)", allowed, refused, bound)
	if allowed > bound {
		t.Errorf("the two nodes served %d requests of one account; the policy allows at most %d", allowed, bound)
	}
	if allowed < p.Quota || refused == 0 {
		t.Errorf("%d served and %d refused: the test never reached the limit", allowed, refused)
	}
}
