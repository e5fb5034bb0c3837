package formsapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/pgstore"
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

// TestExportResumesByteIdentical cuts the export at 100 random byte
// offsets, in both formats, resumes each from the last complete line,
// and requires the concatenation to be the uninterrupted export.
func TestExportResumesByteIdentical(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	ctx := context.Background()
	// More submissions, some large, so pages and chunks end mid-file.
	for i := range 300 {
		data := fmt.Sprintf(`{"name":"n%d","text":"%s","=x":"-%d","n":%d}`, i, strings.Repeat(`é,\"\n`, i%40), i, i)
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: json.RawMessage(data)}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	h := formsapi.NewHandler(s, s, formsapi.WithPageBytes(4096))
	r := rand.New(rand.NewPCG(25, 1))
	for _, format := range []string{"jsonl", "csv"} {
		full := do(t, h, "GET", exportPath+"?format="+format, bearer(storetest.KeyA)...)
		if full.status != http.StatusOK {
			t.Fatalf("%s: %d %s", format, full.status, full.body)
		}
		for range 100 {
			cut := r.IntN(len(full.body))
			prefix, pos := completeLines(t, format, full.body[:cut])
			target := exportPath + "?format=" + format
			if pos != "" {
				target += "&after=" + pos
			}
			rest := do(t, h, "GET", target, bearer(storetest.KeyA)...)
			if rest.status != http.StatusOK {
				t.Fatalf("%s: resume at %d: %d %s", format, cut, rest.status, rest.body)
			}
			if got := append(append([]byte(nil), prefix...), rest.body...); !bytes.Equal(got, full.body) {
				t.Fatalf("%s: cut at %d, resumed after %q: %d bytes, want the %d of the whole export", format, cut, pos, len(got), len(full.body))
			}
		}
	}
}

// completeLines returns the part of a cut export that holds complete
// lines (rows), and the position of the last of them ("" for none).
func completeLines(t *testing.T, format string, b []byte) ([]byte, string) {
	t.Helper()
	if format == "jsonl" {
		end := bytes.LastIndexByte(b, '\n') + 1
		if end == 0 {
			return nil, ""
		}
		lines := jsonLines(t, b[:end])
		return b[:end], lines[len(lines)-1].Position
	}
	// CSV: a row ends at a CRLF outside quotes.
	quoted, end, rows := false, 0, 0
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"':
			quoted = !quoted
		case !quoted && b[i] == '\n' && i > 0 && b[i-1] == '\r':
			end, rows = i+1, rows+1
		}
	}
	if rows < 2 { // the header alone, or less: start over
		return nil, ""
	}
	recs, err := csv.NewReader(bytes.NewReader(b[:end])).ReadAll()
	if err != nil {
		t.Fatalf("CSV prefix: %v", err)
	}
	return b[:end], recs[len(recs)-1][1]
}

// TestExportAsOfTokenWithWritersAndDeleters: while writers add and
// deleters delete, an export plus the feed from its Sync-Token is exactly
// the form's submissions afterwards.
func TestExportAsOfTokenWithWritersAndDeleters(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	ctx := context.Background()
	for i := range 500 {
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}, formsapi.Metadata{ID: fmt.Sprint("pre-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	h := formsapi.NewHandler(s, s, formsapi.WithPageBytes(2048))
	srv := httptest.NewServer(h)
	defer srv.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // a writer
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: json.RawMessage(fmt.Sprintf(`{"w":%d}`, i))}, formsapi.Metadata{ID: fmt.Sprint("w-", i)})
			runtime.Gosched()
		}
	}()
	go func() { // a deleter, of older and newer submissions
		defer wg.Done()
		for i := 0; !stop.Load() && i < 500; i += 3 {
			s.DeleteSubmission(ctx, storetest.AccountA, storetest.FormBusy, fmt.Sprint("pre-", 499-i))
			s.DeleteSubmission(ctx, storetest.AccountA, storetest.FormBusy, fmt.Sprint("w-", i/3))
		}
	}()
	req, _ := http.NewRequest("GET", srv.URL+exportPath, nil)
	req.Header.Set("Authorization", "Bearer "+storetest.KeyA)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	copyOf := map[string]string{}
	// Read slowly, line by line, so the writers run during the export.
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("%d %v", res.StatusCode, err)
	}
	for _, l := range jsonLines(t, body) {
		copyOf[l.Ref] = string(l.Data)
	}
	stop.Store(true)
	wg.Wait()
	items, _, _, _ := feedAll(t, h, storetest.FormBusy, res.Header.Get("Sync-Token"))
	_, _, deleted, _ := feedAll(t, h, storetest.FormBusy, res.Header.Get("Sync-Token"))
	for ref, sub := range items {
		var v struct{ Data json.RawMessage }
		json.Unmarshal(sub, &v)
		copyOf[ref] = string(v.Data)
	}
	for _, ref := range deleted {
		delete(copyOf, ref)
	}
	want, _, _, _ := feedAll(t, h, storetest.FormBusy, "start")
	if len(want) != len(copyOf) {
		t.Fatalf("export + feed: %d submissions, the form has %d", len(copyOf), len(want))
	}
	for ref, sub := range want {
		var v struct{ Data json.RawMessage }
		json.Unmarshal(sub, &v)
		if copyOf[ref] != string(v.Data) {
			t.Fatalf("ref %s: %q in the copy, %q in the form", ref, copyOf[ref], v.Data)
		}
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

// TestExportIdenticalAcrossStores: the same seed and secret give the
// same bytes from memstore, sqlitestore and pgstore (when configured), in
// every format and option.
func TestExportIdenticalAcrossStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	secret := []byte("an export secret of thirty-two bytes!")
	type both interface {
		formsapi.Store
		formsapi.KeyResolver
		formsapi.Writer
	}
	stores := map[string]both{"memstore": memstore.New()}
	lite, err := sqlitestore.Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	stores["sqlitestore"] = lite
	if os.Getenv(pgtest.EnvVar) != "" {
		dsn, schema := pgtest.Schema(t)
		pg, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pg.Close() })
		stores["pgstore"] = pg
	}
	seed := storetest.DefaultSeed()
	var want map[string][]byte
	for name, s := range stores {
		if err := storetest.Load(ctx, s, seed); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range 40 {
			data := fmt.Sprintf(`{"a":"=1+%d","b":{"c":[1,2]},"n":-%d.5,"t":true,"z":null,"q":"x,\"y\""}`, i, i)
			if i%7 == 0 {
				data = fmt.Sprintf(`{"late%d":"@x","a":"+"}`, i)
			}
			if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: json.RawMessage(data), CreatedAt: time.Date(2024, 3, 1, 0, 0, i, 0, time.UTC)}, formsapi.Metadata{}); err != nil {
				t.Fatal(err)
			}
		}
		h := formsapi.NewHandler(s, s, formsapi.WithCursorSecret(secret))
		got := map[string][]byte{}
		for _, q := range []string{"", "format=csv", "format=csv&bom=true", "format=csv&formulas=keep"} {
			res := do(t, h, "GET", exportPath+"?"+q, bearer(storetest.KeyA)...)
			if res.status != http.StatusOK {
				t.Fatalf("%s ?%s: %d %s", name, q, res.status, res.body)
			}
			got[q] = res.body
		}
		if want == nil {
			want = got
			continue
		}
		for q := range want {
			if !bytes.Equal(want[q], got[q]) {
				t.Errorf("%s ?%s: not the bytes of the other stores:\n%s\nwant\n%s", name, q, got[q], want[q])
			}
		}
	}
}

// FuzzExportAfter: whatever after is, the export answers 200 or a 400
// naming after, never anything else.
func FuzzExportAfter(f *testing.F) {
	s := seeded(f)
	h := formsapi.NewHandler(s, s)
	lines := do(f, h, "GET", exportPath, bearer(storetest.KeyA)...).body
	var first exportLine
	json.Unmarshal(lines[:bytes.IndexByte(lines, '\n')], &first)
	for _, seed := range []string{first.Position, "", "0", "-1", strings.Repeat("A", 22), first.Position[:21] + "B", "start"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, after string) {
		res := do(t, h, "GET", exportPath+"?after="+url.QueryEscape(after), bearer(storetest.KeyA)...)
		switch res.status {
		case http.StatusOK:
		case http.StatusBadRequest:
			if !bytes.HasPrefix(res.body, []byte(`{"success":false,"message":"invalid after`)) {
				t.Fatalf("after=%q: %s", after, res.body)
			}
		default:
			t.Fatalf("after=%q: %d %s", after, res.status, res.body)
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
