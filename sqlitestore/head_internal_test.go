package sqlitestore

import (
	"testing"

	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/pagecache"
)

// TestHeadOf: the first row of a page read parses into the form's version
// and head, extremes included, and anything else (a submission's JSON, a
// number too long) is no head.
func TestHeadOf(t *testing.T) {
	for _, c := range []struct {
		in      string
		version int64
		head    pagecache.Head
		ok      bool
	}{
		{"7 3 12 1740787200000000000 44", 7, pagecache.Head{Base: 3, Last: 12, Anchor: keyset.Pos{At: 1740787200000000000, Seq: 44}}, true},
		{"9 0 0 0 0", 9, pagecache.Head{}, true},
		{"1 2 3 -5 6", 1, pagecache.Head{Base: 2, Last: 3, Anchor: keyset.Pos{At: -5, Seq: 6}}, true},
		{"9223372036854775807 1 1 -9223372036854775808 9223372036854775807", 9223372036854775807,
			pagecache.Head{Base: 1, Last: 1, Anchor: keyset.Pos{At: -9223372036854775808, Seq: 9223372036854775807}}, true},
		{"9223372036854775808 1 1 1 1", 0, pagecache.Head{}, false},
		{"1 1 1 -9223372036854775809 1", 0, pagecache.Head{}, false},
		{"1 1 1 1 99999999999999999999", 0, pagecache.Head{}, false},
		{"1 1 1 1", 0, pagecache.Head{}, false},
		{"1 1 1 1 1 ", 0, pagecache.Head{}, false},
		{"1  1 1 1 1", 0, pagecache.Head{}, false},
		{`{"formId":"f"}`, 0, pagecache.Head{}, false},
		{"", 0, pagecache.Head{}, false},
	} {
		v, h, ok := headOf([]byte(c.in))
		if ok != c.ok || ok && (v != c.version || h != c.head) {
			t.Errorf("headOf(%q) = %d, %+v, %t; want %d, %+v, %t", c.in, v, h, ok, c.version, c.head, c.ok)
		}
	}
}
