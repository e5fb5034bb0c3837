package formsapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
)

// listMessage answers GET the find form's list with query through h, and
// returns its status and the message of its error ("" for a 200).
func listMessage(t *testing.T, h http.Handler, query string) (int, string) {
	t.Helper()
	r := httptest.NewRequest("GET", findPath, nil)
	r.URL.RawQuery = query
	r.Header.Set("Authorization", "Bearer "+storetest.KeyA)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code == http.StatusOK {
		return w.Code, ""
	}
	var e struct{ Message string }
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("?%s: %d and a body that is no error: %s", query, w.Code, w.Body)
	}
	return w.Code, e.Message
}

// filterMessage is the text of a ParseFilter error after the sentinel's.
func filterMessage(err error) string {
	return strings.TrimPrefix(err.Error(), formsapi.ErrInvalidInput.Error()+": ")
}

// TestFilterText: Query.ParseFilter reads a filter written as the list's
// query string and FilterText writes it back in one canonical form; a
// filter the list refuses is refused with the list's own 400 message,
// naming the clause, and leaves the Query as it was.
func TestFilterText(t *testing.T) {
	t.Parallel()
	h := findHandler(t)
	for text, want := range map[string]string{
		"": "",
		"filter[rating][gte]=4.0&q=Zo%C3%AB&filter[status][in]=open,%22new%22": `filter%5Brating%5D%5Bgte%5D=4&filter%5Bstatus%5D%5Bin%5D=%22new%22%2C%22open%22&q=zoe`,
		"filter[email]=a@b.example":                                `filter%5Bemail%5D=%22a%40b.example%22`,
		"filter[email][eq]=a@b.example":                            `filter%5Bemail%5D=%22a%40b.example%22`,
		"filter[name][prefix]=ZO%C3%8B&filter[gone][exists]=false": `filter%5Bgone%5D%5Bexists%5D=false&filter%5Bname%5D%5Bprefix%5D=%22zoe%22`,
		"filter[n][ne]=null&filter[n][lt]=1e2":                     `filter%5Bn%5D%5Blt%5D=100&filter%5Bn%5D%5Bne%5D=null`,
	} {
		var q formsapi.Query
		if err := q.ParseFilter(text); err != nil {
			t.Errorf("ParseFilter(%q): %v", text, err)
			continue
		}
		if got := q.FilterText(); got != want {
			t.Errorf("FilterText of %q: %s, want %s", text, got, want)
		}
		if status, msg := listMessage(t, h, text); status != http.StatusOK {
			t.Errorf("the list refuses ?%s, which ParseFilter takes: %s", text, msg)
		}
	}
	for text, names := range map[string]string{
		"filter[rating][gte]=true":         "filter[rating][gte]",
		"filter[rating][most]=4":           "filter[rating][most]",
		"filter[a]=1&filter[a][eq]=2":      "filter[a][eq]",
		"filter[tags][in]=" + manyValues(): "filter[tags][in]",
		"filter[x]=":                       "filter[x]",
		"q=ab":                             "q",
		"filter[a]=1&filter[b]=1&filter[c]=1&filter[d]=1&filter[e]=1&filter[f]=1&filter[g]=1&filter[h]=1&filter[i]=1": "the filter clauses limit",
		"filter[" + strings.Repeat("f", 65) + "]=1": "the filter field length limit",
	} {
		before := formsapi.Query{Filters: []formsapi.Filter{{Field: "kept", Value: `"as it was"`}}, Search: "kept"}
		q := before
		err := q.ParseFilter(text)
		if !errors.Is(err, formsapi.ErrInvalidInput) || !strings.Contains(err.Error(), names) {
			t.Errorf("ParseFilter(%.60q): %v, want ErrInvalidInput naming %s", text, err, names)
			continue
		}
		if !reflect.DeepEqual(q, before) {
			t.Errorf("ParseFilter(%.60q) refused it and changed the query to %+v", text, q)
		}
		if status, msg := listMessage(t, h, text); status != http.StatusBadRequest || msg != filterMessage(err) {
			t.Errorf("?%.60s: the list answers %d %q, ParseFilter %q", text, status, msg, filterMessage(err))
		}
	}
	for text, names := range map[string]string{
		"limit=5&filter[a]=1": `invalid "limit"`,
		"filter[a]=%zz":       "percent-encoding",
		"q=zoe&q=zoe":         "invalid q",
	} {
		var q formsapi.Query
		if err := q.ParseFilter(text); !errors.Is(err, formsapi.ErrInvalidInput) || !strings.Contains(err.Error(), names) {
			t.Errorf("ParseFilter(%q): %v, want ErrInvalidInput naming %s", text, err, names)
		}
	}
}

// manyValues is an in clause's list one value longer than the limit.
func manyValues() string {
	vs := make([]string, 33)
	for i := range vs {
		vs[i] = "v" + strings.Repeat("x", i)
	}
	return strings.Join(vs, ",")
}

// FuzzFilterText: for any text, ParseFilter takes it exactly when the
// list takes it as its query string (for a text of filter and q
// parameters), refusing it with the list's message; and what it takes,
// FilterText writes as a text that ParseFilter reads back to the same
// clauses and search, and that FilterText writes again unchanged.
//
//	go test -run '^$' -fuzz FuzzFilterText -fuzztime 2m .
func FuzzFilterText(f *testing.F) {
	for _, s := range []string{
		"filter[tag]=t1", "filter[score]=42.0", "filter[name]=%22Zo%C3%AB%22", "filter[a][gt]=1",
		"filter[]=1", "filter=1", "filter[a]=", "filter[a]=1e999", "filter[a]=%22x", "filter[a]=1&filter[a]=2",
		"filter[%00]=%FF", "filter[n]=-0", "filter[n][gte]=3&filter[n][lt]=9", "filter[tag][in]=t0,%22a,b%22,3",
		"filter[tag][exists]=false", "filter[name][prefix]=%22%5C%22zo%22", "filter[tag][ne]=t1&q=zoe",
		"q=ZO%C3%8B&filter[tag]=t0", "q=ab", "q=%FF%FE%FD", "filter[a]]=1", "filter[a]][gte]=2", "filter[x][prefix]=%EF%AC%81",
		"filter[name]=%22%5Cud800%22", "limit=3", "filter[a]=1;filter[b]=2",
	} {
		f.Add(s)
	}
	h := findHandlerTB(f)
	f.Fuzz(func(t *testing.T, text string) {
		var q formsapi.Query
		err := q.ParseFilter(text)
		if vals, perr := url.ParseQuery(text); perr == nil && onlyFilterParams(vals) && len(vals["q"]) < 2 {
			status, msg := listMessage(t, h, text)
			switch {
			case err == nil && status != http.StatusOK:
				t.Fatalf("ParseFilter takes %q, the list answers %d %q", text, status, msg)
			case err != nil && (status != http.StatusBadRequest || msg != filterMessage(err)):
				t.Fatalf("ParseFilter(%q): %v; the list answers %d %q", text, err, status, msg)
			}
		}
		if err != nil {
			return
		}
		canon := q.FilterText()
		var again formsapi.Query
		if err := again.ParseFilter(canon); err != nil {
			t.Fatalf("FilterText of %q is %q, which ParseFilter refuses: %v", text, canon, err)
		}
		if !reflect.DeepEqual(again.Filters, q.Filters) || again.Search != q.Search {
			t.Fatalf("%q read back as %+v %q, want %+v %q", canon, again.Filters, again.Search, q.Filters, q.Search)
		}
		if c := again.FilterText(); c != canon {
			t.Fatalf("FilterText is not a fixed point: %q, then %q", canon, c)
		}
	})
}

// findHandlerTB is findHandler for a fuzz test too.
func findHandlerTB(tb testing.TB) http.Handler {
	s := memstore.New()
	if err := storetest.Load(context.Background(), s, storetest.FindSeed()); err != nil {
		tb.Fatal(err)
	}
	return formsapi.NewHandler(s, s)
}

// onlyFilterParams reports whether vals holds only filter parameters and q.
func onlyFilterParams(vals url.Values) bool {
	for name := range vals {
		if name != "q" && name != "filter" && !strings.HasPrefix(name, "filter[") {
			return false
		}
	}
	return true
}
