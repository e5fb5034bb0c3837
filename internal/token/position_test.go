package token

import (
	"strings"
	"testing"
)

func TestPositions(t *testing.T) {
	c := New([]byte("secret"))
	l := List{Account: "acct", FormID: "f1"}
	p := c.Positions(l)
	for i, tc := range [][2]int64{{1, 1}, {5, 9}, {MaxPosition, MaxPosition}, {1 << 40, 1<<40 + 3}} {
		tag := []uint32{0, 1, 0xffffff, IncarnationTag(1 << 63)}[i]
		s := string(p.Append(nil, tc[0], tc[1], tag))
		if len(s) != PositionLength {
			t.Fatalf("%v: length %d", tc, len(s))
		}
		if again := string(c.Positions(l).Append(nil, tc[0], tc[1], tag)); again != s {
			t.Errorf("%v: not deterministic: %s, %s", tc, s, again)
		}
		pos, asOf, got, ok := p.Open(s)
		if !ok || pos != tc[0] || asOf != tc[1] || got != tag {
			t.Errorf("%v, tag %x: opened as %d, %d, %x, %v", tc, tag, pos, asOf, got, ok)
		}
		// Another list, another secret: nothing.
		for name, q := range map[string]Positions{
			"another form":    c.Positions(List{Account: "acct", FormID: "f2"}),
			"another account": c.Positions(List{Account: "acct2", FormID: "f1"}),
			"another secret":  New([]byte("other")).Positions(l),
		} {
			if _, _, _, ok := q.Open(s); ok {
				t.Errorf("%v: opened for %s", tc, name)
			}
		}
	}
	a := string(p.Append(nil, 1, 2, 0))
	for _, bad := range []string{"", "x", a[:21], a + "A", strings.Repeat("A", 22), a[:21] + "B", "1", "-1"} {
		if _, _, _, ok := p.Open(bad); ok && bad != a {
			t.Errorf("%q opened", bad)
		}
	}
	// A sync token of the same list is no position.
	if _, _, _, ok := p.Open(c.SealSync(l, Sync{Pos: 1})); ok {
		t.Error("a sync token opened as a position")
	}
}

// TestIncarnationTag: 0 for an incarnation not known, never 0 for
// another; the tags of incarnations that differ in their low, middle or
// high bits differ.
func TestIncarnationTag(t *testing.T) {
	if IncarnationTag(0) != 0 {
		t.Fatal("the tag of no incarnation is not 0")
	}
	seen := map[uint32]uint64{}
	for _, inc := range []uint64{1, 2, 3, 1 << 24, 1 << 48, 1 << 63, 1<<24 | 1, 0xffffff, 4, 5, 6, 7, 8, 1<<63 | 1<<40 | 7} {
		tag := IncarnationTag(inc)
		if tag == 0 || tag > 0xffffff {
			t.Fatalf("%x: tag %x", inc, tag)
		}
		if other, dup := seen[tag]; dup {
			t.Fatalf("%x and %x: the same tag %x", inc, other, tag)
		}
		seen[tag] = inc
	}
}

func FuzzPositionOpen(f *testing.F) {
	c := New([]byte("secret"))
	p := c.Positions(List{Account: "a", FormID: "f"})
	f.Add(string(p.Append(nil, 3, 7, 0)))
	f.Add(string(p.Append(nil, 3, 7, IncarnationTag(42))))
	f.Add("AAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		pos, asOf, tag, ok := p.Open(s)
		if ok && (pos <= 0 || pos > asOf || asOf > MaxPosition || tag > 0xffffff || string(p.Append(nil, pos, asOf, tag)) != s) {
			t.Fatalf("%q opened as %d, %d", s, pos, asOf)
		}
	})
}
