package formsapi_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// TestSortBadInput: an invalid sort, and sort beside order or sync, are
// 400s naming the parameter, before any store call.
func TestSortBadInput(t *testing.T) {
	for query, says := range map[string]string{
		"sort=":                               "", // empty is absent: 200
		"sort=-":                              "invalid sort: name a field",
		"sort=%FF":                            "invalid sort: the field name is not valid UTF-8",
		"sort=" + strings.Repeat("f", 65):     "invalid sort: the field name is longer than 64 bytes",
		"sort=n&order=asc":                    "invalid order: it cannot be combined with sort",
		"sort=n&sync=start":                   "invalid sort: it cannot be combined with sync",
		"sort=n&sort=m":                       "invalid sort: the parameter is given more than once",
		"sort=-" + strings.Repeat("f", 64):    "",
		"sort=n&filter[n][gte]=3&total=exact": "",
	} {
		c := &counting{store: seeded(t), keys: seeded(t)}
		h := formsapi.NewHandler(c, c)
		res := do(t, h, "GET", findPath+"?"+query, bearer(storetest.KeyA)...)
		if says == "" {
			if res.status == http.StatusBadRequest {
				t.Errorf("?%s: %d %s, want it accepted", query, res.status, res.body)
			}
			continue
		}
		if res.status != http.StatusBadRequest || !strings.Contains(string(res.body), says) {
			t.Errorf("?%s: %d %s, want 400 saying %q", query, res.status, res.body, says)
		}
		if c.calls != 0 {
			t.Errorf("?%s: the store was called %d times", query, c.calls)
		}
	}
}

// sortedNs reads the n and the named member of each submission of a
// sorted walk through the handler.
func sortedWalk(t *testing.T, h http.Handler, query string) []int {
	t.Helper()
	status, ns := fuzzWalk(t, h, query)
	if status != http.StatusOK {
		t.Fatalf("?%s: %d", query, status)
	}
	return ns
}

// TestSortOrders: the documented order of kinds and values on the find
// seed, through the handler: numbers by value, instants as instants
// whatever their offset, text by its normal form, then booleans, and
// the submissions without a value last in both directions.
func TestSortOrders(t *testing.T) {
	is := is.New(t)
	h := findHandler(t)
	// n is a number in every submission: a plain order.
	asc := sortedWalk(t, h, "sort=n&limit=7")
	is.Equal(len(asc), 40)
	is.True(slices.IsSorted(asc))
	desc := sortedWalk(t, h, "sort=-n&limit=3")
	is.True(slices.IsSortedFunc(desc, func(a, b int) int { return b - a }))
	// gone: null (i%7 == 0) and absent (the rest but 1) last both ways;
	// the string "null" (i%7 == 1) first.
	for _, q := range []string{"sort=gone", "sort=-gone"} {
		ns := sortedWalk(t, h, q+"&limit=4")
		is.Equal(len(ns), 40)
		for i, n := range ns {
			is.Equal(n%7 == 1 && n != 13, i < 6) // the 6 "null" strings first
		}
	}
	// when: instants (i%4 <= 1, either offset) as instants, before the
	// dates as text (i%4 == 2), then those without (i%4 == 3).
	ns := sortedWalk(t, h, "sort=when&limit=5")
	var kinds []int
	for _, n := range ns {
		kinds = append(kinds, map[int]int{0: 0, 1: 0, 2: 1, 3: 2}[n%4])
		if n == 13 {
			kinds[len(kinds)-1] = 2
		}
	}
	is.True(slices.IsSorted(kinds))
	var instants []int
	for _, n := range ns {
		if n%4 <= 1 && n != 13 {
			instants = append(instants, n)
		}
	}
	is.True(slices.IsSorted(instants)) // i hours after the start, whatever the offset
	// even: false before true; ties by creation time.
	ev := sortedWalk(t, h, "sort=even")
	for i, n := range ev {
		is.Equal(n%2 == 0, i >= 20)
	}
}

// TestSortCursorAndTag: a cursor keeps its sort (another with it is a
// 400), the cursor alone continues the walk, and the ETag differs with
// the sort.
func TestSortCursorAndTag(t *testing.T) {
	is := is.New(t)
	h := findHandler(t)
	res := do(t, h, "GET", findPath+"?sort=-n&limit=3", bearer(storetest.KeyA)...)
	is.Equal(res.status, http.StatusOK)
	var p findPage
	is.NoErr(json.Unmarshal(res.body, &p))
	is.True(p.NextCursor != nil)
	cursor := url.QueryEscape(*p.NextCursor)
	is.Equal(do(t, h, "GET", findPath+"?sort=-n&cursor="+cursor, bearer(storetest.KeyA)...).status, http.StatusOK)
	for _, other := range []string{"sort=n", "sort=-m"} {
		res := do(t, h, "GET", findPath+"?"+other+"&cursor="+cursor, bearer(storetest.KeyA)...)
		is.Equal(res.status, http.StatusBadRequest)
		is.True(strings.Contains(string(res.body), "invalid cursor: it was issued for another sort"))
	}
	// A cursor of the unsorted list does not take a sort either.
	plain := do(t, h, "GET", findPath+"?limit=3", bearer(storetest.KeyA)...)
	var pp findPage
	is.NoErr(json.Unmarshal(plain.body, &pp))
	res = do(t, h, "GET", findPath+"?sort=n&cursor="+url.QueryEscape(*pp.NextCursor), bearer(storetest.KeyA)...)
	is.Equal(res.status, http.StatusBadRequest)
	// The cursor alone: 37, 36, ... 0.
	got := sortedWalk(t, h, "cursor="+cursor)
	is.Equal(len(got), 37)
	is.Equal(got[0], 36)
	tag := func(q string) string {
		res := do(t, h, "GET", findPath+"?"+q, bearer(storetest.KeyA)...)
		is.Equal(res.status, http.StatusOK)
		return res.header.Get("ETag")
	}
	is.True(tag("sort=n") != tag("sort=-n"))
	is.True(tag("sort=n") != tag("limit=20"))
	is.True(tag("sort=n") != tag("sort=m"))
	again := do(t, h, "GET", findPath+"?sort=n", append(bearer(storetest.KeyA), "If-None-Match", tag("sort=n"))...)
	is.Equal(again.status, http.StatusNotModified)
}

// TestSortSameOnEveryStore: the same sorted pages, item for item, from
// memstore, sqlitestore and (with FORMSAPI_TEST_POSTGRES) pgstore,
// through the handler.
func TestSortSameOnEveryStore(t *testing.T) {
	t.Parallel()
	stores, m := everyStore(t, storetest.FindSeed())
	queries := []string{"sort=n", "sort=-score&limit=3", "sort=when&limit=4", "sort=-when", "sort=name&limit=1", "sort=-name&fields=n",
		"sort=even&filter[tag]=t1", "sort=-gone&limit=2", "sort=nested", "sort=missing&limit=9", "sort=tag&q=zoe&limit=2",
		"sort=score&since=2024-01-01T00:00:03Z&until=2024-01-01T00:00:09Z&limit=2", "sort=-n&filter[n][lt]=20&total=exact&limit=5"}
	var want map[string][]int
	for _, name := range slices.Sorted(maps.Keys(stores)) {
		h := formsapi.NewHandler(stores[name], m)
		got := map[string][]int{}
		for _, q := range queries {
			got[q] = sortedWalk(t, h, q)
		}
		if want == nil {
			want = got
			continue
		}
		for _, q := range queries {
			if !slices.Equal(got[q], want[q]) {
				t.Errorf("%s, ?%s: %v, another store %v", name, q, got[q], want[q])
			}
		}
	}
}

// FuzzSortParams sends any sort value, with other parameters, to a
// form's list over every store (memstore, sqlitestore, and pgstore when
// FORMSAPI_TEST_POSTGRES is set): the answer is 200 or 400, a 400 names
// a parameter, every store gives the same status, and a 200's walk
// through its next cursors yields the same submissions in the same order
// in each. Run it for a minute or more:
//
//	go test -run '^$' -fuzz FuzzSortParams -fuzztime 1m .
func FuzzSortParams(f *testing.F) {
	for _, q := range []string{
		"n", "-n", "--n", "-", "", "%FF", "when", "-when", "name", "gone", "nested", "missing", "score",
		"a'%20OR%201=1--", "%00", strings.Repeat("x", 65),
	} {
		f.Add(q, "limit=3")
		f.Add(q, "filter[tag]=t1&limit=1")
	}
	f.Add("n", "order=asc")
	f.Add("-score", "q=zoe&limit=2")
	f.Add("when", "since=2024-01-01T00:00:05Z&fields=n")
	stores, m := everyStore(f, storetest.FindSeed())
	names := slices.Sorted(maps.Keys(stores))
	f.Fuzz(func(t *testing.T, sort, rest string) {
		query := "sort=" + url.QueryEscape(sort) + "&" + rest
		var want []int
		wantStatus := 0
		for i, name := range names {
			status, got := fuzzWalk(t, formsapi.NewHandler(stores[name], m), query)
			switch {
			case i == 0:
				want, wantStatus = got, status
			case status != wantStatus:
				t.Fatalf("?%s: %s answers %d, %s %d", query, name, status, names[0], wantStatus)
			case !slices.Equal(got, want):
				t.Fatalf("?%s: %s walks to %v, %s to %v", query, name, got, names[0], want)
			}
		}
	})
}

// TestSortWithoutIndex: a database store without its sort index answers
// a sorted list with 501, naming what to leave out, and the unsorted
// list as ever.
func TestSortWithoutIndex(t *testing.T) {
	is := is.New(t)
	s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "f.db"))
	is.NoErr(err)
	t.Cleanup(func() { s.Close() })
	is.NoErr(storetest.Load(context.Background(), s, storetest.FindSeed()))
	h := formsapi.NewHandler(s, s)
	res := do(t, h, "GET", findPath+"?sort=n", bearer(storetest.KeyA)...)
	is.Equal(res.status, http.StatusNotImplemented)
	is.True(strings.Contains(string(res.body), "leave sort out"))
	is.Equal(do(t, h, "GET", findPath+"?limit=3", bearer(storetest.KeyA)...).status, http.StatusOK)
}
