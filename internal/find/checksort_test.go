package find

import (
	"strings"
	"testing"
)

// TestCheckSortFields: the names a sort index cannot keep are refused,
// each named in the error; the others pass.
func TestCheckSortFields(t *testing.T) {
	for _, bad := range [][]string{
		{""},
		{"a\x00b"},
		{"\xff"},
		{strings.Repeat("x", MaxFieldBytes+1)},
		{"rating", "rating"},
	} {
		if err := CheckSortFields(bad); err == nil {
			t.Errorf("CheckSortFields(%q): no error", bad)
		}
	}
	if err := CheckSortFields([]string{"rating", "Zoë", strings.Repeat("x", MaxFieldBytes)}); err != nil {
		t.Errorf("CheckSortFields of good names: %v", err)
	}
}
