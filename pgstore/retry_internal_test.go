package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestRetry checks which failures of a read retry runs again, and how
// often: a broken connection once, a conflict up to conflictAttempts
// times in all, anything else never, and nothing once ctx has ended.
func TestRetry(t *testing.T) {
	serialization := fmt.Errorf("query: %w", &pgconn.PgError{Code: "40001"})
	deadlock := &pgconn.PgError{Code: "40P01"}
	unique := &pgconn.PgError{Code: "23505"}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name      string
		ctx       context.Context
		errs      []error // what each call returns; nil after the last
		wantCalls int
		wantErr   error
	}{
		{"success", context.Background(), nil, 1, nil},
		{"serialization failures, then success", context.Background(), []error{serialization, serialization}, 3, nil},
		{"a deadlock, then success", context.Background(), []error{deadlock}, 2, nil},
		{"conflicts without end", context.Background(), []error{deadlock, deadlock, deadlock, deadlock, deadlock, deadlock, deadlock}, conflictAttempts, deadlock},
		{"a broken connection, then a conflict", context.Background(), []error{io.ErrUnexpectedEOF, serialization}, 3, nil},
		{"a connection broken twice", context.Background(), []error{io.EOF, io.EOF, io.EOF}, 2, io.EOF},
		{"another error", context.Background(), []error{unique, unique}, 1, unique},
		{"a conflict after ctx ended", canceled, []error{serialization, serialization}, 1, serialization},
	} {
		calls := 0
		err := retry(c.ctx, func() error {
			calls++
			if calls <= len(c.errs) {
				return c.errs[calls-1]
			}
			return nil
		})
		if calls != c.wantCalls {
			t.Errorf("%s: %d calls, want %d", c.name, calls, c.wantCalls)
		}
		if !errors.Is(err, c.wantErr) || (err == nil) != (c.wantErr == nil) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.wantErr)
		}
	}
}

// TestConflict checks that conflicts are told by SQLSTATE, wrapped or
// not, and nothing else counts as one.
func TestConflict(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "40001"}, true},
		{fmt.Errorf("add: %w", &pgconn.PgError{Code: "40P01"}), true},
		{&pgconn.PgError{Code: "40002"}, false}, // integrity constraint violation at commit: not a conflict
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "08006"}, false},
		{errors.New("could not serialize access due to concurrent update"), false}, // the message alone is not the SQLSTATE
		{nil, false},
	} {
		if got := conflict(c.err); got != c.want {
			t.Errorf("conflict(%v) = %t, want %t", c.err, got, c.want)
		}
	}
}
