package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/wire"
)

// TestMixedPageReadAgainWhole: a page the read cache began with items it
// held at the form's version, whose rest was read after a commit (at the
// next version), is read again whole: the page holds each item once, and
// the entry the cache keeps is valid JSON. The page was rewound only to
// after the held items, so they came twice and the kept entry began with
// a comma, served as "[,{…" to every later request (TestCacheUnderConcurrentWriter
// caught it under load, 1 run in about 40).
func TestMixedPageReadAgainWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "mixed.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "f", Title: "F", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	add := func(n int) {
		t.Helper()
		sub := formsapi.Submission{FormID: "f", Data: fmt.Appendf(nil, `{"n":%d}`, n), CreatedAt: t0.Add(time.Duration(n) * time.Second)}
		if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	for n := range 30 {
		add(n)
	}
	page := func(limit int) []int {
		t.Helper()
		var p wire.Page
		if err := s.AppendSubmissions(ctx, "acct", "f", formsapi.Query{Limit: limit}, &p); err != nil {
			t.Fatal(err)
		}
		var items []struct{ Data struct{ N int } }
		if err := json.Unmarshal(append(append([]byte("["), p.Body...), ']'), &items); err != nil {
			t.Fatalf("a page of %d: %v: [%s]", limit, err, p.Body)
		}
		ns := make([]int, len(items))
		for i, it := range items {
			ns[i] = it.Data.N
		}
		return ns
	}
	page(10) // the cache holds the newest ten
	committed := false
	s.afterBegin = func() {
		if !committed {
			committed = true
			add(100) // between the cache's ten and the rest: a Mixed page
		}
	}
	want := []int{100}
	for n := 29; len(want) < 25; n-- {
		want = append(want, n)
	}
	for i, got := range [][]int{page(25), page(25)} { // read again whole, then from the cache
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("page %d of 25: %v, want %v", i+1, got, want)
		}
	}
	if !committed {
		t.Fatal("the commit between the cache's items and the read did not happen")
	}
}
