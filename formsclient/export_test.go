package formsclient

import (
	"context"
	"time"
)

// SetSleep replaces how c waits before a retry, so tests can record the
// waits (or learn that one began) without spending them.
func SetSleep(c *Client, f func(ctx context.Context, d time.Duration) error) { c.sleep = f }

// Sleep is the client's own wait.
var Sleep = sleep

// RetryAfter exposes the Retry-After parser.
var RetryAfter = retryAfter

// Backoff exposes the backoff computation.
func Backoff(c *Client, try int, ra time.Duration) time.Duration { return c.wait(try, ra) }
