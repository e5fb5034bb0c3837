package coalesce

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// With Spacing, a call that comes less than Spacing after the last batch
// started waits, with the calls that come meanwhile, until Spacing has
// passed, and they go in one batch; a call that comes later runs at once.
func TestSpacing(t *testing.T) {
	fire := fakeTimers(t)
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clockMu sync.Mutex
	now = func() time.Time {
		clockMu.Lock()
		defer clockMu.Unlock()
		return clock
	}
	t.Cleanup(func() { now = realNow })
	advance := func(d time.Duration) {
		clockMu.Lock()
		clock = clock.Add(d)
		clockMu.Unlock()
	}
	var mu sync.Mutex
	var batches [][]int
	b := &Batcher[int]{Max: 8, Spacing: 10 * time.Millisecond, Run: func(_ context.Context, batch []*int) {
		mu.Lock()
		defer mu.Unlock()
		var ns []int
		for _, it := range batch {
			ns = append(ns, *it)
		}
		batches = append(batches, ns)
	}}
	seen := func() [][]int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(batches)
	}
	if err := b.Do(context.Background(), &[]int{1}[0]); err != nil { // the first batch: at once
		t.Fatal(err)
	}
	advance(4 * time.Millisecond)
	done := make(chan error, 2)
	for _, n := range []int{2, 3} {
		go func() { done <- b.Do(context.Background(), &n) }()
	}
	for b.Waiting() != 2 {
		realYield()
	}
	if got := seen(); len(got) != 1 {
		t.Fatalf("batches %v before Spacing passed, want only the first", got)
	}
	advance(6 * time.Millisecond)
	// Spacing has passed: calls 2 and 3 go together. The timers fire
	// until they do (the batcher may not have set its timer yet).
	for got := 0; got < 2; {
		fire()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			got++
		default:
			realYield()
		}
	}
	advance(time.Second)
	if err := b.Do(context.Background(), &[]int{4}[0]); err != nil { // long after: at once, no timer
		t.Fatal(err)
	}
	got := seen()
	if len(got) != 3 || !slices.Equal(got[0], []int{1}) || len(got[1]) != 2 || !slices.Equal(got[2], []int{4}) {
		t.Fatalf("batches %v, want [1], then 2 and 3 together, then [4]", got)
	}
}

// With Target, a batch waits for Target calls, then starts as soon as
// Spacing has passed since the last one; with fewer calls it starts once
// MaxSpacing has passed, never later. So calls at a steady rate r go in
// a batch every Target/r, clamped to [Spacing, MaxSpacing], and a call
// never goes in a batch that started before it was made.
func TestTarget(t *testing.T) {
	// Fake timers that say how many are pending: settle fires them until
	// the batcher waits on a new one (it has looked at the clock again
	// and decided to wait) or runs a batch.
	var timersMu sync.Mutex
	var timers []func()
	afterFunc = func(_ time.Duration, f func()) interface{ Stop() bool } {
		timersMu.Lock()
		defer timersMu.Unlock()
		timers = append(timers, f)
		return stopper{}
	}
	t.Cleanup(func() { afterFunc = realAfterFunc })
	fire := func() {
		timersMu.Lock()
		fs := timers
		timers = nil
		timersMu.Unlock()
		for _, f := range fs {
			f()
		}
	}
	pending := func() int {
		timersMu.Lock()
		defer timersMu.Unlock()
		return len(timers)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := start
	var clockMu sync.Mutex
	now = func() time.Time {
		clockMu.Lock()
		defer clockMu.Unlock()
		return clock
	}
	t.Cleanup(func() { now = realNow })
	advance := func(d time.Duration) {
		clockMu.Lock()
		clock = clock.Add(d)
		clockMu.Unlock()
	}
	type ran struct {
		at    time.Duration // since start, by the clock, when the batch started
		calls []int
	}
	var mu sync.Mutex
	var batches []ran
	made := map[int]time.Duration{} // when each call was made
	b := &Batcher[int]{Max: 64, Spacing: time.Millisecond, Target: 4, MaxSpacing: 10 * time.Millisecond,
		Run: func(_ context.Context, batch []*int) {
			at := now().Sub(start)
			mu.Lock()
			defer mu.Unlock()
			r := ran{at: at}
			for _, it := range batch {
				r.calls = append(r.calls, *it)
				if made[*it] > at {
					t.Errorf("call %d made at %s went in a batch that started at %s", *it, made[*it], at)
				}
			}
			batches = append(batches, r)
		}}
	seen := func() []ran {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(batches)
	}
	// settle lets the batcher look at the clock: it fires the timers
	// once one is pending, then waits until it waits on a new one or
	// has started a batch.
	settle := func() {
		n := len(seen())
		for pending() == 0 && len(seen()) == n {
			realYield()
		}
		fire()
		for pending() == 0 && len(seen()) == n {
			realYield()
		}
	}
	done := make(chan error, 64)
	n := 0
	call := func() {
		n++
		id := n
		mu.Lock()
		made[id] = now().Sub(start)
		mu.Unlock()
		w, ran := b.Waiting(), len(seen())
		go func() { done <- b.Do(context.Background(), &id) }()
		for b.Waiting() == w && len(seen()) == ran {
			realYield() // queued, or run at once
		}
	}
	wait := func(k int) {
		t.Helper()
		for range k {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second): // a bug: the test fails rather than hangs
				t.Fatalf("a call waits at %s; batches %v", now().Sub(start), seen())
			}
		}
	}
	want := func(i int, at time.Duration, calls ...int) {
		t.Helper()
		got := seen()
		if len(got) <= i || got[i].at != at || !slices.Equal(got[i].calls, calls) {
			t.Fatalf("batches %v, want batch %d at %s with %v", got, i, at, calls)
		}
	}

	call() // the first: at once
	wait(1)
	want(0, 0, 1)

	// Three calls, fewer than Target: the timers fire, but the batch waits
	// for a fourth call or MaxSpacing.
	advance(2 * time.Millisecond)
	for range 3 {
		call()
	}
	settle()
	advance(3 * time.Millisecond)
	settle()
	if got := seen(); len(got) != 1 {
		t.Fatalf("batches %v with 3 calls waiting before MaxSpacing, want only the first", got)
	}
	call() // the fourth, at 5 ms: the batch starts at once (Spacing has passed)
	wait(4)
	want(1, 5*time.Millisecond, 2, 3, 4, 5)

	// Target calls at once, before Spacing has passed: they wait for it.
	advance(time.Millisecond / 4)
	for range 4 {
		call()
	}
	settle()
	if got := seen(); len(got) != 2 {
		t.Fatalf("batches %v before Spacing passed, want two", got)
	}
	advance(3 * time.Millisecond / 4)
	settle()
	wait(4)
	want(2, 6*time.Millisecond, 6, 7, 8, 9)

	// One call: it waits until MaxSpacing after the last batch, never
	// later.
	advance(time.Millisecond)
	call()
	settle()
	advance(8 * time.Millisecond)
	settle()
	if got := seen(); len(got) != 3 {
		t.Fatalf("batches %v before MaxSpacing passed, want three", got)
	}
	advance(time.Millisecond)
	settle()
	wait(1)
	want(3, 16*time.Millisecond, 10)

	// A steady rate: a call every 0.5 ms, Target 4, a batch every 2 ms
	// (the spacing the rate asks for: Target / rate).
	for i := range 16 {
		advance(time.Millisecond / 2)
		call()
		if i%4 != 3 {
			settle()
		} else {
			wait(4) // the batch of the fourth call starts now, before the clock moves
		}
	}
	got := seen()[4:]
	if len(got) != 4 {
		t.Fatalf("batches %v at a call every 0.5 ms, want 4 of 4 calls", got)
	}
	for i, r := range got {
		if at := 18*time.Millisecond + time.Duration(i)*2*time.Millisecond; r.at != at || len(r.calls) != 4 {
			t.Fatalf("batches %v at a call every 0.5 ms, want one of 4 calls every 2 ms from 18 ms", got)
		}
	}

	// Long after (an idle caller): at once.
	advance(time.Second)
	call()
	wait(1)
	if got := seen(); len(got) != 9 || got[8].at != 16*time.Millisecond+8*time.Millisecond+time.Second {
		t.Fatalf("batches %v, want the last at once", got)
	}
}
