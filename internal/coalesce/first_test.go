package coalesce

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// holdYield makes the yield of the next Do that finds nothing in flight
// wait until join has called Do and it waits, so that the first batch
// takes a second call, as it may when requests are woken together.
func holdYield(t *testing.T, b *Batcher[int], join func()) {
	t.Helper()
	yield = func() {
		yield = func() {}
		go join()
		for b.Waiting() == 0 {
			realYield()
		}
	}
	t.Cleanup(func() { yield = realYield })
}

// The first caller of a batch of several returns at once when its context
// ends, as every other call does, while the batch goes on for the others.
func TestFirstCallerOfABatchEndsWithItsContext(t *testing.T) {
	started, hold := make(chan struct{}), make(chan struct{})
	defer close(hold)
	b := &Batcher[int]{Max: 8, Run: func(ctx context.Context, batch []*int) {
		close(started)
		<-hold // a server that answers late; the batch's context is live
	}}
	other := make(chan error, 1)
	holdYield(t, b, func() { other <- b.Do(context.Background(), new(int)) })
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- b.Do(ctx, new(int)) }()
	<-started
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first call returned %v, want its context's error", err)
	}
}

// A Run that panics fails its own batch's calls, and the batcher goes on:
// the calls after it run.
func TestPanicInRunDoesNotWedgeTheBatcher(t *testing.T) {
	for _, detach := range []bool{false, true} {
		boom := true
		b := &Batcher[int]{Max: 8, Detach: detach, Run: func(ctx context.Context, batch []*int) {
			if boom {
				boom = false
				panic("boom")
			}
			for _, it := range batch {
				*it = 1
			}
		}}
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = errors.New("the panic reached the caller")
				}
			}()
			err = b.Do(context.Background(), new(int))
		}()
		if err == nil {
			t.Errorf("detach %v: a call whose batch panicked returned nil, with no result", detach)
		}
		it := new(int)
		if err := b.Do(context.Background(), it); err != nil || *it != 1 {
			t.Errorf("detach %v: the call after a panic: %v, result %d", detach, err, *it)
		}
	}
}

// With Detach, a Run that ignores its context holds up no later batch once
// every call of its batch has given up.
func TestAbandonedDetachedBatchHoldsNoOne(t *testing.T) {
	stuck, hold := make(chan struct{}), make(chan struct{})
	defer close(hold)
	first := true
	b := &Batcher[int]{Max: 8, Detach: true, Run: func(ctx context.Context, batch []*int) {
		if first {
			first = false
			close(stuck)
			<-hold // a client that does not end the round trip with ctx
		}
		for _, it := range batch {
			*it = 1
		}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Do(ctx, new(int)) }()
	<-stuck
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the abandoned call returned %v", err)
	}
	it := new(int)
	if err := b.Do(context.Background(), it); err != nil || *it != 1 {
		t.Fatalf("the next call: %v, result %d", err, *it)
	}
}

// fakeTimers replaces afterFunc for one test: each timer's function is
// kept, to be fired by the test when it chooses.
func fakeTimers(t *testing.T) (fire func()) {
	t.Helper()
	var fs []func()
	var mu sync.Mutex
	afterFunc = func(_ time.Duration, f func()) interface{ Stop() bool } {
		mu.Lock()
		fs = append(fs, f)
		mu.Unlock()
		return stopper{}
	}
	t.Cleanup(func() { afterFunc = realAfterFunc })
	return func() {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range fs {
			f()
		}
		fs = nil
	}
}

type stopper struct{}

func (stopper) Stop() bool { return true }

// A call that waits its queue bound behind a batch in flight leaves the
// queue with ErrNotSent and never reaches Run; one that was taken into a
// batch before its bound ran out is not affected by it.
func TestQueueBound(t *testing.T) {
	fire := fakeTimers(t)
	started, hold := make(chan struct{}, 8), make(chan struct{})
	var mu sync.Mutex
	var ran []int
	b := &Batcher[int]{Max: 8, Detach: true, Run: func(ctx context.Context, batch []*int) {
		started <- struct{}{}
		<-hold
		mu.Lock()
		defer mu.Unlock()
		for _, it := range batch {
			ran = append(ran, *it)
		}
	}}
	first := make(chan error, 1)
	go func() { first <- b.DoWithin(context.Background(), &[]int{1}[0], time.Second, 0) }()
	<-started // call 1 runs alone, never queued
	late := make(chan error, 1)
	go func() { late <- b.DoWithin(context.Background(), &[]int{2}[0], time.Second, 0) }()
	for b.Waiting() != 1 {
		realYield()
	}
	fire() // call 2's bound runs out while call 1's batch is in flight
	if err := <-late; !errors.Is(err, ErrNotSent) {
		t.Fatalf("the call past its queue bound returned %v, want ErrNotSent", err)
	}
	if n := b.Waiting(); n != 0 {
		t.Fatalf("%d calls wait after the only one left", n)
	}
	third := make(chan error, 1)
	go func() { third <- b.DoWithin(context.Background(), &[]int{3}[0], time.Second, 0) }()
	for b.Waiting() != 1 {
		realYield()
	}
	hold <- struct{}{} // call 1's batch ends; call 3's starts
	<-started
	fire() // too late for call 3: it is in its batch
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-third; err != nil {
		t.Fatalf("the call taken into a batch before its bound ran out returned %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(ran, []int{1, 3}) {
		t.Fatalf("Run saw calls %v, want [1 3] (never the call that left the queue)", ran)
	}
}
