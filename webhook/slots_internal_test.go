package webhook

import (
	"context"
	"errors"
	"testing"

	"github.com/formsapi/formsapi/internal/testenv"
)

// queued returns how many attempts wait for a slot.
func (s *slots) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}

// TestSlots: an account never holds more than its share; a slot that
// frees goes to the waiter whose account has the fewest in flight, then
// whose endpoint has, then to the one that came first; a waiter whose
// context ends holds nothing.
func TestSlots(t *testing.T) {
	t.Parallel()
	s := newSlots(4, 2)
	ctx := context.Background()
	got := make(chan string, 8)
	take := func(name, account, endpoint string) {
		go func() {
			if err := s.acquire(ctx, account, endpoint); err != nil {
				t.Error(err)
				return
			}
			got <- name
		}()
	}
	want := func(name string) {
		t.Helper()
		if g := <-got; g != name {
			t.Fatalf("%s got the slot, want %s", g, name)
		}
	}
	waiting := func(n int) {
		t.Helper()
		testenv.WaitFor(t, func() bool { return s.queued() == n })
	}
	take("a1", "A", "a")
	want("a1")
	take("a2", "A", "a")
	want("a2")
	take("a3", "A", "a") // A holds its share
	waiting(1)
	take("b1", "B", "b")
	want("b1")
	take("b2", "B", "b") // all four slots held
	want("b2")
	take("b3", "B", "b")
	waiting(2)
	take("c1", "C", "c")
	waiting(3)
	s.release("A", "a")
	want("c1") // C has none in flight: before A's, which came first
	s.release("B", "b")
	want("a3") // A and B hold one each: the first to come
	s.release("C", "c")
	want("b3")
	if s.queued() != 0 || s.inFlight != 4 || s.accounts["A"] != 2 || s.accounts["B"] != 2 || s.accounts["C"] != 0 {
		t.Fatalf("in flight %d, by account %v, %d waiting", s.inFlight, s.accounts, s.queued())
	}

	// Within an account, the endpoint with the fewest in flight first.
	s = newSlots(3, 3)
	for _, name := range []string{"x1", "x2", "y1"} {
		take(name, "A", name[:1])
		want(name)
	}
	take("x3", "A", "x")
	waiting(1)
	take("y2", "A", "y")
	waiting(2)
	s.release("A", "y")
	want("y2")

	// A waiter that gives up holds nothing, and the next one is served.
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error)
	go func() { gaveUp <- s.acquire(cctx, "B", "b") }()
	waiting(2)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire after its context ended: %v", err)
	}
	s.release("A", "x")
	want("x3")
	if s.queued() != 0 || s.inFlight != 3 || s.accounts["B"] != 0 {
		t.Fatalf("after a waiter gave up: in flight %d, by account %v, %d waiting", s.inFlight, s.accounts, s.queued())
	}
}

// TestSlotsPastTheShare: an account goes past its share while a share
// stays free after it, and no further; an account under its share takes
// the slots kept free.
func TestSlotsPastTheShare(t *testing.T) {
	t.Parallel()
	s := newSlots(8, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends any acquire still waiting when the test fails
	inFlight := func() int { s.mu.Lock(); defer s.mu.Unlock(); return s.inFlight }
	for i := range 6 {
		go s.acquire(ctx, "A", "a")
		testenv.WaitFor(t, func() bool { return inFlight() == i+1 }) // A's attempt i+1 has its slot
	}
	got := make(chan string, 4)
	go func() {
		if err := s.acquire(ctx, "A", "a"); err == nil {
			got <- "a7"
		}
	}()
	testenv.WaitFor(t, func() bool { return s.queued() == 1 }) // a seventh would leave less than a share
	for i := range 2 {
		go s.acquire(ctx, "B", "b")
		testenv.WaitFor(t, func() bool { return inFlight() == 7+i }) // B's attempt i+1 has its slot
	}
	s.release("A", "a")
	if s.queued() != 1 || s.inFlight != 7 {
		t.Fatalf("a slot freed by A went to A past its share with none kept: in flight %d, %d waiting", s.inFlight, s.queued())
	}
	s.release("B", "b")
	s.release("B", "b")
	if g := <-got; g != "a7" {
		t.Fatalf("got %s", g)
	}
}
