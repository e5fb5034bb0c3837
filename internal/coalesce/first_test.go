package coalesce

import (
	"context"
	"errors"
	"testing"
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
