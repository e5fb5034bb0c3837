package benchdata

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
)

// Key is the API key the handler benchmarks register.
const Key = "bench-key"

// discard is a ResponseWriter that keeps only the status and headers, so
// the benchmark measures the handler rather than a recorder.
type discard struct {
	h      http.Header
	status int
	n      int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(code int)        { d.status = code }
func (d *discard) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }

// RunHandler benchmarks the handler over store on the lists a client reads
// most: the forms, the first page of a big form, a page 99% deep in it
// (reached with a cursor), each in both orders, and a since/until window.
// The store must hold Load's data for at least one form of perForm
// submissions, with Key registered.
func RunHandler(b *testing.B, store formsapi.Store, keys formsapi.KeyResolver, perForm int) {
	RunHandlerCPU(b, store, keys, perForm, nil)
}

// RunHandlerCPU is RunHandler that also reports, as pg-cpu-ns/op, the
// CPU time the database server spent per request, from cpu, which returns
// the server's CPU time so far (and false when it cannot tell).
func RunHandlerCPU(b *testing.B, store formsapi.Store, keys formsapi.KeyResolver, perForm int, cpu func() (time.Duration, bool)) {
	h := formsapi.NewHandler(store, keys)
	sub := "/v1/forms/" + FormID(0) + "/submissions"
	deep := func(order string) string {
		// Pages of a hundredth of the form at most, so that the walk
		// reaches 99% on a page that has a next one, small forms too.
		walk := strconv.Itoa(max(1, min(1000, perForm/100)))
		return sub + "?limit=100&order=" + order + "&cursor=" + url.QueryEscape(cursorAt(b, h, sub+"?limit="+walk+"&order="+order, perForm*99/100))
	}
	window := "since=" + At(perForm/2).Format("2006-01-02T15:04:05Z") + "&until=" + At(perForm/2+5000).Format("2006-01-02T15:04:05Z")
	for _, c := range []struct{ name, target string }{
		{"Forms", "/v1/forms"},
		{"FirstPage", sub + "?limit=100"},
		{"DeepPage", deep("desc")},
		{"FirstPageAsc", sub + "?limit=100&order=asc"},
		{"DeepPageAsc", deep("asc")},
		{"Window", sub + "?limit=100&" + window},
		{"WindowAsc", sub + "?limit=100&order=asc&" + window},
	} {
		b.Run(c.name, func(b *testing.B) { serveBench(b, func() http.Handler { return h }, c.target, cpu) })
	}
}

// cursorAt walks first's list through the handler and returns the cursor
// that starts after about depth items.
func cursorAt(b *testing.B, h http.Handler, first string, depth int) string {
	target, seen := first, 0
	for {
		r := httptest.NewRequest("GET", target, nil)
		r.Header.Set("Authorization", "Bearer "+Key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var page struct {
			Submissions []json.RawMessage
			NextCursor  string
		}
		if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || page.NextCursor == "" {
			b.Fatalf("walking %s: %v (status %d)", first, err, w.Code)
		}
		seen += len(page.Submissions)
		if seen >= depth {
			return page.NextCursor
		}
		target = first + "&cursor=" + url.QueryEscape(page.NextCursor)
	}
}

// processCPU returns the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// SummarySizes are the forms RunSummary summarizes, by their number of
// submissions (WideSubmission's); SummaryForm names each.
var SummarySizes = []int{10_000, 100_000}

// SummaryForm names the form of n submissions of the summary benchmarks.
func SummaryForm(n int) string { return "summary-" + strconv.Itoa(n) }

// LoadSummary adds, for each of SummarySizes, a form of that many
// WideSubmissions of Account to w, and Key.
func LoadSummary(b *testing.B, w formsapi.Writer) {
	ctx := b.Context()
	for _, n := range SummarySizes {
		id := SummaryForm(n)
		if err := w.AddForm(ctx, Account, formsapi.Form{ID: id, Title: id, CreatedAt: Start}); err != nil {
			b.Fatal(err)
		}
		if err := AddAll(ctx, w, n, 0, func(i int) (formsapi.Submission, formsapi.Metadata) { return WideSubmission(id, i) }, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.AddKey(ctx, Key, Account); err != nil {
		b.Fatal(err)
	}
}

// RunSummary measures GET /v1/forms/{formId}/summary over the forms
// LoadSummary added, unfiltered and with filter[country]=FR (one in 8),
// beside the baseline of the same runs, Page, the first page of 100 of
// the form's submissions:
// Cached, a handler over cached that keeps the summary after the first
// request, so that every request is a key lookup and the kept summary;
// Uncached, a new handler for every request over uncached, a store
// without a read cache over the same data, so that every request reads
// every page and count of the summary from the database, as the first
// request after a write does at worst. It reports the process's CPU per
// request as cpu-ns/op, and the database server's as pg-cpu-ns/op from
// cpu when it is not nil.
func RunSummary(b *testing.B, cached, uncached formsapi.Store, keys formsapi.KeyResolver, cpu func() (time.Duration, bool)) {
	for _, n := range SummarySizes {
		form := "/v1/forms/" + SummaryForm(n)
		for _, q := range []struct{ name, target string }{{"All", form + "/summary"}, {"Filtered", form + "/summary?filter[country]=FR"}, {"Page", form + "/submissions?limit=100"}} {
			target := q.target
			for _, c := range []struct {
				name  string
				store formsapi.Store
				fresh bool
			}{{"Cached", cached, false}, {"Uncached", uncached, true}} {
				b.Run(strconv.Itoa(n)+"/"+q.name+"/"+c.name, func(b *testing.B) {
					h := formsapi.NewHandler(c.store, keys)
					handler := func() http.Handler { return h }
					if c.fresh {
						handler = func() http.Handler { return formsapi.NewHandler(c.store, keys) }
					}
					serveBench(b, handler, target, cpu)
				})
			}
		}
	}
}

// serveBench measures GET target with the API key, served by the handler
// that handler returns for each request (the same one, or a new one), after
// one request that must answer 200. It reports the process's CPU time per
// request as cpu-ns/op (on a shared machine ns/op counts the time other
// processes held the cores too), and the database server's as
// pg-cpu-ns/op from cpu when it is not nil and can tell.
func serveBench(b *testing.B, handler func() http.Handler, target string, cpu func() (time.Duration, bool)) {
	r := httptest.NewRequest("GET", target, nil)
	r.Header.Set("Authorization", "Bearer "+Key)
	w := &discard{h: http.Header{}}
	handler().ServeHTTP(w, r)
	if w.status != http.StatusOK {
		b.Fatalf("GET %s: status %d", target, w.status)
	}
	b.SetBytes(int64(w.n))
	var cpu0 time.Duration
	ok := cpu != nil
	if ok {
		cpu0, ok = cpu()
	}
	b.ReportAllocs()
	self0 := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h := handler()
		w.n = 0
		clear(w.h)
		h.ServeHTTP(w, r)
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-self0)/float64(b.N), "cpu-ns/op")
	if ok {
		if cpu1, ok := cpu(); ok {
			b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "pg-cpu-ns/op")
		}
	}
}

// ExportForm is the form the filtered export benchmarks fill
// (LoadExport) and export (RunExportFiltered).
const ExportForm = "export"

// ExportSubmissions is how many submissions LoadExport adds by default.
const ExportSubmissions = 100_000

// LoadExport adds the form ExportForm of Account, n wide submissions
// (WideSubmission) in it (ExportSubmissions, unless a run asks for the
// scale of issue 39's goals), and the key Key.
func LoadExport(b *testing.B, w formsapi.Writer, n int) {
	ctx := context.Background()
	if err := w.AddForm(ctx, Account, formsapi.Form{ID: ExportForm, Title: "Sign-ups"}); err != nil {
		b.Fatal(err)
	}
	if err := AddAll(ctx, w, n, 0, func(i int) (formsapi.Submission, formsapi.Metadata) { return WideSubmission(ExportForm, i) }, nil); err != nil {
		b.Fatal(err)
	}
	if err := w.AddKey(ctx, Key, Account); err != nil {
		b.Fatal(err)
	}
}

// ExportFilters are the exports RunExportFiltered measures, by name: the
// whole form, and filters that keep 1% (an equality on company, 1 in
// 97), 2% (an operator, teamSize gte 51), 1% (q, a search of "holdings 5
// ltd") and 50% (country in four of eight; teamSize lt 27, a range,
// which no index key narrows).
var ExportFilters = []struct{ Name, Query string }{
	{"all", ""},
	{"eq1pct", "filter[company]=" + url.QueryEscape("Example Holdings 5 Ltd")},
	{"gte2pct", "filter[teamSize][gte]=51"},
	{"q1pct", "q=" + url.QueryEscape("holdings 5 ltd")},
	{"in50pct", "filter[country][in]=NL,DE,FR,GB"},
	{"lt50pct", "filter[teamSize][lt]=27"},
}

// RunExportFiltered measures the whole export of ExportForm (LoadExport)
// as JSON Lines, unfiltered and with each of ExportFilters, one export
// an op, each served to a writer that counts its lines. It reports the
// process's CPU per export as cpu-ms/op, the database server's as
// pg-cpu-ms/op from cpu when it is not nil and can tell, and the lines
// written as rows/op.
func RunExportFiltered(b *testing.B, store formsapi.Store, keys formsapi.KeyResolver, cpu func() (time.Duration, bool)) {
	h := formsapi.NewHandler(store, keys)
	for _, c := range ExportFilters {
		b.Run(c.Name, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/v1/forms/"+ExportForm+"/export?"+c.Query, nil)
			r.Header.Set("Authorization", "Bearer "+Key)
			w := &lineCounter{h: http.Header{}}
			h.ServeHTTP(w, r)
			if w.status != http.StatusOK || w.lines == 0 {
				b.Fatalf("status %d, %d lines", w.status, w.lines)
			}
			rows := w.lines
			var cpu0 time.Duration
			ok := cpu != nil
			if ok {
				cpu0, ok = cpu()
			}
			self0 := processCPU()
			b.ResetTimer()
			for range b.N {
				h.ServeHTTP(w, r)
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-self0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			if ok {
				if cpu1, ok := cpu(); ok {
					b.ReportMetric(float64((cpu1-cpu0).Microseconds())/1000/float64(b.N), "pg-cpu-ms/op")
				}
			}
			b.ReportMetric(float64(rows), "rows/op")
		})
	}
}

// lineCounter is a response writer that counts the lines of a body.
type lineCounter struct {
	h      http.Header
	status int
	lines  int
}

func (d *lineCounter) Header() http.Header  { return d.h }
func (d *lineCounter) WriteHeader(code int) { d.status = code; d.lines = 0 }
func (d *lineCounter) Write(p []byte) (int, error) {
	d.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}
