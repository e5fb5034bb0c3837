package sqlitestore_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// TestByteBudgetHonoured checks that both read paths end a page at the
// byte budget, and that the read cache applies it to the pages it holds
// (storetest only skips a store that ignores it).
func TestByteBudgetHonoured(t *testing.T) {
	t.Parallel()
	s := load(t, mustOpen(t, dbPath(t)), storetest.DefaultSeed())
	fast := func(q formsapi.Query) (int, string) {
		t.Helper()
		var p wire.Page
		if err := s.AppendSubmissions(ctx, storetest.AccountA, storetest.FormBusy, q, &p); err != nil {
			t.Fatal(err)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(append(append([]byte("["), p.Body...), ']'), &items); err != nil {
			t.Fatal(err)
		}
		return len(items), p.NextCursor
	}
	// The first read fills the cache; the budgeted ones are answered from it.
	if n, next := fast(formsapi.Query{Limit: 100}); n != 23 || next != "" {
		t.Fatalf("no budget: %d items, cursor %q; want all 23", n, next)
	}
	for _, q := range []formsapi.Query{{Limit: 100, MaxBytes: 1}, {Limit: 100, MaxBytes: 1}} {
		if n, next := fast(q); n != 1 || next == "" {
			t.Errorf("one-byte budget: %d items, cursor %q; want one and a cursor", n, next)
		}
	}
	entries, _ := sqlitestore.CachedPages(s)
	if entries == 0 {
		t.Fatal("the cache holds nothing: the test does not test it")
	}
	// In the other order: a budgeted page in the cache is not the whole list.
	q := formsapi.Query{Limit: 100, Order: formsapi.Oldest, MaxBytes: 1}
	if n, next := fast(q); n != 1 || next == "" {
		t.Errorf("oldest first, one-byte budget: %d items, cursor %q", n, next)
	}
	q.MaxBytes = 0
	if n, next := fast(q); n != 23 || next != "" {
		t.Errorf("oldest first after a budgeted page: %d items, cursor %q; want all 23", n, next)
	}
	p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormBusy, formsapi.Query{Limit: 100, MaxBytes: 1})
	if err != nil || len(p.Items) != 1 || p.NextCursor == "" {
		t.Fatalf("ListSubmissions with a one-byte budget: %d items, cursor %q, error %v", len(p.Items), p.NextCursor, err)
	}
}

// TestByteBudgetWalkTwice walks a list under a byte budget twice on a
// store with a cache: the second walk meets cached pages that the budget
// ended, and must give the same items, each once.
func TestByteBudgetWalkTwice(t *testing.T) {
	t.Parallel()
	s := load(t, mustOpen(t, dbPath(t)), storetest.DefaultSeed())
	for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
		var walks [][]string
		for _, budget := range []int{600, 600, 0, 600, 1, 600} {
			var items []string
			q := formsapi.Query{Limit: 100, Order: o, MaxBytes: budget}
			for pages := 0; ; pages++ {
				if pages > 30 {
					t.Fatalf("order %s, budget %d: the walk does not end", o, budget)
				}
				var p wire.Page
				if err := s.AppendSubmissions(ctx, storetest.AccountA, storetest.FormBusy, q, &p); err != nil {
					t.Fatal(err)
				}
				var page []json.RawMessage
				if err := json.Unmarshal(append(append([]byte("["), p.Body...), ']'), &page); err != nil {
					t.Fatal(err)
				}
				for _, it := range page {
					items = append(items, string(it))
				}
				if p.NextCursor == "" {
					break
				}
				q.Cursor = p.NextCursor
			}
			walks = append(walks, items)
		}
		for i, w := range walks {
			if len(w) != 23 || strings.Join(w, "\n") != strings.Join(walks[2], "\n") {
				t.Errorf("order %s: walk %d gives %d items, not the 23 of the walk without a budget", o, i, len(w))
			}
		}
	}
}
