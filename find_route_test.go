package formsapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

const findPath = "/v1/forms/" + storetest.FormFind + "/submissions"

// findHandler is a handler over memstore loaded with storetest.FindSeed.
func findHandler(t *testing.T) http.Handler {
	s := memstore.New()
	if err := storetest.Load(context.Background(), s, storetest.FindSeed()); err != nil {
		t.Fatal(err)
	}
	return formsapi.NewHandler(s, s)
}

// findPage is a page of submissions as the tests read it.
type findPage struct {
	Submissions []formsapi.Submission
	NextCursor  *string
}

// walkFind follows a filtered list's cursors to its end and returns the
// n of each submission.
func walkFind(t *testing.T, h http.Handler, query string) []int {
	t.Helper()
	if status, ns := fuzzWalk(t, h, query); status == http.StatusOK {
		return ns
	}
	t.Fatalf("GET ?%s: not 200", query)
	return nil
}

func TestFilterEquality(t *testing.T) {
	is := is.New(t)
	h := findHandler(t)
	for query, want := range map[string]func(int) bool{
		"filter[tag]=t1":                            func(i int) bool { return i%5 == 1 && i != 13 },
		"filter[tag]=%22t1%22":                      func(i int) bool { return i%5 == 1 && i != 13 },
		"filter[score]=42.0":                        func(i int) bool { return i != 13 && i%5 != 2 && i%5 != 4 },
		"filter[score]=%2242%22":                    func(i int) bool { return i%5 == 2 && i != 13 },
		"filter[name]=Zo%C3%AB":                     func(i int) bool { return i%4 == 0 || i == 13 },
		"filter[even]=true&filter[tag]=t0":          func(i int) bool { return i%10 == 0 },
		"filter[gone]=null":                         func(i int) bool { return i%7 == 0 && i != 13 },
		"filter[gone]=%22null%22":                   func(i int) bool { return i%7 == 1 },
		"filter[n]=17&limit=1":                      func(i int) bool { return i == 17 },
		"filter[html]=a%3Cb%3E%26c&order=asc":       func(i int) bool { return i != 13 },
		"filter[missing]=1":                         func(int) bool { return false },
		"filter[even]=false&limit=2&order=asc":      func(i int) bool { return i%2 == 1 },
		"filter[tag]=t2&since=2024-01-01T00:00:00Z": func(i int) bool { return i%5 == 2 },
	} {
		got := walkFind(t, h, query)
		var exp []int
		for i := range 40 {
			if want(i) {
				exp = append(exp, i)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, exp) {
			t.Errorf("?%s: got n %v, want %v", query, got, exp)
		}
	}
	is.True(true)
}

// TestFilterBadInput: each malformed filter is a 400 that names the
// parameter (and the limit, for one past a limit), before any store call.
func TestFilterBadInput(t *testing.T) {
	long := strings.Repeat("f", 65)
	for query, says := range map[string]string{
		"filter=x":                 "invalid filter: name the field in brackets",
		"filter[a=1":               "invalid filter[a:",
		"filter[]=1":               "invalid filter[]:",
		"filter[a][gtx]=1":         "invalid filter[a][gtx]: unknown operator gtx: the operators are eq, ne, gt",
		"filter[a][gt]=true":       "invalid filter[a][gt]: the value is true, which does not order",
		"filter[a][lte]=null":      "invalid filter[a][lte]: the value is null, which does not order",
		"filter[a][exists]=yes":    "invalid filter[a][exists]: the value must be true",
		"filter[a][prefix]=%CC%81": "invalid filter[a][prefix]: the value is empty once case and accents are set aside",
		"filter[a][prefix]=" + strings.Repeat("v", 257):   "the filter value length limit",
		"filter[a][in]=" + strings.Repeat("1,", 32) + "1": "the filter list length limit",
		"filter[a][in]=1,,2":                              "invalid filter[a][in]: the value at value 2 is empty",
		"filter[a][in]=%22a%22b":                          "invalid filter[a][in]: the value has a quoted value followed by more than a comma",
		"filter[a][in]=1," + strings.Repeat("v", 255):     "the filter value length limit",
		"filter[a]=1&filter[a][eq]=1":                     "invalid filter[a][eq]: filter[a] gives the same field and operator",
		"filter[a][gte]=1&filter[a][gte]=2":               "invalid filter[a][gte]: the parameter is given more than once",
		"filter[][gt]=1":                                  "invalid filter[][gt]: the field name is empty",
		"filter[a][gt]=1&filter[b]=1&filter[c]=1&filter[d]=1&filter[e]=1&filter[f]=1&filter[g]=1&filter[h]=1&filter[h][ne]=1": "the filter clauses limit",
		"filter[a]=":                            "invalid filter[a]: the value is empty",
		"filter[a]=1&filter[a]=2":               "invalid filter[a]: the parameter is given more than once",
		"filter[a]=%22unterminated":             "invalid filter[a]: the value starts with a double quote",
		"filter[a]=1e999":                       "invalid filter[a]: the value is a number beyond the range",
		"filter[" + long + "]=1":                "the filter field length limit",
		"filter[a]=" + strings.Repeat("v", 255): "the filter value length limit",
		"filter[a]=%FF":                         "invalid filter[a]: the value is not valid UTF-8",
		"filter[a]=%22%5Cud800%22":              "escape of half a surrogate pair, which is not a character",
		"filter[a]=1&filter[b]=1&filter[c]=1&filter[d]=1&filter[e]=1&filter[f]=1&filter[g]=1&filter[h]=1&filter[i]=1": "the filter clauses limit",
		"filter[a]=1&sync=start": "invalid filter: it cannot be combined with sync",
	} {
		c := &counting{store: seeded(t), keys: seeded(t)}
		h := formsapi.NewHandler(c, c)
		res := do(t, h, "GET", findPath+"?"+query, bearer(storetest.KeyA)...)
		if res.status != http.StatusBadRequest || !strings.Contains(string(res.body), says) {
			t.Errorf("?%s: %d %s, want 400 saying %q", query, res.status, res.body, says)
		}
		if c.calls != 0 {
			t.Errorf("?%s: the store was called %d times", query, c.calls)
		}
	}
	// At the limits: accepted.
	h := findHandler(t)
	for _, query := range []string{
		"filter[" + strings.Repeat("f", 64) + "]=1",
		"filter[a]=" + strings.Repeat("v", 254),
		"filter[a]=1&filter[b]=1&filter[c]=1&filter[d]=1&filter[e]=1&filter[f]=1&filter[g]=1&filter[h]=1",
		"filter[a][gte]=1&filter[a][lt]=9&filter[c]=1&filter[d][ne]=1&filter[e][in]=1,2&filter[f][exists]=true&filter[g][prefix]=x&filter[h][eq]=1",
		"filter[a][in]=" + strings.Repeat("1,", 31) + "1",
		"filter[a][prefix]=" + strings.Repeat("v", 256),
		"filter[a][gte]=gte.4",
	} {
		if res := do(t, h, "GET", findPath+"?"+query, bearer(storetest.KeyA)...); res.status != http.StatusOK {
			t.Errorf("?%s: %d %s, want 200", query, res.status, res.body)
		}
	}
}

// TestFilterOperators: filter[<field>][<op>] through the handler, each
// operator's value as a query string gives it; an equality keeps its
// meaning whatever its value looks like.
func TestFilterOperators(t *testing.T) {
	h := findHandler(t)
	instant := func(i int) bool { return i != 13 && i%4 <= 1 }
	for query, want := range map[string]func(int) bool{
		"filter[n][gte]=10&filter[n][lt]=20":                   func(i int) bool { return i >= 10 && i < 20 },
		"filter[n][gt]=35&order=asc&limit=1":                   func(i int) bool { return i > 35 },
		"filter[n][lte]=3&filter[even][eq]=true":               func(i int) bool { return i <= 3 && i%2 == 0 },
		"filter[score][ne]=42":                                 func(i int) bool { return i%5 == 2 || i%5 == 4 || i == 13 },
		"filter[tag][in]=t1,%22t3%22":                          func(i int) bool { return (i%5 == 1 || i%5 == 3) && i != 13 },
		"filter[tag][in]=t1&filter[tag][ne]=t1":                func(int) bool { return false },
		"filter[score][in]=43,%2242%22":                        func(i int) bool { return i%5 == 2 || i%5 == 4 || i == 13 },
		"filter[gone][exists]=false":                           func(i int) bool { return i%7 != 1 },
		"filter[gone][exists]=true&limit=2":                    func(i int) bool { return i%7 == 1 },
		"filter[name][prefix]=ZO%C3%8B%20":                     func(i int) bool { return i%4 == 3 && i != 13 },
		"filter[name][prefix]=%22zo%22":                        func(int) bool { return true },
		"filter[when][gte]=2024-03-10T18:00:00Z":               func(i int) bool { return instant(i) && i >= 18 },
		"filter[when][lt]=2024-03-10T12:00:00%2B02:00":         func(i int) bool { return instant(i) && i < 10 },
		"filter[when][lte]=2024-03-05":                         func(i int) bool { return i%4 == 2 && i < 20 },
		"filter[tag]=gte.4":                                    func(int) bool { return false },
		"filter[score][gt]=%2241%22":                           func(i int) bool { return i%5 == 2 },
		"filter[n][gte]=30&q=zoe&order=asc":                    func(i int) bool { return i >= 30 },
		"filter[n][gte]=30&since=2024-01-01T00:00:00Z&limit=1": func(i int) bool { return i >= 30 },
	} {
		got := walkFind(t, h, query)
		var exp []int
		for i := range 40 {
			if want(i) {
				exp = append(exp, i)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, exp) {
			t.Errorf("?%s: got n %v, want %v", query, got, exp)
		}
	}
}

// TestFilterOperatorCursorAndTag: a cursor seals its operators as it
// does equalities; eq spelled out is equality, with its tag and cursor.
func TestFilterOperatorCursorAndTag(t *testing.T) {
	is := is.New(t)
	h := findHandler(t)
	res := do(t, h, "GET", findPath+"?filter[n][gte]=10&limit=3", bearer(storetest.KeyA)...)
	is.Equal(res.status, http.StatusOK)
	var p findPage
	is.NoErr(json.Unmarshal(res.body, &p))
	is.True(p.NextCursor != nil)
	cursor := url.QueryEscape(*p.NextCursor)
	is.Equal(do(t, h, "GET", findPath+"?filter[n][gte]=10&cursor="+cursor, bearer(storetest.KeyA)...).status, http.StatusOK)
	for _, other := range []string{"filter[n][gte]=11", "filter[n][gt]=10", "filter[n]=10", "filter[n][gte]=10&filter[m][exists]=true"} {
		res := do(t, h, "GET", findPath+"?"+other+"&cursor="+cursor, bearer(storetest.KeyA)...)
		is.Equal(res.status, http.StatusBadRequest)
		is.True(strings.Contains(string(res.body), "invalid cursor: it was issued for another filter"))
	}
	// The cursor alone carries the operator.
	n := len(p.Submissions)
	for p.NextCursor != nil {
		res := do(t, h, "GET", findPath+"?cursor="+url.QueryEscape(*p.NextCursor), bearer(storetest.KeyA)...)
		is.Equal(res.status, http.StatusOK)
		p = findPage{}
		is.NoErr(json.Unmarshal(res.body, &p))
		for _, s := range p.Submissions {
			var d struct{ N int }
			is.NoErr(json.Unmarshal(s.Data, &d))
			is.True(d.N >= 10)
		}
		n += len(p.Submissions)
	}
	is.Equal(n, 30)
	tag := func(q string) string {
		res := do(t, h, "GET", findPath+"?"+q, bearer(storetest.KeyA)...)
		is.Equal(res.status, http.StatusOK)
		return res.header.Get("ETag")
	}
	is.True(tag("filter[n][gte]=10") != tag("filter[n][gt]=10"))
	is.True(tag("filter[n][gte]=10") != tag("filter[n]=10"))
	is.True(tag("filter[tag][in]=t1,t2") != tag("filter[tag][in]=t1,t3"))
	is.Equal(tag("filter[tag][in]=t1,t2"), tag("filter[tag][in]=%22t2%22,t1,t2")) // a set
	is.Equal(tag("filter[n][eq]=17"), tag("filter[n]=17"))
	is.Equal(tag("filter[name][prefix]=ZO%C3%8B"), tag("filter[name][prefix]=zoe"))
	again := do(t, h, "GET", findPath+"?filter[n][gte]=10", append(bearer(storetest.KeyA), "If-None-Match", tag("filter[n][gte]=10"))...)
	is.Equal(again.status, http.StatusNotModified)
}

// TestFilterCursorAndTag: a cursor keeps its filters, another filter with
// it is a 400, and the ETag differs with the filter.
func TestFilterCursorAndTag(t *testing.T) {
	is := is.New(t)
	h := findHandler(t)
	res := do(t, h, "GET", findPath+"?filter[even]=true&limit=3", bearer(storetest.KeyA)...)
	is.Equal(res.status, http.StatusOK)
	var p findPage
	is.NoErr(json.Unmarshal(res.body, &p))
	is.True(p.NextCursor != nil)
	cursor := url.QueryEscape(*p.NextCursor)
	// The same filter again: fine; another, or none given but another
	// field: 400.
	is.Equal(do(t, h, "GET", findPath+"?filter[even]=true&cursor="+cursor, bearer(storetest.KeyA)...).status, http.StatusOK)
	other := do(t, h, "GET", findPath+"?filter[even]=false&cursor="+cursor, bearer(storetest.KeyA)...)
	is.Equal(other.status, http.StatusBadRequest)
	is.True(strings.Contains(string(other.body), "invalid cursor: it was issued for another filter"))
	// Page 2 through the cursor alone holds only matches.
	res2 := do(t, h, "GET", findPath+"?cursor="+cursor, bearer(storetest.KeyA)...)
	is.Equal(res2.status, http.StatusOK)
	var p2 findPage
	is.NoErr(json.Unmarshal(res2.body, &p2))
	for _, s := range p2.Submissions {
		is.True(strings.Contains(string(s.Data), `"even":true`))
	}
	// Tags differ by filter, and a 304 answers the same filter.
	a := do(t, h, "GET", findPath+"?filter[even]=true", bearer(storetest.KeyA)...)
	b := do(t, h, "GET", findPath+"?filter[even]=false", bearer(storetest.KeyA)...)
	is.True(a.header.Get("ETag") != b.header.Get("ETag"))
	again := do(t, h, "GET", findPath+"?filter[even]=true", append(bearer(storetest.KeyA), "If-None-Match", a.header.Get("ETag"))...)
	is.Equal(again.status, http.StatusNotModified)
	// The forms list does not read filters.
	is.Equal(do(t, h, "GET", "/v1/forms?filter[a]=1", bearer(storetest.KeyA)...).status, http.StatusOK)
}

// TestFilterSameOnEveryStore: the same filtered pages, item for item,
// from memstore, sqlitestore and (with FORMSAPI_TEST_POSTGRES) pgstore,
// through the handler, and from a host's store that does not filter at
// all (the handler drops what does not match).
func TestFilterSameOnEveryStore(t *testing.T) {
	t.Parallel()
	stores, m := everyStore(t, storetest.FindSeed())
	stores["a host's store that ignores filters"] = unfiltered{m}
	queries := []string{"filter[tag]=t3", "filter[tag]=t2&fields=n,score", "filter[score]=42&order=asc&limit=4", "filter[name]=ZO%C3%8B&limit=1", "filter[even]=true&filter[tag]=t0",
		"filter[n][gte]=10&filter[n][lt]=30&limit=4", "filter[when][gt]=2024-03-10T06:00:00Z&order=asc", "filter[tag][in]=t1,t2&filter[gone][exists]=false", "filter[name][prefix]=zoe%20&filter[score][ne]=42"}
	var want map[string][]int
	for name, s := range stores {
		h := formsapi.NewHandler(s, m)
		got := map[string][]int{}
		for _, q := range queries {
			got[q] = walkFind(t, h, q)
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

// everyStore returns memstore, sqlitestore and (with
// FORMSAPI_TEST_POSTGRES) pgstore, by name, each loaded with seed, the
// database stores both with their search index off (their default) and
// on, and
// the memstore, which a handler over any of them takes as its key
// resolver (the seed's keys are the same in each).
func everyStore(t testing.TB, seed storetest.Seed) (map[string]formsapi.Store, *memstore.Store) {
	t.Helper()
	ctx := context.Background()
	m := memstore.New()
	stores := map[string]formsapi.Store{"memstore": m}
	stores["sqlitestore"], stores["sqlitestore (search index)"] = openSQLite(t, false), openSQLite(t, true)
	if os.Getenv(pgtest.EnvVar) != "" {
		stores["pgstore"], stores["pgstore (search index)"] = openPostgres(t, false), openPostgres(t, true)
	}
	for name, s := range stores {
		if err := storetest.Load(ctx, s.(formsapi.Writer), seed); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return stores, m
}

// unfiltered is a host's store that ignores Query.Filters.
type unfiltered struct{ *memstore.Store }

func (u unfiltered) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	q.Filters = nil
	return u.Store.ListSubmissions(ctx, account, formID, q)
}

// FuzzFindParams sends any query string (filters, search, and the rest)
// to a form's list over every store (memstore, sqlitestore, and pgstore
// when FORMSAPI_TEST_POSTGRES is set; their statements bind every value):
// the answer is 200 or 400, never another, a 400 names a parameter, and
// every store gives the same status. A 200 is walked to its end through
// its next cursors, and every store's walk yields the same submissions
// (as a multiset: stores order ties their own way). Run it for minutes:
//
//	go test -run '^$' -fuzz FuzzFindParams -fuzztime 5m .
func FuzzFindParams(f *testing.F) {
	for _, q := range []string{
		"filter[tag]=t1", "filter[score]=42.0&order=asc&limit=2", "filter[name]=%22Zo%C3%AB%22",
		"filter[a][gt]=1", "filter[]=1", "filter=1", "filter[a]=", "filter[a]=1e999", "filter[a]=%22x",
		"filter[a]=1&filter[a]=2", "filter[%00]=%FF", "filter[even]=true&since=2024-01-01T00:00:00Z&cursor=abc",
		"filter[x]=null&sync=start", "filter[a']=1'%20OR%201=1--", "filter[n]=-0", "filter[n]=1E2",
		"q=zoe", "q=ZO%C3%8B&filter[tag]=t0&limit=2", "q=ab", "q=%FF%FE%FD", "q=Z%CC%81%CC%88", "q=42&order=asc",
		"q=" + strings.Repeat("%C3%A9", 65), "q=a'%20OR%201=1--", "q=%25_%25", "q=zoe&sync=start",
		"filter[tag]=t2&fields=n,score&limit=3", "filter[even]=false&total=exact&limit=1", "q=zoe&total=estimate&order=asc&limit=1",
		"filter[name]=%22%5Cud800%22",
	} {
		f.Add(q)
	}
	stores, m := everyStore(f, storetest.FindSeed())
	names := slices.Sorted(maps.Keys(stores))
	f.Fuzz(func(t *testing.T, query string) {
		var want []int
		wantStatus := 0
		for i, name := range names {
			status, got := fuzzWalk(t, formsapi.NewHandler(stores[name], m), query)
			slices.Sort(got)
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

// fuzzWalk sends query to the form's list and, on a 200, follows its next
// cursors to the end: the status and the n of every submission walked.
func fuzzWalk(t *testing.T, h http.Handler, query string) (int, []int) {
	var ns []int
	for page := 0; ; page++ {
		r := httptest.NewRequest("GET", findPath, nil)
		r.URL.RawQuery = query
		r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch {
		case w.Code == http.StatusBadRequest && page == 0:
			if !strings.Contains(w.Body.String(), `"message":"invalid `) && !strings.Contains(w.Body.String(), "query string is malformed") {
				t.Fatalf("?%s: a 400 that names no parameter: %s", query, w.Body)
			}
			return w.Code, nil
		case w.Code != http.StatusOK:
			t.Fatalf("?%s: %d %s", query, w.Code, w.Body)
		case page == 1000:
			t.Fatalf("?%s: the cursor does not advance", query)
		}
		var p findPage
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatalf("?%s: %v", query, err)
		}
		for _, s := range p.Submissions {
			var d struct{ N int }
			if err := json.Unmarshal(s.Data, &d); err != nil {
				t.Fatal(err)
			}
			ns = append(ns, d.N)
		}
		if p.NextCursor == nil {
			return http.StatusOK, ns
		}
		query = "cursor=" + url.QueryEscape(*p.NextCursor)
	}
}

// TestFieldsProjection: fields= keeps only the named data members, in the
// order data has them, and every other member of a submission; it is
// sealed in the cursor, tagged, and checked.
func TestFieldsProjection(t *testing.T) {
	is := is.New(t)
	h := findHandler(t)
	res := do(t, h, "GET", findPath+"?fields=tag,n,absent&limit=3&filter[even]=true", bearer(storetest.KeyA)...)
	is.Equal(res.status, http.StatusOK)
	var p struct {
		Submissions []map[string]json.RawMessage
		NextCursor  string
	}
	is.NoErr(json.Unmarshal(res.body, &p))
	is.Equal(len(p.Submissions), 3)
	for _, s := range p.Submissions {
		is.True(strings.HasPrefix(string(s["data"]), `{"n":`)) // the stored order: n before tag
		var d map[string]any
		is.NoErr(json.Unmarshal(s["data"], &d))
		is.Equal(len(d), 2) // n and tag; absent is not there
		is.True(s["formId"] != nil && s["attachments"] != nil && s["createdAt"] != nil)
	}
	// Page 2 through the cursor alone is projected too.
	res2 := do(t, h, "GET", findPath+"?cursor="+url.QueryEscape(p.NextCursor), bearer(storetest.KeyA)...)
	is.Equal(res2.status, http.StatusOK)
	is.True(!strings.Contains(string(res2.body), `"score"`))
	// Another projection with the cursor: 400; the same (in another
	// order): fine.
	other := do(t, h, "GET", findPath+"?fields=tag&cursor="+url.QueryEscape(p.NextCursor), bearer(storetest.KeyA)...)
	is.Equal(other.status, http.StatusBadRequest)
	is.True(strings.Contains(string(other.body), "invalid cursor: it was issued for another fields"))
	is.Equal(do(t, h, "GET", findPath+"?fields=absent,n,tag&cursor="+url.QueryEscape(p.NextCursor), bearer(storetest.KeyA)...).status, http.StatusOK)
	// The tag differs from the whole page's.
	whole := do(t, h, "GET", findPath+"?limit=3&filter[even]=true", bearer(storetest.KeyA)...)
	is.True(whole.header.Get("ETag") != res.header.Get("ETag"))
	is.True(len(res.body) < len(whole.body))
	// Bad input.
	many := strings.Repeat("f,", 32) + "g"
	for query, says := range map[string]string{
		"fields=a,,b":                       "invalid fields: a name is empty",
		"fields=a,a":                        "invalid fields: a name is given twice",
		"fields=" + many:                    "the fields count limit",
		"fields=" + strings.Repeat("x", 65): "the fields name length limit",
		"fields=a&sync=start":               "invalid fields: it cannot be combined with sync",
	} {
		res := do(t, h, "GET", findPath+"?"+query, bearer(storetest.KeyA)...)
		if res.status != http.StatusBadRequest || !strings.Contains(string(res.body), says) {
			t.Errorf("?%s: %d %s, want 400 saying %q", query, res.status, res.body, says)
		}
	}
}

// TestFieldsRepeated: fields given once per name (fields=tag&fields=n,
// what OpenAPI's form style with explode sends, openapi-fetch's default)
// is the list fields=tag,n: the same page, the same tag, and cursors of
// one form serve the other; both forms mixed are one list too. An empty
// name among them, a name given twice, more than 32 names in all, or
// the other parameters given twice are still a 400.
func TestFieldsRepeated(t *testing.T) {
	is := is.New(t)
	h := findHandler(t)
	joined := do(t, h, "GET", findPath+"?fields=tag,n&limit=3&filter[even]=true", bearer(storetest.KeyA)...)
	is.Equal(joined.status, http.StatusOK)
	for _, query := range []string{"fields=tag&fields=n", "fields=n&fields=tag", "fields=n&fields=&fields=tag&fields=", "fields=tag&fields=n&fields="} {
		res := do(t, h, "GET", findPath+"?"+query+"&limit=3&filter[even]=true", bearer(storetest.KeyA)...)
		if query == "fields=tag&fields=n" || query == "fields=n&fields=tag" {
			is.Equal(res.status, http.StatusOK)                                                 // the repeated form
			is.Equal(withoutCursor(decode(t, res.body)), withoutCursor(decode(t, joined.body))) // is the same page
			is.Equal(res.header.Get("ETag"), joined.header.Get("ETag"))                         // with the same tag
			continue
		}
		is.Equal(res.status, http.StatusBadRequest) // an empty name among others
		is.True(strings.Contains(string(res.body), "invalid fields: a name is empty"))
	}
	var p struct{ NextCursor string }
	is.NoErr(json.Unmarshal(joined.body, &p))
	is.True(p.NextCursor != "")
	// The joined form's cursor with the repeated form, and back.
	next := do(t, h, "GET", findPath+"?fields=n&fields=tag&cursor="+url.QueryEscape(p.NextCursor), bearer(storetest.KeyA)...)
	is.Equal(next.status, http.StatusOK)
	is.Equal(withoutCursor(decode(t, next.body)), withoutCursor(decode(t, do(t, h, "GET", findPath+"?fields=tag,n&cursor="+url.QueryEscape(p.NextCursor), bearer(storetest.KeyA)...).body)))
	is.NoErr(json.Unmarshal(do(t, h, "GET", findPath+"?fields=tag&fields=n&limit=3&filter[even]=true", bearer(storetest.KeyA)...).body, &p))
	is.Equal(do(t, h, "GET", findPath+"?fields=tag,n&cursor="+url.QueryEscape(p.NextCursor), bearer(storetest.KeyA)...).status, http.StatusOK)
	// Mixed: one list.
	mixed := do(t, h, "GET", findPath+"?fields=tag,n&fields=score&limit=3&filter[even]=true", bearer(storetest.KeyA)...)
	is.Equal(mixed.status, http.StatusOK)
	is.Equal(withoutCursor(decode(t, mixed.body)), withoutCursor(decode(t, do(t, h, "GET", findPath+"?fields=n,score,tag&limit=3&filter[even]=true", bearer(storetest.KeyA)...).body)))
	many := ""
	for i := range 33 {
		many += fmt.Sprintf("fields=f%d&", i)
	}
	for query, says := range map[string]string{
		"fields=a&fields=a":            "invalid fields: a name is given twice",
		"fields=a,b&fields=b":          "invalid fields: a name is given twice",
		many + "limit=1":               "the fields count limit",
		"order=asc&order=asc":          "invalid order: the parameter is given more than once",
		"limit=1&limit=1":              "invalid limit: the parameter is given more than once",
		"fields=a&fields=b&sync=start": "invalid fields: it cannot be combined with sync",
	} {
		res := do(t, h, "GET", findPath+"?"+query, bearer(storetest.KeyA)...)
		if res.status != http.StatusBadRequest || !strings.Contains(string(res.body), says) {
			t.Errorf("?%s: %d %s, want 400 saying %q", query, res.status, res.body, says)
		}
	}
}

// countingStore is a host's store (not embedding one of this module's)
// that counts its CountSubmissions calls.
type countingStore struct {
	m     *memstore.Store
	mu    sync.Mutex
	count int
}

func (c *countingStore) ListForms(ctx context.Context, account string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	return c.m.ListForms(ctx, account, q)
}

func (c *countingStore) ListSubmissions(ctx context.Context, account, form string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	return c.m.ListSubmissions(ctx, account, form, q)
}

func (c *countingStore) CountSubmissions(ctx context.Context, account, form string, q formsapi.Query, exact bool) (formsapi.Total, error) {
	c.mu.Lock()
	c.count++
	c.mu.Unlock()
	return c.m.CountSubmissions(ctx, account, form, q, exact)
}

// TestTotals: total=exact and total=estimate add the list's size to the
// page; a request that does not ask counts nothing; the tag covers the
// total; bad values are 400s; a store that cannot count is 501.
func TestTotals(t *testing.T) {
	is := is.New(t)
	m := memstore.New()
	is.NoErr(storetest.Load(context.Background(), m, storetest.FindSeed()))
	c := &countingStore{m: m}
	h := formsapi.NewHandler(c, m)
	total := func(query string) (map[string]any, response) {
		res := do(t, h, "GET", findPath+"?"+query, bearer(storetest.KeyA)...)
		is.Equal(res.status, http.StatusOK)
		var p struct{ Total map[string]any }
		is.NoErr(json.Unmarshal(res.body, &p))
		return p.Total, res
	}
	got, _ := total("limit=2")
	is.Equal(got, nil)   // not asked: no total
	is.Equal(c.count, 0) // and nothing counted
	got, _ = total("limit=2&total=exact")
	is.Equal(got, map[string]any{"value": 40.0, "kind": "exact"})
	got, _ = total("filter[tag]=t1&total=exact")
	is.Equal(got, map[string]any{"value": 8.0, "kind": "exact"}) // t1: 1, 6, ..., 36
	got, _ = total("filter[tag]=t1&total=estimate")
	is.Equal(got, map[string]any{"value": 8.0, "kind": "estimate"})
	got, _ = total("filter[even]=true&filter[tag]=t1&total=exact")
	is.Equal(got, map[string]any{"value": 4.0, "kind": "exact"}) // 6, 16, 26, 36
	is.Equal(c.count, 4)
	_, a := total("filter[tag]=t1")
	_, b := total("filter[tag]=t1&total=exact")
	is.True(a.header.Get("ETag") != b.header.Get("ETag"))
	for query, says := range map[string]string{
		"total=yes":              "invalid total",
		"total=exact&sync=start": "invalid total: it cannot be combined with sync",
	} {
		res := do(t, h, "GET", findPath+"?"+query, bearer(storetest.KeyA)...)
		is.Equal(res.status, http.StatusBadRequest)
		is.True(strings.Contains(string(res.body), says))
	}
	// A host's type that embeds memstore does not count through it (the
	// count would pass its own ListSubmissions by): 501, and without
	// total, 200.
	u := formsapi.NewHandler(unfiltered{m}, m)
	is.Equal(do(t, u, "GET", findPath+"?total=exact", bearer(storetest.KeyA)...).status, http.StatusNotImplemented)
	is.Equal(do(t, u, "GET", findPath, bearer(storetest.KeyA)...).status, http.StatusOK)
}
