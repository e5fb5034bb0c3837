package formsapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestSummarySinceCenturiesAgo: a since so far back that the time from
// it to the newest submission does not fit a time.Duration (292 years)
// still gives at most the summary buckets limit of buckets, the newest
// ones; before, the range was measured saturated and the summary built
// millions of hourly buckets (hundreds of MB) for one request.
func TestSummarySinceCenturiesAgo(t *testing.T) {
	t.Parallel()
	m := memstore.New()
	if err := storetest.Load(context.Background(), m, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	h := formsapi.NewHandler(m, m)
	for _, query := range []string{
		"interval=hour&since=1700-01-01T00:00:00Z",
		"interval=day&since=1000-01-01T00:00:00Z",
		"interval=week&since=1000-01-01T00:00:00Z",
	} {
		sum := decodeSummary(t, getSummary(t, h, storetest.FormBusy, query, "")).Summary
		if len(sum.Buckets) != 366 {
			t.Errorf("?%s: %d buckets, want the newest 366 (the summary buckets limit)", query, len(sum.Buckets))
			continue
		}
		var counted int64
		for _, b := range sum.Buckets {
			counted += b.Count.Value
		}
		if counted == 0 {
			t.Errorf("?%s: the newest 366 buckets count nothing; want the form's submissions", query)
		}
	}
}

// TestSummaryRangeOfCenturies: since and until centuries apart are a 400
// naming the buckets limit; before, the range's length overflowed to a
// negative count of intervals and was accepted, and the summary built
// an hourly bucket for each of a thousand years.
func TestSummaryRangeOfCenturies(t *testing.T) {
	t.Parallel()
	m := memstore.New()
	if err := storetest.Load(context.Background(), m, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	h := formsapi.NewHandler(m, m)
	for _, query := range []string{
		"interval=hour&since=1000-01-01T00:00:00Z&until=2026-01-01T00:00:00Z",
		"interval=day&since=1000-01-01T00:00:00Z&until=9999-01-01T00:00:00Z",
		"interval=week&since=0002-01-01T00:00:00Z&until=9999-12-31T23:59:59.999999999Z",
	} {
		w := getSummary(t, h, storetest.FormBusy, query, "")
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "(the summary buckets limit)") {
			t.Errorf("?%s: %d %.200s, want 400 naming the summary buckets limit", query, w.Code, w.Body)
		}
	}
}
