package memstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
)

// TestExactCountStopsAtItsByteBound: an exact count of a filtered list
// stops, "at_least" the matches found, right after the candidate whose
// check brings its work (find.Examined: here the data checked) to the
// bound (find.MaxExactCountBytes, here lowered to keep the test small),
// as the database stores' stored.CountMatches does; within it, and
// without filters, the count is exact.
func TestExactCountStopsAtItsByteBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New()
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "f", Title: "F", CreatedAt: time.Unix(1, 0)}); err != nil {
		t.Fatal(err)
	}
	const n, size = 40, 1000
	for i := range n {
		data := fmt.Sprintf(`{"a":1,"i":"%02d","pad":"%s"}`, i, strings.Repeat("x", size-25))
		if len(data) != size {
			t.Fatalf("data of %d bytes, want %d", len(data), size)
		}
		sub := formsapi.Submission{FormID: "f", Data: []byte(data), CreatedAt: time.Unix(int64(10+i), 0)}
		if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
	}
	filtered := formsapi.Query{Limit: 1, Filters: []formsapi.Filter{{Field: "a", Value: "1"}}}
	for _, tc := range []struct {
		name     string
		q        formsapi.Query
		maxBytes int64
		want     formsapi.Total
	}{
		{"ThirtyOne", filtered, 31 * size, formsapi.Total{Value: 31, Kind: find.AtLeast}},
		{"ThirtyTwo", filtered, 32*size - 1, formsapi.Total{Value: 32, Kind: find.AtLeast}},
		{"WithinTheBytes", filtered, n*size + 1, formsapi.Total{Value: n, Kind: find.Exact}},
		{"NoFilters", formsapi.Query{Limit: 1}, size, formsapi.Total{Value: n, Kind: find.Exact}},
	} {
		got, err := s.countSubmissions(ctx, "acct", "f", tc.q, true, tc.maxBytes)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v (%v), want %+v", tc.name, got, err, tc.want)
		}
	}
}
