package formsapi

import "time"

// WithClock sets the handler's clock (of grant expiry and log
// throttling), for tests.
func WithClock(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}

// LogInterval is the least time between two log lines of one kind of
// failure.
const LogInterval = logInterval
