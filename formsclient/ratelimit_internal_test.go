package formsclient

import (
	"net/http"
	"strings"
	"testing"
)

// TestRateLimitFieldsAreBounded: a server's RateLimit field of
// megabytes (the transport takes 10 MiB of headers) is read within a
// bound: the policies the API sends come first and are few, so the
// client reads the first kilobytes and items, not every item of the
// field with a map each (9 MiB took 385 MB of allocations and seconds).
func TestRateLimitFieldsAreBounded(t *testing.T) {
	h := http.Header{}
	h.Add("RateLimit", `"default";r=5;t=30`)
	h.Add("RateLimit", strings.Repeat(`"p";r=9;t=1;x=2;y=3,`, 9<<20/20))
	h.Set("RateLimit-Policy", `"default";q=100;w=60,`+strings.Repeat(`"p";q=1;w=1,`, 1<<20/12))
	var rl *RateLimit
	allocs := testing.AllocsPerRun(3, func() { rl = parseRateLimit(h) })
	if rl == nil || rl.Policy != "default" || rl.Remaining != 5 || rl.Quota != 100 {
		t.Errorf("got %+v, want the default policy's fields", rl)
	}
	if allocs > 1000 {
		t.Errorf("%v allocations to read the fields", allocs)
	}
}
