package formsapi

import (
	"context"
	"time"
)

// WithClock sets the handler's clock (of grant expiry and log
// throttling), for tests.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}

// LogInterval is the least time between two log lines of one kind of
// failure.
const LogInterval = logInterval

// WithoutRefusalPacing answers refused keys without waiting for their
// turn (authfail.go), for fuzz targets that send thousands of refused
// keys a second through one handler.
func WithoutRefusalPacing() Option {
	return func(c *config) { c.sleep = func(context.Context, time.Duration) {} }
}
