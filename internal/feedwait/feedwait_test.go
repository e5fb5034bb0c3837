package feedwait

import (
	"context"
	"errors"
	"testing"
	"time"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestWaitersOfAFormShareOneWakeUp: waiters of a form hold one channel,
// closed by one wake-up; a watch made after it holds a new one; release
// drops the entries.
func TestWaitersOfAFormShareOneWakeUp(t *testing.T) {
	t.Parallel()
	h := New(nil, 0, 0)
	var k1, k2 [32]byte
	k2[0] = 1
	a, b := h.Watch("f", k1, 3), h.Watch("f", k2, 5)
	other := h.Watch("g", k1, 0)
	if a.Form != b.Form || a.Key == b.Key || a.Key != other.Key {
		t.Fatal("waiters of one form, or of one key, hold different channels")
	}
	h.WakeForm("f")
	if !closed(a.Form) || !closed(b.Form) || closed(other.Form) || closed(a.Key) {
		t.Fatal("a form's wake-up closed the wrong channels")
	}
	c := h.Watch("f", k1, 5)
	if closed(c.Form) {
		t.Fatal("a watch after the wake-up holds the closed channel")
	}
	h.WakeKey(k1)
	if !closed(c.Key) || !closed(other.Key) || closed(b.Key) {
		t.Fatal("a key's wake-up closed the wrong channels")
	}
	for _, w := range []*Watch{a, b, c, other, a} { // a twice: the second does nothing
		w.Release()
	}
	if f, k := h.Waiting(); f != 0 || k != 0 {
		t.Fatalf("%d, %d waiting after every release", f, k)
	}
	if len(h.forms) != 0 || len(h.keys) != 0 {
		t.Fatalf("entries left: %d forms, %d keys", len(h.forms), len(h.keys))
	}
}

// TestCheckWakesWhatItNames: the check gets every form (with the least
// position of its waiters) and key waited on, and wakes what it names,
// but not the channels of waiters that came after it began (their own
// read covers what it saw); a failed check wakes nothing.
func TestCheckWakesWhatItNames(t *testing.T) {
	t.Parallel()
	var late *Watch
	var h *Hub
	var k [32]byte
	fail := false
	h = New(func(ctx context.Context, forms []Form, keys [][32]byte) ([]string, [][32]byte, error) {
		if fail {
			return nil, nil, errors.New("down")
		}
		if len(forms) != 2 || len(keys) != 1 {
			t.Errorf("check of %v and %d keys, want 2 forms and 1 key", forms, len(keys))
		}
		for _, f := range forms {
			if f.ID == "f" && f.After != 3 {
				t.Errorf("form f after %d, want the least of its waiters, 3", f.After)
			}
		}
		// A waiter of g that registers after a wake-up of g made while
		// the check ran: the check does not wake its channel.
		h.WakeForm("g")
		late = h.Watch("g", k, 9)
		return []string{"f", "g"}, [][32]byte{k}, nil
	}, 0, 0)
	a, b := h.Watch("f", k, 7), h.Watch("f", k, 3)
	g := h.Watch("g", k, 0)
	fail = true
	if err := h.Check(context.Background()); err == nil || closed(a.Form) {
		t.Fatal("a failed check woke a waiter, or said nothing")
	}
	fail = false
	if err := h.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !closed(a.Form) || !closed(b.Form) || !closed(g.Form) || !closed(a.Key) {
		t.Fatal("the check did not wake what it named")
	}
	if closed(late.Form) {
		t.Fatal("the check woke a waiter that registered after it began")
	}
	if h.Stats().Checks != 2 {
		t.Fatalf("%d checks, want 2", h.Stats().Checks)
	}
}

// TestCloseEndsWaiters: Close closes every watch's Done, later ones too.
func TestCloseEndsWaiters(t *testing.T) {
	t.Parallel()
	h := New(nil, 0, 0)
	w := h.Watch("f", [32]byte{}, 0)
	h.Close()
	h.Close()
	if !closed(w.Done) || !closed(h.Watch("f", [32]byte{}, 0).Done) {
		t.Fatal("Close did not end the waiters")
	}
}

// TestTickChecksWhileWaiting: while a request waits, each interval that
// passes runs the check (the clock seam stands for the interval).
func TestTickChecksWhileWaiting(t *testing.T) {
	t.Parallel()
	checked := make(chan []Form, 1)
	h := New(func(_ context.Context, forms []Form, _ [][32]byte) ([]string, [][32]byte, error) {
		checked <- forms
		return []string{"f"}, nil, nil
	}, time.Hour, 0)
	ticks := make(chan time.Time)
	h.after = func(time.Duration) <-chan time.Time { return ticks }
	defer h.Close()
	w := h.Watch("f", [32]byte{}, 4)
	ticks <- time.Now()
	if forms := <-checked; len(forms) != 1 || forms[0] != (Form{ID: "f", After: 4}) {
		t.Fatalf("checked %v, want f after 4", forms)
	}
	<-w.Form // woken by what the check named
	w.Release()
}

// TestPokeRunsTheCheckNow: with an interval that never ends, a poke
// while something waits runs the check, which wakes what it names; a
// poke while nothing waits does nothing and leaves nothing behind.
func TestPokeRunsTheCheckNow(t *testing.T) {
	t.Parallel()
	checks := make(chan struct{}, 10)
	h := New(func(_ context.Context, forms []Form, _ [][32]byte) ([]string, [][32]byte, error) {
		checks <- struct{}{}
		return []string{forms[0].ID}, nil, nil
	}, time.Hour, time.Minute)
	defer h.Close()
	never := make(chan time.Time)
	h.after = func(time.Duration) <-chan time.Time { return never }
	h.Poke() // nothing waits: no check, nothing kept for later
	if len(h.poke) != 0 {
		t.Fatal("a poke with nothing waiting was kept")
	}
	var k [32]byte
	w := h.Watch("f", k, 0)
	defer w.Release()
	if closed(w.Form) {
		t.Fatal("woken before any check")
	}
	h.Poke()
	select {
	case <-w.Form:
	case <-time.After(30 * time.Second):
		t.Fatal("a poke ran no check in 30 s")
	}
	if n := len(checks); n != 1 {
		t.Fatalf("%d checks after one poke, want 1", n)
	}
}

// TestFirstHook: the hook runs when a watch registers with a hub that
// held no waiter, after the registration (a waiter then waits) and
// before Watch returns; not for a watch beside another; again once the
// others were released or woken.
func TestFirstHook(t *testing.T) {
	t.Parallel()
	h := New(nil, 0, 0)
	calls, waitingAtCall := 0, 0
	h.SetFirstHook(func() {
		calls++
		forms, _ := h.Waiting()
		waitingAtCall = forms
	})
	var k [32]byte
	a := h.Watch("f", k, 0)
	if calls != 1 || waitingAtCall != 1 {
		t.Fatalf("first watch: %d calls, %d waiting at the call; want 1, 1", calls, waitingAtCall)
	}
	b := h.Watch("g", k, 0)
	if calls != 1 {
		t.Fatalf("a watch beside another called the hook")
	}
	a.Release()
	b.Release()
	c := h.Watch("f", k, 0)
	if calls != 2 {
		t.Fatalf("a watch after the others were released: %d calls, want 2", calls)
	}
	h.WakeAll()
	c.Release()
	h.Watch("f", k, 0).Release()
	if calls != 3 {
		t.Fatalf("a watch after a wake-up emptied the hub: %d calls, want 3", calls)
	}
}
