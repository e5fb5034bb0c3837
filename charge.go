package formsapi

// The charge of a request's work (RELIABILITY case 103): a filtered or
// searched page, and an exact count, check candidates against their data
// and may read and normalize megabytes for one request. The stores of
// this module count that work (find.Examined) in the request's
// wire.Meter; once the request is read, the handler charges the rate
// limiter one unit more per started chargeBytes of it, beyond the one
// unit Allow took, and the RateLimit fields say what is left after the
// charge.

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/formsapi/formsapi/ratelimit"
)

// chargeBytes is the work one unit of the rate limit pays for: the
// default page's byte budget (DefaultPageBytes), so that a filtered page
// that examined no more than an unfiltered page sends costs what that
// page costs, one unit, and one that examined its whole bound
// (find.MaxExaminedBytes, 16 MiB) costs four.
const chargeBytes = 4 << 20

// chargedUnits is how many units beyond the first a request whose reads
// did examined bytes of work costs: one per started chargeBytes, less
// the one Allow took.
func chargedUnits(examined int64) int {
	if examined <= chargeBytes {
		return 0
	}
	return int((examined+chargeBytes-1)/chargeBytes) - 1
}

// chargeWork charges the buckets of req the units its work costs beyond
// the first (chargedUnits), when the limiter can be charged
// (ratelimit.Charger), and sets the RateLimit fields to what is left. A
// failed charge is logged (throttled) and changes nothing: the request
// is served, its work being done.
func (a *api) chargeWork(w http.ResponseWriter, r *http.Request, req request, examined int64) {
	ac := &a.cfg.access
	n := chargedUnits(examined)
	if n == 0 || ac.charger == nil {
		return
	}
	d, err := a.charge(r.Context(), req.key, req.grant, n)
	if err != nil {
		a.logThrottled(logLimiterFailed, w, r, slog.LevelError, "formsapi: rate limiter failed to charge a request's work; request served", slog.Any("err", err))
		return
	}
	setRateLimitHeaders(w.Header(), d)
}

// charge charges n units to the buckets a request of token with grant g
// spent its first unit in (see decide), the key's own first for a
// scoped key, and returns the decision the answer shows: the account's
// for an unscoped key, the key's own for a scoped one.
func (a *api) charge(ctx context.Context, token string, g Grant, n int) (ratelimit.Decision, error) {
	ac := &a.cfg.access
	ctx, cancel := context.WithTimeout(ctx, 2*ac.timeout)
	defer cancel()
	if g.Forms == nil {
		d, err := ac.charger.Charge(ctx, "account:"+g.AccountID, ac.policy, n)
		d.Policy = ac.policy
		return d, err
	}
	d, err := ac.charger.Charge(ctx, "key:"+KeyID(token), ac.keyPolicy, n)
	d.Policy = ac.keyPolicy
	if err != nil {
		return d, err
	}
	if _, err := ac.charger.Charge(ctx, "account:"+g.AccountID, ac.policy, n); err != nil {
		return d, err
	}
	return d, nil
}
