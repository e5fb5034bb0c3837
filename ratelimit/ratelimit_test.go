package ratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	for _, p := range []Policy{
		{Name: "default", Quota: 100, Window: time.Minute},
		{Name: strings.Repeat("n", 64), Quota: 1, Window: time.Second},
		{Name: "a-b_c.D9", Quota: 10, Window: 366 * 24 * time.Hour, KeyQuota: 10},
		{Name: "ok", Quota: 10, Window: time.Second, KeyQuota: 1},
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
	for _, p := range []Policy{
		{Name: "", Quota: 1, Window: time.Second},
		{Name: strings.Repeat("n", 65), Quota: 1, Window: time.Second},
		{Name: `a"b`, Quota: 1, Window: time.Second},
		{Name: "a b", Quota: 1, Window: time.Second},
		{Name: "a~b", Quota: 1, Window: time.Second},
		{Name: "ok", Quota: 0, Window: time.Second},
		{Name: "ok", Quota: 1, Window: 1500 * time.Millisecond},
		{Name: "ok", Quota: 1, Window: 0},
		{Name: "ok", Quota: 1, Window: 400 * 24 * time.Hour},
		{Name: "ok", Quota: 10, Window: time.Second, KeyQuota: -1},
		{Name: "ok", Quota: 10, Window: time.Second, KeyQuota: 11},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
}

func TestPolicyPerKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		quota, keyQuota, want int
	}{
		{600, 0, 300}, // half
		{7, 0, 4},     // rounded up
		{1, 0, 1},     // at least 1
		{2, 0, 1},
		{600, 50, 50}, // as set
		{600, 600, 600},
	} {
		p := Policy{Name: "default", Quota: c.quota, Window: time.Minute, KeyQuota: c.keyQuota}
		k := p.PerKey()
		if k.Quota != c.want || k.Window != p.Window || k.Name != "default-key" {
			t.Errorf("%+v: PerKey %+v, want quota %d, the same window, name default-key", p, k, c.want)
		}
		if err := k.Validate(); err != nil {
			t.Errorf("%+v: PerKey is invalid: %v", p, err)
		}
	}
}

func TestPolicyPerKeyLongNames(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	fits := Policy{Name: strings.Repeat("a", 60), Quota: 2, Window: time.Second}
	is.Equal(fits.PerKey().Name, fits.Name+"-key") // 64 characters: as it is
	long1 := Policy{Name: strings.Repeat("a", 64), Quota: 2, Window: time.Second}
	long2 := Policy{Name: strings.Repeat("a", 63) + "b", Quota: 2, Window: time.Second}
	k1, k2 := long1.PerKey(), long2.PerKey()
	is.NoErr(k1.Validate())                              // a name too long for the suffix stays valid
	is.NoErr(k2.Validate())                              // (both)
	is.True(strings.HasSuffix(k1.Name, "-key"))          // and ends in -key
	is.True(strings.HasPrefix(k1.Name, long1.Name[:51])) // after the name's start
	is.True(k1.Name != k2.Name)                          // distinct names stay distinct
}

func TestPolicyInterval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    Policy
		want time.Duration
	}{
		{Policy{Quota: 10, Window: time.Second}, 100 * time.Millisecond},
		{Policy{Quota: 3, Window: time.Second}, 333334 * time.Microsecond}, // rounded up to a microsecond
		{Policy{Quota: 1, Window: time.Hour}, time.Hour},
	} {
		if got := c.p.Interval(); got != c.want {
			t.Errorf("%+v: Interval %s, want %s", c.p, got, c.want)
		}
	}
}

func TestRefusedDecision(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	p := Policy{Name: "default", Quota: 2, Window: 2 * time.Second}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := p.RefusedDecision(now.Add(2*time.Second), now) // a full burst spent
	is.True(!d.Allowed)
	is.Equal(d.RetryAfter, time.Second) // one interval
	is.Equal(d.Reset, 2*time.Second)
	d = p.RefusedDecision(now.Add(time.Second), now) // SQL said no, but here it would fit
	is.True(!d.Allowed)                              // still refused
	is.Equal(d.Remaining, 0)
	is.Equal(d.RetryAfter, time.Microsecond) // and never "retry now"
}
