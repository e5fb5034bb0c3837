package formsapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/storetest"
)

// filterCorpus adds n submissions to FormSmall whose data vary in the
// members the filter tests look at: color (a string, absent from every
// seventh), n (a number, a string in every eleventh), and name (text
// with accents, for q); every thirteenth has an attachment whose file
// name holds "zoe".
func filterCorpus(t *testing.T, s formsapi.Writer, n int) {
	t.Helper()
	ctx := context.Background()
	colors := []string{"red", "green", "Red", "blue"}
	names := []string{"Zoë Smith", "ZOE", "Bob", "zoey", "Chloé"}
	for i := range n {
		d := map[string]any{"i": i, "name": names[i%len(names)], "n": i % 100}
		if i%7 != 0 {
			d["color"] = colors[i%len(colors)]
		}
		if i%11 == 0 {
			d["n"] = fmt.Sprint(i % 100)
		}
		data, _ := json.Marshal(d)
		sub := formsapi.Submission{FormID: storetest.FormSmall, Data: data}
		if i%13 == 0 {
			sub.Attachments = []formsapi.Attachment{{FieldName: "cv", FileURL: fmt.Sprintf("https://files.example/%d/zoe-cv.pdf", i), FileSize: 10, MIMEType: "application/pdf"}}
		}
		if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
}

// trickyCorpus adds to FormSmall submissions whose data would fool a
// shortcut in the filtered export's check: a member named twice (the
// last counts, though the first is indexed too), a string written with
// escapes (equal to the plain one), a member of the same name nested
// (which no filter names), numbers written otherwise than their
// canonical text, a number's text as a string, and a value's text
// inside another string.
func trickyCorpus(t *testing.T, s formsapi.Writer) {
	t.Helper()
	for _, data := range []string{
		`{"i":1000,"color":"red","color":"blue","n":7}`,
		`{"i":1001,"color":"blue","color":"red","n":"7"}`,
		`{"i":1002,"color":"r\u0065d","n":5e1}`,
		`{"i":1003,"nested":{"color":"red","n":50},"tags":["red"]}`,
		`{"i":1004,"color":"red car","n":50.0}`,
		`{"i":1005,"note":"\"red\"","n":-0,"color":null}`,
		`{"i":1006,"color":"green","n":true}`,
		`{ "i" : 1007 , "color" : "blue" , "n" : 7.0 }`,
		`{"i":1008,"c\u006flor":"red","n":"50"}`,
	} {
		if err := s.AddSubmission(context.Background(), formsapi.Submission{FormID: storetest.FormSmall, Data: json.RawMessage(data)}, formsapi.Metadata{}); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
	}
}

// number reports whether v, a member decoded by encoding/json, is the
// number f.
func number(v any, f float64) bool {
	n, ok := v.(float64)
	return ok && n == f
}

// rawLines splits a JSON Lines body into its lines, each with its \n.
func rawLines(body []byte) [][]byte {
	var out [][]byte
	for _, l := range bytes.SplitAfter(body, []byte("\n")) {
		if len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// filterCases are the filters the tests export with, and the oracle of
// each: which submission's data, as the unfiltered export gives it, the
// filter keeps, computed here rather than by the package's matcher.
var filterCases = []struct {
	query string
	keeps func(data map[string]any, files []string) bool
}{
	{"filter[color]=red", func(d map[string]any, _ []string) bool { return d["color"] == "red" }},
	{"filter[n][gte]=50", func(d map[string]any, _ []string) bool {
		v, ok := d["n"].(float64)
		return ok && v >= 50
	}},
	{"filter[n][gte]=50&filter[color][ne]=blue", func(d map[string]any, _ []string) bool {
		v, ok := d["n"].(float64)
		return ok && v >= 50 && d["color"] != "blue"
	}},
	{"filter[color][exists]=false", func(d map[string]any, _ []string) bool { return d["color"] == nil }},
	{"filter[nothing]=1", func(map[string]any, []string) bool { return false }},
	{"filter[color][in]=red,blue", func(d map[string]any, _ []string) bool { return d["color"] == "red" || d["color"] == "blue" }},
	{"filter[n][in]=50,%227%22,true,null", func(d map[string]any, _ []string) bool {
		v, set := d["n"]
		return number(v, 50) || v == "7" || v == true || set && v == nil
	}},
	{"filter[n]=7&filter[color][in]=blue,green", func(d map[string]any, _ []string) bool {
		return number(d["n"], 7) && (d["color"] == "blue" || d["color"] == "green")
	}},
	{"filter[n]=0", func(d map[string]any, _ []string) bool { return number(d["n"], 0) }},
	{"filter[color]=null", func(d map[string]any, _ []string) bool { v, set := d["color"]; return set && v == nil }},
	// q: "Zoë Smith", "ZOE" and "zoey" hold zoe once normalized; "Chloé"
	// and "Bob" do not, but a file named zoe-cv.pdf does.
	{"q=zo%C3%AB", func(d map[string]any, files []string) bool {
		name, _ := d["name"].(string)
		return name == "Zoë Smith" || name == "ZOE" || name == "zoey" || len(files) > 0 && strings.Contains(files[0], "zoe")
	}},
	{"q=zoe&filter[color]=green", func(d map[string]any, files []string) bool {
		name, _ := d["name"].(string)
		return d["color"] == "green" && (name == "Zoë Smith" || name == "ZOE" || name == "zoey" || len(files) > 0)
	}},
}

// TestExportFiltered: on every store, a filtered export is the
// unfiltered export's lines that the filter keeps, byte for byte, as
// JSON Lines and as CSV (whose header keeps every column); resumed
// after any of its lines with the same filter it continues byte for
// byte; its tag is its own.
func TestExportFiltered(t *testing.T) {
	t.Parallel()
	for name, s := range exportStores(t) {
		t.Run(name, func(t *testing.T) {
			filterCorpus(t, s, 400)
			trickyCorpus(t, s)
			filterCorpus(t, s, 50)
			// Small pages: the export reads many, and a filter keeps
			// none of some.
			h := formsapi.NewHandler(s, s, formsapi.WithPageBytes(2048))
			path := "/v1/forms/" + storetest.FormSmall + "/export"
			get := func(query string, headers ...string) response {
				t.Helper()
				res := do(t, h, "GET", path+"?"+query, append(bearer(storetest.KeyA), headers...)...)
				if res.status != http.StatusOK {
					t.Fatalf("?%s: %d %s", query, res.status, res.body)
				}
				return res
			}
			full := get("")
			all := rawLines(full.body)
			subs := jsonLines(t, full.body)
			csvFull := get("format=csv")
			csvRows := strings.SplitAfter(string(csvFull.body), "\r\n")
			if len(all) < 400 || len(csvRows) != len(all)+2 { // header, rows, and the "" after the last CRLF
				t.Fatalf("%d lines, %d CSV rows", len(all), len(csvRows))
			}
			tags := map[string]string{"": full.header.Get("ETag")}
			for _, c := range filterCases {
				var want bytes.Buffer
				wantCSV := csvRows[0]
				for i, sub := range subs {
					var d map[string]any
					if err := json.Unmarshal(sub.Data, &d); err != nil {
						t.Fatal(err)
					}
					var files []string
					for _, a := range sub.Attachments {
						files = append(files, a.FileURL)
					}
					if c.keeps(d, files) {
						want.Write(all[i])
						wantCSV += csvRows[i+1]
					}
				}
				got := get(c.query)
				if !bytes.Equal(got.body, want.Bytes()) {
					t.Fatalf("?%s: %d lines, want the %d of the unfiltered export that it keeps", c.query, len(rawLines(got.body)), len(rawLines(want.Bytes())))
				}
				// As of the same position as the whole export: its
				// Sync-Token continues the feed where the form ends.
				if rest, _, _, _ := feedAll(t, h, storetest.FormSmall, got.header.Get("Sync-Token")); len(rest) != 0 {
					t.Errorf("?%s: the feed after its Sync-Token has %d submissions", c.query, len(rest))
				}
				if g := get(c.query + "&format=csv"); string(g.body) != wantCSV {
					t.Errorf("?%s&format=csv: %d bytes, want %d", c.query, len(g.body), len(wantCSV))
				}
				gz := get(c.query, "Accept-Encoding", "gzip")
				zr, err := gzip.NewReader(bytes.NewReader(gz.body))
				if err != nil {
					t.Fatal(err)
				}
				if plain, err := io.ReadAll(zr); err != nil || !bytes.Equal(plain, want.Bytes()) {
					t.Errorf("?%s gzip-coded: another file (%v)", c.query, err)
				}
				tag := got.header.Get("ETag")
				for q, other := range tags {
					if other == tag {
						t.Errorf("?%s has the tag of ?%s", c.query, q)
					}
				}
				tags[c.query] = tag
				if r := do(t, h, "GET", path+"?"+c.query, append(bearer(storetest.KeyA), "If-None-Match", tag)...); r.status != http.StatusNotModified {
					t.Errorf("?%s with its own tag: %d, want 304", c.query, r.status)
				}
				// Resumed after its first, a middle and its last line,
				// with the same filter: the rest, byte for byte.
				lines := jsonLines(t, got.body)
				raw := rawLines(got.body)
				for _, k := range []int{0, len(lines) / 2, len(lines) - 1} {
					if k < 0 || k >= len(lines) {
						continue
					}
					rest := get(c.query + "&after=" + url.QueryEscape(lines[k].Position))
					if !bytes.Equal(rest.body, bytes.Join(raw[k+1:], nil)) {
						t.Errorf("?%s resumed after line %d of %d: %d bytes, want the %d that follow it", c.query, k, len(lines), len(rest.body), len(bytes.Join(raw[k+1:], nil)))
					}
				}
			}
		})
	}
}

// TestExportFilterResumedWithAnother: after is a plain position, so a
// resume with another filter (or none) continues from it with the filter
// it gives: the rest of that other export, as documented.
func TestExportFilterResumedWithAnother(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	filterCorpus(t, s, 100)
	h := formsapi.NewHandler(s, s)
	path := "/v1/forms/" + storetest.FormSmall + "/export"
	red := jsonLines(t, do(t, h, "GET", path+"?filter[color]=red", bearer(storetest.KeyA)...).body)
	all := do(t, h, "GET", path, bearer(storetest.KeyA)...).body
	cut := red[len(red)/2].Position
	rest := do(t, h, "GET", path+"?after="+url.QueryEscape(cut), bearer(storetest.KeyA)...)
	i := bytes.Index(all, []byte(cut))
	if i < 0 {
		t.Fatal("the filtered line is not in the unfiltered export")
	}
	end := i + bytes.IndexByte(all[i:], '\n') + 1
	if rest.status != http.StatusOK || !bytes.Equal(rest.body, all[end:]) {
		t.Errorf("a filtered export resumed without its filter: %d, %d bytes, want the unfiltered rest", rest.status, len(rest.body))
	}
}

// TestExportBadFilters: a bad filter or search is the 400 the
// submissions list gives for it, with the same message, before any
// byte of the file.
func TestExportBadFilters(t *testing.T) {
	t.Parallel()
	h := seededHandler(t)
	nine := ""
	for i := range 9 {
		nine += fmt.Sprintf("&filter[f%d]=1", i)
	}
	for _, query := range []string{
		"filter=1",
		"filter[a][foo]=1",
		"filter[]=1",
		"filter[a=1",
		"filter[a]=1&filter[a]=2",
		"filter[a]=1&filter[a][eq]=1",
		"filter[a][gte]=true",
		"filter[a][in]=",
		"filter[" + strings.Repeat("x", 65) + "]=1",
		"filter[a]=" + url.QueryEscape(`"`+strings.Repeat("x", 300)+`"`),
		nine[1:],
		"q=a",
		"q=" + strings.Repeat("x", 1000),
		"q=abc&q=abd",
	} {
		var list, export struct{ Message string }
		lr := do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions?"+query, bearer(storetest.KeyA)...)
		er := do(t, h, "GET", exportPath+"?"+query, bearer(storetest.KeyA)...)
		json.Unmarshal(lr.body, &list)
		json.Unmarshal(er.body, &export)
		if lr.status != http.StatusBadRequest || er.status != http.StatusBadRequest || export.Message != list.Message || !strings.HasPrefix(export.Message, "invalid ") {
			t.Errorf("?%.60s: the list %d %q, the export %d %q; want the same 400", query, lr.status, list.Message, er.status, export.Message)
		}
		if ct := er.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("?%.60s: the export's 400 is %s", query, ct)
		}
	}
}

// TestExportFilterWalkIsCharged: a filter that keeps nothing still
// costs its walk: one unit for the request and one more for every 1,000
// submissions checked past the first 1,000, as filtered pages of the
// list that check as many would, on every store, those that a database
// store leaves out by their keys too; the limiter's refusal breaks it.
func TestExportFilterWalkIsCharged(t *testing.T) {
	t.Parallel()
	for name, s := range exportStores(t) {
		t.Run(name, func(t *testing.T) {
			filterCorpus(t, s, 2497) // 2,500 with the 3 seeded: 1 + 2 units
			// An equality (the database stores leave out by their keys the
			// submissions that cannot match, unread, and the walk still
			// counts them), an in, and an operator no key narrows.
			for _, filter := range []string{"filter[nothing]=1", "filter[color][in]=purple,cyan", "filter[n][gt]=1000"} {
				export := func(quota int) (complete bool, lines int) {
					limiter := ratelimit.NewMemory()
					policy := ratelimit.Policy{Name: "test", Quota: quota, Window: time.Hour}
					srv := httptest.NewServer(formsapi.NewHandler(s, s, formsapi.WithRateLimit(ratelimit.Options{Limiter: limiter, Policy: policy})))
					defer srv.Close()
					req, _ := http.NewRequest("GET", srv.URL+"/v1/forms/"+storetest.FormSmall+"/export?"+filter, nil)
					req.Header.Set("Authorization", "Bearer "+storetest.KeyA)
					res, err := http.DefaultClient.Do(req)
					if err != nil || res.StatusCode != http.StatusOK {
						t.Fatalf("quota %d: %v %v", quota, res, err)
					}
					defer res.Body.Close()
					body, err := io.ReadAll(res.Body)
					return err == nil, len(rawLines(body))
				}
				if complete, n := export(3); !complete || n != 0 {
					t.Errorf("?%s, a quota of 3: complete %v, %d lines; want the whole (empty) file", filter, complete, n)
				}
				if complete, _ := export(2); complete {
					t.Errorf("?%s, a quota of 2 walked the whole form: the walk is not charged", filter)
				}
			}
		})
	}
}

// clockedFeed is a host's store whose every feed read moves the
// handler's clock an hour on: a walk of many pages is hours long to the
// handler.
type clockedFeed struct {
	formsapi.Store
	feed  formsapi.FeedStore
	clock *fakeClock
}

func (c clockedFeed) SyncSubmissions(ctx context.Context, accountID, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	c.clock.advance(time.Hour)
	return c.feed.SyncSubmissions(ctx, accountID, formID, after, limit)
}

// fakeClock is a clock that moves when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// deadlineRecorder is a response writer with write deadlines, which
// records the deadline in force, and the clock, at each write.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	clock    *fakeClock
	deadline time.Time
	writes   []time.Duration // the deadline less the clock, at each write
}

func (d *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	d.deadline = t
	return nil
}

func (d *deadlineRecorder) Write(b []byte) (int, error) {
	d.writes = append(d.writes, d.deadline.Sub(d.clock.now()))
	return d.ResponseRecorder.Write(b)
}

func (d *deadlineRecorder) FlushError() error {
	d.ResponseRecorder.Flush()
	return nil
}

// TestExportFilterWalkOutlivesTheStallTimeout: a filter that keeps only
// the last submission of a form walks thousands of entries (hours, to the
// handler's clock, many times its stall timeout) before its first line,
// and that line is written under a deadline a full stall timeout from its
// write's start, not one that passed during the walk: the walk is not a
// stall, and does not break the file.
func TestExportFilterWalkOutlivesTheStallTimeout(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	filterCorpus(t, s, 3000)
	clock := &fakeClock{t: time.Now()}
	const stall = 5 * time.Second
	h := formsapi.NewHandler(clockedFeed{Store: s, feed: s, clock: clock}, s, formsapi.WithClock(clock.now), formsapi.WithDeadlineClock(clock.now),
		formsapi.WithRateLimit(ratelimit.Options{StallTimeout: stall}))
	for query, last := range map[string]string{"filter[i]=2999": `"i":2999`, "filter[i]=2999&format=csv": ",2999,", "q=zoey&filter[i][gte]=2990": `"i":2998`} {
		rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder(), clock: clock}
		start := clock.now()
		r := httptest.NewRequest("GET", "/v1/forms/"+storetest.FormSmall+"/export?"+query, nil)
		r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
		h.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK || len(rec.writes) == 0 {
			t.Fatalf("?%s: %d, %d writes", query, rec.Code, len(rec.writes))
		}
		if walked := clock.now().Sub(start); walked < 100*stall {
			t.Fatalf("?%s: the walk took %v to the handler's clock: the test shows nothing", query, walked)
		}
		for i, left := range rec.writes {
			if left != stall {
				t.Errorf("?%s: write %d of %d under a deadline %v from its start, want the stall timeout, %v", query, i, len(rec.writes), left, stall)
			}
		}
		if !strings.Contains(rec.Body.String(), last) {
			t.Errorf("?%s: the last match is not in the file: %q", query, rec.Body.String())
		}
	}
}

// FuzzExportFilters: for any query string of filter and q parameters,
// the export of the find form answers as the submissions list does, on
// every store: the same 400 with the same message, or a file of exactly
// the submissions that walking the list's pages gives.
//
//	go test -run '^$' -fuzz FuzzExportFilters -fuzztime 2m .
func FuzzExportFilters(f *testing.F) {
	for _, q := range []string{
		"filter[tag]=t1", "filter[score]=42.0", "filter[name]=%22Zo%C3%AB%22", "filter[a][gt]=1",
		"filter[]=1", "filter=1", "filter[a]=", "filter[a]=1e999", "filter[a]=%22x", "filter[a]=1&filter[a]=2",
		"filter[%00]=%FF", "filter[n]=-0", "filter[n][gte]=3&filter[n][lt]=9", "filter[tag][in]=t0,t2",
		"filter[tag][exists]=false", "filter[name][prefix]=zo", "filter[tag][ne]=t1&q=zoe",
		"q=zoe", "q=ZO%C3%8B&filter[tag]=t0", "q=ab", "q=%FF%FE%FD", "q=42", "q=zoe&q=zoe",
		"filter[name]=%22%5Cud800%22",
	} {
		f.Add(q)
	}
	stores, m := everyStore(f, storetest.FindSeed())
	f.Fuzz(func(t *testing.T, query string) {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return // the list's and the export's "malformed" differ in nothing the test could tell
		}
		for name := range vals {
			if name != "q" && name != "filter" && !strings.HasPrefix(name, "filter[") {
				return // a parameter of the list alone: the export refuses it
			}
		}
		for name, s := range stores {
			h := formsapi.NewHandler(s, m)
			status, want := fuzzWalk(t, h, query)
			r := httptest.NewRequest("GET", "/v1/forms/"+storetest.FormFind+"/export", nil)
			r.URL.RawQuery = query
			r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != status {
				t.Fatalf("%s ?%s: the export answers %d, the list %d: %s", name, query, w.Code, status, w.Body)
			}
			if status != http.StatusOK {
				lr := httptest.NewRequest("GET", findPath, nil)
				lr.URL.RawQuery = query
				lr.Header.Set("Authorization", "Bearer "+storetest.KeyA)
				lw := httptest.NewRecorder()
				h.ServeHTTP(lw, lr)
				var le, ee struct{ Message string }
				json.Unmarshal(lw.Body.Bytes(), &le)
				json.Unmarshal(w.Body.Bytes(), &ee)
				if le.Message != ee.Message {
					t.Fatalf("%s ?%s: the export says %q, the list %q", name, query, ee.Message, le.Message)
				}
				continue
			}
			var got []int
			for _, l := range jsonLines(t, w.Body.Bytes()) {
				var d struct{ N int }
				if err := json.Unmarshal(l.Data, &d); err != nil {
					t.Fatal(err)
				}
				got = append(got, d.N)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("%s ?%s: the export has %v, the list's pages %v", name, query, got, want)
			}
		}
	})
}

// writeRecorder records, at each write of the body, the clock's time.
type writeRecorder struct {
	*httptest.ResponseRecorder
	clock  *fakeClock
	writes []time.Time
}

func (w *writeRecorder) Write(b []byte) (int, error) {
	w.writes = append(w.writes, w.clock.now())
	return w.ResponseRecorder.Write(b)
}

func (w *writeRecorder) FlushError() error {
	w.ResponseRecorder.Flush()
	return nil
}

// TestExportFilterKeepAlive: a filtered export that keeps nothing of a
// long walk (an hour a page, to the handler's clock) sends what its
// format opens with at once (the CSV's header; the gzip header), and,
// coded with gzip, an empty deflate block between pages once nothing was
// sent for the keep-alive interval, so a proxy's idle timeout does not
// cut it; decoded, the file is the one without them. Without gzip, JSON
// Lines has nothing to send before a line, and sends nothing. With a
// clock that does not move, no keep-alive is sent.
func TestExportFilterKeepAlive(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	filterCorpus(t, s, 3000)
	for _, c := range []struct {
		query string
		gz    bool
		early bool // a write before the walk's end
		alive bool // writes between pages
	}{
		{"filter[i]=-1", true, true, true},
		{"filter[i]=-1&format=csv", true, true, true},
		{"filter[i]=-1&format=csv", false, true, false},
		{"filter[i]=-1", false, false, false},
	} {
		for _, moving := range []bool{true, false} {
			clock := &fakeClock{t: time.Now()}
			var store formsapi.Store = s
			if moving {
				store = clockedFeed{Store: s, feed: s, clock: clock}
			}
			h := formsapi.NewHandler(store, s, formsapi.WithClock(clock.now), formsapi.WithDeadlineClock(clock.now))
			rec := &writeRecorder{ResponseRecorder: httptest.NewRecorder(), clock: clock}
			r := httptest.NewRequest("GET", "/v1/forms/"+storetest.FormSmall+"/export?"+c.query, nil)
			r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
			if c.gz {
				r.Header.Set("Accept-Encoding", "gzip")
			}
			h.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Fatalf("?%s: %d %s", c.query, rec.Code, rec.Body)
			}
			body := rec.Body.Bytes()
			if c.gz {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatalf("?%s gzip: the body does not decode: %v", c.query, err)
				}
			}
			if want := strings.Contains(c.query, "csv"); want != (len(body) > 0) || want && bytes.Count(body, []byte("\r\n")) != 1 {
				t.Errorf("?%s gzip %v: decoded body %q, want the header alone for CSV, nothing for JSON Lines", c.query, c.gz, body)
			}
			end := clock.now()
			before := 0 // writes before the walk's end
			for _, at := range rec.writes {
				if at.Before(end) {
					before++
				}
			}
			if !moving {
				if n := len(rec.writes); c.gz && n != 2 || !c.gz && n > 1 {
					t.Errorf("?%s gzip %v, a clock that does not move: %d writes, want %d", c.query, c.gz, n, map[bool]int{true: 2, false: 1}[c.gz])
				}
				continue
			}
			if early := before > 0; early != c.early {
				t.Errorf("?%s gzip %v: %d writes before the walk's end, want some: %v", c.query, c.gz, before, c.early)
			}
			if alive := before > 2; alive != c.alive {
				t.Errorf("?%s gzip %v: %d writes before the walk's end, want keep-alives between pages: %v", c.query, c.gz, before, c.alive)
			}
		}
	}
}
