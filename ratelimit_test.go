package formsapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/formsapi/formsapi/ratelimit"
)

func TestRateLimitHeaders(t *testing.T) {
	t.Parallel()
	p := ratelimit.Policy{Name: "default", Quota: 100, Window: time.Minute}
	for _, c := range []struct {
		d          ratelimit.Decision
		rl, retry  string
		wantPolicy string
	}{
		{ratelimit.Decision{Allowed: true, Remaining: 99, Reset: 600 * time.Millisecond, Policy: p}, `"default";r=99;t=1`, "", `"default";q=100;w=60`},
		{ratelimit.Decision{Allowed: true, Remaining: 0, Reset: time.Minute, Policy: p}, `"default";r=0;t=60`, "", `"default";q=100;w=60`},
		{ratelimit.Decision{Remaining: 0, Reset: time.Minute, RetryAfter: 1200 * time.Millisecond, Policy: p}, `"default";r=0;t=2`, "2", `"default";q=100;w=60`},
		{ratelimit.Decision{RetryAfter: time.Microsecond, Policy: p}, `"default";r=0;t=1`, "1", `"default";q=100;w=60`},
		{ratelimit.Decision{RetryAfter: 0, Policy: p.PerKey()}, `"default-key";r=0;t=1`, "1", `"default-key";q=50;w=60`}, // a refusal never says "retry now"
	} {
		h := http.Header{}
		setRateLimitHeaders(h, c.d)
		if got := h.Values("RateLimit"); len(got) != 1 || got[0] != c.rl {
			t.Errorf("%+v: RateLimit %q, want %q", c.d, got, c.rl)
		}
		if got := h.Values("RateLimit-Policy"); len(got) != 1 || got[0] != c.wantPolicy {
			t.Errorf("%+v: RateLimit-Policy %q, want %q", c.d, got, c.wantPolicy)
		}
		if got := h.Get("Retry-After"); got != c.retry {
			t.Errorf("%+v: Retry-After %q, want %q", c.d, got, c.retry)
		}
	}
}
