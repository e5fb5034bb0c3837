package ratelimit_test

import (
	"context"
	"testing"

	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/ratelimit/ratelimittest"
)

// go test -run '^$' -bench . -benchmem ./ratelimit/
//
// Memory.Allow alone, over 10,000 keys from parallel goroutines, with a
// policy that never refuses (ratelimittest.Benchmark). The handler's cost
// with the limiter is BenchmarkRateLimitHandler in the root package.
func BenchmarkMemoryAllow(b *testing.B) {
	ratelimittest.Benchmark(b, context.Background(), ratelimit.NewMemory(), 10_000)
}
