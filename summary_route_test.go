package formsapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/storetest"
)

// summaryAnswer is the summary as the tests read it.
type summaryAnswer struct {
	Summary struct {
		Count figure
		Read  struct {
			Value    int64
			Complete bool
		}
		Interval string
		Buckets  []struct {
			Start time.Time
			Count figure
		}
		Fields []struct {
			Name     string
			Present  figure
			Distinct figure
			Top      []struct {
				Value json.RawMessage
				Count figure
			}
		}
		MoreFields bool
	}
}

type figure struct {
	Value int64
	Kind  string
}

// getSummary requests the summary of form with query from h as KeyA.
func getSummary(t *testing.T, h http.Handler, form, query, ifNoneMatch string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", "/v1/forms/"+form+"/summary?"+query, nil)
	r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
	if ifNoneMatch != "" {
		r.Header.Set("If-None-Match", ifNoneMatch)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func decodeSummary(t *testing.T, w *httptest.ResponseRecorder) summaryAnswer {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %.300s", w.Code, w.Body)
	}
	var s summaryAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSummaryOnEveryStore: the summary of the find form is the same over
// memstore, sqlitestore and pgstore (with FORMSAPI_TEST_POSTGRES), with
// and without their search index, for each interval, filters and q; and
// memstore's is the form's, counted here from the seed.
func TestSummaryOnEveryStore(t *testing.T) {
	seed := storetest.FindSeed()
	stores, m := everyStore(t, seed)
	queries := []string{"", "interval=hour&top=3", "interval=week&top=0", "filter[tag]=t1", "filter[score][gte]=42&filter[even]=true",
		"q=zoe", "since=2024-03-01T09:00:05Z&until=2024-03-01T10:00:00Z&interval=hour", "filter[gone][exists]=false&top=20"}
	want := map[string]string{}
	for _, q := range queries {
		want[q] = getSummary(t, formsapi.NewHandler(m, m), storetest.FormFind, q, "").Body.String()
	}
	for _, name := range slices.Sorted(maps.Keys(stores)) {
		h := formsapi.NewHandler(stores[name], m)
		for _, q := range queries {
			if got := getSummary(t, h, storetest.FormFind, q, "").Body.String(); got != want[q] {
				t.Errorf("%s ?%s:\n got %.800s\nwant %.800s", name, q, got, want[q])
			}
		}
	}

	// memstore's, against the seed.
	var subs []formsapi.Submission
	for _, s := range seed.Submissions {
		if s.Submission.FormID == storetest.FormFind {
			subs = append(subs, s.Submission)
		}
	}
	s := decodeSummary(t, getSummary(t, formsapi.NewHandler(m, m), storetest.FormFind, "top=20", ""))
	sum := s.Summary
	if sum.Count != (figure{int64(len(subs)), "exact"}) || sum.Read.Value != int64(len(subs)) || !sum.Read.Complete || sum.Interval != "day" {
		t.Errorf("count %+v, read %+v, interval %q; want %d exact, all read", sum.Count, sum.Read, sum.Interval, len(subs))
	}
	var inBuckets int64
	for _, b := range sum.Buckets {
		inBuckets += b.Count.Value
		if b.Count.Kind != "exact" || b.Start.Hour() != 0 {
			t.Errorf("bucket %+v", b)
		}
	}
	if len(sum.Buckets) != 30 || inBuckets != int64(len(subs)) {
		t.Errorf("%d buckets counting %d; want 30 counting %d", len(sum.Buckets), inBuckets, len(subs))
	}
	present, values := map[string]int64{}, map[string]map[string]int64{}
	for _, sub := range subs {
		var data map[string]any
		if err := json.Unmarshal(sub.Data, &data); err != nil {
			t.Fatal(err)
		}
		for k, v := range data {
			if v == nil {
				continue
			}
			present[k]++
			if values[k] == nil {
				values[k] = map[string]int64{}
			}
			switch v.(type) {
			case map[string]any, []any:
			default:
				values[k][jsonText(t, v)]++ // numbers by value
			}
		}
	}
	if len(sum.Fields) != len(present) {
		t.Errorf("%d fields, want %d", len(sum.Fields), len(present))
	}
	for _, f := range sum.Fields {
		if f.Present != (figure{present[f.Name], "exact"}) {
			t.Errorf("field %s present %+v, want %d", f.Name, f.Present, present[f.Name])
		}
		for _, v := range f.Top {
			var x any
			if err := json.Unmarshal(v.Value, &x); err != nil {
				t.Fatal(err)
			}
			if n := values[f.Name][jsonText(t, x)]; n != v.Count.Value {
				t.Errorf("field %s value %s: %d, want %d", f.Name, v.Value, v.Count.Value, n)
			}
		}
	}
}

// TestSummaryBounded: over a form of more submissions than a summary
// reads, the read stops at 10,000, the count and the buckets the read did
// not reach are the store's exact counts, and the fields' figures are
// lower bounds.
func TestSummaryBounded(t *testing.T) {
	ctx := context.Background()
	m := memstore.New()
	if err := storetest.Load(ctx, m, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 12000
	for i := range n {
		sub := formsapi.Submission{FormID: storetest.FormEmpty, Data: fmt.Appendf(nil, `{"i":%d,"half":%t}`, i, i%2 == 0), CreatedAt: start.Add(time.Duration(i) * 10 * time.Second)}
		if err := m.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	h := formsapi.NewHandler(m, m)
	sum := decodeSummary(t, getSummary(t, h, storetest.FormEmpty, "", "")).Summary
	if sum.Read.Value != 10000 || sum.Read.Complete {
		t.Errorf("read %+v, want 10000, not complete", sum.Read)
	}
	if sum.Count != (figure{n, "exact"}) {
		t.Errorf("count %+v, want %d exact (the store's count)", sum.Count, n)
	}
	// 12,000 submissions 10 s apart: 8,640 a day, from January 1st.
	perDay := map[string]int64{"2025-01-01": 8640, "2025-01-02": n - 8640}
	var counted int64
	for _, b := range sum.Buckets {
		want := perDay[b.Start.Format(time.DateOnly)]
		counted += b.Count.Value
		if b.Count != (figure{want, "exact"}) {
			t.Errorf("bucket %s: %+v, want %d exact", b.Start.Format(time.DateOnly), b.Count, want)
		}
	}
	if counted != n {
		t.Errorf("the buckets count %d, want %d", counted, n)
	}
	for _, f := range sum.Fields {
		if f.Present != (figure{10000, "at_least"}) {
			t.Errorf("field %s present %+v, want 10000 at_least", f.Name, f.Present)
		}
	}
	// With a filter the buckets the read did not reach are its lower
	// bounds, and the count is no more exact than the store says.
	sum = decodeSummary(t, getSummary(t, h, storetest.FormEmpty, "filter[half]=true&interval=hour&since=2025-01-01T00:00:00Z&until=2025-01-02T00:00:00Z", "")).Summary
	if len(sum.Buckets) != 24 || sum.Read.Value != 4320 || !sum.Read.Complete {
		t.Errorf("%d buckets, read %+v; want 24, all 4320 of the day's halves", len(sum.Buckets), sum.Read)
	}
	for _, b := range sum.Buckets {
		if b.Count != (figure{180, "exact"}) {
			t.Errorf("hour %s: %+v, want 180 exact", b.Start, b.Count)
		}
	}
}

// TestSummaryKeptUntilWrite: a summary is answered again from the kept
// one, reading no submission, with 304 to its tag, until a write changes
// the form; then it is read afresh. On sqlitestore, its own key resolver.
func TestSummaryKeptUntilWrite(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, false)
	if err := storetest.Load(ctx, s, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	o := &recordingObserver{}
	h := formsapi.NewHandler(s, s, formsapi.WithObserver(o))
	first := getSummary(t, h, storetest.FormBusy, "filter[n][gte]=2", "")
	calls, reqs := o.take()
	if !slices.Contains(calls, observe.OpListSubmissions) || reqs[0].Cache != observe.CacheMiss {
		t.Errorf("first request: calls %v, cache %v; want pages read, a miss", calls, reqs[0].Cache)
	}
	again := getSummary(t, h, storetest.FormBusy, "filter[n][gte]=2", "")
	calls, reqs = o.take()
	if slices.Contains(calls, observe.OpListSubmissions) || slices.Contains(calls, observe.OpCount) || reqs[0].Cache != observe.CacheHit {
		t.Errorf("second request: calls %v, cache %v; want no page read, a hit", calls, reqs[0].Cache)
	}
	if again.Body.String() != first.Body.String() || again.Header().Get("ETag") != first.Header().Get("ETag") || first.Header().Get("ETag") == "" {
		t.Errorf("the kept summary differs: %q %q", first.Header().Get("ETag"), again.Header().Get("ETag"))
	}
	tag := first.Header().Get("ETag")
	if w := getSummary(t, h, storetest.FormBusy, "filter[n][gte]=2", tag); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("If-None-Match: %d %q, want 304", w.Code, w.Body)
	}
	if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`{"n":99}`)}, formsapi.Metadata{}); err != nil {
		t.Fatal(err)
	}
	after := getSummary(t, h, storetest.FormBusy, "filter[n][gte]=2", tag)
	if after.Code != http.StatusOK {
		t.Fatalf("after a write: %d, want 200", after.Code)
	}
	was, now := decodeSummary(t, first).Summary.Count, decodeSummary(t, after).Summary.Count
	if now.Value != was.Value+1 {
		t.Errorf("count %+v after an addition, was %+v", now, was)
	}
}

// TestSummaryRefusals: each bad parameter is a 400 naming it, the
// buckets limit and the top limit by name; another account's form is a
// 404.
func TestSummaryRefusals(t *testing.T) {
	m := memstore.New()
	if err := storetest.Load(context.Background(), m, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	h := formsapi.NewHandler(m, m)
	for query, want := range map[string]string{
		"interval=month":             "invalid interval",
		"interval=day&interval=hour": "invalid interval: the parameter is given more than once",
		"top=21":                     "(the summary top limit)",
		"top=-1":                     "invalid top",
		"since=2024-01-01T00:00:00Z&until=2025-01-02T00:00:00Z":               "(the summary buckets limit)",
		"interval=hour&since=2024-01-01T00:00:00Z&until=2024-01-17T00:00:01Z": "(the summary buckets limit)",
		"since=2024-01-02T00:00:00Z&until=2024-01-01T00:00:00Z":               "invalid until",
		"since=yesterday":   "invalid since",
		"filter[a][near]=1": "invalid filter[a][near]",
		"q=ab":              "invalid q",
	} {
		w := getSummary(t, h, storetest.FormBusy, query, "")
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), want) {
			t.Errorf("?%s: %d %s, want 400 containing %q", query, w.Code, w.Body, want)
		}
	}
	if w := getSummary(t, h, storetest.FormB, "", ""); w.Code != http.StatusNotFound {
		t.Errorf("another account's form: %d, want 404", w.Code)
	}
	// A week of hours is within the limit; 366 days are.
	for _, query := range []string{"interval=hour&since=2024-01-01T00:00:00Z&until=2024-01-16T06:00:00Z", "since=2024-01-01T00:00:00Z&until=2025-01-01T00:00:00Z"} {
		if w := getSummary(t, h, storetest.FormBusy, query, ""); w.Code != http.StatusOK {
			t.Errorf("?%s: %d %s", query, w.Code, w.Body)
		}
	}
}

// jsonText is v as encoding/json writes it.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSummaryOfAFormCreatedAgain: a form deleted and created again with
// the same ID has a summary of its own, never the old form's kept one.
func TestSummaryOfAFormCreatedAgain(t *testing.T) {
	ctx := context.Background()
	s := openSQLite(t, false)
	if err := storetest.Load(ctx, s, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	h := formsapi.NewHandler(s, s)
	before := decodeSummary(t, getSummary(t, h, storetest.FormSmall, "", "")).Summary
	if err := s.DeleteForm(ctx, storetest.AccountA, storetest.FormSmall); err != nil {
		t.Fatal(err)
	}
	if err := s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: storetest.FormSmall, Title: "again", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(`{"again":true}`)}, formsapi.Metadata{}); err != nil {
		t.Fatal(err)
	}
	after := decodeSummary(t, getSummary(t, h, storetest.FormSmall, "", "")).Summary
	if after.Count.Value != 1 || len(after.Fields) != 1 || after.Fields[0].Name != "again" || before.Count.Value == 1 {
		t.Errorf("the form created again: count %+v, fields %+v (before: %+v)", after.Count, after.Fields, before.Count)
	}
}

// FuzzSummaryParams sends any query string to the summary of the find
// form over every store (memstore, sqlitestore with and without its
// search index, and pgstore when FORMSAPI_TEST_POSTGRES is set): the
// answer is 200 or 400, never another, a 400 names a parameter, and every
// store gives the same answer, byte for byte. Run it for minutes:
//
//	go test -run '^$' -fuzz FuzzSummaryParams -fuzztime 2m .
func FuzzSummaryParams(f *testing.F) {
	for _, q := range []string{
		"", "interval=hour", "interval=week&top=0", "interval=month", "top=21", "top=-1", "top=x", "top=20&top=1",
		"since=2024-03-01T09:00:00Z&until=2024-03-01T10:00:00Z&interval=hour", "since=2020-01-01T00:00:00Z&until=2030-01-01T00:00:00Z",
		"since=2024-03-01T09:00:05Z", "until=2024-03-01T09:00:05Z&interval=week", "filter[tag]=t1", "filter[score][gte]=42&q=zoe",
		"filter[a]=1&filter[a]=2", "q=ab", "filter[%00]=%FF", "limit=1&cursor=abc&sync=start", "filter[gone][exists]=false",
	} {
		f.Add(q)
	}
	stores, m := everyStore(f, storetest.FindSeed())
	names := slices.Sorted(maps.Keys(stores))
	f.Fuzz(func(t *testing.T, query string) {
		want, wantStatus := "", 0
		for i, name := range names {
			r := httptest.NewRequest("GET", "/v1/forms/"+storetest.FormFind+"/summary", nil)
			r.URL.RawQuery = query
			r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
			w := httptest.NewRecorder()
			formsapi.NewHandler(stores[name], m).ServeHTTP(w, r)
			switch {
			case w.Code != http.StatusOK && w.Code != http.StatusBadRequest:
				t.Fatalf("?%s: %s answers %d: %s", query, name, w.Code, w.Body)
			case w.Code == http.StatusBadRequest && !strings.Contains(w.Body.String(), `"message":"invalid `) && !strings.Contains(w.Body.String(), "query string is malformed"):
				t.Fatalf("?%s: %s: a 400 that names no parameter: %s", query, name, w.Body)
			case i == 0:
				want, wantStatus = w.Body.String(), w.Code
			case w.Code != wantStatus || w.Body.String() != want:
				t.Fatalf("?%s: %s answers %d %.500s, %s %d %.500s", query, name, w.Code, w.Body, names[0], wantStatus, want)
			}
		}
	})
}

// TestSummaryWorkIsCharged: a summary read afresh pays for the bytes it
// read as filtered pages do, one unit more per started 4 MiB past the
// first; the kept summary, served again, costs one unit. 1,000
// submissions of about 10 KiB each: some 10 MiB read, 2 units more.
func TestSummaryWorkIsCharged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	if err := s.AddForm(ctx, "acct-a", formsapi.Form{ID: "big", Title: "Big", CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddKey(ctx, storetest.KeyA, "acct-a"); err != nil {
		t.Fatal(err)
	}
	note := strings.Repeat("n", 10<<10)
	for i := range 1000 {
		data := fmt.Sprintf(`{"i":%d,"note":%q}`, i, note)
		sub := formsapi.Submission{FormID: "big", Data: []byte(data), CreatedAt: time.Date(2025, 1, 2, 0, 0, i, 0, time.UTC)}
		if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	policy := ratelimit.Policy{Name: "test", Quota: 100, Window: time.Hour}
	h := formsapi.NewHandler(s, s, formsapi.WithRateLimit(ratelimit.Options{Limiter: newFrozenLimiter(), Policy: policy}))
	remaining := func(w *httptest.ResponseRecorder) int {
		t.Helper()
		if w.Code != http.StatusOK {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		var r int
		if _, err := fmt.Sscanf(w.Header().Get("RateLimit"), `"test";r=%d;`, &r); err != nil {
			t.Fatalf("RateLimit %q: %v", w.Header().Get("RateLimit"), err)
		}
		return r
	}
	if r := remaining(getSummary(t, h, "big", "", "")); r != 100-1-2 {
		t.Errorf("after a summary read afresh, %d units left; want 97 (1 and 2 for its 10 MiB)", r)
	}
	if r := remaining(getSummary(t, h, "big", "", "")); r != 97-1 {
		t.Errorf("after the kept summary, %d units left; want 96 (1)", r)
	}
}
