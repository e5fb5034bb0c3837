package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
)

// The find clauses: filters on submitted fields (formsapi.Query.Filters).
// They run on a seed of their own (FindSeed), whose data holds the
// cases: the same value as a number, a float and a string, accents and
// case, a value in a nested object, a member named twice, null, and the
// same data in another form and another account.

// Forms of FindSeed.
const (
	FormFind      = "find-a"  // AccountA's form of findCount submissions
	FormFindOther = "find-a2" // AccountA's form with the same data as FormFind
	FormFindB     = "find-b"  // AccountB's form with the same data as FormFind
	findCount     = 40
)

// findNames are the values of the member "name", in turn: a filter on one
// must not match another.
var findNames = []string{`"Zoë"`, `"zoe"`, `"ZOË"`, `"Zoe "`}

// findData returns the data of submission i of the find forms.
func findData(i int) string {
	score := []string{`42`, `42.0`, `"42"`, `4.2e1`, `43`}[i%5]
	var extra string
	switch {
	case i%7 == 0:
		extra = `,"gone":null`
	case i%7 == 1:
		extra = `,"gone":"null"`
	}
	if i == 13 {
		// Named twice: the last one counts, as in encoding/json.
		return `{"n":13,"tag":"t1","tag":"t4","even":false,"name":"Zoë","score":43}`
	}
	return fmt.Sprintf(`{"n":%d,"tag":"t%d","even":%t,"name":%s,"score":%s,"html":"a<b>&c","nested":{"tag":"t0"}%s%s}`,
		i, i%5, i%2 == 0, findNames[i%4], score, extra, findWhen(i))
}

// findWhen is the member "when" of submission i of the find forms, for
// the range operators: an RFC 3339 instant i hours after 2024-03-10T00:00Z
// (i%4 == 0), the same instant written at +05:00, so that its text orders
// otherwise (i%4 == 1), a date of March 2024 as text (i%4 == 2), or none.
func findWhen(i int) string {
	at := time.Date(2024, 3, 10, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Hour)
	switch i % 4 {
	case 0:
		return `,"when":"` + at.Format(time.RFC3339) + `"`
	case 1:
		return `,"when":"` + at.In(time.FixedZone("", 5*3600)).Format(time.RFC3339) + `"`
	case 2:
		return fmt.Sprintf(`,"when":"2024-03-%02d"`, i/4+1)
	}
	return ""
}

// FindSeed is the seed of the find clauses: DefaultSeed's forms, keys
// and submissions, and three forms of findCount submissions each with
// findData, some sharing a timestamp.
func FindSeed() Seed {
	s := DefaultSeed()
	s.Forms = append(s.Forms,
		SeedForm{AccountA, formsapi.Form{ID: FormFind, Title: "Find", CreatedAt: base}},
		SeedForm{AccountA, formsapi.Form{ID: FormFindOther, Title: "Find too", CreatedAt: base}},
		SeedForm{AccountB, formsapi.Form{ID: FormFindB, Title: "B find", CreatedAt: base}},
	)
	for _, form := range []string{FormFind, FormFindOther, FormFindB} {
		for j := range findCount {
			i := j * 11 % findCount // out of time order
			at := base.Add(time.Duration(i/3) * time.Second)
			s.Submissions = append(s.Submissions, SeedSubmission{
				Submission: formsapi.Submission{FormID: form, Data: []byte(findData(i)), CreatedAt: at},
			})
		}
	}
	return s
}

// findCase is one set of filters and the values of "n" it must find.
type findCase struct {
	name    string
	filters []formsapi.Filter
	want    func(i int) bool
}

func findCases() []findCase {
	f := func(field, value string) formsapi.Filter { return formsapi.Filter{Field: field, Value: value} }
	isNumber42 := func(i int) bool { return i != 13 && i%5 != 2 && i%5 != 4 }
	return []findCase{
		{"string", []formsapi.Filter{f("tag", `"t1"`)}, func(i int) bool { return i%5 == 1 && i != 13 }},
		{"last of a member named twice", []formsapi.Filter{f("tag", `"t4"`)}, func(i int) bool { return i%5 == 4 || i == 13 }},
		{"accents and case count", []formsapi.Filter{f("name", `"Zoë"`)}, func(i int) bool { return i%4 == 0 || i == 13 }},
		{"trailing space counts", []formsapi.Filter{f("name", `"Zoe "`)}, func(i int) bool { return i%4 == 3 && i != 13 }},
		{"number equals its float forms", []formsapi.Filter{f("score", `42`)}, isNumber42},
		{"a string is not a number", []formsapi.Filter{f("score", `"42"`)}, func(i int) bool { return i%5 == 2 && i != 13 }},
		{"true", []formsapi.Filter{f("even", `true`)}, func(i int) bool { return i%2 == 0 }},
		{"false", []formsapi.Filter{f("even", `false`)}, func(i int) bool { return i%2 == 1 }},
		{"null", []formsapi.Filter{f("gone", `null`)}, func(i int) bool { return i%7 == 0 && i != 13 }},
		{"the string null", []formsapi.Filter{f("gone", `"null"`)}, func(i int) bool { return i%7 == 1 }},
		{"HTML characters", []formsapi.Filter{f("html", `"a<b>&c"`)}, func(i int) bool { return i != 13 }},
		{"several clauses AND", []formsapi.Filter{f("even", `true`), f("score", `42`), f("tag", `"t0"`)}, func(i int) bool { return i%2 == 0 && isNumber42(i) && i%5 == 0 }},
		{"clauses that exclude each other", []formsapi.Filter{f("n", `2`), f("tag", `"t1"`)}, func(int) bool { return false }},
		{"a nested member is not top-level", []formsapi.Filter{f("tag", `"t0"`)}, func(i int) bool { return i%5 == 0 }},
		{"a member no submission has", []formsapi.Filter{f("missing", `"t0"`)}, func(int) bool { return false }},
		{"an object never matches", []formsapi.Filter{f("nested", `"t0"`)}, func(int) bool { return false }},
		{"one submission", []formsapi.Filter{f("n", `17`)}, func(i int) bool { return i == 17 }},
	}
}

// opCases are the clauses with operators (formsapi.FilterOp) and the
// values of "n" each must find, on findData (submission 13 has no html,
// gone or when, its tag t4 and its score 43).
func opCases() []findCase {
	op := func(field string, o formsapi.FilterOp, value string) formsapi.Filter {
		return formsapi.Filter{Field: field, Op: o, Value: value}
	}
	in := func(field string, values ...string) formsapi.Filter {
		return formsapi.Filter{Field: field, Op: formsapi.FilterIn, Values: values}
	}
	instant := func(i int) bool { return i != 13 && i%4 <= 1 }
	return []findCase{
		{"gte a number", []formsapi.Filter{op("n", formsapi.FilterGte, "10")}, func(i int) bool { return i >= 10 }},
		{"lt a number", []formsapi.Filter{op("n", formsapi.FilterLt, "9.5")}, func(i int) bool { return i <= 9 }},
		{"a range of two clauses", []formsapi.Filter{op("n", formsapi.FilterGt, "5"), op("n", formsapi.FilterLte, "20")}, func(i int) bool { return i > 5 && i <= 20 }},
		{"numbers by value, strings left out", []formsapi.Filter{op("score", formsapi.FilterGte, "42")}, func(i int) bool { return i%5 != 2 }},
		{"gt a number", []formsapi.Filter{op("score", formsapi.FilterGt, "42")}, func(i int) bool { return i%5 == 4 || i == 13 }},
		{"a string range leaves numbers out", []formsapi.Filter{op("score", formsapi.FilterGte, `"4"`)}, func(i int) bool { return i%5 == 2 }},
		{"instants as instants", []formsapi.Filter{op("when", formsapi.FilterGte, `"2024-03-10T18:00:00Z"`)}, func(i int) bool { return instant(i) && i >= 18 }},
		{"an instant at another offset", []formsapi.Filter{op("when", formsapi.FilterLt, `"2024-03-10T12:00:00+02:00"`)}, func(i int) bool { return instant(i) && i < 10 }},
		{"text by its normal form, instants left out", []formsapi.Filter{op("when", formsapi.FilterLt, `"2024-03-05"`)}, func(i int) bool { return i%4 == 2 && i < 16 }},
		{"gt text, case and accents aside", []formsapi.Filter{op("name", formsapi.FilterGt, `"ZOE"`)}, func(i int) bool { return i%4 == 3 && i != 13 }},
		{"lte text, case and accents aside", []formsapi.Filter{op("name", formsapi.FilterLte, `"zoë"`)}, func(i int) bool { return i%4 != 3 || i == 13 }},
		{"ne keeps null's absence too", []formsapi.Filter{op("gone", formsapi.FilterNe, "null")}, func(i int) bool { return i%7 != 0 || i == 13 }},
		{"ne a string", []formsapi.Filter{op("tag", formsapi.FilterNe, `"t1"`)}, func(i int) bool { return i%5 != 1 || i == 13 }},
		{"in", []formsapi.Filter{in("tag", `"t1"`, `"t3"`)}, func(i int) bool { return (i%5 == 1 || i%5 == 3) && i != 13 }},
		{"in, of two kinds", []formsapi.Filter{in("score", `"42"`, `43`)}, func(i int) bool { return i%5 == 2 || i%5 == 4 || i == 13 }},
		{"exists", []formsapi.Filter{op("gone", formsapi.FilterExists, "true")}, func(i int) bool { return i%7 == 1 }},
		{"exists false: absent or null", []formsapi.Filter{op("gone", formsapi.FilterExists, "false")}, func(i int) bool { return i%7 != 1 }},
		{"prefix, case and accents aside", []formsapi.Filter{op("name", formsapi.FilterPrefix, "zo")}, func(int) bool { return true }},
		{"prefix with a space", []formsapi.Filter{op("name", formsapi.FilterPrefix, "zoe ")}, func(i int) bool { return i%4 == 3 && i != 13 }},
		{"prefix leaves numbers out", []formsapi.Filter{op("score", formsapi.FilterPrefix, "4")}, func(i int) bool { return i%5 == 2 }},
		{"an operator beside an equality", []formsapi.Filter{op("n", formsapi.FilterGte, "20"), op("tag", formsapi.FilterEq, `"t0"`)}, func(i int) bool { return i%5 == 0 && i >= 20 }},
		{"a range of another kind than every member", []formsapi.Filter{op("html", formsapi.FilterGt, "5")}, func(int) bool { return false }},
	}
}

// walkFiltered walks every page of a filtered list: a page may be short,
// or empty, and still carry a cursor.
func walkFiltered(t *testing.T, s formsapi.Store, account, form string, q formsapi.Query) []formsapi.Submission {
	t.Helper()
	var all []formsapi.Submission
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("more than 10000 pages: the cursor does not advance")
		}
		p, err := s.ListSubmissions(context.Background(), account, form, q)
		if err != nil {
			t.Fatalf("page %d (cursor %q): %v", pages, q.Cursor, err)
		}
		if len(p.Items) > q.Limit {
			t.Fatalf("page %d has %d items, more than the limit %d", pages, len(p.Items), q.Limit)
		}
		all = append(all, p.Items...)
		if p.NextCursor == "" {
			return all
		}
		if p.NextCursor == q.Cursor {
			t.Fatalf("page %d gives back its own cursor %q", pages, q.Cursor)
		}
		q.Cursor = p.NextCursor
	}
}

// findNs returns the "n" of each submission, in page order.
func findNs(t *testing.T, subs []formsapi.Submission) []int {
	t.Helper()
	ns := make([]int, len(subs))
	for i, s := range subs {
		var d struct{ N *int }
		if err := json.Unmarshal(s.Data, &d); err != nil || d.N == nil {
			t.Fatalf("submission %d: data %s has no n", i, s.Data)
		}
		ns[i] = *d.N
	}
	return ns
}

// findExpected returns the "n" of each submission of the find forms that
// want keeps, in the order o lists them.
func findExpected(x *expect, form string, q formsapi.Query, want func(int) bool) []int {
	type item struct {
		n  int
		at time.Time
		k  int // insertion order: the tie-breaker of the oracle
	}
	var items []item
	for k, s := range x.subs[form] {
		var d struct{ N int }
		if err := json.Unmarshal(s.Submission.Data, &d); err != nil {
			panic(err)
		}
		if !want(d.N) || !inRange(q, s.Submission.CreatedAt) {
			continue
		}
		items = append(items, item{d.N, s.Submission.CreatedAt, k})
	}
	slices.SortStableFunc(items, func(a, b item) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.k - b.k
	})
	if q.Order == formsapi.Newest {
		slices.Reverse(items)
	}
	ns := make([]int, len(items))
	for i, it := range items {
		ns[i] = it.n
	}
	return ns
}

func inRange(q formsapi.Query, at time.Time) bool {
	return (q.Since.IsZero() || !at.Before(q.Since)) && (q.Until.IsZero() || at.Before(q.Until))
}

func findClauses(t *testing.T, open Open, cfg *config) {
	seed := FindSeed()
	x := expectations(seed)
	reads := readers(t, open, seed) // every clause here only reads

	t.Run("Find/Equality", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, c := range findCases() {
			for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
				q := formsapi.Query{Limit: MaxLimit, Order: o, Filters: c.filters}
				got := findNs(t, walkFiltered(t, s, AccountA, FormFind, q))
				want := findExpected(x, FormFind, q, c.want)
				// Items sharing a timestamp come in the store's own
				// order: compare as sets, and the order by time below.
				if !sameSet(got, want) {
					t.Errorf("%s, order %s: got n %v, want %v", c.name, o, got, want)
				}
			}
		}
	})
	t.Run("Find/Operators", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for k, c := range opCases() {
			for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
				limits := []int{MaxLimit}
				if k%4 == 0 {
					limits = append(limits, 3)
				}
				for _, limit := range limits {
					q := formsapi.Query{Limit: limit, Order: o, Filters: c.filters}
					got := findNs(t, walkFiltered(t, s, AccountA, FormFind, q))
					want := findExpected(x, FormFind, q, c.want)
					if !sameSet(got, want) {
						t.Errorf("%s, order %s, limit %d: got n %v, want %v", c.name, o, limit, got, want)
					}
				}
			}
		}
	})
	t.Run("Find/Order", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
			q := formsapi.Query{Limit: MaxLimit, Order: o, Filters: []formsapi.Filter{{Field: "even", Value: "true"}}}
			subs := walkFiltered(t, s, AccountA, FormFind, q)
			for i := 1; i < len(subs); i++ {
				a, b := subs[i-1].CreatedAt, subs[i].CreatedAt
				if o == formsapi.Newest && a.Before(b) || o == formsapi.Oldest && b.Before(a) {
					t.Errorf("order %s: item %d at %v follows one at %v", o, i, b, a)
				}
			}
			all := findNs(t, walkFiltered(t, s, AccountA, FormFind, formsapi.Query{Limit: MaxLimit, Order: o}))
			var kept []int
			for _, n := range all {
				if n%2 == 0 {
					kept = append(kept, n)
				}
			}
			if got := findNs(t, subs); !slices.Equal(got, kept) {
				t.Errorf("order %s: the filtered list %v is not the unfiltered one's matches in its order, %v", o, got, kept)
			}
		}
	})
	t.Run("Find/Pagination", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, c := range findCases()[:6] {
			for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
				one := findNs(t, walkFiltered(t, s, AccountA, FormFind, formsapi.Query{Limit: MaxLimit, Order: o, Filters: c.filters}))
				for _, limit := range []int{1, 2, 3, 7} {
					got := findNs(t, walkFiltered(t, s, AccountA, FormFind, formsapi.Query{Limit: limit, Order: o, Filters: c.filters}))
					if !slices.Equal(got, one) {
						t.Errorf("%s, order %s, limit %d: pages give %v, one page gives %v", c.name, o, limit, got, one)
					}
				}
			}
		}
	})
	t.Run("Find/Range", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		filters := []formsapi.Filter{{Field: "score", Value: "42"}}
		for _, r := range []struct{ since, until time.Time }{
			{base.Add(3 * time.Second), time.Time{}},
			{time.Time{}, base.Add(5 * time.Second)},
			{base.Add(2 * time.Second), base.Add(9 * time.Second)},
		} {
			for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
				q := formsapi.Query{Limit: 2, Order: o, Since: r.since, Until: r.until, Filters: filters}
				got := findNs(t, walkFiltered(t, s, AccountA, FormFind, q))
				want := findExpected(x, FormFind, q, findCases()[4].want)
				if !sameSet(got, want) {
					t.Errorf("since %v, until %v, order %s: got n %v, want %v", r.since, r.until, o, got, want)
				}
			}
		}
	})
	t.Run("Find/Isolation", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, c := range findCases() {
			q := formsapi.Query{Limit: MaxLimit, Filters: c.filters}
			for _, form := range []string{FormFind, FormFindOther} {
				for _, sub := range walkFiltered(t, s, AccountA, form, q) {
					if sub.FormID != form || bytes.Contains(sub.Data, []byte(CanaryB)) {
						t.Errorf("%s: form %s lists a submission of form %s", c.name, form, sub.FormID)
					}
				}
			}
			if _, err := s.ListSubmissions(context.Background(), AccountA, FormFindB, q); !errors.Is(err, formsapi.ErrFormNotFound) {
				t.Errorf("%s: another account's form: got %v, want ErrFormNotFound", c.name, err)
			}
		}
	})
}

// totalClauses hold the contract of CountSubmissions (see formsapi.Total)
// on a store that counts.
func totalClauses(t *testing.T, open Open, cfg *config) {
	seed := FindSeed()
	x := expectations(seed)
	ctx := context.Background()
	t.Run("Find/Total", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		c, ok := s.(formsapi.Counter)
		if !ok {
			// An optional method: a store without it answers total with 501 (the
			// handler's clause), so there is nothing of the store's to hold here.
			t.Log("the store has no CountSubmissions (see formsapi.Total): clause not applicable")
			return
		}
		ranges := []struct{ since, until time.Time }{{}, {base.Add(3 * time.Second), base.Add(9 * time.Second)}}
		for _, r := range ranges {
			for _, fc := range append(findCases(), opCases()...) {
				q := formsapi.Query{Limit: 1, Since: r.since, Until: r.until, Filters: fc.filters, Cursor: "ignored", Order: formsapi.Oldest}
				want := int64(len(findExpected(x, FormFind, q, fc.want)))
				got, err := c.CountSubmissions(ctx, AccountA, FormFind, q, true)
				if err != nil || got != (formsapi.Total{Value: want, Kind: find.Exact}) {
					t.Errorf("%s, since %v: exact total %+v (%v), want %d exact", fc.name, r.since, got, err, want)
				}
				est, err := c.CountSubmissions(ctx, AccountA, FormFind, q, false)
				if err != nil || est.Value < want || est.Kind != find.Estimate && est != got {
					t.Errorf("%s, since %v: estimate %+v (%v), want an estimate of at least %d", fc.name, r.since, est, err, want)
				}
			}
			q := formsapi.Query{Limit: 1, Since: r.since, Until: r.until}
			want := int64(len(findExpected(x, FormFind, q, func(int) bool { return true })))
			for _, exact := range []bool{true, false} {
				got, err := c.CountSubmissions(ctx, AccountA, FormFind, q, exact)
				if err != nil || got != (formsapi.Total{Value: want, Kind: find.Exact}) {
					t.Errorf("no filters, since %v, exact %t: %+v (%v), want %d exact", r.since, exact, got, err, want)
				}
			}
		}
		for _, form := range []string{FormFindB, "no-such-form"} {
			if _, err := c.CountSubmissions(ctx, AccountA, form, formsapi.Query{Limit: 1}, true); !errors.Is(err, formsapi.ErrFormNotFound) {
				t.Errorf("form %s: got %v, want ErrFormNotFound", form, err)
			}
		}
		if got, err := c.CountSubmissions(ctx, AccountA, FormEmpty, formsapi.Query{Limit: 1}, true); err != nil || got != (formsapi.Total{Kind: find.Exact}) {
			t.Errorf("a form without submissions: %+v (%v), want 0 exact", got, err)
		}
	})
}

// sameSet reports whether a and b hold the same values, each as often.
func sameSet(a, b []int) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
