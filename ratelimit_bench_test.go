package formsapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/storetest"
)

// go test -run '^$' -bench 'RateLimit' -benchmem .
//
// The cost of the in-process limiter on the cheapest request there is
// (the forms of an account, from memstore), against the same handler
// without one; and Allow alone over many keys from parallel goroutines.
func BenchmarkRateLimitHandler(b *testing.B) {
	s := seeded(b)
	huge := formsapi.RateLimitPolicy{Name: "default", Quota: 1 << 30, Window: time.Second} // never refuses
	for _, c := range []struct {
		name string
		opts []formsapi.Option
	}{
		{"Baseline", nil},
		{"MemoryLimiter", []formsapi.Option{formsapi.WithRateLimiter(formsapi.NewMemoryRateLimiter(huge))}},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := formsapi.NewHandler(s, s, c.opts...)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequest("GET", "/v1/forms", nil)
				r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
				for pb.Next() {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusOK {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		})
	}
}

func BenchmarkMemoryRateLimiterAllow(b *testing.B) {
	l := formsapi.NewMemoryRateLimiter(formsapi.RateLimitPolicy{Name: "default", Quota: 1 << 30, Window: time.Second})
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("account:%d", i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			l.Allow(ctx, keys[i%len(keys)])
		}
	})
}
