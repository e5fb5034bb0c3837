package sqlitestore

import (
	"fmt"
	"slices"
	"testing"

	"github.com/formsapi/formsapi/internal/find"
)

// TestHoldsAnyKey: a find_keys column holds a key only as a whole
// element, whatever the search's negative keys before it; what is not
// findKeys's array holds every key (the submission is then checked as
// any other, never left out).
func TestHoldsAnyKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		list string
		keys []int64
		want bool
	}{
		{"[]", []int64{5}, false},
		{"[5]", []int64{5}, true},
		{"[1,5,9]", []int64{5}, true},
		{"[1,5,9]", []int64{2, 9}, true},
		{"[15,50,555]", []int64{5}, false},
		{"[-5,-3]", []int64{5}, false},
		{"[-5,-3,5]", []int64{5}, true},
		{"[-5,-3,4,6]", []int64{3, 5}, false},
		{"[9223372036854775807]", []int64{9223372036854775807}, true},
		{"[5 ]", []int64{7}, true},
		{"[x]", []int64{7}, true},
		{"[99999999999999999999]", []int64{7}, true},
		{"", []int64{7}, true},
	} {
		if got := holdsAnyKey([]byte(c.list), c.keys); got != c.want {
			t.Errorf("holdsAnyKey(%s, %v) = %t, want %t", c.list, c.keys, got, c.want)
		}
	}
	// findKeys's own arrays, with the search's keys and without: every
	// key of data is held, and a key of another value is not.
	for i := range 50 {
		data := []byte(fmt.Sprintf(`{"i":%d,"s":"v%d","t":"zoë %d","b":true,"nested":{"i":1}}`, i, i, i))
		keys := find.Keys(data)
		other := find.Key("s", fmt.Sprintf(`"w%d"`, i))
		for _, trigrams := range []bool{false, true} {
			list := []byte(findKeys(data, nil, trigrams))
			for _, k := range keys {
				if !holdsAnyKey(list, []int64{k}) {
					t.Fatalf("%s (trigrams %t): key %d of its data not held", data, trigrams, k)
				}
			}
			if slices.Contains(keys, other) || holdsAnyKey(list, []int64{other}) {
				t.Fatalf("%s (trigrams %t): holds the key of another value", data, trigrams)
			}
		}
	}
}
