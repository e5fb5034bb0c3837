package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/formsapi/formsapi"
)

// itemSize is what an item counts for against Query.MaxBytes.
func itemSize(t *testing.T, s formsapi.Submission) int {
	t.Helper()
	b, err := formsapi.AppendSubmissionJSON(nil, s)
	if err != nil {
		t.Fatalf("a returned submission does not encode: %v", err)
	}
	return len(b)
}

// checkByteBudget walks FormBusy with byte budgets of one byte (one item
// a page), of about two and a half items, and of everything, in both
// orders: every item comes exactly once and in order, and each page ends
// early only where the next item would pass the budget. A store that
// ignores MaxBytes, which the contract allows, is skipped.
func checkByteBudget(t *testing.T, s formsapi.Store) {
	ctx := context.Background()
	for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
		all := walkSubmissions(t, s, AccountA, FormBusy, formsapi.Query{Limit: MaxLimit, Order: o})
		if len(all) != busyCount {
			t.Fatalf("order %s: %d submissions in one page, want the seed's %d", o, len(all), busyCount)
		}
		sizes, total := make([]int, len(all)), 0
		for i, sub := range all {
			sizes[i] = itemSize(t, sub)
			total += sizes[i]
		}
		for _, budget := range []int{1, sizes[0] + sizes[1] + sizes[2]/2, total} {
			q := formsapi.Query{Limit: MaxLimit, Order: o, MaxBytes: budget}
			var pages [][]formsapi.Submission
			for {
				if len(pages) > len(all) {
					t.Fatalf("order %s, budget %d: more pages than items", o, budget)
				}
				p, err := s.ListSubmissions(ctx, AccountA, FormBusy, q)
				if err != nil {
					t.Fatalf("order %s, budget %d, page %d: %v", o, budget, len(pages), err)
				}
				if len(p.Items) == 0 && p.NextCursor != "" {
					t.Fatalf("order %s, budget %d, page %d: empty, with a next cursor", o, budget, len(pages))
				}
				pages = append(pages, p.Items)
				if p.NextCursor == "" {
					break
				}
				q.Cursor = p.NextCursor
			}
			if len(pages) == 1 && budget < total {
				t.Skipf("the store ignores Query.MaxBytes (one page of %d items for a budget of %d bytes); the contract allows that", len(pages[0]), budget)
			}
			var got []formsapi.Submission
			for i, page := range pages {
				used := 0
				for _, sub := range page {
					used += itemSize(t, sub)
				}
				if len(page) > 1 && used > budget {
					t.Errorf("order %s, budget %d: page %d holds %d items of %d bytes in all, past the budget", o, budget, i, len(page), used)
				}
				if i+1 < len(pages) && len(pages[i+1]) > 0 {
					if next := itemSize(t, pages[i+1][0]); used+next <= budget {
						t.Errorf("order %s, budget %d: page %d ends at %d bytes though its next item (%d bytes) fits", o, budget, i, used, next)
					}
				}
				got = append(got, page...)
			}
			if want := submissionKeys(all); !slices.Equal(submissionKeys(got), want) {
				t.Errorf("order %s, budget %d: the pages give\n%v\nbut one page gives\n%v", o, budget, submissionKeys(got), want)
			}
			if budget == 1 && len(pages) != len(all) {
				t.Errorf("order %s: a budget of one byte gives %d pages for %d items, want one item a page", o, len(pages), len(all))
			}
		}
	}
}
