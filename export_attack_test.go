package formsapi_test

// The export attacked from outside, over real HTTP (httptest servers over
// real stores): the same bytes from every store through gzip, a gzip
// stream cut and resumed, a key revoked mid-export, after= of a form
// deleted and created again, one key's 32 exports at once, and a server
// that dies mid-export.

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
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

var attackSecret = []byte("export attack secret of 32 bytes")

// attackData adds n submissions to FormBusy of s, some of them with cells
// a spreadsheet would run, nested values and non-ASCII text.
func attackData(t *testing.T, s formsapi.Writer, n int) {
	t.Helper()
	for i := range n {
		data := fmt.Sprintf(`{"name":"n%d","f":" =1+%d","bom":"\ufeff@x","nested":{"a":[%d,"é"]},"x":%d.5,"pad":"%s"}`, i, i, i, i, strings.Repeat("y", i%300))
		at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
		if err := s.AddSubmission(context.Background(), formsapi.Submission{FormID: storetest.FormBusy, Data: json.RawMessage(data), CreatedAt: at}, formsapi.Metadata{ID: fmt.Sprint("s", i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// getExport GETs target from srv with key, raw (gzip not decoded by the
// client), and returns the response with its body read as far as it
// goes and the error that ended it (nil: a clean end).
func getExport(t *testing.T, url, key string, gz bool) (*http.Response, []byte, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res, body, err
}

// gunzipPrefix decodes as much of the gzip stream b (maybe cut anywhere)
// as it holds.
func gunzipPrefix(b []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil // the cut is inside gzip's header
	}
	out, _ := io.ReadAll(zr) // io.ErrUnexpectedEOF at the cut
	return out
}

// lastCompleteLine returns the prefix of the JSON Lines file b up to its
// last complete line and that line's position ("" if none).
func lastCompleteLine(t *testing.T, b []byte) ([]byte, string) {
	t.Helper()
	end := bytes.LastIndexByte(b, '\n') + 1
	if end == 0 {
		return nil, ""
	}
	start := bytes.LastIndexByte(b[:end-1], '\n') + 1
	var l struct{ Position string }
	if err := json.Unmarshal(b[start:end], &l); err != nil {
		t.Fatalf("line %q: %v", b[start:end], err)
	}
	return b[:end], l.Position
}

// withoutPositions returns file b with each line's ref and position (a
// store's own feed positions, which need not be memstore's) replaced by
// the line's number.
func withoutPositions(b []byte) []byte {
	var out []byte
	for i, line := range bytes.SplitAfter(b, []byte("\n")) {
		switch {
		case bytes.HasPrefix(line, []byte(`{"ref":"`)):
			_, rest, _ := bytes.Cut(line, []byte(`","position":"`))
			_, rest, _ = bytes.Cut(rest, []byte(`"`))
			line = append([]byte(fmt.Sprintf(`{"line":%d`, i)), rest...)
		case i > 0: // a CSV row past the header; ref and position are never quoted
			cells := bytes.SplitN(line, []byte(","), 3)
			if len(cells) == 3 {
				line = append([]byte(fmt.Sprintf("line %d,", i)), cells[2]...)
			}
		}
		out = append(out, line...)
	}
	return out
}

// TestExportSameBytesOverHTTP: over real HTTP, with gzip and without, the
// export of the same data is the same file from memstore, sqlitestore and
// pgstore (when configured), in both formats, byte for byte but for the
// refs and positions, which name each store's own feed positions.
func TestExportSameBytesOverHTTP(t *testing.T) {
	t.Parallel()
	files := map[string]map[string][]byte{} // query → store → file
	for name, s := range exportStores(t) {
		attackData(t, s, 250)
		srv := httptest.NewServer(formsapi.NewHandler(s, s, formsapi.WithFeed(s), formsapi.WithCursorSecret(attackSecret), formsapi.WithPageBytes(8192)))
		for _, q := range []string{"format=jsonl", "format=csv", "format=csv&bom=true&formulas=keep"} {
			for _, gz := range []bool{false, true} {
				res, body, err := getExport(t, srv.URL+exportPath+"?"+q, storetest.KeyA, gz)
				if err != nil || res.StatusCode != http.StatusOK {
					t.Fatalf("%s ?%s gzip %v: %d %v", name, q, gz, res.StatusCode, err)
				}
				if gz != (res.Header.Get("Content-Encoding") == "gzip") {
					t.Fatalf("%s ?%s gzip %v: Content-Encoding %q", name, q, gz, res.Header.Get("Content-Encoding"))
				}
				if gz {
					zr, err := gzip.NewReader(bytes.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					if body, err = io.ReadAll(zr); err != nil {
						t.Fatalf("%s ?%s: the gzip stream: %v", name, q, err)
					}
				}
				k := fmt.Sprintf("%s gzip=%v", q, gz)
				if files[k] == nil {
					files[k] = map[string][]byte{}
				}
				files[k][name] = withoutPositions(body)
			}
		}
		srv.Close()
	}
	for k, byStore := range files {
		want := byStore["memstore"]
		if len(want) == 0 || !bytes.Contains(want, []byte("n249")) {
			t.Fatalf("%s: memstore's file lacks the last submission:\n%.300s", k, want)
		}
		if gzOff := files[strings.Replace(k, "gzip=true", "gzip=false", 1)]["memstore"]; !bytes.Equal(want, gzOff) {
			t.Errorf("%s: gzip decodes to another file than without gzip", k)
		}
		for name, got := range byStore {
			if !bytes.Equal(got, want) {
				t.Errorf("%s: %s's file (%d bytes) is not memstore's (%d bytes)", k, name, len(got), len(want))
			}
		}
	}
}

// TestExportGzipCutAndResumed: a gzip export cut at random bytes on the
// wire gives, decoded, a prefix of the file; resumed after the last
// complete line of it, the pieces are the uncut file byte for byte.
func TestExportGzipCutAndResumed(t *testing.T) {
	t.Parallel()
	s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := storetest.Load(context.Background(), s, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	attackData(t, s, 400)
	srv := httptest.NewServer(formsapi.NewHandler(s, s, formsapi.WithFeed(s), formsapi.WithCursorSecret(attackSecret), formsapi.WithPageBytes(4096)))
	defer srv.Close()
	_, plain, err := getExport(t, srv.URL+exportPath, storetest.KeyA, false)
	if err != nil {
		t.Fatal(err)
	}
	_, wire, err := getExport(t, srv.URL+exportPath, storetest.KeyA, true)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(25, 4))
	for range 40 {
		cut := r.IntN(len(wire))
		prefix, pos := lastCompleteLine(t, gunzipPrefix(wire[:cut]))
		target := srv.URL + exportPath
		if pos != "" {
			target += "?after=" + pos
		}
		res, rest, err := getExport(t, target, storetest.KeyA, true)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("resumed after %q: %d %v", pos, res.StatusCode, err)
		}
		if got := append(append([]byte(nil), prefix...), gunzipPrefix(rest)...); !bytes.Equal(got, plain) {
			t.Fatalf("cut at wire byte %d of %d, resumed after %q: %d bytes, want the %d of the uncut file", cut, len(wire), pos, len(got), len(plain))
		}
	}
}

// revokeAt is an observer that calls revoke when the handler starts its
// nth read of a feed page (never while n is 0).
type revokeAt struct {
	n, reads atomic.Int64
	revoke   func()
}

func (o *revokeAt) Call(ctx context.Context, c observe.Call) (context.Context, func(error)) {
	if c.Op == observe.OpSyncSubmissions && o.reads.Add(1) == o.n.Load() {
		o.revoke()
	}
	return ctx, func(error) {}
}

func (o *revokeAt) Request(context.Context, observe.Request) {}

// TestExportStopsWhenItsKeyIsRevoked: a key revoked while its export runs
// stops the export at its next page, a broken response after the
// complete lines sent; resuming with that key gets 401. Over every store.
func TestExportStopsWhenItsKeyIsRevoked(t *testing.T) {
	t.Parallel()
	for name, s := range exportStores(t) {
		attackData(t, s, 300)
		key, err := formsapi.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.AddKey(context.Background(), key, storetest.AccountA); err != nil {
			t.Fatal(err)
		}
		obs := &revokeAt{revoke: func() {
			if err := s.RevokeKey(context.Background(), key); err != nil {
				t.Error(err)
			}
		}}
		srv := httptest.NewServer(formsapi.NewHandler(s, s, formsapi.WithCursorSecret(attackSecret), formsapi.WithPageBytes(4096), formsapi.WithObserver(obs)))
		pos := brokenAt20(t, name+", the key revoked at the 20th page", srv.URL+exportPath, key, obs)
		if reads := obs.reads.Load(); reads != 20 {
			t.Errorf("%s: %d pages read, want 20 (the 20th read before the key was looked up again)", name, reads)
		}
		res, _, _ := getExport(t, srv.URL+exportPath+"?after="+pos, key, false)
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: resumed with the revoked key: %d, want 401", name, res.StatusCode)
		}
		srv.Close()
	}
}

// brokenAt20 GETs the export at target whole with KeyA, then with key
// while obs acts at its 20th page read (past the first 32 KiB chunk of
// lines): that export must be a 200 broken off after complete lines that
// are a proper prefix of the whole. It returns the position of the last
// of them.
func brokenAt20(t *testing.T, what, target, key string, obs *revokeAt) string {
	t.Helper()
	_, full, err := getExport(t, target, storetest.KeyA, false)
	if err != nil {
		t.Fatal(err)
	}
	obs.reads.Store(0)
	obs.n.Store(20)
	res, body, err := getExport(t, target, key, false)
	if res.StatusCode != http.StatusOK || err == nil {
		t.Fatalf("%s: %d, %d bytes, err %v; want a 200 broken off", what, res.StatusCode, len(body), err)
	}
	prefix, pos := lastCompleteLine(t, body)
	if !bytes.HasPrefix(full, prefix) || len(prefix) == 0 || len(prefix) >= len(full) {
		t.Fatalf("%s: %d bytes of complete lines before the break, not a proper prefix of the %d of the file", what, len(prefix), len(full))
	}
	return pos
}

// TestExportStopsWhenItsFormIsCreatedAgain: a form deleted and created
// again with the same ID while its export runs stops the export at its
// next page, a broken response after the old form's complete lines,
// rather than go on with the new form's submissions under the old form's
// refs and positions (RELIABILITY case 101: it went on, and ended
// without an error). Over every store.
func TestExportStopsWhenItsFormIsCreatedAgain(t *testing.T) {
	t.Parallel()
	for name, s := range exportStores(t) {
		ctx := context.Background()
		attackData(t, s, 300)
		obs := &revokeAt{revoke: func() {
			if err := s.DeleteForm(ctx, storetest.AccountA, storetest.FormBusy); err != nil {
				t.Error(err)
			}
			if err := s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: storetest.FormBusy, Title: "again"}); err != nil {
				t.Error(err)
			}
			attackData(t, s, 300)
		}}
		srv := httptest.NewServer(formsapi.NewHandler(s, s, formsapi.WithCursorSecret(attackSecret), formsapi.WithPageBytes(4096), formsapi.WithObserver(obs)))
		brokenAt20(t, name+", the form created again at the 20th page", srv.URL+exportPath, storetest.KeyA, obs)
		srv.Close()
	}
}

// TestExportAfterOfARecreatedForm: a position of a form that was deleted
// and created again since (same ID) is no position of the new form: a 400
// naming after, before any byte of body (docs/api.md); the new form's
// export from the start is served.
func TestExportAfterOfARecreatedForm(t *testing.T) {
	t.Parallel()
	for name, s := range exportStores(t) {
		ctx := context.Background()
		attackData(t, s, 30)
		srv := httptest.NewServer(formsapi.NewHandler(s, s, formsapi.WithFeed(s), formsapi.WithCursorSecret(attackSecret)))
		_, body, err := getExport(t, srv.URL+exportPath, storetest.KeyA, false)
		if err != nil {
			t.Fatal(err)
		}
		_, pos := lastCompleteLine(t, body[:bytes.IndexByte(body, '\n')+1])
		if err := s.DeleteForm(ctx, storetest.AccountA, storetest.FormBusy); err != nil {
			t.Fatal(err)
		}
		if err := s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: storetest.FormBusy, Title: "again"}); err != nil {
			t.Fatal(err)
		}
		attackData(t, s, 30)
		res, got, _ := getExport(t, srv.URL+exportPath+"?after="+pos, storetest.KeyA, false)
		if res.StatusCode != http.StatusBadRequest || !bytes.Contains(got, []byte("after")) {
			t.Errorf("%s: after= of the deleted form: %d %.200s, want a 400 naming after", name, res.StatusCode, got)
		}
		res, got, err = getExport(t, srv.URL+exportPath, storetest.KeyA, false)
		if err != nil || res.StatusCode != http.StatusOK || bytes.Count(got, []byte("\n")) != 30 {
			t.Errorf("%s: the new form's export: %d, %d lines, %v; want 200 and its 30", name, res.StatusCode, bytes.Count(got, []byte("\n")), err)
		}
		srv.Close()
	}
}

// holdFirstPages is an observer that holds every export's first read of a
// feed page until release is closed, counting the reads held.
type holdFirstPages struct {
	held    atomic.Int64
	arrived chan struct{}
	release chan struct{}
}

func (o *holdFirstPages) Call(ctx context.Context, c observe.Call) (context.Context, func(error)) {
	if c.Op == observe.OpSyncSubmissions {
		select {
		case <-o.release:
		default:
			o.held.Add(1)
			o.arrived <- struct{}{}
			<-o.release
		}
	}
	return ctx, func(error) {}
}

func (o *holdFirstPages) Request(context.Context, observe.Request) {}

// TestExport32AtOnce: one key's 32 exports at once are each served whole
// when the handler's room holds them (each holds a page's share of the
// bytes in flight for its whole stream: with the default 4 MiB pages,
// three of one account's exports run at once on 2 CPUs and the others
// get 503, see docs/api.md); a 33rd while they run gets 429 before
// reading anything, and the key's next export once they are done is
// served.
func TestExport32AtOnce(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	attackData(t, s, 200)
	obs := &holdFirstPages{arrived: make(chan struct{}, 64), release: make(chan struct{})}
	srv := httptest.NewServer(formsapi.NewHandler(s, s, formsapi.WithCursorSecret(attackSecret), formsapi.WithObserver(obs), formsapi.WithPageBytes(32<<10)))
	defer srv.Close()
	refused := make(chan int, 32) // the status of an export refused before its first page
	var wg sync.WaitGroup
	bodies := make([][]byte, 32)
	errs := make([]error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", srv.URL+exportPath+"?format=csv", nil)
			req.Header.Set("Authorization", "Bearer "+storetest.KeyA)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				errs[i] = fmt.Errorf("status %d", res.StatusCode)
				refused <- res.StatusCode
				return
			}
			bodies[i], errs[i] = io.ReadAll(res.Body)
		}()
	}
	for range 32 {
		select {
		case <-obs.arrived: // the export holds its place in flight
		case status := <-refused:
			close(obs.release)
			wg.Wait()
			t.Fatalf("an export of the 32 got %d", status)
		}
	}
	res, body, _ := getExport(t, srv.URL+exportPath+"?format=csv", storetest.KeyA, false)
	if res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a 33rd export of the key: %d %.200s, want 429", res.StatusCode, body)
	}
	if held := obs.held.Load(); held != 32 {
		t.Errorf("%d page reads, want the 32 held: the 33rd read a page", held)
	}
	close(obs.release)
	wg.Wait()
	for i := range 32 {
		if errs[i] != nil || !bytes.Equal(bodies[i], bodies[0]) || bytes.Count(bodies[0], []byte("\r\n")) < 200 {
			t.Fatalf("export %d: %v, %d bytes; export 0: %d", i, errs[i], len(bodies[i]), len(bodies[0]))
		}
	}
	if res, _, err := getExport(t, srv.URL+exportPath+"?format=csv", storetest.KeyA, false); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("the key's export after the 32: %d %v", res.StatusCode, err)
	}
}

// TestExportResumedAfterTheServerDied: the server dies mid-export (its
// connections cut, its store never closed, as under SIGKILL) with a third
// of the file at its client; a new server over the same SQLite file, with
// the same cursor secret, resumes the export after the last complete row
// the client has, and the pieces are the file the first server would have
// sent. (The same with a real SIGKILL of examples/server was run by hand
// for issue 25; see its report.)
func TestExportResumedAfterTheServerDied(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.db")
	first, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := storetest.Load(context.Background(), first, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	attackData(t, first, 600)
	srv := httptest.NewServer(formsapi.NewHandler(first, first, formsapi.WithCursorSecret(attackSecret), formsapi.WithPageBytes(4096)))
	_, want, err := getExport(t, srv.URL+exportPath+"?format=csv", storetest.KeyA, false)
	if err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections() // the server dies: its store is never closed
	srv.Close()
	got := want[:len(want)/3] // what the client kept of the export it was reading
	// got ends at a row's CRLF; its last row may hold a quoted line break,
	// so find the last complete row as a client would.
	prefix, pos := lastCSVRow(t, got)
	second, err := sqlitestore.Open(path) // first is never closed
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	srv2 := httptest.NewServer(formsapi.NewHandler(second, second, formsapi.WithCursorSecret(attackSecret), formsapi.WithPageBytes(4096)))
	defer srv2.Close()
	res2, rest, err := getExport(t, srv2.URL+exportPath+"?format=csv&after="+pos, storetest.KeyA, false)
	if err != nil || res2.StatusCode != http.StatusOK {
		t.Fatalf("resumed on the new server: %d %v", res2.StatusCode, err)
	}
	if all := append(append([]byte(nil), prefix...), rest...); !bytes.Equal(all, want) {
		t.Fatalf("kept %d bytes, resumed after %q with %d: %d bytes, want the %d of the uncut file", len(prefix), pos, len(rest), len(all), len(want))
	}
}

// lastCSVRow returns the prefix of CSV file b up to its last complete row
// past the header, and that row's position (column 2).
func lastCSVRow(t *testing.T, b []byte) ([]byte, string) {
	t.Helper()
	quoted, end, start, rows := false, 0, 0, 0
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"':
			quoted = !quoted
		case !quoted && b[i] == '\n' && i > 0 && b[i-1] == '\r':
			start, end, rows = end, i+1, rows+1
		}
	}
	if rows < 2 {
		t.Fatalf("no complete row past the header in %q", b)
	}
	cells := strings.SplitN(string(b[start:end]), ",", 3)
	if len(cells) < 3 || cells[1] == "" {
		t.Fatalf("row %q", b[start:end])
	}
	return b[:end], cells[1]
}

// TestExportIdentifiersEscaped (issue 42; RELIABILITY 98, 108): a CSV
// export's ref and position cells are base64url, which a '-' may start
// (3 of 45 positions did in the attack), and a spreadsheet runs such a
// cell as a formula, breaking the position a resume needs. They follow
// the formula rule of every other cell: a ' before one that begins with
// '-', none with formulas=keep; after= takes the position as the cell
// gives it, ' and all, and the resumed export is the rest of the file.
func TestExportIdentifiersEscaped(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	attackData(t, s, 300)
	srv := httptest.NewServer(formsapi.NewHandler(s, s, formsapi.WithCursorSecret(attackSecret)))
	defer srv.Close()
	get := func(query string) string {
		t.Helper()
		res, body, err := getExport(t, srv.URL+exportPath+query, storetest.KeyA, false)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("export %s: %d %v %.200s", query, res.StatusCode, err, body)
		}
		return string(body)
	}
	var ids [][2]string // ref and position of each line, as JSON Lines give them
	for line := range strings.Lines(get("")) {
		var v struct{ Ref, Position string }
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, [2]string{v.Ref, v.Position})
	}
	escaped := func(id string) string {
		if strings.HasPrefix(id, "-") {
			return "'" + id
		}
		return id
	}
	full := get("?format=csv")
	rows, err := csv.NewReader(strings.NewReader(full)).ReadAll()
	if err != nil || len(rows) != len(ids)+1 {
		t.Fatalf("CSV: %d rows, %v; want %d and a header", len(rows), err, len(ids))
	}
	dashes, resumeAt := 0, -1
	for i, id := range ids {
		row := rows[i+1]
		if row[0] != escaped(id[0]) || row[1] != escaped(id[1]) {
			t.Errorf("row %d: ref %q, position %q; want %q, %q", i, row[0], row[1], escaped(id[0]), escaped(id[1]))
		}
		for j, cell := range row {
			if cell != "" && strings.IndexByte("=+-@\t\r\x00", cell[0]) >= 0 {
				t.Errorf("row %d, cell %d: %q begins a formula", i, j, cell)
			}
		}
		for _, x := range id {
			if strings.HasPrefix(x, "-") {
				dashes++
			}
		}
		if strings.HasPrefix(id[1], "-") && resumeAt < 0 && i < len(ids)-1 {
			resumeAt = i
		}
	}
	if dashes == 0 || resumeAt < 0 {
		t.Fatalf("no ref or position of the %d lines begins with '-': the test shows nothing", len(ids))
	}
	t.Logf("%d of %d refs and positions begin with '-'", dashes, 2*len(ids))
	keep, err := csv.NewReader(strings.NewReader(get("?format=csv&formulas=keep"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if keep[i+1][0] != id[0] || keep[i+1][1] != id[1] {
			t.Errorf("formulas=keep, row %d: %q, %q; want them raw", i, keep[i+1][0], keep[i+1][1])
		}
	}
	// Resume after the row whose position a spreadsheet would have run,
	// with the cell as the file has it.
	lines := strings.SplitAfter(full, "\r\n")
	want := strings.Join(lines[resumeAt+2:], "")
	if got := get("?format=csv&after=" + url.QueryEscape(rows[resumeAt+1][1])); got != want {
		t.Errorf("resumed after %q: %d bytes, want the %d after that row", rows[resumeAt+1][1], len(got), len(want))
	}
}

// splitLinesPy splits s as Python's str.splitlines does: at \n, \r, \r\n,
// \v, \f, \x1c, \x1d, \x1e, U+0085, U+2028 and U+2029, none kept.
func splitLinesPy(s string) []string {
	var lines []string
	start := 0
	for i, r := range s {
		switch r {
		case '\n':
			if i > 0 && s[i-1] == '\r' {
				start = i + 1 // the \r ended the line already
				continue
			}
		case '\r', '\v', '\f', '\x1c', '\x1d', '\x1e', '\u0085', '\u2028', '\u2029':
		default:
			continue
		}
		lines = append(lines, s[start:i])
		start = i + utf8.RuneLen(r)
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// TestExportJSONLinesSplitAsUnicode (issue 42; RELIABILITY 109): data
// holding U+2028, U+2029 and U+0085 raw (in values and names, beside
// other characters of the same lead bytes: ’ … © é) gives a JSON Lines
// export whose lines a reader that splits as Unicode does (Python's
// str.splitlines) reads as one line per submission, each the submission's
// data: the three are escaped as \u2028, \u2029 and \u0085. Issue 42's
// 45 lines split into 47.
func TestExportJSONLinesSplitAsUnicode(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	values := []string{"a\u2028b", "\u2029", "x\u0085", "’\u2028…\u0085©é\u2029", "\u0085\u0085", "end\u2028", "¡\u00a0€\u202f"}
	base := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	want := map[string]string{}
	for i, v := range values {
		data, _ := json.Marshal(map[string]string{"v": v, "k\u2028\u0085": v})
		// encoding/json escapes U+2028 and U+2029 itself: store them raw.
		data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte(`\u2028`), []byte("\u2028")), []byte(`\u2029`), []byte("\u2029"))
		id := fmt.Sprint("sep", i)
		if err := s.AddSubmission(context.Background(), formsapi.Submission{FormID: storetest.FormBusy, Data: data, CreatedAt: base.Add(time.Duration(i) * time.Second)}, formsapi.Metadata{ID: id}); err != nil {
			t.Fatal(err)
		}
		want[v] = v
	}
	srv := httptest.NewServer(formsapi.NewHandler(s, s, formsapi.WithCursorSecret(attackSecret)))
	defer srv.Close()
	res, body, err := getExport(t, srv.URL+exportPath, storetest.KeyA, false)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("export: %d %v", res.StatusCode, err)
	}
	n := bytes.Count(body, []byte("\n"))
	lines := splitLinesPy(string(body))
	if len(lines) != n {
		t.Fatalf("%d lines split as Python does, want the %d submissions", len(lines), n)
	}
	seen := 0
	for _, line := range lines {
		var v struct{ Data map[string]any }
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("a line split as Python does is not JSON: %v: %.200q", err, line)
		}
		if got, ok := v.Data["v"].(string); ok {
			if want[got] != got || v.Data["k\u2028\u0085"] != got {
				t.Errorf("a line's data: %q, want one of the values given", v.Data)
			}
			seen++
		}
	}
	if seen != len(values) {
		t.Errorf("%d lines of the %d submissions with separators", seen, len(values))
	}
	for _, raw := range []string{"\u2028", "\u2029", "\u0085"} {
		if bytes.Contains(body, []byte(raw)) {
			t.Errorf("the export holds %q raw", raw)
		}
	}
}
