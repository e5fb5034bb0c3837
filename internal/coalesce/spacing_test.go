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
	fire() // Spacing has passed: calls 2 and 3 go together
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
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
