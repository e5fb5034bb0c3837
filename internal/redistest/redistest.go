// Package redistest gives each Redis test a client of the server named by
// FORMSAPI_TEST_REDIS and a key prefix of its own, whose keys are deleted
// when the test ends, so tests run in parallel on one Redis, beside other
// users of it, and leave nothing behind.
package redistest

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/formsapi/formsapi/internal/testenv"
)

// EnvVar names the URL of the Redis server the tests use.
const EnvVar = "FORMSAPI_TEST_REDIS"

// URL returns the test server's URL. Without one the test is skipped, or
// fails when CI is set (see testenv.Get).
func URL(t testing.TB) string {
	t.Helper()
	return testenv.Get(t, EnvVar, "redis://127.0.0.1:6379/0")
}

// Client returns a new client of the test server, closed when the test
// ends. Each call makes another client, with its own connections, as
// another node of a fleet would.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(URL(t))
	if err != nil {
		t.Fatalf("redistest: %s cannot be parsed", EnvVar) // the error may quote a password
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// Prefix returns a key prefix of the test's own, "formsapi:test:"
// followed by random letters and digits and ":", and deletes every key
// that starts with it when the test ends (after the test's own cleanups).
func Prefix(t testing.TB) string {
	t.Helper()
	c := Client(t)
	prefix := "formsapi:test:" + rand.Text()[:12] + ":" // rand.Text has no glob characters
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		keys, err := Keys(ctx, c, prefix)
		if err == nil && len(keys) > 0 {
			err = c.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Errorf("redistest: delete the keys of %s: %v", prefix, err)
		}
	})
	return prefix
}

// Keys returns every key that starts with prefix, which must hold no
// glob character (* ? [ \).
func Keys(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	return keys, iter.Err()
}
