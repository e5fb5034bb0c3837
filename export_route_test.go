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
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

const exportPath = "/v1/forms/" + storetest.FormBusy + "/export"

// exportLine is one JSON Lines line.
type exportLine struct {
	Ref, Position string
	formsapi.Submission
}

func jsonLines(t *testing.T, body []byte) []exportLine {
	t.Helper()
	var lines []exportLine
	for _, l := range bytes.SplitAfter(body, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		if l[len(l)-1] != '\n' {
			t.Fatalf("a line without its \\n: %q", l)
		}
		var e exportLine
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		lines = append(lines, e)
	}
	return lines
}

// feedAll reads a form's feed from token to its end and returns its items
// by ref, the refs deleted, and the last token.
func feedAll(t *testing.T, h http.Handler, formID, token string) (items map[string]json.RawMessage, order []string, deleted []string, last string) {
	t.Helper()
	items = map[string]json.RawMessage{}
	for {
		res := do(t, h, "GET", "/v1/forms/"+formID+"/submissions?limit=1000&sync="+url.QueryEscape(token), bearer(storetest.KeyA)...)
		if res.status != http.StatusOK {
			t.Fatalf("feed: %d %s", res.status, res.body)
		}
		var p struct {
			Submissions []json.RawMessage
			Refs        []string
			Deleted     []string
			SyncToken   string
			HasMore     bool
		}
		if err := json.Unmarshal(res.body, &p); err != nil {
			t.Fatal(err)
		}
		for i, ref := range p.Refs {
			items[ref] = p.Submissions[i]
			order = append(order, ref)
		}
		for _, ref := range p.Deleted {
			delete(items, ref)
		}
		deleted = append(deleted, p.Deleted...)
		token = p.SyncToken
		if !p.HasMore {
			return items, order, deleted, token
		}
	}
}

// TestExportJSONLines: every submission of the feed, in commit order,
// with its ref and the very fields the feed gives, and the export's
// headers.
func TestExportJSONLines(t *testing.T) {
	t.Parallel()
	h := seededHandler(t)
	res := do(t, h, "GET", exportPath, bearer(storetest.KeyA)...)
	if res.status != http.StatusOK {
		t.Fatalf("%d %s", res.status, res.body)
	}
	for name, want := range map[string]string{
		"Content-Type":        "application/jsonl; charset=utf-8",
		"Accept-Ranges":       "none",
		"Cache-Control":       "private, no-cache",
		"Content-Disposition": `attachment; filename="` + storetest.FormBusy + `.jsonl"`,
	} {
		if got := res.header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if tag := res.header.Get("ETag"); strings.HasPrefix(tag, "W/") || tag == "" {
		t.Errorf("ETag %q, want a strong tag", tag)
	}
	items, order, _, _ := feedAll(t, h, storetest.FormBusy, "start")
	lines := jsonLines(t, res.body)
	if len(lines) != len(order) || len(lines) == 0 {
		t.Fatalf("%d lines, the feed has %d submissions", len(lines), len(order))
	}
	for i, l := range lines {
		if l.Ref != order[i] {
			t.Fatalf("line %d: ref %s, the feed's %d-th is %s", i, l.Ref, i, order[i])
		}
		var want formsapi.Submission
		json.Unmarshal(items[l.Ref], &want)
		if fmt.Sprint(want) != fmt.Sprint(l.Submission) {
			t.Errorf("line %d: %+v, the feed gives %+v", i, l.Submission, want)
		}
	}
	// The Sync-Token continues where the export ends: nothing more.
	rest, _, _, _ := feedAll(t, h, storetest.FormBusy, res.header.Get("Sync-Token"))
	if len(rest) != 0 {
		t.Errorf("the feed after the export's token has %d submissions", len(rest))
	}
	// A Range request gets the whole file; gzip is the same file.
	if r := do(t, h, "GET", exportPath, append(bearer(storetest.KeyA), "Range", "bytes=0-10")...); r.status != http.StatusOK || !bytes.Equal(r.body, res.body) {
		t.Errorf("a Range request: %d, %d bytes, want the whole 200", r.status, len(r.body))
	}
	gz := do(t, h, "GET", exportPath, append(bearer(storetest.KeyA), "Accept-Encoding", "gzip")...)
	zr, err := gzip.NewReader(bytes.NewReader(gz.body))
	if err != nil || gz.header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip: %v %v", err, gz.header)
	}
	if plain, err := io.ReadAll(zr); err != nil || !bytes.Equal(plain, res.body) {
		t.Errorf("the gzip body decodes to another file (%v)", err)
	}
	if gz.header.Get("ETag") == res.header.Get("ETag") {
		t.Error("the same strong tag with and without gzip")
	}
	// HEAD: the headers, no body.
	head := do(t, h, "HEAD", exportPath, bearer(storetest.KeyA)...)
	if head.status != http.StatusOK || len(head.body) != 0 || head.header.Get("ETag") != res.header.Get("ETag") {
		t.Errorf("HEAD: %d, %d bytes, tag %q", head.status, len(head.body), head.header.Get("ETag"))
	}
}

// TestExportBadInput: each bad parameter is a 400 naming it, before any
// byte of the file.
func TestExportBadInput(t *testing.T) {
	t.Parallel()
	h := seededHandler(t)
	lines := jsonLines(t, do(t, h, "GET", exportPath, bearer(storetest.KeyA)...).body)
	small := jsonLines(t, do(t, h, "GET", "/v1/forms/"+storetest.FormSmall+"/export", bearer(storetest.KeyA)...).body)
	feed := do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions?sync=start&limit=1", bearer(storetest.KeyA)...)
	var fp struct{ SyncToken, NextCursor string }
	json.Unmarshal(feed.body, &fp)
	list := do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions?limit=1", bearer(storetest.KeyA)...)
	var lp struct{ NextCursor string }
	json.Unmarshal(list.body, &lp)
	for query, param := range map[string]string{
		"format=xlsx":                            "format",
		"format=csv&format=csv":                  "format",
		"formt=csv":                              "formt",
		"limit=10":                               "limit",
		"bom=true":                               "bom",
		"format=csv&bom=yes":                     "bom",
		"formulas=keep":                          "formulas",
		"format=csv&formulas=off":                "formulas",
		"after=":                                 "after",
		"after=12":                               "after",
		"after=" + url.QueryEscape(fp.SyncToken): "after",
		"after=" + url.QueryEscape(lp.NextCursor): "after",
		"after=" + small[0].Position:              "after", // another form's
		"after=" + lines[0].Position + "x":        "after",
	} {
		res := do(t, h, "GET", exportPath+"?"+query, bearer(storetest.KeyA)...)
		var e struct{ Message string }
		json.Unmarshal(res.body, &e)
		if res.status != http.StatusBadRequest || !strings.HasPrefix(e.Message, "invalid "+param) && !strings.HasPrefix(e.Message, `invalid "`+param+`"`) {
			t.Errorf("?%s: %d %s, want a 400 naming %s", query, res.status, res.body, param)
		}
	}
	// The position of a line resumes; the sync token of the export is a
	// sync token, not a position.
	if res := do(t, h, "GET", exportPath+"?after="+lines[0].Position, bearer(storetest.KeyA)...); res.status != http.StatusOK {
		t.Errorf("after a line's position: %d", res.status)
	}
}

// TestExportScope: a form outside the key's scope, another account's
// form and a missing form get the same 404.
func TestExportScope(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	ctx := context.Background()
	scoped, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddKeyWith(ctx, scoped, storetest.AccountA, formsapi.KeyOptions{Forms: []string{storetest.FormSmall}}); err != nil {
		t.Fatal(err)
	}
	h := formsapi.NewHandler(s, s)
	missing := do(t, h, "GET", "/v1/forms/"+storetest.FormNone+"/export", bearer(storetest.KeyA)...)
	if missing.status != http.StatusNotFound {
		t.Fatalf("missing form: %d", missing.status)
	}
	for name, res := range map[string]response{
		"outside the scope": do(t, h, "GET", exportPath, bearer(scoped)...),
		"another account's": do(t, h, "GET", "/v1/forms/"+storetest.FormB+"/export", bearer(storetest.KeyA)...),
		"without a key":     do(t, h, "GET", exportPath),
	} {
		want := http.StatusNotFound
		if name == "without a key" {
			want = http.StatusUnauthorized
		} else if !bytes.Equal(res.body, missing.body) {
			t.Errorf("%s: %s, want the bytes of a missing form's 404", name, res.body)
		}
		if res.status != want {
			t.Errorf("%s: %d, want %d", name, res.status, want)
		}
	}
	if res := do(t, h, "GET", "/v1/forms/"+storetest.FormSmall+"/export", bearer(scoped)...); res.status != http.StatusOK {
		t.Errorf("inside the scope: %d", res.status)
	}
}

// FuzzExportAfter: whatever after, format, bom and formulas are, and
// whatever else the query holds, the export answers 200 or a 400 naming
// a parameter, never anything else, over memstore and sqlitestore
// (FuzzExportAfterPostgres: over pgstore). Its seed corpus runs with the
// package's tests; a long run of each:
//
//	go test -run '^$' -fuzz '^FuzzExportAfter$' -fuzztime 10m .
//	FORMSAPI_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	  go test -run '^$' -fuzz '^FuzzExportAfterPostgres$' -fuzztime 10m .
func FuzzExportAfter(f *testing.F) {
	ctx := context.Background()
	lite, err := sqlitestore.Open(filepath.Join(f.TempDir(), "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { lite.Close() })
	if err := storetest.Load(ctx, lite, storetest.DefaultSeed()); err != nil {
		f.Fatal(err)
	}
	mem := seeded(f)
	secret := formsapi.WithCursorSecret([]byte("fuzz export secret of 32 bytes!!"))
	fuzzExportAfter(f, formsapi.NewHandler(mem, mem, secret), formsapi.NewHandler(lite, lite, secret))
}

// FuzzExportAfterPostgres is FuzzExportAfter over pgstore; without
// FORMSAPI_TEST_POSTGRES it is skipped (it fails when CI is set).
func FuzzExportAfterPostgres(f *testing.F) {
	ctx := context.Background()
	pg := openPostgres(f, false)
	if err := storetest.Load(ctx, pg, storetest.DefaultSeed()); err != nil {
		f.Fatal(err)
	}
	fuzzExportAfter(f, formsapi.NewHandler(pg, pg, formsapi.WithCursorSecret([]byte("fuzz export secret of 32 bytes!!"))))
}

// fuzzExportAfter is the fuzz target of FuzzExportAfter over handlers,
// each over a store holding storetest's default seed. The seeds include
// the position and the ref of each handler's first line.
func fuzzExportAfter(f *testing.F, handlers ...http.Handler) {
	var seeds []struct{ after, format, bom, formulas, extra string }
	for _, h := range handlers {
		res := do(f, h, "GET", exportPath, bearer(storetest.KeyA)...)
		var first exportLine
		if res.status != http.StatusOK || json.Unmarshal(res.body[:max(bytes.IndexByte(res.body, '\n'), 0)], &first) != nil || first.Position == "" {
			f.Fatalf("export: %d %.200s", res.status, res.body)
		}
		p := first.Position
		seeds = append(seeds, []struct{ after, format, bom, formulas, extra string }{
			{p, "", "", "", ""}, {p, "csv", "true", "keep", ""}, {p[:21] + "B", "", "", "", ""},
			{first.Ref, "csv", "", "", "after=x"}, {p, "", "true", "", "sync=start"}, {p, "csv", "true", "keep", "format=jsonl"},
		}...)
	}
	seeds = append(seeds, []struct{ after, format, bom, formulas, extra string }{
		{"", "", "", "", ""}, {"0", "csv", "", "", ""}, {"-1", "jsonl", "false", "", ""}, {strings.Repeat("A", 22), "csv", "", "escape", ""},
		{"start", "CSV", "yes", "KEEP", ""}, {"%zz", "csv", "", "", "limit=5"},
	}...)
	for _, seed := range seeds {
		f.Add(seed.after, seed.format, seed.bom, seed.formulas, seed.extra)
	}
	f.Fuzz(func(t *testing.T, after, format, bom, formulas, extra string) {
		q := url.Values{}
		for name, v := range map[string]string{"after": after, "format": format, "bom": bom, "formulas": formulas} {
			if v != "" {
				q.Set(name, v)
			}
		}
		target := exportPath + "?" + q.Encode()
		if extra != "" {
			target += "&" + extra
		}
		for _, h := range handlers {
			r := httptest.NewRequest("GET", "/", nil)
			r.URL.RawQuery = strings.SplitN(target, "?", 2)[1]
			r.URL.Path = exportPath
			r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			switch w.Code {
			case http.StatusOK:
			case http.StatusBadRequest:
				if !bytes.HasPrefix(w.Body.Bytes(), []byte(`{"success":false,"message":"invalid `)) &&
					!bytes.HasPrefix(w.Body.Bytes(), []byte(`{"success":false,"message":"the query string is malformed`)) {
					t.Fatalf("?%s: a 400 that names no parameter: %s", r.URL.RawQuery, w.Body)
				}
			default:
				t.Fatalf("?%s: %d %s", r.URL.RawQuery, w.Code, w.Body)
			}
		}
	})
}

// feedPages counts the pages of the feed a handler reads (an observer's
// sync_submissions calls).
type feedPages struct{ n atomic.Int64 }

func (f *feedPages) Call(ctx context.Context, c observe.Call) (context.Context, func(error)) {
	if c.Op == observe.OpSyncSubmissions {
		f.n.Add(1)
	}
	return ctx, func(error) {}
}

func (f *feedPages) Request(context.Context, observe.Request) {}

// TestExportNotModifiedReadsNoRows: a 304 for an unchanged form reads
// the form's feed head only, no page of submissions; an addition or a
// deletion changes the tag.
func TestExportNotModifiedReadsNoRows(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	ctx := context.Background()
	pages := &feedPages{}
	h := formsapi.NewHandler(s, s, formsapi.WithObserver(pages))
	get := func(tag string) response {
		t.Helper()
		hdr := bearer(storetest.KeyA)
		if tag != "" {
			hdr = append(hdr, "If-None-Match", tag)
		}
		return do(t, h, "GET", exportPath+"?format=csv", hdr...)
	}
	first := get("")
	tag := first.header.Get("ETag")
	if first.status != http.StatusOK || tag == "" || pages.n.Load() == 0 {
		t.Fatalf("%d, tag %q, %d pages", first.status, tag, pages.n.Load())
	}
	pages.n.Store(0)
	if res := get(tag); res.status != http.StatusNotModified || len(res.body) != 0 || pages.n.Load() != 0 {
		t.Fatalf("with its tag: %d, %d bytes, %d pages read", res.status, len(res.body), pages.n.Load())
	}
	if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: json.RawMessage(`{"new":1}`)}, formsapi.Metadata{ID: "x"}); err != nil {
		t.Fatal(err)
	}
	added := get(tag)
	if added.status != http.StatusOK || added.header.Get("ETag") == tag {
		t.Fatalf("after an addition: %d, tag %q", added.status, added.header.Get("ETag"))
	}
	if err := s.DeleteSubmission(ctx, storetest.AccountA, storetest.FormBusy, "x"); err != nil {
		t.Fatal(err)
	}
	if res := get(added.header.Get("ETag")); res.status != http.StatusOK {
		t.Fatalf("after a deletion: %d", res.status)
	}
}

// TestExportStopsWhenTheClientGoes: a client that reads the first bytes
// of a large export and closes the connection stops the export's reads
// long before its end.
func TestExportStopsWhenTheClientGoes(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	ctx := context.Background()
	big := strings.Repeat("x", 500)
	const n = 20000
	for i := range n {
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: json.RawMessage(fmt.Sprintf(`{"i":%d,"t":"%s"}`, i, big))}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	obs, done := &feedPages{}, make(chan struct{})
	h := formsapi.NewHandler(s, s, formsapi.WithObserver(obs), formsapi.WithPageBytes(64<<10))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done) // also when the export breaks the response
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+exportPath, nil)
	req.Header.Set("Authorization", "Bearer "+storetest.KeyA)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(res.Body, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	res.Body.Close() // before reading to the end: the connection is closed
	<-done
	total := n * (len(big) + 40) / (64 << 10)
	if got := obs.n.Load(); got >= int64(total)/2 {
		t.Errorf("%d pages read after the client left; the whole export is about %d", got, total)
	}
}

// TestExportRateAccounting: an export costs one unit, and one more for
// every 100 submissions sent past the first 100, as paging through them
// with the default limit would; a key whose budget runs out mid-export
// gets a broken response, and its next request a 429.
func TestExportRateAccounting(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	ctx := context.Background()
	for i := range 450 {
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	// 453 submissions: 1 unit for the request, 4 more (past 100, 200,
	// 300 and 400).
	export := func(quota int) (complete bool, next int) {
		limiter := ratelimit.NewMemory()
		policy := ratelimit.Policy{Name: "test", Quota: quota, Window: time.Hour}
		srv := httptest.NewServer(formsapi.NewHandler(s, s, formsapi.WithRateLimit(ratelimit.Options{Limiter: limiter, Policy: policy})))
		defer srv.Close()
		get := func() (*http.Response, error) {
			req, _ := http.NewRequest("GET", srv.URL+"/v1/forms/"+storetest.FormSmall+"/export", nil)
			req.Header.Set("Authorization", "Bearer "+storetest.KeyA)
			return http.DefaultClient.Do(req)
		}
		res, err := get()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("quota %d: %v %v", quota, res, err)
		}
		_, err = io.ReadAll(res.Body)
		res.Body.Close()
		after, err2 := get()
		if err2 != nil {
			t.Fatal(err2)
		}
		after.Body.Close()
		return err == nil, after.StatusCode
	}
	if complete, next := export(5); !complete || next != http.StatusTooManyRequests {
		t.Errorf("a quota of exactly 5: complete %v, then %d; want the whole file, then 429", complete, next)
	}
	if complete, _ := export(4); complete {
		t.Error("a quota of 4 sent the whole export")
	}
	if complete, next := export(6); !complete || next != http.StatusOK {
		t.Errorf("a quota of 6: complete %v, then %d; want the whole file, then 200", complete, next)
	}
}

// TestExportOutlivesWriteTimeout: under a server whose WriteTimeout has
// passed before the handler writes anything (1 ns), a page cannot be
// sent but the export is, whole: each of its chunks has a deadline of
// its own.
func TestExportOutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	h := seededHandler(t, formsapi.WithPageBytes(512))
	want := do(t, h, "GET", exportPath, bearer(storetest.KeyA)...)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.WriteTimeout = time.Nanosecond
	srv.Start()
	defer srv.Close()
	get := func(path string) ([]byte, error) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+storetest.KeyA)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		return io.ReadAll(res.Body)
	}
	if _, err := get("/v1/forms/" + storetest.FormBusy + "/submissions"); err == nil {
		t.Fatal("a page went out past the server's WriteTimeout: the test shows nothing")
	}
	got, err := get(exportPath)
	if err != nil || !bytes.Equal(got, want.body) {
		t.Fatalf("the export under an expired WriteTimeout: %v, %d bytes, want %d", err, len(got), len(want.body))
	}
}
