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
	tr := New(time.Minute, func(_ context.Context, uses map[[32]byte]int64) error {
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
	tr := New(time.Hour, func(_ context.Context, uses map[[32]byte]int64) error {
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
