package formsapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/storetest"
)

// TestFilterParity: every store (memstore, sqlitestore and, with
// FORMSAPI_TEST_POSTGRES, pgstore, each with its search index off and
// on, and a host's store that does not filter, which the handler
// filters) gives the same submissions for random filters with operators
// on a random corpus of Unicode text, numbers in their several forms,
// RFC 3339 instants at several offsets, dates as text, nulls, members of
// every kind, members named twice and missing ones, walked to the end in
// random page sizes through the handler; the same sorted pages; and
// the same summary of the form, byte for byte, under random filters,
// intervals and tops. FORMSAPI_PARITY_SEED picks another corpus and
// queries (the failure names the seed).
func TestFilterParity(t *testing.T) {
	t.Parallel()
	seed := uint64(39)
	if s := os.Getenv("FORMSAPI_PARITY_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(seed, 0))
	const count = 300
	corpus := parityCorpus(r, count)
	stores, m := everyStore(t, corpus)
	stores["a host's store that does not filter"] = unfiltered{m}
	names := slices.Sorted(maps.Keys(stores))
	handlers := map[string]http.Handler{}
	for _, name := range names {
		handlers[name] = formsapi.NewHandler(stores[name], m)
	}
	some := 0 // queries that keep some submissions but not all
	const queries = 150
	for range queries {
		query := parityQuery(r)
		var want []int
		wantStatus := 0
		for i, name := range names {
			status, got := fuzzWalk(t, handlers[name], query)
			slices.Sort(got)
			switch {
			case i == 0:
				want, wantStatus = got, status
			case status != wantStatus:
				t.Fatalf("seed %d, ?%s: %s answers %d, %s %d", seed, query, name, status, names[0], wantStatus)
			case !slices.Equal(got, want):
				t.Fatalf("seed %d, ?%s: %s finds n %v, %s n %v", seed, query, name, got, names[0], want)
			}
		}
		if wantStatus == http.StatusOK && len(want) > 0 && len(want) < count {
			some++
		}
	}
	// Not a vacuous comparison: most queries tell submissions apart.
	if some < queries/3 {
		t.Errorf("seed %d: only %d of %d queries keep some submissions but not all", seed, some, queries)
	}
	// Sorted lists: the same submissions in the same order, page by page
	// (ties by createdAt and position, which every store gives in the
	// order the corpus was written).
	for range queries / 3 {
		query := paritySortQuery(r)
		var want []int
		for i, name := range names {
			status, got := fuzzWalk(t, handlers[name], query)
			switch {
			case status != http.StatusOK:
				t.Fatalf("seed %d, ?%s: %s answers %d", seed, query, name, status)
			case i == 0:
				want = got
			case !slices.Equal(got, want):
				t.Fatalf("seed %d, ?%s: %s sorts n %v, %s n %v", seed, query, name, got, names[0], want)
			}
		}
	}
	// The summary: the same figures, byte for byte, under random
	// filters, intervals and tops (the corpus fits in one read, so every
	// figure is exact on every store).
	summaryPath := strings.TrimSuffix(findPath, "/submissions") + "/summary"
	counted := 0 // summaries of some submissions
	for range queries / 5 {
		vals, err := url.ParseQuery(parityQuery(r))
		if err != nil {
			t.Fatal(err)
		}
		vals.Del("limit")
		vals.Set("interval", []string{"hour", "day", "week"}[r.IntN(3)])
		vals.Set("top", strconv.Itoa(r.IntN(6)))
		query := vals.Encode()
		var want string
		wantStatus := 0
		for i, name := range names {
			req := httptest.NewRequest("GET", summaryPath, nil)
			req.URL.RawQuery = query
			req.Header.Set("Authorization", "Bearer "+storetest.KeyA)
			w := httptest.NewRecorder()
			handlers[name].ServeHTTP(w, req)
			switch {
			case i == 0:
				want, wantStatus = w.Body.String(), w.Code
			case w.Code != wantStatus || w.Body.String() != want:
				t.Fatalf("seed %d, summary ?%s: %s answers %d %.400s, %s %d %.400s", seed, query, name, w.Code, w.Body, names[0], wantStatus, want)
			}
		}
		var a struct {
			Summary struct{ Count struct{ Value int } }
		}
		if wantStatus == http.StatusOK && json.Unmarshal([]byte(want), &a) == nil && a.Summary.Count.Value > 0 {
			counted++
		}
	}
	if counted < queries/5/3 {
		t.Errorf("seed %d: only %d of %d summaries count some submissions", seed, counted, queries/5)
	}
}

// paritySortQuery is a random sorted list: a field of the corpus (or
// none has), either direction, a random page size, and at times a filter
// or a range of creation times beside it.
func paritySortQuery(r *rand.Rand) string {
	vals := url.Values{}
	field := []string{"num", "text", "when", "mixed", "tag", "n", "missing"}[r.IntN(7)]
	if r.IntN(2) == 0 {
		field = "-" + field
	}
	vals.Set("sort", field)
	vals.Set("limit", strconv.Itoa([]int{1, 7, 40, 1000}[r.IntN(4)]))
	switch r.IntN(4) {
	case 0:
		vals.Set("filter[tag]", fmt.Sprintf("t%d", r.IntN(4)))
	case 1:
		vals.Set("filter[num][gte]", "1")
	case 2:
		vals.Set("since", "2024-02-01T00:00:30Z")
		vals.Set("until", "2024-02-01T00:01:10Z")
	}
	return vals.Encode()
}

// The corpus's values, by kind.
var (
	parityTexts = []string{
		"Zoë", "zoe", "ZOË", "Zoe ", "zoe\u0308", "Straße", "STRASSE", "strasse", "ﬁle", "file", "Ｆｉｌｅ",
		"naïve", "naive", "øre", "Øre", "ore", "日本語", "日本", "😀 smile", "", " lead", "a,b", `quo"te`,
		`back\slash`, "é", "e\u0301", "2024-03-05", "2024-3-5", "gte.4", "null", "42", "4.2e1", "-1",
		"Ünal", "ünal", "unal", "x\u2028y", "<b>&amp;", "ǅemal", "ΣΊΣΥΦΟΣ", "σίσυφος",
	}
	parityNumbers = []string{"0", "-0", "1", "-1", "42", "42.0", "4.2e1", "43", "1e2", "100", "99.5", "-7.25", "0.1", "1e-3", "12345678901234567890", "9007199254740993"}
	parityOffsets = []*time.Location{time.UTC, time.FixedZone("", 5*3600+1800), time.FixedZone("", -8*3600), time.FixedZone("", 14*3600)}
)

// parityInstant is a random RFC 3339 instant in March 2024 at a random
// offset, with fractions of a second at times.
func parityInstant(r *rand.Rand) string {
	at := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.IntN(10*24*3600)) * time.Second)
	if r.IntN(3) == 0 {
		at = at.Add(time.Duration(r.IntN(1000)) * time.Millisecond)
	}
	return at.In(parityOffsets[r.IntN(len(parityOffsets))]).Format(time.RFC3339Nano)
}

// parityString is s as a JSON string, HTML characters as they are.
func parityString(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// parityValue is a random member value of a kind that suits field.
func parityValue(r *rand.Rand, field string) string {
	switch k := r.IntN(10); {
	case k == 0:
		return "null"
	case field == "num" && k < 8, field == "mixed" && k < 3:
		return parityNumbers[r.IntN(len(parityNumbers))]
	case field == "when" && k < 6, field == "mixed" && k < 4:
		return parityString(parityInstant(r))
	case field == "when" && k < 8:
		return parityString(fmt.Sprintf("2024-03-%02d", 1+r.IntN(12)))
	case field == "mixed" && k < 5:
		return []string{"true", "false"}[r.IntN(2)]
	case field == "mixed" && k < 6:
		return `{"a":1}`
	case field == "mixed" && k < 7:
		return `[1,"x"]`
	}
	return parityString(parityTexts[r.IntN(len(parityTexts))])
}

// parityCorpus is DefaultSeed with count random submissions on
// storetest.FormFind, each with a distinct n.
func parityCorpus(r *rand.Rand, count int) storetest.Seed {
	s := storetest.DefaultSeed()
	s.Forms = append(s.Forms, storetest.SeedForm{AccountID: storetest.AccountA, Form: formsapi.Form{ID: storetest.FormFind, Title: "Parity", CreatedAt: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}})
	for n := range count {
		var b strings.Builder
		fmt.Fprintf(&b, `{"n":%d,"tag":"t%d"`, n, r.IntN(4))
		for _, field := range []string{"num", "text", "when", "mixed"} {
			if r.IntN(6) == 0 {
				continue // missing
			}
			fmt.Fprintf(&b, `,%q:%s`, field, parityValue(r, field))
			if r.IntN(20) == 0 {
				fmt.Fprintf(&b, `,%q:%s`, field, parityValue(r, field)) // named twice
			}
		}
		b.WriteString("}")
		s.Submissions = append(s.Submissions, storetest.SeedSubmission{Submission: formsapi.Submission{
			FormID: storetest.FormFind, Data: []byte(b.String()),
			CreatedAt: time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.IntN(count/3)) * time.Second),
		}})
	}
	return s
}

// parityLiteral is a random filter value for field as a query string
// gives it: a JSON literal, or bare text for a string at times.
func parityLiteral(r *rand.Rand, field string) string {
	v := parityValue(r, field)
	if strings.HasPrefix(v, `"`) && r.IntN(2) == 0 {
		var s string
		_ = json.Unmarshal([]byte(v), &s)
		if s != "" && !strings.HasPrefix(s, `"`) && !strings.Contains(s, ",") {
			return s // bare text
		}
	}
	return v
}

// parityQuery is a random query of one to three clauses with operators
// (and an equality on tag at times, which the database stores walk), a
// random page size and order.
func parityQuery(r *rand.Rand) string {
	ops := []string{"", "eq", "ne", "gt", "gte", "lt", "lte", "in", "exists", "prefix"}
	vals := url.Values{}
	for range 1 + r.IntN(3) {
		field := []string{"num", "text", "when", "mixed"}[r.IntN(4)]
		op := ops[r.IntN(len(ops))]
		var v string
		switch op {
		case "in":
			var list []string
			for range 1 + r.IntN(4) {
				list = append(list, parityLiteral(r, field))
			}
			v = strings.Join(list, ",")
		case "exists":
			v = []string{"true", "false"}[r.IntN(2)]
		case "prefix":
			text := []rune(parityTexts[r.IntN(len(parityTexts))])
			v = string(text[:min(len(text), 1+r.IntN(3))])
			if v == "" || strings.HasPrefix(v, `"`) {
				v = "z"
			}
		default:
			v = parityLiteral(r, field)
		}
		name := "filter[" + field + "]"
		if op != "" {
			name += "[" + op + "]"
		}
		vals.Set(name, v)
	}
	if r.IntN(3) == 0 {
		vals.Set("filter[tag]", fmt.Sprintf("t%d", r.IntN(4)))
	}
	vals.Set("limit", strconv.Itoa([]int{5, 40, 1000}[r.IntN(3)]))
	if r.IntN(2) == 0 {
		vals.Set("order", "asc")
	}
	return vals.Encode()
}
