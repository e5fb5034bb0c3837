package formsapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/sqlitestore"
)

// budgetStore is what TestEveryPageKeepsTheBudget needs of a store.
type budgetStore interface {
	formsapi.Store
	formsapi.FeedStore
	formsapi.KeyManager
	formsapi.Writer
}

// hostStore stands for a host's own store: it has the Store and FeedStore
// methods of the store inside it and nothing else, so the handler reads
// it through the checked path and keeps the budget itself.
type hostStore struct {
	formsapi.Store
	formsapi.FeedStore
}

// Sizes of the budget test: every submission's JSON is about 28 KB, most
// of it attachment field names of "<", which JSON sends as six bytes
// each; every form's about 3.7 KB, its title escaped the same way.
const (
	budgetSubs     = 24
	budgetForms    = 30
	budgetPageSize = 64 << 10
)

func loadBudgetData(t *testing.T, s budgetStore) (full, scoped string) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var scope []string
	for i := range budgetForms {
		id := fmt.Sprintf("form-%02d", i)
		f := formsapi.Form{ID: id, Title: strings.Repeat("<", 600), CreatedAt: at.Add(time.Duration(i) * time.Minute)}
		if err := s.AddForm(ctx, "acct", f); err != nil {
			t.Fatal(err)
		}
		if i%3 != 0 {
			scope = append(scope, id)
		}
	}
	for i := range budgetSubs {
		var atts []formsapi.Attachment
		for j := range 3 {
			atts = append(atts, formsapi.Attachment{FieldName: strings.Repeat("<", 1500), FileURL: fmt.Sprintf("https://files.example.com/%d/%d", i, j), FileSize: 1, MIMEType: "text/plain"})
		}
		data := fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", 1000*(i%5)))
		sub := formsapi.Submission{FormID: "form-01", Data: []byte(data), Attachments: atts, CreatedAt: at.Add(time.Duration(i%7) * time.Second)}
		if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	full, scoped = mustKey(t), mustKey(t)
	if err := s.AddKey(ctx, full, "acct"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddKeyWith(ctx, scoped, "acct", formsapi.KeyOptions{Forms: scope}); err != nil {
		t.Fatal(err)
	}
	return full, scoped
}

func mustKey(t *testing.T) string {
	t.Helper()
	k, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// budgetPage is one page of any list or of the feed, its items as sent.
type budgetPage struct {
	Forms       []json.RawMessage
	Submissions []json.RawMessage
	NextCursor  string
	SyncToken   string
	HasMore     bool
}

// TestEveryPageKeepsTheBudget walks the forms list, a submissions list
// and the sync feed, with a limit far above what the byte budget allows,
// through each store's fast path and through the checked path of a
// host's store, with a full and a scoped key: every page's items total
// at most the budget (or the page holds one item), a page cut short says
// more follows, and the walk gives every item exactly once.
func TestEveryPageKeepsTheBudget(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) budgetStore{
		"memstore": func(t *testing.T) budgetStore { return memstore.New() },
		"sqlitestore": func(t *testing.T) budgetStore {
			s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "b.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		"pgstore": func(t *testing.T) budgetStore {
			return openPostgres(t, false)
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			full, scoped := loadBudgetData(t, s)
			for _, path := range []struct {
				name  string
				store formsapi.Store
			}{{"fast", s}, {"checked", hostStore{s, s}}} {
				h := formsapi.NewHandler(path.store, s, formsapi.WithPageBytes(budgetPageSize))
				walk := func(what, first, key string, want int) {
					t.Helper()
					items, target := 0, first
					for pages := 0; target != ""; pages++ {
						if pages > 100 {
							t.Fatalf("%s, %s: the walk does not end", path.name, what)
						}
						res := do(t, h, "GET", target, bearer(key)...)
						if res.status != 200 {
							t.Fatalf("%s, %s: status %d: %.300s", path.name, what, res.status, res.body)
						}
						var p budgetPage
						if err := json.Unmarshal(res.body, &p); err != nil {
							t.Fatal(err)
						}
						got := append(p.Forms, p.Submissions...)
						size := 0
						for _, it := range got {
							size += len(it)
						}
						if len(got) > 1 && size > budgetPageSize {
							t.Errorf("%s, %s: page %d holds %d items of %d bytes, past the budget of %d", path.name, what, pages, len(got), size, budgetPageSize)
						}
						if len(got) == 0 && (p.NextCursor != "" || p.HasMore) {
							t.Errorf("%s, %s: page %d is empty but says more follows", path.name, what, pages)
						}
						items += len(got)
						target = ""
						switch {
						case p.SyncToken != "" && p.HasMore:
							target = strings.Split(first, "?")[0] + "?limit=1000&sync=" + url.QueryEscape(p.SyncToken)
						case p.NextCursor != "":
							target = strings.Split(first, "?")[0] + "?limit=1000&cursor=" + url.QueryEscape(p.NextCursor)
						}
					}
					if items != want {
						t.Errorf("%s, %s: the walk gave %d items, want %d", path.name, what, items, want)
					}
				}
				walk("forms", "/v1/forms?limit=1000", full, budgetForms)
				walk("forms of a scoped key", "/v1/forms?limit=1000", scoped, budgetForms-budgetForms/3)
				walk("submissions", "/v1/forms/form-01/submissions?limit=1000&order=asc", full, budgetSubs)
				walk("feed", "/v1/forms/form-01/submissions?limit=1000&sync=start", full, budgetSubs)
			}
		})
	}
}
