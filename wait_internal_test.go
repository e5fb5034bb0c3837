package formsapi

import (
	"testing"
	"time"
)

// TestWaitEndsShareATick: the waits that end in one tick share one
// channel and one timer, which goes once the last of them gives it back;
// a wait never ends before its time, and ends at most a tick after it.
func TestWaitEndsShareATick(t *testing.T) {
	t.Parallel()
	ws := newWaiters()
	const d = time.Hour // no timer fires during the test
	a := ws.endAt(0, d)
	b := ws.endAt(-waitTick/2, d) // the same tick, rounded up
	c := ws.endAt(waitTick+1, d)  // the next one
	if a != b || a.n != 2 {
		t.Fatalf("two waits ending in one tick: %p and %p, %d holders; want one end held twice", a, b, a.n)
	}
	if c == a {
		t.Fatal("a wait a tick later shares the earlier tick's end")
	}
	for _, w := range []struct{ now, d time.Duration }{{0, d}, {waitTick / 2, d}, {waitTick + 1, d}, {3, time.Second}, {waitTick - 1, 1}} {
		e := ws.endAt(w.now, w.d)
		if at := time.Duration(e.tick) * waitTick; at < w.now+w.d || at >= w.now+w.d+waitTick {
			t.Errorf("a wait of %s at %s ends at %s: want from its time to a tick after", w.d, w.now, at)
		}
		ws.endDone(e)
	}
	ws.endDone(a)
	if len(ws.ends) != 2 {
		t.Fatalf("%d ends held after one of a tick's two waits gave it back; want 2", len(ws.ends))
	}
	ws.endDone(b)
	ws.endDone(c)
	if len(ws.ends) != 0 {
		t.Fatalf("%d ends held after every wait gave its back; want none", len(ws.ends))
	}
	if a.timer.Stop() || c.timer.Stop() {
		t.Fatal("a tick's timer still runs after every wait gave it back")
	}
}

// TestWaitEndCloses: an end's channel closes when its tick comes (one
// already past: at once), and a new wait of that tick gets a new end.
func TestWaitEndCloses(t *testing.T) {
	t.Parallel()
	ws := newWaiters()
	e := ws.endAt(-time.Second, 0) // a tick already past
	select {
	case <-e.ch:
	case <-time.After(time.Minute): // a guard: the timer fires at once
		t.Fatal("the end of a past tick did not close")
	}
	ws.mu.Lock()
	_, held := ws.ends[e.tick]
	ws.mu.Unlock()
	if held {
		t.Fatal("a closed end is still in the map")
	}
	ws.endDone(e) // its holder gives it back after it closed: nothing to undo
	if f := ws.endAt(-time.Second, 0); f == e {
		t.Fatal("a wait got the end that has closed")
	} else {
		<-f.ch
		ws.endDone(f)
	}
}
