package sqlitestore

import (
	"hash/fnv"
	"testing"
)

// TestTailSlotOf: a form's slot is its ID's FNV-1a hash (hash/fnv's)
// modulo tailSlots, computed without an allocation.
func TestTailSlotOf(t *testing.T) {
	for _, id := range []string{"", "f", "bench-form-000", "t19-form-09", "ünïcode"} {
		h := fnv.New32a()
		h.Write([]byte(id))
		if got, want := tailSlotOf(id), h.Sum32()%tailSlots; got != want {
			t.Errorf("%q: slot %d, want %d", id, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { sink = tailSlotOf("bench-form-000") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// sink keeps TestTailSlotOf's call from being optimized away.
var sink uint32
