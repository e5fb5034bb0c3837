package formsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// exportStore is a store the export tests write to and read keys from.
type exportStore interface {
	formsapi.Store
	formsapi.FeedStore
	formsapi.KeyResolver
	formsapi.Writer
}

// exportStores returns a seeded memstore, sqlitestore and, when
// configured, pgstore.
func exportStores(t *testing.T) map[string]exportStore {
	t.Helper()
	ctx := context.Background()
	stores := map[string]exportStore{"memstore": memstore.New()}
	lite, err := sqlitestore.Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	stores["sqlitestore"] = lite
	if os.Getenv(pgtest.EnvVar) != "" {
		stores["pgstore"] = openPostgres(t, false)
	}
	for name, s := range stores {
		if err := storetest.Load(ctx, s, storetest.DefaultSeed()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return stores
}

// withoutFields hides a store's field table (and its fast paths): the
// handler reads it as a host's FeedStore.
type withoutFields struct {
	formsapi.Store
	formsapi.FeedStore
}

// TestCSVHeaderFromTheFieldTable: over each of this module's stores a
// CSV export reads the form once, as JSON Lines does (its header is one
// call to the field table), and keeps the column of a field whose every
// submission was deleted; over a store without the table it reads the
// form twice and has only the columns of the submissions still there.
func TestCSVHeaderFromTheFieldTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, s := range exportStores(t) {
		t.Run(name, func(t *testing.T) {
			for i := range 200 {
				data := fmt.Sprintf(`{"name":"n%d","text":"%s"}`, i, bytes.Repeat([]byte("x"), i))
				if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: json.RawMessage(data)}, formsapi.Metadata{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: json.RawMessage(`{"gone":"soon"}`)}, formsapi.Metadata{ID: "gone"}); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteSubmission(ctx, storetest.AccountA, storetest.FormBusy, "gone"); err != nil {
				t.Fatal(err)
			}
			read := func(store formsapi.Store, format string) (header []byte, pages int64) {
				t.Helper()
				p := &feedPages{}
				h := formsapi.NewHandler(store, s, formsapi.WithPageBytes(4096), formsapi.WithObserver(p))
				res := do(t, h, "GET", exportPath+"?format="+format, bearer(storetest.KeyA)...)
				if res.status != http.StatusOK {
					t.Fatalf("%s: %d %s", format, res.status, res.body)
				}
				return res.body[:bytes.IndexByte(res.body, '\n')+1], p.n.Load()
			}
			_, jsonl := read(s, "jsonl")
			header, csv := read(s, "csv")
			if csv != jsonl || jsonl < 5 {
				t.Errorf("a CSV export read %d pages of the feed, JSON Lines %d: the header should cost none", csv, jsonl)
			}
			if !bytes.Contains(header, []byte(",data.gone,")) {
				t.Errorf("header %q: no column for the deleted submission's field", header)
			}
			header2, csv2 := read(withoutFields{s, s}, "csv")
			if csv2 < 2*jsonl-1 {
				t.Errorf("without a field table a CSV export read %d pages, JSON Lines %d: want the form read twice", csv2, jsonl)
			}
			if want := bytes.Replace(header, []byte(",data.gone"), nil, 1); !bytes.Equal(header2, want) {
				t.Errorf("header without a field table %q, want %q", header2, want)
			}
		})
	}
}

// TestExportTagNamesTheIncarnation: a form deleted and created again
// with the same ID, brought to the same feed head with other data, is
// another file: its export's ETag differs, and the old tag gets a 200.
func TestExportTagNamesTheIncarnation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, s := range exportStores(t) {
		t.Run(name, func(t *testing.T) {
			h := formsapi.NewHandler(s, s)
			fill := func(v string) (tag string, body []byte) {
				t.Helper()
				for i := range 3 {
					if err := s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormEmpty, Data: json.RawMessage(fmt.Sprintf(`{"v":%q,"i":%d}`, v, i))}, formsapi.Metadata{}); err != nil {
						t.Fatal(err)
					}
				}
				res := do(t, h, "GET", "/v1/forms/"+storetest.FormEmpty+"/export?format=csv", bearer(storetest.KeyA)...)
				if res.status != http.StatusOK {
					t.Fatalf("%d %s", res.status, res.body)
				}
				return res.header.Get("ETag"), res.body
			}
			tag, body := fill("before")
			if err := s.DeleteForm(ctx, storetest.AccountA, storetest.FormEmpty); err != nil {
				t.Fatal(err)
			}
			if err := s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: storetest.FormEmpty, Title: "again"}); err != nil {
				t.Fatal(err)
			}
			tag2, body2 := fill("after")
			if bytes.Equal(body, body2) || tag == tag2 {
				t.Fatalf("the form created again: same tag %s (bodies equal: %v)", tag, bytes.Equal(body, body2))
			}
			res := do(t, h, "GET", "/v1/forms/"+storetest.FormEmpty+"/export?format=csv", append(bearer(storetest.KeyA), "If-None-Match", tag)...)
			if res.status != http.StatusOK || !bytes.Equal(res.body, body2) {
				t.Fatalf("with the old form's tag: %d, want 200 and the new form's file", res.status)
			}
		})
	}
}

// failingFeed is a memstore whose feed fails past a position: an export
// of its form breaks off after its status line.
type failingFeed struct {
	*memstore.Store
	past int64
}

func (f failingFeed) SyncSubmissions(ctx context.Context, account, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	if after > f.past {
		return formsapi.FeedPage{}, errors.New("the disk went away")
	}
	return f.Store.SyncSubmissions(ctx, account, formID, after, limit)
}

// requestsOnly sends each request an observer is told of to a channel.
type requestsOnly chan observe.Request

func (requestsOnly) Call(ctx context.Context, _ observe.Call) (context.Context, func(error)) {
	return ctx, func(error) {}
}

func (r requestsOnly) Request(_ context.Context, req observe.Request) { r <- req }

// TestObserverSeesAnExportBreakOff: an export whose store fails after
// its status line is a broken response, and the observer is told of it,
// with its status, the bytes sent before and Aborted.
func TestObserverSeesAnExportBreakOff(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	for i := range 400 { // past a chunk of the body (32 KiB) before it fails
		data := fmt.Sprintf(`{"i":%d,"text":%q}`, i, strings.Repeat("x", 200))
		if err := s.AddSubmission(context.Background(), formsapi.Submission{FormID: storetest.FormBusy, Data: json.RawMessage(data)}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	requests := make(requestsOnly, 1)
	f := failingFeed{s, 300}
	srv := httptest.NewServer(formsapi.NewHandler(f, s, formsapi.WithFeed(f), formsapi.WithPageBytes(1024), formsapi.WithObserver(requests),
		formsapi.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+exportPath, nil)
	req.Header.Set("Authorization", "Bearer "+storetest.KeyA)
	req.Header.Set("Accept-Encoding", "identity") // the bytes as sent
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || err == nil || len(body) == 0 {
		t.Fatalf("status %d, %d bytes, read error %v: want a 200 broken off after some lines", res.StatusCode, len(body), err)
	}
	// The observer is told before the connection is broken off, so by
	// the time the client has read to the break.
	var got observe.Request
	select {
	case got = <-requests:
	default:
		t.Fatal("the observer was not told of the broken-off export")
	}
	if !got.Aborted || got.Status != http.StatusOK || got.BodyBytes < int64(len(body)) || got.Route != "GET /v1/forms/{formId}/export" {
		t.Fatalf("observed %+v; the client read %d bytes", got, len(body))
	}
}
