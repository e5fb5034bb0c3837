package formsapi_test

import (
	"context"
	"testing"

	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
)

// openPostgres opens a pgstore, with its search index on if searchIndex,
// on a migrated schema from internal/pgtest's pool (Pooled): a schema an
// earlier test emptied, or a new one migrated for it, rather than a
// schema migrated for each store, which costs about half a second of
// PostgreSQL's CPU. The store is closed when the test ends, and its
// schema then goes back to the pool emptied; TestMain drops the pool.
func openPostgres(t testing.TB, searchIndex bool) *pgstore.Store {
	t.Helper()
	opts := []pgstore.Option{pgstore.WithSortIndex()}
	class := "pgstore with its sort index"
	if searchIndex {
		opts, class = append(opts, pgstore.WithSearchIndex()), "pgstore with its search and sort indexes"
	}
	ctx := context.Background()
	dsn, schema := pgtest.Pooled(t, class, func(dsn, schema string) error {
		s, err := pgstore.Open(ctx, dsn, append(opts, pgstore.WithSchema(schema))...)
		if err != nil {
			return err
		}
		s.Close()
		return nil
	})
	s, err := pgstore.Open(ctx, dsn, append(opts, pgstore.WithSchema(schema))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
