package token

import (
	"strings"
	"testing"
)

func TestPositions(t *testing.T) {
	c := New([]byte("secret"))
	l := List{Account: "acct", FormID: "f1"}
	p := c.Positions(l)
	for _, tc := range [][2]int64{{1, 1}, {5, 9}, {MaxPosition, MaxPosition}, {1 << 40, 1<<40 + 3}} {
		s := string(p.Append(nil, tc[0], tc[1]))
		if len(s) != PositionLength {
			t.Fatalf("%v: length %d", tc, len(s))
		}
		if again := string(c.Positions(l).Append(nil, tc[0], tc[1])); again != s {
			t.Errorf("%v: not deterministic: %s, %s", tc, s, again)
		}
		pos, asOf, ok := p.Open(s)
		if !ok || pos != tc[0] || asOf != tc[1] {
			t.Errorf("%v: opened as %d, %d, %v", tc, pos, asOf, ok)
		}
		// Another list, another secret: nothing.
		for name, q := range map[string]Positions{
			"another form":    c.Positions(List{Account: "acct", FormID: "f2"}),
			"another account": c.Positions(List{Account: "acct2", FormID: "f1"}),
			"another secret":  New([]byte("other")).Positions(l),
		} {
			if _, _, ok := q.Open(s); ok {
				t.Errorf("%v: opened for %s", tc, name)
			}
		}
	}
	a := string(p.Append(nil, 1, 2))
	for _, bad := range []string{"", "x", a[:21], a + "A", strings.Repeat("A", 22), a[:21] + "B", "1", "-1"} {
		if _, _, ok := p.Open(bad); ok && bad != a {
			t.Errorf("%q opened", bad)
		}
	}
	// A sync token of the same list is no position.
	if _, _, ok := p.Open(c.SealSync(l, Sync{Pos: 1})); ok {
		t.Error("a sync token opened as a position")
	}
}

func FuzzPositionOpen(f *testing.F) {
	c := New([]byte("secret"))
	p := c.Positions(List{Account: "a", FormID: "f"})
	f.Add(string(p.Append(nil, 3, 7)))
	f.Add("AAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		pos, asOf, ok := p.Open(s)
		if ok && (pos <= 0 || pos > asOf || asOf > MaxPosition || string(p.Append(nil, pos, asOf)) != s) {
			t.Fatalf("%q opened as %d, %d", s, pos, asOf)
		}
	})
}
