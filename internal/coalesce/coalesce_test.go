package coalesce_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi/internal/coalesce"
	"github.com/formsapi/formsapi/internal/testenv"
)

// item is a call of the tests: its number, and the batch that ran it.
type item struct {
	n     int
	batch int // set by Run: 1 for the first batch, 2 for the next…
}

// recorder is a Batcher whose Run records each batch and blocks while
// hold is set, until release.
type recorder struct {
	b coalesce.Batcher[item]

	mu      sync.Mutex
	batches [][]int
	ctxs    []context.Context
	hold    chan struct{} // Run waits for it to be closed, when not nil
	started chan struct{} // gets a value when a batch starts
}

func newRecorder(max int, detach bool) *recorder {
	r := &recorder{started: make(chan struct{}, 100)}
	r.b = coalesce.Batcher[item]{Max: max, Detach: detach, Run: r.run}
	return r
}

func (r *recorder) run(ctx context.Context, batch []*item) {
	r.mu.Lock()
	ns := make([]int, len(batch))
	for i, it := range batch {
		ns[i] = it.n
	}
	r.batches = append(r.batches, ns)
	r.ctxs = append(r.ctxs, ctx)
	n, hold := len(r.batches), r.hold
	r.mu.Unlock()
	r.started <- struct{}{}
	if hold != nil {
		<-hold
	}
	for _, it := range batch {
		it.batch = n
	}
}

func (r *recorder) seen() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// holdFirst starts call 0 with Run held, and waits until its batch runs.
func holdFirst(t *testing.T, r *recorder) (release func(), first chan error) {
	t.Helper()
	hold := make(chan struct{})
	r.mu.Lock()
	r.hold = hold
	r.mu.Unlock()
	first = make(chan error, 1)
	go func() { first <- r.b.Do(context.Background(), &item{n: 0}) }()
	<-r.started
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			if r.hold == hold { // not replaced by the test meanwhile
				r.hold = nil
			}
			r.mu.Unlock()
			close(hold)
		})
	}, first
}

func TestIdleCallRunsAloneUnderItsOwnContext(t *testing.T) {
	t.Parallel()
	for _, detach := range []bool{false, true} {
		r := newRecorder(8, detach)
		type ctxKey struct{}
		ctx := context.WithValue(context.Background(), ctxKey{}, "mine")
		for i := 1; i <= 2; i++ {
			it := &item{n: i}
			if err := r.b.Do(ctx, it); err != nil {
				t.Fatal(err)
			}
			if it.batch != i {
				t.Errorf("detach %v: call %d ran in batch %d", detach, i, it.batch)
			}
		}
		if got, want := r.seen(), [][]int{{1}, {2}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("detach %v: batches %v, want %v", detach, got, want)
		}
		if v := r.ctxs[0].Value(ctxKey{}); v != "mine" {
			t.Errorf("detach %v: a batch of one ran under another context", detach)
		}
	}
}

// Calls that arrive while a batch is in flight wait, and all run in the
// next batch, in arrival order, which starts after the last arrived.
func TestWaitingCallsShareTheNextBatch(t *testing.T) {
	t.Parallel()
	for _, detach := range []bool{false, true} {
		r := newRecorder(64, detach)
		release, first := holdFirst(t, r)
		items := make([]*item, 5)
		errs := make(chan error, len(items))
		for i := range items {
			items[i] = &item{n: i + 1}
			go func() { errs <- r.b.Do(context.Background(), items[i]) }()
			testenv.WaitFor(t, func() bool { return r.b.Waiting() == i+1 })
		}
		if got := len(r.seen()); got != 1 {
			t.Fatalf("detach %v: %d batches ran while the first was in flight", detach, got)
		}
		release()
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		for range items {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		for _, it := range items {
			if it.batch != 2 {
				t.Errorf("detach %v: call %d ran in batch %d, want 2", detach, it.n, it.batch)
			}
		}
		if got, want := r.seen(), [][]int{{0}, {1, 2, 3, 4, 5}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("detach %v: batches %v, want %v", detach, got, want)
		}
		// Nothing is in flight any more: the next call runs at once.
		it := &item{n: 9}
		if err := r.b.Do(context.Background(), it); err != nil || it.batch != 3 {
			t.Errorf("detach %v: a call after the batches: batch %d, %v", detach, it.batch, err)
		}
	}
}

func TestMaxBoundsABatch(t *testing.T) {
	t.Parallel()
	r := newRecorder(2, false)
	release, first := holdFirst(t, r)
	errs := make(chan error, 5)
	for i := 1; i <= 5; i++ {
		go func() { errs <- r.b.Do(context.Background(), &item{n: i}) }()
		testenv.WaitFor(t, func() bool { return r.b.Waiting() == i })
	}
	release()
	<-first
	for range 5 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := r.seen(), [][]int{{0}, {1, 2}, {3, 4}, {5}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
}

// A waiting call whose context ends returns at once with its error; the
// batch it would have joined still runs for the others.
func TestWaitingCallEndsWithItsContext(t *testing.T) {
	t.Parallel()
	r := newRecorder(64, false)
	release, first := holdFirst(t, r)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	abandoned := make(chan error, 1)
	go func() { abandoned <- r.b.Do(ctx, &item{n: 1}) }()
	testenv.WaitFor(t, func() bool { return r.b.Waiting() == 1 })
	other := &item{n: 2}
	otherErr := make(chan error, 1)
	go func() { otherErr <- r.b.Do(context.Background(), other) }()
	testenv.WaitFor(t, func() bool { return r.b.Waiting() == 2 })
	cancel()
	if err := <-abandoned; !errors.Is(err, context.Canceled) {
		t.Fatalf("the abandoned call returned %v", err)
	}
	if got := len(r.seen()); got != 1 {
		t.Fatalf("%d batches ran while the first was held", got)
	}
	release()
	<-first
	if err := <-otherErr; err != nil || other.batch != 2 {
		t.Errorf("the other call: batch %d, %v", other.batch, err)
	}
}

// With Detach, Do returns when its context ends even while Run is stuck.
func TestDetachedCallEndsWithItsContext(t *testing.T) {
	t.Parallel()
	r := newRecorder(64, true)
	hold := make(chan struct{})
	r.hold = hold
	defer close(hold)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.b.Do(ctx, &item{n: 1}) }()
	<-r.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Do returned %v", err)
	}
}

// A batch's context ends only when every call's context has, and has the
// latest deadline of its calls.
func TestBatchContext(t *testing.T) {
	t.Parallel()
	r := newRecorder(64, false)
	release, first := holdFirst(t, r)
	now := time.Now()
	ctx1, cancel1 := context.WithDeadline(context.Background(), now.Add(time.Hour))
	ctx2, cancel2 := context.WithDeadline(context.Background(), now.Add(2*time.Hour))
	defer cancel1()
	defer cancel2()
	errs := make(chan error, 2)
	go func() { errs <- r.b.Do(ctx1, &item{n: 1}) }()
	testenv.WaitFor(t, func() bool { return r.b.Waiting() == 1 })
	go func() { errs <- r.b.Do(ctx2, &item{n: 2}) }()
	testenv.WaitFor(t, func() bool { return r.b.Waiting() == 2 })
	// Hold the second batch too, to look at its context while it runs.
	hold2 := make(chan struct{})
	r.mu.Lock()
	r.hold = hold2
	r.mu.Unlock()
	release()
	<-first
	<-r.started
	r.mu.Lock()
	bctx := r.ctxs[1]
	r.mu.Unlock()
	if d, ok := bctx.Deadline(); !ok || !d.Equal(now.Add(2*time.Hour)) {
		t.Errorf("the batch's deadline is %v (%v), want the latest of its calls'", d, ok)
	}
	cancel1()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first call returned %v", err)
	}
	select {
	case <-bctx.Done():
		t.Fatal("the batch's context ended while one of its calls was live")
	default:
	}
	cancel2()
	<-errs
	select {
	case <-bctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the batch's context did not end with its last call's")
	}
	close(hold2)
}

// A batch whose calls each have a run (DoWithin) runs under a context
// that ends the longest of them after the batch starts, whatever their
// contexts' deadlines, so that a server that hangs holds the calls queued
// behind it no longer; a batch with a call without one has no such bound.
func TestRunBoundsTheBatch(t *testing.T) {
	t.Parallel()
	for _, detach := range []bool{false, true} {
		r := newRecorder(64, detach)
		before := time.Now()
		for _, run := range []time.Duration{time.Hour, 2 * time.Hour} {
			if err := r.b.DoWithin(context.Background(), &item{n: 1}, time.Minute, run); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.b.Do(context.Background(), &item{n: 2}); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		r.mu.Lock()
		ctxs := slices.Clone(r.ctxs)
		r.mu.Unlock()
		for i, run := range []time.Duration{time.Hour, 2 * time.Hour} {
			d, ok := ctxs[i].Deadline()
			if !ok || d.Before(before.Add(run)) || d.After(after.Add(run)) {
				t.Errorf("detach %v: batch %d with a run of %s has the deadline %v (%v)", detach, i+1, run, d, ok)
			}
		}
		if d, ok := ctxs[2].Deadline(); ok {
			t.Errorf("detach %v: a batch of a call without a run has the deadline %v", detach, d)
		}
	}
	// In a batch of several, the longest run bounds it, and a call
	// without one lifts the bound.
	for _, runs := range [][]time.Duration{{time.Hour, 3 * time.Hour}, {time.Hour, 0}} {
		r := newRecorder(64, true)
		release, first := holdFirst(t, r)
		errs := make(chan error, len(runs))
		for i, run := range runs {
			go func() { errs <- r.b.DoWithin(context.Background(), &item{n: i + 1}, 0, run) }()
			testenv.WaitFor(t, func() bool { return r.b.Waiting() == i+1 })
		}
		before := time.Now()
		release()
		<-first
		for range runs {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		after := time.Now()
		r.mu.Lock()
		d, ok := r.ctxs[1].Deadline()
		r.mu.Unlock()
		switch {
		case runs[1] == 0 && ok:
			t.Errorf("runs %v: the batch has the deadline %v", runs, d)
		case runs[1] > 0 && (!ok || d.Before(before.Add(runs[1])) || d.After(after.Add(runs[1]))):
			t.Errorf("runs %v: the batch's deadline is %v (%v), want the longest run after its start", runs, d, ok)
		}
	}
}

// A call with a queue bound whose context ends while it waits leaves the
// queue, never sent, and says so: ErrNotSent, wrapping its context's
// error. The batch in flight and the next one go on without it.
func TestQueuedCallEndsNotSent(t *testing.T) {
	t.Parallel()
	r := newRecorder(64, true)
	release, first := holdFirst(t, r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.b.DoWithin(ctx, &item{n: 1}, time.Hour, time.Hour) }()
	testenv.WaitFor(t, func() bool { return r.b.Waiting() == 1 })
	cancel()
	err := <-done
	if !errors.Is(err, coalesce.ErrNotSent) || !errors.Is(err, context.Canceled) {
		t.Fatalf("the call whose context ended in the queue returned %v", err)
	}
	if n := r.b.Waiting(); n != 0 {
		t.Fatalf("%d calls still wait", n)
	}
	other := &item{n: 2}
	otherErr := make(chan error, 1)
	go func() { otherErr <- r.b.Do(context.Background(), other) }()
	testenv.WaitFor(t, func() bool { return r.b.Waiting() == 1 })
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-otherErr; err != nil || other.batch != 2 {
		t.Fatalf("the next call: batch %d, %v", other.batch, err)
	}
	if got, want := r.seen(), [][]int{{0}, {2}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v: the call that left was sent", got, want)
	}
}
