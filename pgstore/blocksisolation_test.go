package pgstore_test

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// TestSearchTailFoldsAtStrictIsolation: with repeatable read or
// serializable the database's default isolation, the store's single
// writes still fold a form's tail of the search index (they run at read
// committed while the index is on), and searches find every match. Before,
// the fold, which runs at read committed only, never ran for a single
// write at that default: after 700 writes all 700 were in the tail, and
// a form's tail grew with every write, each search walking it whole.
func TestSearchTailFoldsAtStrictIsolation(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			is := is.New(t)
			dsn, schema := pgtest.Schema(t)
			mustOpenIn(t, dsn, schema, pgstore.WithSearchIndex()).Close()
			s := mustOpenIn(t, withParam(dsn, "default_transaction_isolation", url.PathEscape(level)), schema, pgstore.WithSearchIndex())
			is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "strict"}))
			var want []int
			for n := range 700 {
				is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "strict", Data: []byte(fmt.Sprintf(`{"n":%d,"a":"needle"}`, n))}, formsapi.Metadata{}))
				want = append(want, n)
			}
			_, tail := checkBlocks(t, s)
			if tail > 300 {
				t.Errorf("%d rows in the tail after 700 writes", tail)
			}
			checkSearchAll(t, s, "strict", want)
		})
	}
}
