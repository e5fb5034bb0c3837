package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// TestInsertErrorOtherUniqueViolation: a write refused by a unique
// index other than the metadata ID's (here a host's own, on the
// submissions' times; before migration 0037 the search index's fold
// failed so) is not the client's invalid input: a client does not make
// again a write it was told is invalid. Before, every unique violation
// of the insert was reported as a metadata ID the form already has. A
// metadata ID the form has is still invalid input.
func TestInsertErrorOtherUniqueViolation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pgtest.Schema(t)
	s := mustOpenIn(t, dsn, schema)
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "once"}))
	pgtest.Exec(t, dsn, `CREATE UNIQUE INDEX host_once ON `+quote(schema)+`.formsapi_submissions (form_seq, created_at)`)
	at := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	sub := formsapi.Submission{FormID: "once", Data: []byte(`{"a":1}`), CreatedAt: at}
	is.NoErr(s.AddSubmission(ctx, sub, formsapi.Metadata{ID: "first"}))
	err := s.AddSubmission(ctx, sub, formsapi.Metadata{ID: "second"})
	is.True(err != nil)
	is.True(!errors.Is(err, formsapi.ErrInvalidInput)) // the host's index, not the client's input
	err = s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		yield(sub, formsapi.Metadata{ID: "third"})
	})
	is.True(err != nil)
	is.True(!errors.Is(err, formsapi.ErrInvalidInput))
	sub.CreatedAt = at.Add(time.Second)
	err = s.AddSubmission(ctx, sub, formsapi.Metadata{ID: "first"})
	is.True(errors.Is(err, formsapi.ErrInvalidInput)) // the metadata ID's index
}
