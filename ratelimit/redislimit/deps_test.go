package redislimit_test

import (
	"strings"
	"testing"

	"github.com/formsapi/formsapi/internal/testenv"
)

// TestOnlyThisPackageImportsRedis: the handler, package ratelimit and the
// stores link no Redis client; only a program that imports redislimit
// does.
func TestOnlyThisPackageImportsRedis(t *testing.T) {
	t.Parallel()
	testenv.LinkedOnlyThrough(t, "github.com/formsapi/formsapi/ratelimit/redislimit", "github.com/redis/go-redis/v9", func(dep string) bool {
		return strings.Contains(dep, "redis")
	})
}
