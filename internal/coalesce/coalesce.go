// Package coalesce runs the calls that concurrent requests make to one
// remote server together. A call's fixed cost (a round trip, the
// server's per-statement or per-command work, the system calls on both
// ends) is most of its cost; while one batch of calls is in flight, the
// calls that arrive wait, and when it returns they all go in the next
// batch. An idle caller runs its call at once, alone; a busy one sends
// fewer, larger batches.
//
// Nothing is read before the request came: a waiting call runs in a batch
// that starts after it arrived, so it sees every write made before the
// request, as a call of its own would. That is what lets pgstore's key
// lookups (a revocation holds on the very next request) and redislimit's
// decisions (each one after the ones before it) be coalesced.
package coalesce

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// ErrPanic is wrapped by the error Do returns to the calls of a batch
// whose Run panicked: none of them has a result. The batcher goes on with
// the next batch.
var ErrPanic = errors.New("coalesce: the batch's Run panicked")

// ErrNotSent is returned by DoWithin for a call that waited its whole
// queue bound without its batch starting: Run never saw it, so the remote
// server was not asked.
var ErrNotSent = errors.New("coalesce: the call waited too long for its batch")

// Batcher collects the calls of concurrent callers into batches and runs
// them with Run. Each call is a *T the caller made, which Run fills with
// the call's result. The zero value is not usable: set Run and Max. A
// Batcher must not be copied after first use; it is safe for concurrent
// use.
type Batcher[T any] struct {
	// Run performs one batch: it sets the result of every call in batch
	// before it returns. It runs under a context that ends when every
	// call's context has ended (a batch of abandoned calls holds nothing),
	// with the latest of their deadlines; for a batch of one, the call's
	// own context. A batch of calls that each have a run (DoWithin) ends
	// no later than the longest of them after it starts. A Run that panics fails the calls of its batch (Do
	// returns an error wrapping ErrPanic) and no other.
	Run func(ctx context.Context, batch []*T)
	// Max bounds the calls of one batch; the rest wait for the next.
	Max int
	// Detach runs every batch in a goroutine of its own, so that Do
	// returns as soon as the caller's context ends even when Run does not
	// (a client that ignores a context's end); and once the batch's
	// context ends (every call of it gave up), the next batch starts
	// without waiting for such a Run to return. Otherwise a caller that
	// finds nothing in flight and no call to take with it runs its batch
	// of one itself, under its own context, which spares a goroutine
	// switch, and Run must return when the context ends; a batch of
	// several runs in a goroutine, under the batch's context, which
	// outlives each call's, and the caller waits for it as the others do.
	Detach bool
	// Spacing, when positive, is the least time between the starts of
	// two batches: a call that finds the last batch started less than
	// Spacing ago waits in the queue, with the calls that arrive
	// meanwhile, until Spacing has passed, and they then go in one
	// batch. It bounds the batches per second whatever the call rate,
	// for a wait of at most Spacing, plus the batch in flight, per call.
	Spacing time.Duration
	// Target, when positive, with MaxSpacing, spaces the batches by the
	// call rate: a batch waits until Target calls wait for it (and
	// Spacing has passed since the last batch started), or until
	// MaxSpacing has passed since then, whichever comes first. A caller
	// whose calls come at rate r then sends a batch every Target/r,
	// clamped to [Spacing, MaxSpacing]: about r/Target batches a second,
	// so that callers sharing a load send about as many batches together
	// as one caller would with the whole load. A call that finds
	// MaxSpacing passed since the last batch started (an idle caller) runs
	// at once; any other waits at most MaxSpacing, plus the batch in
	// flight. MaxSpacing must then be positive; otherwise Target is
	// ignored.
	Target     int
	MaxSpacing time.Duration

	mu        sync.Mutex
	inFlight  bool          // a batch is running, or waiting for Spacing to pass
	waiting   []*call[T]    // for the next batch, in arrival order
	lastStart time.Time     // of the last batch taken, with Spacing or Target
	full      chan struct{} // closed when Target calls wait, for a batch that waits for them
}

type call[T any] struct {
	item *T
	ctx  context.Context
	run  time.Duration // the least time its batch's Run gets (DoWithin); 0: no bound
	err  error         // set before done is closed: no result (see runOne, drop)
	done chan struct{} // closed when Run has filled item, or failed, or the call was dropped
}

// Do runs item in a batch that starts after Do was called, and returns
// nil when that batch is done and item holds its result, or an error
// wrapping ErrPanic when the batch's Run panicked (or, with Detach, the
// batch context's error when every call of the batch gave up before Run
// returned). When ctx ends first,
// Do returns ctx.Err() at once; the batch may still write item
// afterwards, so the caller must not read it then. The other calls of the
// batch are unaffected.
func (b *Batcher[T]) Do(ctx context.Context, item *T) error {
	return b.DoWithin(ctx, item, 0, 0)
}

// DoWithin is Do for a call with two bounds of its own, each off when 0.
// queue bounds the time the call waits for its batch to start, behind the
// batch in flight: past it, the call leaves the queue and DoWithin
// returns ErrNotSent, the remote server never asked; so it does, wrapping
// ctx's error too, when ctx ends while the call waits. run is the time the
// call's batch gets from its start: when every call of a batch has a run,
// its Run's context ends the longest of them after the batch starts, so
// that a remote server that hangs holds the calls queued behind it no
// longer than that (with Detach, the next batch then starts). A call
// that finds nothing in flight starts its batch at once and is never
// refused for its queue.
func (b *Batcher[T]) DoWithin(ctx context.Context, item *T, queue, run time.Duration) error {
	c := &call[T]{item: item, ctx: ctx, run: run, done: make(chan struct{})}
	b.mu.Lock()
	if !b.inFlight && b.untilNext() > 0 {
		// Too soon after the last batch: wait for Spacing with the calls
		// that come meanwhile, in the queue.
		b.inFlight = true
		go b.loop(nil)
	}
	if b.inFlight {
		b.waiting = append(b.waiting, c)
		if b.full != nil && len(b.waiting) >= b.Target {
			close(b.full) // the batch waiting for Target calls has them
			b.full = nil
		}
		b.mu.Unlock()
		if queue <= 0 {
			return c.wait()
		}
		t := afterFunc(queue, func() { b.drop(c, nil) })
		defer t.Stop()
		err := c.wait()
		if err != nil && b.drop(c, err) {
			// ctx ended while the call was still queued: however late
			// its timer, it was never sent.
			return c.err
		}
		return err
	}
	b.inFlight = true
	b.started()
	b.mu.Unlock()
	// Let the goroutines that are ready to run reach Do before the batch
	// starts: requests woken together (by the return of another
	// batcher's round trip, say) then share this batch rather than one
	// going alone and the rest waiting for the next. Each of them still
	// arrives before the batch starts. On an idle process this returns at
	// once.
	yield()
	b.mu.Lock()
	batch := append([]*call[T]{c}, b.next(max(b.Max, 1)-1)...)
	b.mu.Unlock()
	if b.Detach || len(batch) > 1 {
		// A batch of several runs until the last of its calls' contexts
		// ends: this caller must not be held by the others'.
		go b.loop(batch)
		return c.wait()
	}
	if b.runOne(batch) {
		// The calls that arrived meanwhile go on without this request.
		go b.loop(nil)
	}
	return c.err
}

// targeted reports whether the batches are spaced by Target.
func (b *Batcher[T]) targeted() bool { return b.Target > 0 && b.MaxSpacing > 0 }

// untilNext returns how long the next batch must wait since the last
// batch started: for Spacing to pass, or with Target, for MaxSpacing to
// pass unless Target calls wait; 0 when it need not. b.mu must be held.
func (b *Batcher[T]) untilNext() time.Duration {
	if b.lastStart.IsZero() {
		return 0
	}
	spacing := b.Spacing
	if b.targeted() && len(b.waiting) < b.Target {
		spacing = max(b.MaxSpacing, b.Spacing)
	}
	if spacing <= 0 {
		return 0
	}
	return spacing - now().Sub(b.lastStart)
}

// started notes that a batch starts now, for Spacing and Target. b.mu
// must be held.
func (b *Batcher[T]) started() {
	if b.Spacing > 0 || b.targeted() {
		b.lastStart = now()
	}
}

// take waits for Spacing to pass, if need be, or with Target for Target
// calls or MaxSpacing, and takes the next batch from the waiting calls:
// nil, with nothing in flight any more, when none is waiting.
func (b *Batcher[T]) take() []*call[T] {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		wait := b.untilNext()
		if wait <= 0 {
			break
		}
		var full chan struct{}
		if b.targeted() && len(b.waiting) < b.Target {
			full = make(chan struct{})
			b.full = full
		}
		b.mu.Unlock()
		passed := make(chan struct{})
		t := afterFunc(wait, func() { close(passed) })
		select {
		case <-passed:
		case <-full: // nil without Target: never
			t.Stop()
		}
		b.mu.Lock()
		b.full = nil
	}
	next := b.next(max(b.Max, 1))
	if len(next) == 0 {
		b.inFlight = false
		return nil
	}
	b.started()
	return next
}

// drop takes c out of the queue, if it is still there, fails it with
// ErrNotSent (wrapping cause, if any: the context's end that came first)
// and reports true; a call already taken into a batch, or dropped, is
// left as it is.
func (b *Batcher[T]) drop(c *call[T], cause error) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.Index(b.waiting, c)
	if i < 0 {
		return false
	}
	b.waiting = slices.Delete(b.waiting, i, i+1)
	c.err = ErrNotSent
	if cause != nil {
		c.err = fmt.Errorf("%w (%w)", ErrNotSent, cause)
	}
	close(c.done)
	return true
}

// afterFunc is time.AfterFunc, a seam for the tests.
var (
	realAfterFunc = func(d time.Duration, f func()) interface{ Stop() bool } { return time.AfterFunc(d, f) }
	afterFunc     = realAfterFunc
)

// now is time.Now, a seam for the tests.
var (
	realNow = time.Now
	now     = realNow
)

// yield is runtime.Gosched, a seam for the tests.
var (
	realYield = runtime.Gosched
	yield     = realYield
)

func (c *call[T]) wait() error {
	select {
	case <-c.done:
		return c.err
	case <-c.ctx.Done():
		select {
		case <-c.done: // both at once: the result is there
			return c.err
		default:
			return c.ctx.Err()
		}
	}
}

// loop runs batch, if any, and then each next batch until none is
// waiting.
func (b *Batcher[T]) loop(batch []*call[T]) {
	if batch != nil && !b.runOne(batch) {
		return
	}
	for {
		batch = b.take()
		if batch == nil || !b.runOne(batch) {
			return
		}
	}
}

// runOne runs batch, marks its calls done, and reports whether calls
// wait for the next batch; when none does, nothing is in flight any
// more.
func (b *Batcher[T]) runOne(batch []*call[T]) bool {
	ctx, cancel := batchContext(batch)
	if run := batchRun(batch); run > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, run)
		c1 := cancel
		cancel = func() { c2(); c1() }
	}
	items := make([]*T, len(batch))
	for i, c := range batch {
		items[i] = c.item
	}
	var err error
	if b.Detach {
		err = b.runDetached(ctx, items)
	} else {
		err = b.run(ctx, items)
	}
	cancel()
	for _, c := range batch {
		c.err = err
		close(c.done)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiting) == 0 {
		b.inFlight = false
		return false
	}
	return true
}

// run calls Run, and returns an error wrapping ErrPanic if it panicked.
func (b *Batcher[T]) run(ctx context.Context, items []*T) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPanic, v, debug.Stack())
		}
	}()
	b.Run(ctx, items)
	return nil
}

// runDetached runs Run in a goroutine of its own, and returns when Run
// does or when ctx ends, whichever is first: once every call of the batch
// has given up, a Run that its client does not end (a connection that
// hangs) holds up no later batch. It then returns ctx's error, so that a
// call that sees its batch done before its own context's end reads no
// result; Run goes on until its client ends it, writing to items nobody
// reads.
func (b *Batcher[T]) runDetached(ctx context.Context, items []*T) error {
	if ctx.Done() == nil {
		return b.run(ctx, items)
	}
	ran := make(chan error, 1)
	go func() { ran <- b.run(ctx, items) }()
	select {
	case err := <-ran:
		return err
	case <-ctx.Done():
		select {
		case err := <-ran:
			return err
		default:
			return ctx.Err()
		}
	}
}

// next takes at most n waiting calls, the first to arrive, for the
// next batch. b.mu must be held.
func (b *Batcher[T]) next(n int) []*call[T] {
	next := b.waiting
	if len(next) > n {
		next = next[:n:n]
		b.waiting = b.waiting[n:]
	} else {
		b.waiting = nil
	}
	return next
}

// Waiting returns how many calls wait for the next batch, for tests that
// need a batch to have formed.
func (b *Batcher[T]) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiting)
}

// batchRun is the time a batch's Run gets from its start: the longest run
// of its calls, or 0 (no bound) if one of them has none.
func batchRun[T any](batch []*call[T]) time.Duration {
	var run time.Duration
	for _, c := range batch {
		if c.run <= 0 {
			return 0
		}
		run = max(run, c.run)
	}
	return run
}

// batchContext returns a context for one batch on behalf of its calls:
// done when every call's context is done, and no later than the latest
// of their deadlines (none if one has none).
func batchContext[T any](batch []*call[T]) (context.Context, context.CancelFunc) {
	if len(batch) == 1 {
		return batch[0].ctx, func() {}
	}
	var (
		latest   time.Time
		deadline = true
	)
	for _, c := range batch {
		d, ok := c.ctx.Deadline()
		if !ok {
			deadline = false
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	if deadline {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, latest)
		c1 := cancel
		cancel = func() { c2(); c1() }
	}
	// Cancel when the last call's context ends.
	var (
		mu   sync.Mutex
		live = len(batch)
	)
	stops := make([]func() bool, len(batch))
	for i, c := range batch {
		stops[i] = context.AfterFunc(c.ctx, func() {
			mu.Lock()
			live--
			last := live == 0
			mu.Unlock()
			if last {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
