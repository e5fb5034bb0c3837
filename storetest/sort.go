package storetest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
)

// The sort clauses: lists ordered by a submitted field
// (formsapi.Query.Sort), on FindSeed's forms, whose members hold numbers
// and their float forms, strings, RFC 3339 instants at two offsets,
// dates as text, accents and case, booleans, null, objects and members
// named twice.

// sortFields are the fields the sort clauses order by: each kind, a
// member some submissions lack or hold null, an object, and none.
var sortFields = []string{"n", "score", "when", "name", "even", "gone", "tag", "nested", "missing"}

// sortedWant returns the order FindSeed's form lists under q (its Sort,
// range, filters and search), as each item's place: its sort key
// (find.SortValue; nil without one) and creation time. Items with the
// same place are ties, which the store orders by its tie-breaker.
func sortedWant(x *expect, form string, q formsapi.Query) []sortPlace {
	field, desc, _ := find.ParseSort(q.Sort)
	var keyed, plain []sortPlace
	for _, s := range x.subs[form] {
		sub := s.Submission
		if !inRange(q, sub.CreatedAt) || !q.Finds(sub) {
			continue
		}
		k, ok := find.SortValue(sub.Data, field)
		p := sortPlace{key: k, at: sub.CreatedAt}
		if ok {
			keyed = append(keyed, p)
		} else {
			plain = append(plain, p)
		}
	}
	cmp := func(a, b sortPlace) int {
		c := bytes.Compare(a.key, b.key)
		if c == 0 {
			c = a.at.Compare(b.at)
		}
		if desc {
			return -c
		}
		return c
	}
	slices.SortStableFunc(keyed, cmp)
	slices.SortStableFunc(plain, cmp)
	return append(keyed, plain...)
}

// sortPlace is an item's place in a sorted list, ties aside.
type sortPlace struct {
	key []byte
	at  time.Time
}

func (p sortPlace) String() string { return fmt.Sprintf("%x@%s", p.key, p.at.Format(time.RFC3339Nano)) }

// sortedPlaces returns the places of items, as the list under q orders
// them.
func sortedPlaces(q formsapi.Query, items []formsapi.Submission) []sortPlace {
	field, _, _ := find.ParseSort(q.Sort)
	out := make([]sortPlace, len(items))
	for i, s := range items {
		k, _ := find.SortValue(s.Data, field)
		out[i] = sortPlace{key: k, at: s.CreatedAt}
	}
	return out
}

func samePlaces(a, b []sortPlace) bool {
	return slices.EqualFunc(a, b, func(x, y sortPlace) bool { return bytes.Equal(x.key, y.key) && x.at.Equal(y.at) })
}

// sortQueries are the sorted lists the Sort/Order clause walks.
func sortQueries() []formsapi.Query {
	var qs []formsapi.Query
	for k, f := range sortFields {
		for _, dir := range []string{"", "-"} {
			for _, limit := range []int{MaxLimit, 3} {
				qs = append(qs, formsapi.Query{Limit: limit, Sort: dir + f})
				if k%3 == 0 {
					qs = append(qs, formsapi.Query{Limit: limit, Sort: dir + f, Filters: []formsapi.Filter{{Field: "even", Value: "true"}}})
				}
			}
		}
	}
	from, to := base.Add(3*time.Second), base.Add(9*time.Second)
	return append(qs,
		formsapi.Query{Limit: 4, Sort: "when", Since: from, Until: to},
		formsapi.Query{Limit: 4, Sort: "-name", Since: from},
		formsapi.Query{Limit: 2, Sort: "score", Filters: []formsapi.Filter{{Field: "n", Op: formsapi.FilterGte, Value: "20"}}},
		formsapi.Query{Limit: 5, Sort: "-n", Search: "zoe"},
	)
}

func sortClauses(t *testing.T, open Open, cfg *config) {
	seed := FindSeed()
	x := expectations(seed)
	reads := readers(t, open, seed)
	ctx := context.Background()

	t.Run("Sort/Order", func(t *testing.T) {
		cfg.parallel(t)
		for _, q := range sortQueries() {
			got := walkFiltered(t, reads, AccountA, FormFind, q)
			want := sortedWant(x, FormFind, q)
			if g := sortedPlaces(q, got); !samePlaces(g, want) {
				t.Errorf("sort %q, limit %d, filters %v, since %v: got places\n%v\nwant\n%v", q.Sort, q.Limit, q.Filters, q.Since, g, want)
			}
			seen := map[int]bool{}
			for _, n := range findNs(t, got) {
				if seen[n] {
					t.Errorf("sort %q, limit %d: n %d twice", q.Sort, q.Limit, n)
				}
				seen[n] = true
			}
		}
	})
	t.Run("Sort/Isolation", func(t *testing.T) {
		cfg.parallel(t)
		_, err := reads.ListSubmissions(ctx, AccountA, FormFindB, formsapi.Query{Limit: 5, Sort: "n"})
		if err == nil {
			t.Errorf("a sorted list of another account's form: no error, want ErrFormNotFound")
		}
		q := formsapi.Query{Limit: MaxLimit, Sort: "-n"}
		a := findNs(t, walkFiltered(t, reads, AccountA, FormFindOther, q))
		if len(a) != findCount {
			t.Errorf("a sorted list of a form with the same data: %d items, want %d", len(a), findCount)
		}
	})
	t.Run("Sort/AddedBetweenPages", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		sortAddedBetweenPages(t, s, s)
	})
}

// sortAddedBetweenPages is the clause Sort/AddedBetweenPages, and
// Nodes' SortedPagesWhileAnotherNodeWrites: between the first sorted
// page of FormFind on s and the rest, writer (s, or another node over
// its data) adds submissions of every kind around the cursor's value
// and deletes some; the walk stays in order and returns each submission
// listed before the additions once; a walk begun after them lists every
// addition not deleted.
func sortAddedBetweenPages(t *testing.T, s, writer formsapi.Store) {
	ctx := context.Background()
	w, ok := writer.(adder)
	if !ok {
		t.Log("the store has no AddSubmission method: writes between sorted pages cannot be checked")
		return
	}
	del, _ := writer.(formsapi.Writer)
	added := 0
	live := map[int]bool{} // the additions not deleted, by n
	for _, sort := range []string{"score", "-score", "when", "-name", "gone"} {
		q := formsapi.Query{Limit: 7, Sort: sort}
		before := findNs(t, walkFiltered(t, s, AccountA, FormFind, q))
		first, err := s.ListSubmissions(ctx, AccountA, FormFind, q)
		if err != nil || first.NextCursor == "" {
			t.Fatalf("sort %q: first page: cursor %q, error %v", sort, first.NextCursor, err)
		}
		// Additions of every kind around the cursor's value, at
		// every time, and without the field.
		for _, v := range []string{`-5`, `0`, `3`, `6.5`, `17`, `1e9`, `"2024-03-10T02:00:00Z"`, `"2024-03-01"`, `"Zoe"`, `"a"`, `true`, `null`} {
			for _, at := range []time.Time{base.Add(-time.Hour), base.Add(2 * time.Second), base.Add(time.Hour)} {
				data := fmt.Sprintf(`{"n":%d,"%s":%s}`, 1000+added, sortFieldOf(sort), v)
				id := fmt.Sprintf("sort-added-%d", added)
				added++
				if err := w.AddSubmission(ctx, formsapi.Submission{FormID: FormFind, Data: []byte(data), CreatedAt: at}, formsapi.Metadata{ID: id}); err != nil {
					t.Fatalf("AddSubmission: %v", err)
				}
				live[1000+added-1] = true
				if del != nil && added%5 == 0 {
					// A deletion of an added submission between pages
					// must move no other one.
					if err := del.DeleteSubmission(ctx, AccountA, FormFind, id); err != nil {
						t.Fatalf("DeleteSubmission: %v", err)
					}
					delete(live, 1000+added-1)
				}
			}
		}
		rest := q
		rest.Cursor = first.NextCursor
		items := append(first.Items, walkFiltered(t, s, AccountA, FormFind, rest)...)
		got := findNs(t, items)
		places := sortedPlaces(q, items)
		desc := sort[0] == '-'
		for i := 1; i < len(places); i++ {
			if sortAfter(places[i-1], places[i], desc) {
				t.Errorf("sort %q: item %d (%v) after %v is out of order", sort, i, places[i], places[i-1])
			}
		}
		counts := map[int]int{}
		for _, n := range got {
			counts[n]++
		}
		for _, n := range before {
			if counts[n] != 1 {
				t.Errorf("sort %q: n %d, listed before the additions, came %d times across them, want once", sort, n, counts[n])
			}
		}
		for n, c := range counts {
			if c > 1 {
				t.Errorf("sort %q: n %d came %d times", sort, n, c)
			}
		}
		// A walk begun after the writes returned lists every addition
		// not deleted, and no deleted one.
		again := map[int]bool{}
		for _, n := range findNs(t, walkFiltered(t, s, AccountA, FormFind, q)) {
			again[n] = true
		}
		for n := 1000; n < 1000+added; n++ {
			if again[n] != live[n] {
				t.Errorf("sort %q: a walk after the writes lists addition n %d: %t, want %t (deleted: %t)", sort, n, again[n], live[n], !live[n])
			}
		}
	}
}

// sortAfter reports whether place a sorts after b (without a key: last).
func sortAfter(a, b sortPlace, desc bool) bool {
	switch {
	case a.key == nil && b.key != nil:
		return true
	case a.key != nil && b.key == nil:
		return false
	}
	c := bytes.Compare(a.key, b.key)
	if c == 0 {
		c = a.at.Compare(b.at)
	}
	return c > 0 && !desc || c < 0 && desc
}

// sortFieldOf is the field of a sort parameter.
func sortFieldOf(sort string) string {
	f, _, _ := find.ParseSort(sort)
	return f
}
