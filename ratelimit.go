package formsapi

// The rate-limit header fields. The limiter itself, its policy and its
// decision live in package ratelimit; the options and the buckets a
// request is counted in, in access.go.

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/formsapi/formsapi/ratelimit"
)

// ceilSeconds is d in whole seconds, rounded up: the delay-seconds of
// Retry-After and the t parameter.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := (d + time.Second - 1) / time.Second
	return int64(min(s, math.MaxInt32))
}

// setRateLimitHeaders writes the fields of draft-ietf-httpapi-ratelimit-
// headers-11 for the one policy d was decided under: RateLimit-Policy
// ("name";q=Quota;w=Window) and RateLimit ("name";r=Remaining;t=seconds).
// t is the time until the full quota is back, or on a refusal the
// Retry-After, which the draft says must not point earlier than the end of
// the effective window. The partition key (pk) is left out: it would name
// the account. A scoped key gets its own policy alone, never the
// account's: a policy listed without its RateLimit item would tell a
// client nothing it can act on.
func setRateLimitHeaders(h http.Header, d ratelimit.Decision) {
	p := d.Policy
	name := strconv.Quote(p.Name) // Validate allows only characters Quote keeps
	h.Set("RateLimit-Policy", name+";q="+strconv.Itoa(p.Quota)+";w="+strconv.FormatInt(int64(p.Window/time.Second), 10))
	t := ceilSeconds(d.Reset)
	if !d.Allowed {
		t = max(ceilSeconds(d.RetryAfter), 1)
		h.Set("Retry-After", strconv.FormatInt(t, 10))
	}
	h.Set("RateLimit", name+";r="+strconv.Itoa(max(d.Remaining, 0))+";t="+strconv.FormatInt(t, 10))
}
