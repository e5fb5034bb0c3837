package formsapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/token"
	"github.com/formsapi/formsapi/memstore"
	"github.com/matryer/is"
)

// TestLongestCursorOpens: a list at every documented limit at once (8
// filters of 64-byte names and 256-byte values, a projection of 32
// 64-byte names, a 64-byte search term, since and until) gets a nextCursor that the next request
// accepts. A cursor seals the list's parameters, so it can be several
// thousand characters long; one the server hands out must never be
// refused as malformed.
func TestLongestCursorOpens(t *testing.T) {
	longest := newLongestList(t)
	for _, n := range longest.names {
		longest.q.Set("filter["+n+"]", longest.value)
	}
	longest.walk(t, func(cursor string) {
		// The test is about cursors past the old bound of 1,024.
		t.Logf("cursor of %d characters", len(cursor))
		is.New(t).True(len(cursor) > 4096)
	})
}

// TestLongestOperatorCursorOpens: a list at the operators' limits (8 in
// clauses of 32 values of 256 bytes each, on 64-byte names, with every
// other parameter at its limit too) gets nextCursors that the next
// requests accept. An in list seals its values in the cursor, so such a
// cursor is about 90,000 characters: token.MaxLength bounds what Open
// reads, and must never be below what the handler hands out (it was
// 8,192, and a list of in clauses of some 6 KB of values got a cursor it
// then refused as invalid).
func TestLongestOperatorCursorOpens(t *testing.T) {
	longest := newLongestList(t)
	for _, n := range longest.names {
		list := []string{`"` + longest.value + `"`} // the submissions' value, and 31 others
		for j := 1; j < 32; j++ {
			list = append(list, fmt.Sprintf(`"%02d%s"`, j, longest.value[2:]))
		}
		longest.q.Set("filter["+n+"][in]", strings.Join(list, ","))
	}
	longest.walk(t, func(cursor string) {
		is := is.New(t)
		t.Logf("cursor of %d characters", len(cursor))
		is.True(len(cursor) > 80_000)              // the values are sealed in it
		is.True(len(cursor) < token.MaxLength*3/4) // with room for a store's position
	})
}

// longestList is a form of three submissions that each have 8 member
// names of 64 bytes, each with a string whose canonical JSON is 256
// bytes (254 characters and its quotes), and a list's parameters at
// their limits but the filters, which each test sets: one item a page,
// since and until with nanoseconds, a projection of 32 64-byte names (the
// 8 first), a 64-byte search term.
type longestList struct {
	h     http.Handler
	key   string
	path  string
	names []string
	value string
	q     url.Values
}

func newLongestList(t *testing.T) *longestList {
	is := is.New(t)
	ctx := context.Background()
	s := memstore.New()
	const key, form = "longest-cursor-key-0123456789", "longest-cursor"
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: form, Title: "t", CreatedAt: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}))
	is.NoErr(s.AddKey(ctx, key, "acct"))
	value := strings.Repeat("v", 254)
	var names []string
	data := map[string]string{}
	for i := range 8 {
		n := fmt.Sprintf("f%02d", i) + strings.Repeat("n", 61)
		names = append(names, n)
		data[n] = value
	}
	raw, err := json.Marshal(data)
	is.NoErr(err)
	for i := range 3 {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{
			FormID: form, Data: raw, Attachments: []formsapi.Attachment{},
			CreatedAt: time.Date(2024, 1, 2, 0, i, 0, 0, time.UTC),
		}, formsapi.Metadata{}))
	}
	fields := slices.Clone(names)
	for i := len(fields); i < 32; i++ {
		fields = append(fields, fmt.Sprintf("p%02d", i)+strings.Repeat("p", 61))
	}
	return &longestList{
		h: formsapi.NewHandler(s, s), key: key, path: "/v1/forms/" + form + "/submissions",
		names: names, value: value,
		q: url.Values{
			"limit":  {"1"},
			"order":  {"asc"},
			"since":  {"2024-01-01T00:00:00.123456789Z"},
			"until":  {"2025-01-01T00:00:00.987654321Z"},
			"fields": {strings.Join(fields, ",")},
			"q":      {strings.Repeat("v", 64)},
		},
	}
}

// walk reads the list's three pages, each of one matching item, following
// each nextCursor, and hands the first page's to first.
func (l *longestList) walk(t *testing.T, first func(cursor string)) {
	is := is.New(t)
	target := l.path + "?" + l.q.Encode()
	for page := 1; page <= 3; page++ {
		res := do(t, l.h, "GET", target, bearer(l.key)...)
		if res.status != http.StatusOK {
			t.Fatalf("page %d: %d %s", page, res.status, res.body)
		}
		var p findPage
		is.NoErr(json.Unmarshal(res.body, &p))
		is.Equal(len(p.Submissions), 1) // one item a page, every one a match
		if page == 3 {
			is.True(p.NextCursor == nil) // three submissions, three pages
			break
		}
		is.True(p.NextCursor != nil)
		if page == 1 {
			first(*p.NextCursor)
		}
		target = l.path + "?limit=1&cursor=" + url.QueryEscape(*p.NextCursor)
	}
}
