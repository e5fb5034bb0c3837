package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

// go test -run '^$' -bench . -benchmem ./ratelimit/
//
// Memory.Allow alone, over many keys from parallel goroutines, with a
// policy that never refuses. The handler's cost with the limiter is
// BenchmarkRateLimitHandler in the root package.
func BenchmarkMemoryAllow(b *testing.B) {
	l := NewMemory()
	p := Policy{Name: "default", Quota: 1 << 30, Window: time.Second}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("account:%d", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			l.Allow(ctx, keys[i%len(keys)], p)
		}
	})
}
