package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestFieldsMigrationFillsTheTable: a schema whose submissions were
// stored before the field table existed gets, from the migration that
// makes it, the fields AddSubmission would have kept (names decoded in
// Go, a NUL escape included, across batches of the backfill), and the
// next submission adds to them.
func TestFieldsMigrationFillsTheTable(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s := load(t, mustOpenIn(t, dsn, schema), storetest.DefaultSeed())
	var subs []formsapi.Submission
	for i := range 2500 { // past two batches of the backfill
		data := fmt.Sprintf(`{"i":%d,"f%d":1}`, i, i%1200)
		if i == 1700 {
			data = `{"nul\u0000name":1,"caf\u00e9":2,"i":3}`
		}
		subs = append(subs, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(data)})
	}
	is.NoErr(s.AddSubmissions(ctx, submissions(subs...)))
	type fields struct {
		Names []string
		First []int64
	}
	read := func(s *pgstore.Store, form string) fields {
		names, first, err := s.DataFields(ctx, storetest.AccountA, form, 1<<40, 5000)
		is.NoErr(err) // DataFields
		return fields{names, first}
	}
	want := map[string]fields{}
	for _, form := range []string{storetest.FormBusy, storetest.FormSmall, storetest.FormEmpty} {
		want[form] = read(s, form)
	}
	is.Equal(len(want[storetest.FormSmall].Names), 2+1+1200+2) // n and plan of the seed, i, f0 to f1199, the NUL name and café
	s.Close()

	// The schema as the version before the field table left it. The
	// migrations after 0015 are applied again too (0016 is written so
	// that it can be).
	pgtest.Exec(t, dsn, fmt.Sprintf(`DROP TABLE %[1]s.formsapi_fields; DELETE FROM %[1]s.formsapi_migrations WHERE version >= 15`, quote(schema)))
	again := mustOpenIn(t, dsn, schema)
	for form, w := range want {
		is.Equal(cmp.Diff(w, read(again, form)), "") // the backfill's fields (-AddSubmission's +backfill's)
	}
	is.NoErr(again.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(`{"i":1,"new":2}`)}, formsapi.Metadata{}))
	got := read(again, storetest.FormSmall)
	is.Equal(got.Names[len(got.Names)-1], "new") // a new field after the backfilled ones
}
