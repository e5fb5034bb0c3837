package pgstore_test

import (
	"testing"

	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
)

// pooledSchema returns a migrated schema for stores opened with opts,
// from internal/pgtest's pool (Pooled): a schema emptied by an earlier
// test, or a new one migrated for it. Under -race a migration costs
// about a second, emptying the tables a few milliseconds, and these tests
// open some two hundred stores. The pools are by the search and sort
// index settings, the options a migration reads; a schema is given back
// emptied when the test's later cleanups (its stores' Close) have run,
// so call pooledSchema before opening the stores. TestMain drops the
// pooled schemas.
func pooledSchema(t *testing.T, opts ...pgstore.Option) (dsn, schema string) {
	t.Helper()
	class := "pgstore"
	var migrate []pgstore.Option
	if pgstore.SearchIndexOn(opts...) {
		class, migrate = "pgstore with its search index", []pgstore.Option{pgstore.WithSearchIndex()}
	}
	if pgstore.SortIndexOn(opts...) {
		class, migrate = class+" and sort index", append(migrate, pgstore.WithSortIndex())
	}
	return pgtest.Pooled(t, class, func(dsn, schema string) error {
		s, err := pgstore.Open(ctx, dsn, append(migrate, pgstore.WithSchema(schema))...)
		if err != nil {
			return err
		}
		s.Close()
		return nil
	})
}
