package sqlitestore_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// TestEraseLeavesNoTrace erases a respondent's submissions, small ones and
// one large enough for overflow pages, with metadata of their own, and
// then looks for their bytes in the database file and its -wal file: the
// data and every metadata field were there before (so the search can
// fail), and none is anywhere after. Erase deletes with secure_delete and
// ends with a TRUNCATE checkpoint (see Store.Erase); a store from New gets
// secure_delete for its deletions whatever the host's DSN says.
func TestEraseLeavesNoTrace(t *testing.T) {
	for _, mode := range []string{"Open", "New"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			path := dbPath(t)
			var s *sqlitestore.Store
			if mode == "Open" {
				s = mustOpen(t, path)
			} else {
				s = mustNew(t, hostDB(t, path))
			}
			is.NoErr(storetest.Load(ctx, s, storetest.DefaultSeed()))
			const who = "gone.respondent@example.org"
			traces := []string{who, "TRACE-DATA-7f3a", "TRACE-IP-7f3a", "TRACE-UA-7f3a", "TRACE-GEO-7f3a", "TRACE-ID-7f3a", "TRACE-HOST-ID-7f3a"}
			big := strings.Repeat("TRACE-DATA-7f3a ", 2000) // 32 KB: overflow pages
			for i, data := range []string{
				fmt.Sprintf(`{"email":%q,"note":"TRACE-DATA-7f3a"}`, who),
				fmt.Sprintf(`{"email":%q,"essay":%q}`, who, big),
			} {
				is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(data)}, formsapi.Metadata{
					ClientIP: "TRACE-IP-7f3a", UserAgent: "TRACE-UA-7f3a", Geo: []byte(`{"city":"TRACE-GEO-7f3a"}`),
					TraceID: "TRACE-ID-7f3a", ID: fmt.Sprintf("TRACE-HOST-ID-7f3a-%d", i),
				}))
			}
			files := func() []byte {
				var all []byte
				for _, p := range []string{path, path + "-wal"} {
					b, err := os.ReadFile(p)
					if err != nil && !os.IsNotExist(err) {
						t.Fatal(err)
					}
					all = append(all, b...)
				}
				return all
			}
			before := files()
			for _, tr := range traces {
				if !bytes.Contains(before, []byte(tr)) {
					t.Fatalf("%q is not in the files before the erasure: the search finds nothing", tr)
				}
			}
			n, err := s.Erase(ctx, storetest.AccountA, "email", who)
			is.NoErr(err)
			is.Equal(n, 2)
			after := files()
			for _, tr := range traces {
				if i := bytes.Index(after, []byte(tr)); i >= 0 {
					t.Errorf("%q is still in the files after the erasure, at byte %d", tr, i)
				}
			}
			// The rest of the data is intact.
			p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormSmall, formsapi.Query{Limit: 10})
			is.NoErr(err)
			is.Equal(len(p.Items), 3)
		})
	}
}
