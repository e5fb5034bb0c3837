// Package keyuse notes when API keys were used, in memory, for the stores
// that keep a last-used time: a request never waits for a write. A key's
// use is noted at most once per interval, and a goroutine hands the noted
// uses to the store in one batch per interval, and once more at Stop.
package keyuse

import (
	"context"
	"sync"
	"time"
)

// Tracker holds noted uses until the store writes them. Make one with New.
type Tracker struct {
	interval time.Duration
	now      func() time.Time // the store's clock
	write    func(ctx context.Context, uses map[[32]byte]int64) error
	onTick   func(n int, err error) // see OnTick; under mu

	// noted holds when each key's use was last noted (Unix ns, an int64).
	// A sync.Map, read without a lock: nearly every request finds its key
	// noted less than an interval ago and takes no lock at all.
	noted   sync.Map
	mu      sync.Mutex
	pending map[[32]byte]int64 // noted, not yet written
	stop    chan struct{}
	done    chan struct{}
}

// DefaultInterval is how often the stores note a key's use unless their
// WithLastUsedInterval says otherwise: a key used without pause has a
// LastUsedAt at most this old.
const DefaultInterval = time.Minute

// New returns a tracker that notes a key's use at most once per interval
// and hands batches to write, which stores them in one transaction
// (keeping a newer stored time over an older one). now is the store's
// clock (time.Now unless the host gave it another), by which Flush judges
// which notes are past the interval; the times of uses come from Note.
// Call Start to write batches every interval, and Stop to end and write
// the last batch.
func New(interval time.Duration, now func() time.Time, write func(ctx context.Context, uses map[[32]byte]int64) error) *Tracker {
	return &Tracker{interval: interval, now: now, write: write, pending: map[[32]byte]int64{}}
}

// OnTick makes the goroutine of Start call f after each batch it writes
// on its own, with the number of uses in the batch and the write's error,
// so that a test can wait for a batch instead of for time to pass. f runs
// on that goroutine and must not block for long.
func (t *Tracker) OnTick(f func(n int, err error)) {
	t.mu.Lock()
	t.onTick = f
	t.mu.Unlock()
}

// Note records that the key whose hash is h was used at now, unless a use
// was noted less than an interval ago.
func (t *Tracker) Note(h [32]byte, now time.Time) {
	ns := now.UnixNano()
	if t.recent(h, ns) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.recent(h, ns) { // noted by another request meanwhile
		return
	}
	t.noted.Store(h, ns)
	t.pending[h] = ns
}

// recent reports whether h's use was noted less than an interval before ns.
func (t *Tracker) recent(h [32]byte, ns int64) bool {
	last, ok := t.noted.Load(h)
	return ok && ns-last.(int64) < int64(t.interval)
}

// Pending returns the use of h noted but not yet written, if any.
func (t *Tracker) Pending(h [32]byte) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ns, ok := t.pending[h]
	return time.Unix(0, ns).UTC(), ok
}

// Flush writes the pending uses as one batch. On failure they stay
// pending, to be written with the next batch.
func (t *Tracker) Flush(ctx context.Context) error {
	_, err := t.flush(ctx)
	return err
}

// flush is Flush, and also returns how many uses it wrote or tried to.
func (t *Tracker) flush(ctx context.Context) (int, error) {
	t.mu.Lock()
	p := t.pending
	t.pending = map[[32]byte]int64{}
	now := t.now().UnixNano()
	t.noted.Range(func(h, ns any) bool { // past the interval, a note holds nothing back
		if now-ns.(int64) >= int64(t.interval) {
			t.noted.CompareAndDelete(h, ns)
		}
		return true
	})
	t.mu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	if err := t.write(ctx, p); err != nil {
		t.mu.Lock()
		for h, ns := range p {
			if ns > t.pending[h] {
				t.pending[h] = ns
			}
		}
		t.mu.Unlock()
		return len(p), err
	}
	return len(p), nil
}

// Start writes a batch every interval until Stop. A failed batch stays
// pending for the next; Stop reports the last attempt's error.
func (t *Tracker) Start() {
	stop, done := make(chan struct{}), make(chan struct{})
	t.mu.Lock()
	t.stop, t.done = stop, done
	t.mu.Unlock()
	go func() {
		defer close(done)
		tick := time.NewTicker(t.interval)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				n, err := t.flush(context.Background())
				t.mu.Lock()
				f := t.onTick
				t.mu.Unlock()
				if f != nil {
					f(n, err)
				}
			}
		}
	}()
}

// Stop ends the goroutine Start began and writes what is pending. It is
// safe to call more than once, and without Start.
func (t *Tracker) Stop(ctx context.Context) error {
	t.mu.Lock()
	stop, done := t.stop, t.done
	t.stop = nil
	t.mu.Unlock()
	if stop == nil {
		return nil
	}
	close(stop)
	<-done
	return t.Flush(ctx)
}
