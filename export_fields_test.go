package formsapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/pgstore"
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
		dsn, schema := pgtest.Schema(t)
		pg, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pg.Close() })
		stores["pgstore"] = pg
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
