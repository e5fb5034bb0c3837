package keyset

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
)

var t0 = time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)

func TestParseString(t *testing.T) {
	t.Parallel()
	for _, p := range []Pos{{0, 1}, {t0.UnixNano(), 42}, {-1, math.MaxInt64}, {math.MinInt64, math.MinInt64}} {
		got, err := Parse(p.String())
		if err != nil || got != p {
			t.Errorf("Parse(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	for _, s := range []string{"", ".", "1", "1.", ".1", "1.2.3", "zzzzzzzzzzzzzzzz.1", "1.%", " 1.2"} {
		if _, err := Parse(s); !errors.Is(err, formsapi.ErrInvalidCursor) {
			t.Errorf("Parse(%q): got %v, want ErrInvalidCursor", s, err)
		}
	}
}

func TestBounds(t *testing.T) {
	t.Parallel()
	at := t0.UnixNano()
	cur := Pos{At: at + 5, Seq: 7}
	everything := [2]Pos{{math.MinInt64, math.MinInt64}, {math.MaxInt64, math.MaxInt64}}
	for _, c := range []struct {
		name   string
		q      formsapi.Query
		lo, hi Pos
	}{
		{"none", formsapi.Query{}, everything[0], everything[1]},
		{"since", formsapi.Query{Since: t0}, Pos{at, math.MinInt64}, everything[1]},
		{"until", formsapi.Query{Until: t0}, everything[0], Pos{at, math.MinInt64}},
		{"cursor newest narrows hi", formsapi.Query{Cursor: cur.String()}, everything[0], cur},
		{"cursor oldest narrows lo", formsapi.Query{Cursor: cur.String(), Order: formsapi.Oldest}, cur, everything[1]},
		{"cursor before since keeps since", formsapi.Query{Cursor: Pos{at - 1, 9}.String(), Order: formsapi.Oldest, Since: t0}, Pos{at, math.MinInt64}, everything[1]},
		{"cursor past until keeps until", formsapi.Query{Cursor: Pos{at + 1, 9}.String(), Until: t0}, everything[0], Pos{at, math.MinInt64}},
		{"since before 1678 clamps", formsapi.Query{Since: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)}, Pos{math.MinInt64, math.MinInt64}, everything[1]},
		{"until after 2262 clamps", formsapi.Query{Until: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}, everything[0], Pos{math.MaxInt64, math.MinInt64}},
	} {
		lo, hi, err := Bounds(c.q)
		if err != nil || lo != c.lo || hi != c.hi {
			t.Errorf("%s: Bounds = %v, %v, %v; want %v, %v", c.name, lo, hi, err, c.lo, c.hi)
		}
	}
	if _, _, err := Bounds(formsapi.Query{Cursor: "nope"}); !errors.Is(err, formsapi.ErrInvalidCursor) {
		t.Errorf("a bad cursor: got %v, want ErrInvalidCursor", err)
	}
}

// TestContains holds the bounds to the plain reading of Since and Until:
// createdAt >= Since and createdAt < Until, at and around each bound.
func TestContains(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		{}, t0.Add(-time.Nanosecond), t0, t0.Add(time.Nanosecond), t0.Add(time.Hour),
		time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	stored := []time.Time{t0.Add(-time.Nanosecond), t0, t0.Add(time.Nanosecond), t0.Add(time.Hour),
		time.Unix(0, math.MinInt64+1), time.Unix(0, math.MaxInt64-1)}
	for _, since := range times {
		for _, until := range times {
			q := formsapi.Query{Since: since, Until: until}
			for _, at := range stored {
				want := (since.IsZero() || !at.Before(since)) && (until.IsZero() || at.Before(until))
				if got := Contains(q, at); got != want {
					t.Errorf("since %v until %v: Contains(%v) = %v, want %v", since, until, at, got, want)
				}
			}
		}
	}
}

func TestFetch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ limit, want int }{{1, 2}, {100, 101}, {math.MaxInt, math.MaxInt}} {
		if got, err := Fetch(formsapi.Query{Limit: c.limit}); err != nil || got != c.want {
			t.Errorf("Fetch(limit %d) = %d, %v; want %d", c.limit, got, err, c.want)
		}
	}
	for _, limit := range []int{0, -1, math.MinInt} {
		if _, err := Fetch(formsapi.Query{Limit: limit}); err == nil {
			t.Errorf("Fetch(limit %d): no error", limit)
		}
	}
}

func TestNanos(t *testing.T) {
	t.Parallel()
	if got := Nanos(t0); got != t0.UnixNano() {
		t.Errorf("Nanos(t0) = %d", got)
	}
	if got := Nanos(time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)); got != math.MinInt64 {
		t.Errorf("Nanos(1500) = %d, want MinInt64", got)
	}
	if got := Nanos(time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC)); got != math.MaxInt64 {
		t.Errorf("Nanos(2500) = %d, want MaxInt64", got)
	}
}
