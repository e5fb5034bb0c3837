package pgstore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/formsapi/formsapi/internal/stored"
)

// WithLogger sends the store's progress logs to l instead of
// slog.Default(), and WithLogger(nil) turns them off. Open and New log
// the steps of a start that take long: waiting for another node that
// migrates the schema, applying a migration, filling a new table from the
// stored submissions, re-encoding or indexing them, building the search
// index (WithSearchIndex on a schema with submissions). A step that ends
// within 5 seconds logs nothing; a longer one logs "start: step under
// way" at least every 5 seconds while it runs, with its name (step), the
// rows it has gone through of its total (rows_done, rows_total, for the
// steps that go through rows), the rate (rows_per_s) and the time so far
// (elapsed_s), and "start: step ended" when it ends. A line never holds
// the DSN, an error's text or anything stored.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.progress.Logger, c.quiet = l, l == nil }
}

// startProgress is the progress logger of the store's start.
func (c *config) startProgress() *stored.Progress {
	return c.progress.ForStore("pgstore", c.quiet)
}

// Migrate brings the store's schema at dsn (WithSchema, or the
// connection's current schema) to this version of the package, as Open
// would, turns the search index on and builds it when opts hold
// WithSearchIndex, and closes its connections. It is for a deploy step
// that migrates ahead of the new version's nodes, which then start
// without waiting: everything happens in one transaction under the
// schema's migration lock, so nodes that start meanwhile wait for it and
// then find nothing left to do. WithLogger says where its progress goes.
// A host with a pool of its own migrates ahead the same way by calling
// New and Close. It returns an error wrapping ErrSchemaTooNew if a newer
// version of this package has already migrated the schema, and ctx's
// error if ctx ends first, in which case nothing is applied.
func Migrate(ctx context.Context, dsn string, opts ...Option) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	s, err := Open(ctx, dsn, opts...)
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	return nil
}
