package formsapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
)

// bigForm is a memstore whose form "big" of account "a" (key "k") holds
// n submissions of about size bytes each, oldest first.
func bigForm(t *testing.T, n, size int) *memstore.Store {
	t.Helper()
	ctx := context.Background()
	s := memstore.New()
	if err := s.AddForm(ctx, "a", formsapi.Form{ID: "big"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddKey(ctx, "k", "a"); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		data := fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", size))
		if err := s.AddSubmission(ctx, formsapi.Submission{FormID: "big", Data: []byte(data), CreatedAt: at.Add(time.Duration(i) * time.Second)}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

type bigPage struct {
	items    []int
	bytes    int
	next     string
	linkNext bool
}

// walkBig walks form big with limit=1000, oldest first.
func walkBig(t *testing.T, h http.Handler) []bigPage {
	t.Helper()
	var pages []bigPage
	cursor := ""
	for len(pages) <= 100 {
		target := "/v1/forms/big/submissions?order=asc&limit=1000"
		if cursor != "" {
			target += "&cursor=" + url.QueryEscape(cursor)
		}
		r := httptest.NewRequest("GET", target, nil)
		r.Header.Set("Authorization", "Bearer k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("status %d: %.200s", w.Code, w.Body)
		}
		var body struct {
			Submissions []struct{ Data struct{ I int } }
			NextCursor  string
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		p := bigPage{bytes: w.Body.Len(), next: body.NextCursor, linkNext: w.Header().Get("Link") != ""}
		for _, s := range body.Submissions {
			p.items = append(p.items, s.Data.I)
		}
		pages = append(pages, p)
		if cursor = body.NextCursor; cursor == "" {
			return pages
		}
	}
	t.Fatal("the walk does not end")
	return nil
}

func TestPagesBoundedInBytes(t *testing.T) {
	t.Parallel()
	const envelope = 300 // the response object around the items, with a cursor
	for _, c := range []struct {
		name       string
		n, size    int
		opts       []formsapi.Option
		budget     int
		wantCounts []int
	}{
		// 6 submissions of 1 MiB and a bit: 3 fit the default 4 MiB.
		{"default budget", 6, 1<<20 - 30, nil, formsapi.DefaultPageBytes, []int{3, 3}},
		{"small budget", 10, 1000, []formsapi.Option{formsapi.WithPageBytes(2500)}, 2500, []int{2, 2, 2, 2, 2}},
		// Each submission alone is larger than the budget: one a page.
		{"submissions larger than the budget", 3, 5000, []formsapi.Option{formsapi.WithPageBytes(1000)}, 1000, []int{1, 1, 1}},
		{"budget off", 6, 1<<20 - 30, []formsapi.Option{formsapi.WithPageBytes(0)}, 0, []int{6}},
	} {
		s := bigForm(t, c.n, c.size)
		for _, path := range []struct {
			name  string
			store formsapi.Store
		}{{"fast path", s}, {"checked path", checkedOnly{s}}} {
			pages := walkBig(t, formsapi.NewHandler(path.store, s, c.opts...))
			var counts, all []int
			for i, p := range pages {
				counts = append(counts, len(p.items))
				all = append(all, p.items...)
				if c.budget > 0 && len(p.items) > 1 && p.bytes > c.budget+envelope {
					t.Errorf("%s, %s: page %d is %d bytes, past the budget %d", c.name, path.name, i, p.bytes, c.budget)
				}
				if (p.next != "") != p.linkNext {
					t.Errorf("%s, %s: page %d: nextCursor %q but Link header %v", c.name, path.name, i, p.next, p.linkNext)
				}
			}
			if fmt.Sprint(counts) != fmt.Sprint(c.wantCounts) {
				t.Errorf("%s, %s: pages of %v items, want %v", c.name, path.name, counts, c.wantCounts)
			}
			for i, got := range all {
				if got != i {
					t.Fatalf("%s, %s: items %v, want each of 0 to %d once, in order", c.name, path.name, all, c.n-1)
				}
			}
		}
	}
}

func TestWithPageBytesPanicsOnNegative(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("WithPageBytes(-1) did not panic")
		}
	}()
	formsapi.WithPageBytes(-1)
}
