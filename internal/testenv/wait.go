package testenv

import (
	"testing"
	"time"
)

// WaitFor waits until cond holds, checking every millisecond, for what
// other goroutines do with nothing to signal it (a call queued behind a
// batch, a lock awaited); it fails the test if cond does not hold within
// 30 seconds. The test waits for the condition, never for an amount of
// time.
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30 s")
		}
		time.Sleep(time.Millisecond) // the poll's pace; nothing depends on it
	}
}
