package formsapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

const (
	searchPath     = "/v1/forms/" + storetest.FormSearch + "/submissions"
	searchManyPath = "/v1/forms/" + storetest.FormSearchMany + "/submissions"
)

// walkSearch follows a list's cursors from path?query to its end and
// returns the n of each submission.
func walkSearch(t *testing.T, h http.Handler, path, query string) []int {
	t.Helper()
	var ns []int
	target := path + "?" + query
	for range 2000 {
		res := do(t, h, "GET", target, bearer(storetest.KeyA)...)
		if res.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", target, res.status, res.body)
		}
		var p findPage
		if err := json.Unmarshal(res.body, &p); err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Submissions {
			var d struct{ N int }
			if err := json.Unmarshal(s.Data, &d); err != nil {
				t.Fatal(err)
			}
			ns = append(ns, d.N)
		}
		if p.NextCursor == nil {
			return ns
		}
		target = path + "?cursor=" + url.QueryEscape(*p.NextCursor)
	}
	t.Fatal("the cursor does not advance")
	return nil
}

func searchHandler(t *testing.T) (http.Handler, *memstore.Store) {
	s := memstore.New()
	if err := storetest.Load(context.Background(), s, storetest.SearchSeed()); err != nil {
		t.Fatal(err)
	}
	return formsapi.NewHandler(s, s), s
}

// TestSearchBadInput: a term too short or too long once normalized, not
// UTF-8, or beside sync, is a 400 naming q, and the store is not called.
func TestSearchBadInput(t *testing.T) {
	for query, says := range map[string]string{
		"q=ab":                         "invalid q: is shorter than 3 characters",
		"q=Z%CC%81%CC%88":              "invalid q: is shorter than 3 characters", // one letter with two marks
		"q=" + strings.Repeat("x", 65): "invalid q: is longer than 64 bytes",
		"q=%FF%FE%FD":                  "invalid q: is not valid UTF-8",
		"q=zoe&q=zoe":                  "invalid q: the parameter is given more than once",
		"q=zoe&sync=start":             "invalid q: it cannot be combined with sync",
	} {
		c := &counting{store: seeded(t), keys: seeded(t)}
		h := formsapi.NewHandler(c, c)
		res := do(t, h, "GET", searchPath+"?"+query, bearer(storetest.KeyA)...)
		if res.status != http.StatusBadRequest || !strings.Contains(string(res.body), says) {
			t.Errorf("?%s: %d %s, want 400 saying %q", query, res.status, res.body, says)
		}
		if c.calls != 0 {
			t.Errorf("?%s: the store was called %d times", query, c.calls)
		}
	}
	// At the limits: accepted (64 accented letters are 64 bytes once
	// normalized).
	h, _ := searchHandler(t)
	for _, query := range []string{"q=zoe", "q=" + strings.Repeat("x", 64), "q=" + strings.Repeat("%C3%A9", 64)} {
		if res := do(t, h, "GET", searchPath+"?"+query, bearer(storetest.KeyA)...); res.status != http.StatusOK {
			t.Errorf("?%s: %d %s, want 200", query, res.status, res.body)
		}
	}
}

// TestSearchCursorAndTag: a cursor keeps its term (the same term in
// another case or accents is the same term), another is a 400, and the
// ETag differs with the term.
func TestSearchCursorAndTag(t *testing.T) {
	is := is.New(t)
	h, _ := searchHandler(t)
	res := do(t, h, "GET", searchPath+"?q=zoe&limit=3", bearer(storetest.KeyA)...)
	is.Equal(res.status, http.StatusOK)
	var p findPage
	is.NoErr(json.Unmarshal(res.body, &p))
	is.True(p.NextCursor != nil)
	cursor := url.QueryEscape(*p.NextCursor)
	is.Equal(do(t, h, "GET", searchPath+"?q=ZO%C3%8B&cursor="+cursor, bearer(storetest.KeyA)...).status, http.StatusOK)
	other := do(t, h, "GET", searchPath+"?q=unal&cursor="+cursor, bearer(storetest.KeyA)...)
	is.Equal(other.status, http.StatusBadRequest)
	is.True(strings.Contains(string(other.body), "invalid cursor: it was issued for another q"))
	res2 := do(t, h, "GET", searchPath+"?cursor="+cursor, bearer(storetest.KeyA)...)
	is.Equal(res2.status, http.StatusOK)
	var p2 findPage
	is.NoErr(json.Unmarshal(res2.body, &p2))
	for _, s := range p2.Submissions {
		is.True(strings.Contains(find.Normalize(string(s.Data)), "zoe")) // only matches through the cursor
	}
	a := do(t, h, "GET", searchPath+"?q=zoe", bearer(storetest.KeyA)...)
	b := do(t, h, "GET", searchPath+"?q=unal", bearer(storetest.KeyA)...)
	is.True(a.header.Get("ETag") != b.header.Get("ETag"))
	again := do(t, h, "GET", searchPath+"?q=zoe", append(bearer(storetest.KeyA), "If-None-Match", a.header.Get("ETag"))...)
	is.Equal(again.status, http.StatusNotModified)
	// A total counts the matches.
	tot := do(t, h, "GET", searchPath+"?q=chloe&total=exact", bearer(storetest.KeyA)...)
	is.Equal(tot.status, http.StatusOK)
	is.True(strings.Contains(string(tot.body), `"total":{"value":6,"kind":"exact"}`)) // n%5 == 4 of 30
}

// TestSearchSameOnEveryStore: the same searched pages, item for item,
// from memstore, sqlitestore and (with FORMSAPI_TEST_POSTGRES) pgstore,
// through the handler, and from a host's store that does not search (the
// handler drops what does not match).
func TestSearchSameOnEveryStore(t *testing.T) {
	t.Parallel()
	stores, m := everyStore(t, storetest.SearchSeed())
	stores["a host's store that does not search"] = unsearched{m}
	queries := []struct{ path, query string }{
		{searchPath, "q=zoe"},
		{searchPath, "q=Z%C3%96E+%C3%BCnal&order=asc&limit=1"},
		{searchPath, "q=r%C3%A9sum%C3%A9&fields=n"},
		{searchPath, "q=1017"},
		{searchPath, "q=deepval2"},
		{searchPath, "q=zoe&filter[even]=true&limit=2"},
		{searchManyPath, "q=foo+bar&limit=3"},
		{searchManyPath, "q=zyxw&order=asc"},
	}
	var want map[string][]int
	for name, s := range stores {
		h := formsapi.NewHandler(s, m)
		got := map[string][]int{}
		for _, q := range queries {
			got[q.path+q.query] = walkSearch(t, h, q.path, q.query)
		}
		if want == nil {
			want = got
			continue
		}
		for _, q := range queries {
			if k := q.path + q.query; !slices.Equal(got[k], want[k]) {
				t.Errorf("%s, %s?%s: %v, another store %v", name, q.path, q.query, got[k], want[k])
			}
		}
	}
	if len(want[searchPath+"q=zoe"]) != 24 || len(want[searchManyPath+"q=foo+bar&limit=3"]) != 8 {
		t.Errorf("q=zoe found %d, q=foo bar %d: want 24 and 8", len(want[searchPath+"q=zoe"]), len(want[searchManyPath+"q=foo+bar&limit=3"]))
	}
}

// unsearched is a host's store that ignores Query.Search.
type unsearched struct{ *memstore.Store }

func (u unsearched) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	q.Search = ""
	return u.Store.ListSubmissions(ctx, account, formID, q)
}
