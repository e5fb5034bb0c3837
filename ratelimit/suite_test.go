package ratelimit_test

import (
	"testing"

	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/ratelimit/ratelimittest"
)

// TestMemoryContract: Memory, on the suite's clock, keeps the Limiter
// contract; every duration is checked exactly.
func TestMemoryContract(t *testing.T) {
	ratelimittest.Run(t, func(t *testing.T, clock *ratelimittest.Clock) ratelimit.Limiter {
		return ratelimit.NewMemoryAt(clock.Now)
	})
}
