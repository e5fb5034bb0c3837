package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/sqlitestore"
)

// BenchmarkFullTail measures what a form's unfolded tail costs a read
// when it is at its largest, just short of the fold (foldAt rows less
// one, written one at a time after 2,000 folded ones), for folds of 256
// (the store's) and 1,024 rows, with the search index on: a filtered
// page that matches nothing and a search for a term that no submission
// holds, each a first page that must read the whole tail. Each request
// names another value, so the read cache answers none of them.
//
//	go test -run '^$' -bench BenchmarkFullTail -benchtime 200x ./sqlitestore/
func BenchmarkFullTail(b *testing.B) {
	for _, fold := range []int{sqlitestore.FoldAt, 1024} {
		b.Run("fold="+strconv.Itoa(fold), func(b *testing.B) {
			ctx := context.Background()
			s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "tail.db"), sqlitestore.WithSearchIndex(), sqlitestore.WithFoldAt(fold))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := benchdata.Load(ctx, s, []int{2000}, "", nil); err != nil {
				b.Fatal(err)
			}
			form := benchdata.FormID(0)
			for i := 0; i < fold-1; i++ {
				sub, m := benchdata.Submission(form, 2000+i)
				if err := s.AddSubmission(ctx, sub, m); err != nil {
					b.Fatal(err)
				}
			}
			for _, c := range []struct {
				name  string
				query func(i int) formsapi.Query
			}{
				{"filter", func(i int) formsapi.Query {
					return formsapi.Query{Limit: 100, Filters: []formsapi.Filter{{Field: "email", Value: fmt.Sprintf(`"nobody%d@example.com"`, i)}}}
				}},
				{"search", func(i int) formsapi.Query {
					return formsapi.Query{Limit: 100, Search: fmt.Sprintf("nobody%d", i)}
				}},
			} {
				b.Run(c.name, func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						p, err := s.ListSubmissions(ctx, benchdata.Account, form, c.query(i))
						if err != nil {
							b.Fatal(err)
						}
						if len(p.Items) != 0 {
							b.Fatalf("%d items", len(p.Items))
						}
					}
				})
			}
		})
	}
}
