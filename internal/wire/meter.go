package wire

import (
	"context"
	"sync/atomic"
)

// Meter counts the work that the reads of one request did on the
// candidates of filters and search, in find.Examined's bytes, for the
// handler to charge the rate limiter with (RELIABILITY case 103): a
// filtered page and an exact count may each check megabytes for one
// request. The handler puts one in the request's context (WithMeter);
// this module's stores add to it (AddExamined) what each read checked.
// A read served from a cache adds nothing: it did no such work.
type Meter struct{ examined atomic.Int64 }

type meterKey struct{}

// WithMeter returns ctx with a new Meter, which the reads under it add
// their work to.
func WithMeter(ctx context.Context) (context.Context, *Meter) {
	m := &Meter{}
	return context.WithValue(ctx, meterKey{}, m), m
}

// AddExamined adds n bytes of work to the Meter of ctx, if it has one.
func AddExamined(ctx context.Context, n int64) {
	if m, ok := ctx.Value(meterKey{}).(*Meter); ok && n > 0 {
		m.examined.Add(n)
	}
}

// Examined returns the work added to m so far, in bytes.
func (m *Meter) Examined() int64 { return m.examined.Load() }
