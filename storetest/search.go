package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
)

// The search clauses (formsapi.Query.Search, q=): a page holds the
// submissions one of whose values contains the term once case and
// accents are set aside (formsapi.Query.Finds), on a seed of their own.

// Forms of the search clauses.
const (
	FormSearch     = "search-a"      // AccountA's form of searchCount submissions
	FormSearchMany = "search-many-a" // AccountA's form of searchManyCount submissions
	searchCount    = 30
	// searchManyCount is past the bound on entries a page examines
	// (find.MaxExamined), and every trigram of searchManyTerm is in every
	// submission of FormSearchMany, so a walk through any of them
	// reaches it: a store that bounds its work ends pages short.
	searchManyCount = 1200
	searchManyEvery = 150
	searchManyTerm  = "foo bar"
)

// searchNames are the values of "name", in turn.
var searchNames = []string{"Zoë Ünal", "ZOE UNAL", "zoe", "Zoey", "Chloé"}

func searchData(i int) string {
	return fmt.Sprintf(`{"n":%d,"name":%q,"even":%t,"nested":{"deep":["x","Deepval%d"]},"code":%d,"secretmembername":"y"}`,
		i, searchNames[i%5], i%2 == 0, i, 1000+i)
}

// searchFiles are the attachments of submission i: a file named after it
// for every sixth.
func searchFiles(i int) []formsapi.Attachment {
	if i%6 != 0 {
		return nil
	}
	return []formsapi.Attachment{{FieldName: "cv", FileURL: fmt.Sprintf("https://files.example/u/%d/R%%C3%%A9sum%%C3%%A9-%d.PDF", i, i), FileSize: 10, MIMEType: "application/pdf"}}
}

// searchManyData is submission i of FormSearchMany: every trigram of
// searchManyTerm, in two values, and the term itself in one value for
// every searchManyEvery-th, with the rare word "zyxw" beside it. tag
// names it for an erasure.
func searchManyData(i int) string { return searchManyRow(i, i%searchManyEvery == 0) }

// searchManyRow is the data of a submission n of FormSearchMany, a match
// of searchManyTerm or not.
func searchManyRow(n int, match bool) string {
	if match {
		return fmt.Sprintf(`{"n":%d,"a":"Foo Bar","c":"zyxw","tag":"s%d"}`, n, n)
	}
	return fmt.Sprintf(`{"n":%d,"a":"foo b","b":"o bar","tag":"s%d"}`, n, n)
}

// SearchSeed is DefaultSeed with FormSearch and FormSearchMany.
func SearchSeed() Seed {
	s := DefaultSeed()
	s.Forms = append(s.Forms,
		SeedForm{AccountA, formsapi.Form{ID: FormSearch, Title: "Search", CreatedAt: base}},
		SeedForm{AccountA, formsapi.Form{ID: FormSearchMany, Title: "Search many", CreatedAt: base}},
	)
	for j := range searchCount {
		i := j * 7 % searchCount
		s.Submissions = append(s.Submissions, SeedSubmission{Submission: formsapi.Submission{
			FormID: FormSearch, Data: []byte(searchData(i)), Attachments: searchFiles(i), CreatedAt: base.Add(time.Duration(i/2) * time.Second),
		}})
	}
	for j := range searchManyCount {
		i := j * 7 % searchManyCount
		s.Submissions = append(s.Submissions, SeedSubmission{
			Submission: formsapi.Submission{FormID: FormSearchMany, Data: []byte(searchManyData(i)), CreatedAt: findManyAt(i)},
			Metadata:   formsapi.Metadata{ID: fmt.Sprintf("sm-%d", i)},
		})
	}
	return s
}

// searchCases are terms (as a request gives them) and the n they find
// on FormSearch.
func searchCases() []struct {
	name, term string
	filters    []formsapi.Filter
	want       func(i int) bool
} {
	none := func(int) bool { return false }
	return []struct {
		name, term string
		filters    []formsapi.Filter
		want       func(i int) bool
	}{
		{"accents and case set aside", "zoe", nil, func(i int) bool { return i%5 <= 3 }},
		{"the term's own accents and case too", "ZOË", nil, func(i int) bool { return i%5 <= 3 }},
		{"two words", "Zoe Unal", nil, func(i int) bool { return i%5 <= 1 }},
		{"an accent in the middle", "chloe", nil, func(i int) bool { return i%5 == 4 }},
		{"attachment file names", "résumé", nil, func(i int) bool { return i%6 == 0 }},
		{"one attachment file name", "RESUME-12.pdf", nil, func(i int) bool { return i == 12 }},
		{"numbers' text", "1017", nil, func(i int) bool { return i == 17 }},
		{"nested values", "deepval7", nil, func(i int) bool { return i == 7 }},
		{"member names are not values", "secretmember", nil, none},
		{"never across two values", "unal x", nil, none},
		{"no such text", "qqq", nil, none},
		{"with a filter", "zoe", []formsapi.Filter{{Field: "even", Value: "true"}}, func(i int) bool { return i%5 <= 3 && i%2 == 0 }},
	}
}

// searchExpected returns the n of FormSearch that want keeps, as a set.
func searchExpected(want func(int) bool) []int {
	var ns []int
	for i := range searchCount {
		if want(i) {
			ns = append(ns, i)
		}
	}
	return ns
}

func searchClauses(t *testing.T, open Open, cfg *config) {
	seed := SearchSeed()
	ctx := context.Background()

	t.Run("Find/Search", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		for _, c := range searchCases() {
			want := searchExpected(c.want)
			for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
				for _, limit := range []int{MaxLimit, 2} {
					q := formsapi.Query{Limit: limit, Order: o, Search: find.Normalize(c.term), Filters: c.filters}
					subs := walkFiltered(t, s, AccountA, FormSearch, q)
					if got := findNs(t, subs); !sameSet(got, want) {
						t.Errorf("%s (q %q), order %s, limit %d: got n %v, want %v", c.name, c.term, o, limit, got, want)
					}
					for i := 1; i < len(subs); i++ {
						a, b := subs[i-1].CreatedAt, subs[i].CreatedAt
						if o == formsapi.Newest && a.Before(b) || o == formsapi.Oldest && b.Before(a) {
							t.Errorf("%s, order %s: item %d at %v follows one at %v", c.name, o, i, b, a)
						}
					}
				}
			}
		}
		// A range and a search.
		q := formsapi.Query{Limit: 3, Search: "zoe", Since: base.Add(3 * time.Second), Until: base.Add(9 * time.Second)}
		var want []int
		for _, i := range searchExpected(func(i int) bool { return i%5 <= 3 }) {
			if at := time.Duration(i/2) * time.Second; at >= 3*time.Second && at < 9*time.Second {
				want = append(want, i)
			}
		}
		if got := findNs(t, walkFiltered(t, s, AccountA, FormSearch, q)); !sameSet(got, want) {
			t.Errorf("q zoe within a range: got n %v, want %v", got, want)
		}
	})

	t.Run("Find/SearchPages", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		w, canAdd := s.(adder)
		added := 0
		// The matches: the seed's, and those added (even offsets past
		// the seed's n).
		match := func(n int) bool {
			if n < searchManyCount {
				return n%searchManyEvery == 0
			}
			return (n-searchManyCount)%2 == 0
		}
		for _, term := range []string{searchManyTerm, "zyxw"} {
			for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
				name := fmt.Sprintf("q %q, order %s", term, o)
				q := formsapi.Query{Limit: 3, Order: o, Search: find.Normalize(term)}
				before := findNs(t, walkFiltered(t, s, AccountA, FormSearchMany, q))
				var want []int
				for i := 0; i < searchManyCount+added; i++ {
					if match(i) {
						want = append(want, i)
					}
				}
				if !sameSet(before, want) {
					t.Fatalf("%s: got n %v, want %v", name, before, want)
				}
				if !canAdd {
					continue
				}
				first, err := s.ListSubmissions(ctx, AccountA, FormSearchMany, q)
				if err != nil || first.NextCursor == "" {
					t.Fatalf("%s: first page: cursor %q, error %v", name, first.NextCursor, err)
				}
				// Matches and non-matches added across the range while the
				// walk is under way.
				for k := 0; k <= 10; k++ {
					at := findManyAt(searchManyCount * k / 10)
					for _, matching := range []bool{true, false} {
						n := searchManyCount + added
						added++
						data := searchManyRow(n, matching)
						if err := w.AddSubmission(ctx, formsapi.Submission{FormID: FormSearchMany, Data: []byte(data), CreatedAt: at}, formsapi.Metadata{}); err != nil {
							t.Fatalf("AddSubmission: %v", err)
						}
					}
				}
				got := findNs(t, first.Items)
				rest := q
				rest.Cursor = first.NextCursor
				got = append(got, findNs(t, walkFiltered(t, s, AccountA, FormSearchMany, rest))...)
				checkFilteredWalk(t, name, got, before, match)
			}
		}
	})

	t.Run("Find/SearchWhileWriting", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		searchWhileWriting(t, s, s)
	})

	t.Run("Find/SearchAfterDelete", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		w, ok := s.(formsapi.Writer)
		if !ok {
			t.Log("the store has no Writer: deletions between searched pages cannot be checked")
			return
		}
		gone := map[int]bool{} // deleted or erased by an earlier order's
		for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
			q := formsapi.Query{Limit: 2, Order: o, Search: searchManyTerm}
			whole := findNs(t, walkFiltered(t, s, AccountA, FormSearchMany, q)) // read once before
			first, err := s.ListSubmissions(ctx, AccountA, FormSearchMany, q)
			if err != nil || first.NextCursor == "" {
				t.Fatalf("order %s: first page: cursor %q, error %v", o, first.NextCursor, err)
			}
			// Delete one match the next pages would list, and erase
			// another by its value.
			seen := findNs(t, first.Items)
			var rest []int
			for i := 0; i < searchManyCount; i += searchManyEvery {
				if !slices.Contains(seen, i) && !gone[i] {
					rest = append(rest, i)
				}
			}
			if len(rest) < 4 {
				t.Fatalf("order %s: %d matches left after the first page", o, len(rest))
			}
			deleted, erased := rest[len(rest)/2], rest[len(rest)/2+1]
			gone[deleted], gone[erased] = true, true
			if !slices.Contains(whole, deleted) || !slices.Contains(whole, erased) {
				t.Fatalf("order %s: n %d and %d not found before their deletion: %v", o, deleted, erased, whole)
			}
			if err := w.DeleteSubmission(ctx, AccountA, FormSearchMany, fmt.Sprintf("sm-%d", deleted)); err != nil {
				t.Fatalf("DeleteSubmission: %v", err)
			}
			if n, err := w.Erase(ctx, AccountA, "tag", fmt.Sprintf("s%d", erased)); err != nil || n != 1 {
				t.Fatalf("Erase: %d, %v", n, err)
			}
			next := q
			next.Cursor = first.NextCursor
			got := findNs(t, walkFiltered(t, s, AccountA, FormSearchMany, next))
			again := findNs(t, walkFiltered(t, s, AccountA, FormSearchMany, q))
			for _, n := range []int{deleted, erased} {
				if slices.Contains(got, n) || slices.Contains(again, n) {
					t.Errorf("order %s: n %d found after its deletion (pages after the first %v, a new walk %v)", o, n, got, again)
				}
			}
			for _, n := range rest {
				if n != deleted && n != erased && !slices.Contains(got, n) {
					t.Errorf("order %s: n %d, not deleted, missing from the pages after the first: %v", o, n, got)
				}
			}
		}
	})
}

// searchWhileWriting is the clauses Find/SearchWhileWriting and those
// of the group Nodes: while 4 writers add 40 matches each
// to FormSearch through writer (s, or another node over its data),
// spread over its range (past any batch a store folds its index in),
// searches and a filter walked page by page on s find every match whose
// write returned before the walk began, each once; once the writers are
// done, all 160.
func searchWhileWriting(t *testing.T, s, writer formsapi.Store) {
	w, ok := writer.(adder)
	if !ok {
		t.Log("the store has no AddSubmission: writes during a search cannot be checked")
		return
	}
	ctx := context.Background()
	const writers, each = 4, 40
	var mu sync.Mutex
	var written []int
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := 10000 + g*each + i
				data := fmt.Sprintf(`{"n":%d,"name":"Quökka %d","tag":"qq"}`, n, n)
				at := base.Add(time.Duration(n%searchCount)*500*time.Millisecond + time.Duration(n)*time.Microsecond)
				if err := w.AddSubmission(ctx, formsapi.Submission{FormID: FormSearch, Data: []byte(data), CreatedAt: at}, formsapi.Metadata{}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				written = append(written, n)
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	check := func(final bool) {
		mu.Lock()
		before := slices.Clone(written)
		mu.Unlock()
		for _, q := range []formsapi.Query{
			{Limit: 7, Search: "quokka"},
			{Limit: 5, Order: formsapi.Oldest, Search: "okka 1"},
			{Limit: 9, Filters: []formsapi.Filter{{Field: "tag", Value: `"qq"`}}},
		} {
			got := findNs(t, walkFiltered(t, s, AccountA, FormSearch, q))
			seen := map[int]int{}
			for _, n := range got {
				if seen[n]++; seen[n] == 2 {
					t.Errorf("%+v: n %d found twice while writers added", q, n)
				}
			}
			for _, n := range before {
				if seen[n] == 0 {
					t.Errorf("%+v: n %d, written before the walk began, not found (found %d of %d)", q, n, len(got), len(before))
				}
			}
			if final && len(got) != writers*each {
				t.Errorf("%+v: found %d once the writers were done, want %d", q, len(got), writers*each)
			}
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			check(false)
		}
	}
	close(errs)
	for err := range errs {
		t.Fatalf("AddSubmission: %v", err)
	}
	check(true)
}
