package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
)

// The find clauses with writers: filtered pages under writes between
// them, and filtered pages read again after a write that changes them.

// FormFindMany is AccountA's form of findManyCount submissions of the
// seed of the clauses on writes between filtered pages: more than a
// filtered page examines (find.MaxExamined), all with "kind":"k" and one
// in findManyEvery with "rare":true, so the filter kind=k&rare=true,
// walked by its first field, finds its matches only a few per bound and
// its pages come back short with a cursor on a store that bounds them.
const (
	FormFindMany  = "find-many"
	findManyCount = 1200
	findManyEvery = 150
)

// findManySeed is DefaultSeed with FormFindMany, its submissions two to
// a timestamp and added out of time order.
func findManySeed() Seed {
	s := DefaultSeed()
	s.Forms = append(s.Forms, SeedForm{AccountA, formsapi.Form{ID: FormFindMany, Title: "Find many", CreatedAt: base}})
	for j := range findManyCount {
		i := j * 7 % findManyCount // 7 is prime to the count: every i once
		s.Submissions = append(s.Submissions, SeedSubmission{Submission: formsapi.Submission{
			FormID: FormFindMany, Data: []byte(findManyData(i)), CreatedAt: findManyAt(i),
		}})
	}
	return s
}

func findManyData(i int) string {
	return fmt.Sprintf(`{"n":%d,"kind":"k","rare":%t,"even":%t}`, i, i%findManyEvery == 0, i%2 == 0)
}

func findManyAt(i int) time.Time { return base.Add(time.Duration(i/2) * time.Second) }

// findManyCases are the filters of the clauses on writes between pages:
// a rare value walked by itself, the same matches walked through a common
// value (short pages at the bound), and a common value (full pages).
func findManyCases() []struct {
	name    string
	filters []formsapi.Filter
	limit   int
	match   func(n int) bool
} {
	rare := func(n int) bool { return n%findManyEvery == 0 }
	return []struct {
		name    string
		filters []formsapi.Filter
		limit   int
		match   func(n int) bool
	}{
		{"rare", []formsapi.Filter{{Field: "rare", Value: "true"}}, 3, rare},
		{"rare through a common value", []formsapi.Filter{{Field: "kind", Value: `"k"`}, {Field: "rare", Value: "true"}}, 10, rare},
		{"common", []formsapi.Filter{{Field: "even", Value: "true"}}, 50, func(n int) bool { return n%2 == 0 }},
	}
}

// adder is a store's AddSubmission.
type adder interface {
	AddSubmission(context.Context, formsapi.Submission, formsapi.Metadata) error
}

func findWriteClauses(t *testing.T, open Open, cfg *config) {
	seed := findManySeed()
	ctx := context.Background()

	t.Run("Find/AddedBetweenPages", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		w, ok := s.(adder)
		if !ok {
			t.Log("the store has no AddSubmission method: writes between filtered pages cannot be checked")
			return
		}
		added := 0
		for _, c := range findManyCases() {
			for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
				name := fmt.Sprintf("%s, order %s", c.name, o)
				q := formsapi.Query{Limit: c.limit, Order: o, Filters: c.filters}
				before := findNs(t, walkFiltered(t, s, AccountA, FormFindMany, q))
				first, err := s.ListSubmissions(ctx, AccountA, FormFindMany, q)
				if err != nil || first.NextCursor == "" {
					t.Fatalf("%s: first page: cursor %q, error %v", name, first.NextCursor, err)
				}
				// Additions that match and that do not, before, at and
				// after the first page's last item and across the whole
				// range (a short page's cursor lies past its last item,
				// where the walk stopped), and outside the range.
				var at []time.Time
				if len(first.Items) > 0 {
					last := first.Items[len(first.Items)-1].CreatedAt
					at = append(at, last, last.Add(-time.Nanosecond), last.Add(time.Nanosecond))
				}
				for k := 0; k <= 10; k++ {
					at = append(at, findManyAt(findManyCount*k/10))
				}
				at = append(at, base.Add(-time.Hour), findManyAt(findManyCount).Add(time.Hour))
				addedAt := map[int]time.Time{} // the matches added, at their times
				for _, a := range at {
					for _, matching := range []bool{true, false} {
						// Every case's filter holds for a multiple of
						// findManyEvery (even), none for an odd n.
						n := 2*(100000+added) + 1
						if matching {
							n = findManyEvery * (1000 + added)
						}
						added++
						data := findManyData(n)
						if err := w.AddSubmission(ctx, formsapi.Submission{FormID: FormFindMany, Data: []byte(data), CreatedAt: a}, formsapi.Metadata{}); err != nil {
							t.Fatalf("AddSubmission: %v", err)
						}
						if matching {
							addedAt[n] = a
						}
					}
				}
				got := findNs(t, first.Items)
				rest := q
				rest.Cursor = first.NextCursor
				got = append(got, findNs(t, walkFiltered(t, s, AccountA, FormFindMany, rest))...)
				checkFilteredWalk(t, name, got, before, c.match)
				// A cursor lies at or past its page's last item (past it
				// where the walk examined entries that did not match): a
				// match added before that item never comes, one added past
				// every entry of the form always does, once.
				seen := map[int]int{}
				for _, n := range got {
					seen[n]++
				}
				end := base.Add(-time.Hour) // the far end of the walk
				if o == formsapi.Oldest {
					end = findManyAt(findManyCount).Add(time.Hour)
				}
				for n, a := range addedAt {
					if a.Equal(end) && seen[n] != 1 {
						t.Errorf("%s: a match added after the first page and sorting after every other (n %d) returned %d times, want once", name, n, seen[n])
					}
					if len(first.Items) == 0 {
						continue
					}
					last := first.Items[len(first.Items)-1].CreatedAt
					if sortsBefore := a.After(last) == (o == formsapi.Newest); sortsBefore && !a.Equal(last) && seen[n] != 0 {
						t.Errorf("%s: a match added after the first page and sorting before its last item (n %d) returned %d times, want never", name, n, seen[n])
					}
				}
			}
		}
	})

	t.Run("Find/ConcurrentWriters", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		w, ok := s.(adder)
		if !ok {
			t.Log("the store has no AddSubmission method: writers beside filtered walks cannot be checked")
			return
		}
		var next int // numbers the writers' submissions (under mu)
		for _, c := range findManyCases() {
			for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
				name := fmt.Sprintf("%s, order %s", c.name, o)
				q := formsapi.Query{Limit: c.limit, Order: o, Filters: c.filters}
				before := findNs(t, walkFiltered(t, s, AccountA, FormFindMany, q))
				// Two writers add matches and other submissions all over
				// the range while the walk runs, each waiting for a page
				// to be read before its next write, so pages and writes
				// interleave whatever the scheduler does.
				pages := make(chan struct{}, 1)
				stop := make(chan struct{})
				var wg sync.WaitGroup
				var mu sync.Mutex
				var errs []error
				for writer := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for k := 0; ; k++ {
							select {
							case <-stop:
								return
							case <-pages:
							}
							mu.Lock()
							n := 2*(200000+next) + 1 // odd: a match of no case
							if k%2 == 0 {
								n = findManyEvery * (100000 + next) // a match of every case
							}
							next++
							mu.Unlock()
							at := findManyAt((k*37 + writer*500) % findManyCount)
							if err := w.AddSubmission(ctx, formsapi.Submission{FormID: FormFindMany, Data: []byte(findManyData(n)), CreatedAt: at}, formsapi.Metadata{}); err != nil {
								mu.Lock()
								errs = append(errs, err)
								mu.Unlock()
								return
							}
						}
					}()
				}
				var got []int
				for p := 0; ; p++ {
					if p > 10000 {
						t.Fatalf("%s: more than 10000 pages: the cursor does not advance", name)
					}
					page, err := s.ListSubmissions(ctx, AccountA, FormFindMany, q)
					if err != nil {
						close(stop)
						wg.Wait()
						t.Fatalf("%s: page %d: %v", name, p, err)
					}
					got = append(got, findNs(t, page.Items)...)
					if page.NextCursor == "" {
						break
					}
					q.Cursor = page.NextCursor
					select {
					case pages <- struct{}{}:
					default:
					}
				}
				close(stop)
				wg.Wait()
				if len(errs) > 0 {
					t.Fatalf("%s: AddSubmission: %v", name, errs[0])
				}
				checkFilteredWalk(t, name, got, before, c.match)
			}
		}
	})

	t.Run("Find/FreshAfterWrites", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, FindSeed())
		wr, ok := s.(formsapi.Writer)
		if !ok {
			t.Log("the store has no formsapi.Writer: filtered pages after writes cannot be checked")
			return
		}
		filters := []formsapi.Filter{{Field: "tag", Value: `"t1"`}}
		// Read through the store, and through a handler over it when the
		// store resolves keys: on this module's stores that is their own
		// fast path, with their exact page caches, and an ETag a client
		// sends back.
		var h http.Handler
		if r, ok := s.(formsapi.KeyResolver); ok {
			h = formsapi.NewHandler(s, r)
		}
		target := "/v1/forms/" + FormFind + "/submissions?limit=100&" + url.Values{"filter[tag]": {`"t1"`}}.Encode()
		var etag string
		read := func(step string) []int {
			t.Helper()
			var ns []int
			for range 2 { // the second read may be served by a cache the first filled
				ns = findNs(t, walkFiltered(t, s, AccountA, FormFind, formsapi.Query{Limit: 100, Filters: filters}))
			}
			if h == nil {
				return ns
			}
			r := httptest.NewRequest("GET", target, nil)
			r.Header.Set("Authorization", "Bearer "+KeyA)
			if etag != "" {
				r.Header.Set("If-None-Match", etag)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Fatalf("%s: GET %s with the tag of the page before the write: %d %.300s, want 200 with the page changed", step, target, rec.Code, rec.Body)
			}
			etag = rec.Header().Get("ETag")
			var page struct{ Submissions []formsapi.Submission }
			if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
				t.Fatalf("%s: GET %s: %v", step, target, err)
			}
			if got := findNs(t, page.Submissions); !sameSet(got, ns) {
				t.Errorf("%s: the handler's page has n %v, the store's %v", step, got, ns)
			}
			return ns
		}
		has := func(ns []int, n int) bool { return slices.Contains(ns, n) }
		read("the seed") // the page, and its tag, before any write
		var ns []int
		add := func(n int, tag, id string) {
			t.Helper()
			data := fmt.Sprintf(`{"n":%d,"tag":%q,"v":%q}`, n, tag, id)
			if err := wr.AddSubmission(ctx, formsapi.Submission{FormID: FormFind, Data: []byte(data), CreatedAt: base.Add(time.Duration(n) * time.Millisecond)}, formsapi.Metadata{ID: id}); err != nil {
				t.Fatalf("AddSubmission: %v", err)
			}
		}
		add(901, "t1", "fresh-901")
		if ns = read("a matching submission added"); !has(ns, 901) {
			t.Errorf("a matching submission added: the filtered page %v lacks it", ns)
		}
		add(902, "t1", "fresh-902")
		add(903, "t1", "erase-me")
		if ns = read("two more added"); !has(ns, 902) || !has(ns, 903) {
			t.Errorf("two matching submissions added: the filtered page %v lacks one", ns)
		}
		if err := wr.DeleteSubmission(ctx, AccountA, FormFind, "fresh-901"); err != nil {
			t.Fatalf("DeleteSubmission: %v", err)
		}
		if ns = read("a match deleted"); has(ns, 901) || !has(ns, 902) {
			t.Errorf("a matching submission deleted: the filtered page %v still has it, or lost another", ns)
		}
		if n, err := wr.Erase(ctx, AccountA, "v", "erase-me"); err != nil || n != 1 {
			t.Fatalf("Erase: %d, %v; want 1 deleted", n, err)
		}
		if ns = read("a match erased"); has(ns, 903) || !has(ns, 902) {
			t.Errorf("a matching submission erased: the filtered page %v still has it, or lost another", ns)
		}
		if err := wr.DeleteForm(ctx, AccountA, FormFind); err != nil {
			t.Fatalf("DeleteForm: %v", err)
		}
		if _, err := s.ListSubmissions(ctx, AccountA, FormFind, formsapi.Query{Limit: 100, Filters: filters}); err == nil {
			t.Errorf("a filtered page of a deleted form: no error, want ErrFormNotFound")
		}
	})
}

// checkFilteredWalk checks a filtered walk made while writers added:
// every item matches, none comes twice, and none of before, the walk's
// items without the writes, is missing.
func checkFilteredWalk(t *testing.T, name string, got, before []int, match func(int) bool) {
	t.Helper()
	seen := map[int]int{}
	for _, n := range got {
		seen[n]++
		if seen[n] == 2 {
			t.Errorf("%s: n %d returned twice across pages while writers added", name, n)
		}
		if !match(n) {
			t.Errorf("%s: n %d does not match the filter", name, n)
		}
	}
	for _, n := range before {
		if seen[n] == 0 {
			t.Errorf("%s: n %d skipped while writers added between pages", name, n)
		}
	}
}
