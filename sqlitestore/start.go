package sqlitestore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/formsapi/formsapi/internal/stored"
)

// WithLogger sends the store's progress logs to l instead of
// slog.Default(), and WithLogger(nil) turns them off. Open and New log
// the steps of a start that take long: applying a migration, re-encoding
// or indexing stored submissions, building the search index
// (WithSearchIndex on a file with submissions). A step that ends within
// 5 seconds logs nothing; a longer one logs "start: step under way" at
// least every 5 seconds while it runs, with its name (step), the rows it
// has gone through of its total (rows_done, rows_total, for the steps
// that go through rows), the rate (rows_per_s) and the time so far
// (elapsed_s), and "start: step ended" when it ends. A write whose fold
// of the search index's tail fails (WithSearchIndex; the write stands,
// and a later one folds) logs a warning, the first of a run of failures
// only, with SQLite's result code (sqlite_code), and the next fold that
// succeeds says so, with the number that failed (failed_folds). A line
// never holds the database's path, an error's text or anything stored.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.progress.Logger, c.quiet = l, l == nil }
}

// startProgress is the progress logger of the store's start.
func (c *config) startProgress() *stored.Progress {
	return c.progress.ForStore("sqlitestore", c.quiet)
}

// Migrate brings the database file at path to the schema of this version
// of the package, as Open would (creating the file if needed, mode 0600),
// turns the search index on and builds it when opts hold
// WithSearchIndex, and closes the file. It is for a deploy step that
// migrates ahead of the new version's servers, which then open the file
// without waiting; WithLogger says where its progress goes. A host on its
// own handle (New) migrates ahead the same way by calling New and Close.
// It returns an error wrapping ErrSchemaTooNew if a newer version of this
// package has already migrated the file, and ctx's error if ctx ends
// first (the step under way is rolled back; the migrations applied
// before it stay).
func Migrate(ctx context.Context, path string, opts ...Option) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	s, err := openCtx(ctx, path, opts...)
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	return nil
}
