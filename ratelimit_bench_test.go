package formsapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/storetest"
)

// go test -run '^$' -bench 'RateLimit' -benchmem .
//
// The cost of the in-process limiter on the cheapest request there is
// (the forms of an account, from memstore, with an unscoped key: one
// bucket), against the same handler without one. ratelimit's
// BenchmarkMemoryAllow measures Allow alone over many keys.
func BenchmarkRateLimitHandler(b *testing.B) {
	s := seeded(b)
	huge := ratelimit.Policy{Name: "default", Quota: 1 << 30, Window: time.Second} // never refuses
	for _, c := range []struct {
		name string
		opts []formsapi.Option
	}{
		{"Baseline", nil},
		{"MemoryLimiter", []formsapi.Option{formsapi.WithRateLimit(ratelimit.Options{Limiter: ratelimit.NewMemory(), Policy: huge})}},
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
