package storetest

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
)

// exportStore is a store a handler can export from: the feed, and the
// write side to add and delete while it does.
type exportStore interface {
	writeStore
	formsapi.FeedStore
}

// exportSecret is the cursor secret of the handlers of the export
// clauses: the same on the store checked and on the reference, so that
// the same positions give the same refs and export positions.
var exportSecret = []byte("storetest export secret, 32 byte")

// exportOptions are the query strings the export clauses compare: both
// formats, with a byte order mark, and with formulas kept.
var exportOptions = []string{"format=jsonl", "format=csv", "format=csv&bom=true", "format=csv&formulas=keep",
	// Filtered exports (issue 39): an equality, a range, a prefix and a
	// search, each keeping some of the rows.
	"format=jsonl&filter[t]=true", "format=csv&filter[n][lt]=-20", "format=jsonl&filter[a][prefix]=%3D1", "format=csv&q=padded"}

// exportHandler is a handler over s that serves its feed (WithFeed, so a
// type that embeds one of this module's stores serves its own).
func exportHandler(s exportStore, opts ...formsapi.Option) http.Handler {
	return formsapi.NewHandler(s, s, append([]formsapi.Option{formsapi.WithFeed(s), formsapi.WithCursorSecret(exportSecret)}, opts...)...)
}

// exportGet requests target from h as KeyA and requires a 200.
func exportGet(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	r.Header.Set("Authorization", "Bearer "+KeyA)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %.300s", target, w.Code, w.Body)
	}
	return w
}

// exportPath is the export of FormBusy.
const exportPath = "/v1/forms/" + FormBusy + "/export"

// exportSubmissions are added to FormBusy by the export clauses, after
// the seed: formula triggers, nested values, numbers, null, quotes and
// commas, line breaks, non-ASCII text, and fields that first appear
// late; each at a time of its own.
func exportSubmissions(n int) []formsapi.Submission {
	subs := make([]formsapi.Submission, n)
	for i := range subs {
		data := fmt.Sprintf(`{"a":"=1+%d","b":{"c":[1,2]},"n":-%d.5,"t":true,"z":null,"q":"x,\"y\"","text":"%s"}`, i, i, strings.Repeat(`é,\"\n`, i%40))
		switch i % 7 {
		case 0:
			data = fmt.Sprintf(`{"late%d":"@x","a":"+","tab":"\tcell","cr":"\rcell"}`, i)
		case 3:
			data = fmt.Sprintf(`{"a":" padded ","-minus":"-%d","nul":"\u0000x","emoji":"😀"}`, i)
		}
		subs[i] = formsapi.Submission{FormID: FormBusy, Data: []byte(data), CreatedAt: base.Add(time.Duration(i) * time.Second)}
	}
	return subs
}

// exportClauses checks what the export needs of a store, through a
// handler over it, on a FeedStore with the write side: the same bytes as
// memstore's for the same data, a resumed export that continues the
// first byte for byte, and an export plus the feed from its token that
// is the form, while writers and deleters run.
func exportClauses(t *testing.T, open func(t *testing.T, seed Seed) exportStore, cfg *config) {
	seed := DefaultSeed()
	ctx := context.Background()
	add := func(t *testing.T, s formsapi.Writer, subs []formsapi.Submission) {
		t.Helper()
		seeds := make([]SeedSubmission, len(subs))
		for i, sub := range subs {
			seeds[i].Submission = sub
		}
		addAll(t, s, seeds)
	}

	t.Run("SameBytesAsMemstore", func(t *testing.T) {
		cfg.parallel(t)
		subs := exportSubmissions(60)
		s := open(t, seed)
		add(t, s, subs)
		ref := memstore.New()
		if err := Load(ctx, ref, seed); err != nil {
			t.Fatal(err)
		}
		add(t, ref, subs)
		got, want := exports(t, exportHandler(s)), exports(t, exportHandler(ref))
		// A store whose positions are not memstore's (they need not be
		// 1, 2, 3...) has other refs and positions: compare the rest.
		if !bytes.Equal(got[0], want[0]) {
			normal, wantNormal := renumber(t, got[0]), renumber(t, want[0])
			for i := range got {
				got[i], want[i] = []byte(normal.Replace(string(got[i]))), []byte(wantNormal.Replace(string(want[i])))
			}
		}
		for i, q := range exportOptions {
			whole := want[0] // the same format's unfiltered export
			if strings.HasPrefix(q, "format=csv") {
				whole = want[1]
			}
			if n, all := bytes.Count(want[i], []byte("\n")), bytes.Count(whole, []byte("\n")); strings.Contains(q, "filter") || strings.Contains(q, "q=") {
				if n < 2 || n >= all {
					t.Fatalf("?%s: memstore's export has %d lines of the whole's %d: the filter keeps too few or all", q, n, all)
				}
			}
			if !bytes.Equal(got[i], want[i]) {
				line := firstDiffLine(got[i], want[i])
				t.Errorf("?%s: not memstore's bytes; first differing line %d:\n got %q\nwant %q", q, line.n, line.got, line.want)
			}
		}
	})
	t.Run("Resume", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		add(t, s, exportSubmissions(300))
		h := exportHandler(s, formsapi.WithPageBytes(4096))
		r := rand.New(rand.NewPCG(25, 1))
		for _, q := range []string{"format=jsonl", "format=csv&bom=true", "format=jsonl&filter[n][lt]=-100"} {
			full := exportGet(t, h, exportPath+"?"+q).Body.Bytes()
			resumed, cuts := 0, 100
			if strings.Contains(q, "filter") {
				cuts = 30 // the filter's walk is the export's; the cuts are the clause's cost
			}
			for range cuts {
				cut := r.IntN(len(full))
				prefix, pos := completeLines(t, strings.HasPrefix(q, "format=csv"), full[:cut])
				target := exportPath + "?" + q
				if pos != "" {
					target += "&after=" + pos
					resumed++
				}
				rest := exportGet(t, h, target).Body.Bytes()
				if got := append(append([]byte(nil), prefix...), rest...); !bytes.Equal(got, full) {
					line := firstDiffLine(got, full)
					t.Fatalf("?%s cut at byte %d, resumed after %q: %d bytes, want the %d of the whole export; first differing line %d:\n got %q\nwant %q",
						q, cut, pos, len(got), len(full), line.n, line.got, line.want)
				}
			}
			if resumed < cuts/2 {
				t.Errorf("?%s: %d of %d cuts resumed after a position, want most", q, resumed, cuts)
			}
		}
	})
	t.Run("AsOfTokenWithWritersAndDeleters", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		pre := make([]SeedSubmission, 500)
		for i := range pre {
			pre[i] = SeedSubmission{formsapi.Submission{FormID: FormBusy, Data: []byte(fmt.Sprintf(`{"i":%d}`, i))}, formsapi.Metadata{ID: fmt.Sprint("pre-", i)}}
		}
		addAll(t, s, pre)
		h := exportHandler(s, formsapi.WithPageBytes(2048))
		srv := httptest.NewServer(h)
		defer srv.Close()
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { // a writer
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(fmt.Sprintf(`{"w":%d}`, i))}, formsapi.Metadata{ID: fmt.Sprint("w-", i)})
				runtime.Gosched()
			}
		}()
		go func() { // a deleter, of older and newer submissions
			defer wg.Done()
			for i := 0; !stop.Load() && i < 500; i += 3 {
				s.DeleteSubmission(ctx, AccountA, FormBusy, fmt.Sprint("pre-", 499-i))
				s.DeleteSubmission(ctx, AccountA, FormBusy, fmt.Sprint("w-", i/3))
			}
		}()
		req, _ := http.NewRequest("GET", srv.URL+exportPath, nil)
		req.Header.Set("Authorization", "Bearer "+KeyA)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("export: %d %v", res.StatusCode, err)
		}
		stop.Store(true)
		wg.Wait()
		copyOf := map[string]string{}
		for _, l := range parseLines(t, body) {
			copyOf[l.Ref] = string(l.Data)
		}
		items, deleted := feedFrom(t, h, res.Header.Get("Sync-Token"))
		for _, ref := range deleted {
			delete(copyOf, ref)
		}
		for ref, data := range items {
			copyOf[ref] = data
		}
		want, _ := feedFrom(t, h, "start")
		if len(want) != len(copyOf) {
			t.Fatalf("export + feed from its Sync-Token: %d submissions, the form has %d", len(copyOf), len(want))
		}
		for ref, data := range want {
			if copyOf[ref] != data {
				t.Fatalf("ref %s: %q in the copy, %q in the form", ref, copyOf[ref], data)
			}
		}
	})
}

// exports returns the export of FormBusy with each of exportOptions.
func exports(t *testing.T, h http.Handler) [][]byte {
	t.Helper()
	var bodies [][]byte
	for _, q := range exportOptions {
		bodies = append(bodies, exportGet(t, h, exportPath+"?"+q).Body.Bytes())
	}
	return bodies
}

// exportLine is one JSON Lines line.
type exportLine struct {
	Ref, Position string
	Data          json.RawMessage
}

func parseLines(t *testing.T, body []byte) []exportLine {
	t.Helper()
	var lines []exportLine
	for _, l := range bytes.SplitAfter(body, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var e exportLine
		if l[len(l)-1] != '\n' || json.Unmarshal(l, &e) != nil {
			t.Fatalf("not a JSON Lines line: %q", l)
		}
		lines = append(lines, e)
	}
	return lines
}

// renumber replaces each ref and position of a JSON Lines export by its
// line number, in any export of the same data: in a CSV export too, where
// one that begins with '-' has a ' before it (the formula rule), which
// goes with it, since whether it begins so depends on the store's
// positions and secret.
func renumber(t *testing.T, jsonl []byte) *strings.Replacer {
	t.Helper()
	var pairs []string
	for i, l := range parseLines(t, jsonl) {
		ref, pos := fmt.Sprint("ref#", i), fmt.Sprint("position#", i)
		pairs = append(pairs, "'"+l.Ref, ref, l.Ref, ref, "'"+l.Position, pos, l.Position, pos)
	}
	return strings.NewReplacer(pairs...)
}

type diffLine struct {
	n         int
	got, want string
}

// firstDiffLine finds the first line at which got and want differ.
func firstDiffLine(got, want []byte) diffLine {
	g, w := bytes.SplitAfter(got, []byte("\n")), bytes.SplitAfter(want, []byte("\n"))
	for i := 0; i < max(len(g), len(w)); i++ {
		var a, b []byte
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if !bytes.Equal(a, b) {
			return diffLine{i + 1, string(a), string(b)}
		}
	}
	return diffLine{}
}

// completeLines returns the part of a cut export that holds complete
// lines (CSV rows), and the position of the last of them ("" for none).
func completeLines(t *testing.T, isCSV bool, b []byte) ([]byte, string) {
	t.Helper()
	if !isCSV {
		end := bytes.LastIndexByte(b, '\n') + 1
		if end == 0 {
			return nil, ""
		}
		lines := parseLines(t, b[:end])
		return b[:end], lines[len(lines)-1].Position
	}
	// A row ends at a CRLF outside quotes.
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

// feedFrom reads FormBusy's feed through h from token to its end and
// returns its items' data by ref and the refs it deleted.
func feedFrom(t *testing.T, h http.Handler, token string) (items map[string]string, deleted []string) {
	t.Helper()
	items = map[string]string{}
	for {
		w := exportGet(t, h, "/v1/forms/"+FormBusy+"/submissions?limit=1000&sync="+url.QueryEscape(token))
		var p struct {
			Submissions []struct{ Data json.RawMessage }
			Refs        []string
			Deleted     []string
			SyncToken   string
			HasMore     bool
		}
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		for _, ref := range p.Deleted {
			delete(items, ref)
		}
		for i, ref := range p.Refs {
			items[ref] = string(p.Submissions[i].Data)
		}
		deleted = append(deleted, p.Deleted...)
		token = p.SyncToken
		if !p.HasMore {
			return items, deleted
		}
	}
}
