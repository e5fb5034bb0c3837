package keyuse

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestNoteOncePerIntervalAndRetryFailedBatches(t *testing.T) {
	var batches []map[[32]byte]int64
	fail := true
	tr := New(time.Minute, time.Now, func(_ context.Context, uses map[[32]byte]int64) error {
		if fail {
			return errors.New("database down")
		}
		batches = append(batches, uses)
		return nil
	})
	a, b := [32]byte{1}, [32]byte{2}
	t0 := time.Now()
	tr.Note(a, t0)
	tr.Note(a, t0.Add(30*time.Second)) // within the interval: not noted again
	tr.Note(b, t0.Add(time.Second))
	if at, ok := tr.Pending(a); !ok || !at.Equal(time.Unix(0, t0.UnixNano())) {
		t.Fatalf("pending use of a: %s, %t; want the first use", at, ok)
	}
	if err := tr.Flush(context.Background()); err == nil {
		t.Fatal("a failed write was not reported")
	}
	if _, ok := tr.Pending(b); !ok {
		t.Fatal("a failed batch was dropped instead of kept for the next")
	}
	fail = false
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(batches) != 1 || len(batches[0]) != 2 {
		t.Fatalf("batches %v, want one of both keys", batches)
	}
	if _, ok := tr.Pending(a); ok {
		t.Fatal("a written use is still pending")
	}
	tr.Note(a, t0.Add(61*time.Second)) // a new interval: noted again
	if _, ok := tr.Pending(a); !ok {
		t.Fatal("a use after the interval was not noted")
	}
	if err := tr.Stop(context.Background()); err != nil { // never started: a no-op
		t.Fatal(err)
	}
}

func TestStopWritesWhatIsPending(t *testing.T) {
	written := 0
	tr := New(time.Hour, time.Now, func(_ context.Context, uses map[[32]byte]int64) error {
		written += len(uses)
		return nil
	})
	tr.Start()
	tr.Note([32]byte{7}, time.Now())
	if err := tr.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if written != 1 {
		t.Fatalf("Stop wrote %d uses, want 1", written)
	}
	if err := tr.Stop(context.Background()); err != nil { // twice is fine
		t.Fatal(err)
	}
}

// TestFlushForgetsNotesByItsClock: a note holds a key's next use back
// until the tracker's clock, not the wall clock, says the interval has
// passed.
func TestFlushForgetsNotesByItsClock(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	tr := New(time.Minute, func() time.Time { return now }, func(context.Context, map[[32]byte]int64) error { return nil })
	a := [32]byte{1}
	tr.Note(a, t0)
	now = t0.Add(30 * time.Second)
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.Note(a, t0.Add(40*time.Second))
	if _, ok := tr.Pending(a); ok {
		t.Fatal("a use within the interval was noted again after a flush inside it")
	}
	now = t0.Add(2 * time.Minute) // the wall clock is years before this
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.Note(a, t0.Add(50*time.Second))
	if _, ok := tr.Pending(a); !ok {
		t.Fatal("the flush did not forget a note past the interval by the tracker's clock")
	}
}

// TestOnTickReportsBatchesOfStart: the goroutine of Start tells OnTick
// about each batch it writes, so a test waits for the batch itself.
func TestOnTickReportsBatchesOfStart(t *testing.T) {
	written := make(chan int, 1)
	tr := New(time.Millisecond, time.Now, func(context.Context, map[[32]byte]int64) error { return nil })
	tr.OnTick(func(n int, err error) {
		if n > 0 && err == nil {
			select {
			case written <- n:
			default:
			}
		}
	})
	tr.Start()
	defer tr.Stop(context.Background())
	tr.Note([32]byte{9}, time.Now())
	if n := <-written; n != 1 {
		t.Fatalf("a batch of %d uses, want 1", n)
	}
	if _, ok := tr.Pending([32]byte{9}); ok {
		t.Fatal("the use is still pending after its batch was written")
	}
}
