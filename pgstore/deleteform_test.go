package pgstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/pgstore"
)

// TestDeleteFormWhileWriting deletes forms that writers are adding
// submissions to: each deletion succeeds (a submission committing
// between the deletion of the form's submissions and of the form used to
// break the foreign key: 29 of 30 deletions failed with SQLSTATE 23503),
// and the writers' adds either land before it or are refused with
// ErrFormNotFound.
func TestDeleteFormWhileWriting(t *testing.T) {
	t.Parallel()
	dsn, schema := pooledSchema(t)
	s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for round := range 10 {
		form := fmt.Sprintf("race-%d", round)
		if err := s.AddForm(ctx, "acct", formsapi.Form{ID: form, Title: "Race"}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		added := make(chan struct{}, 3)
		stop := make(chan struct{})
		for range 3 {
			wg.Go(func() {
				first := true
				for {
					select {
					case <-stop:
						return
					default:
					}
					err := s.AddSubmission(ctx, formsapi.Submission{FormID: form, Data: []byte(`{"n":1}`)}, formsapi.Metadata{})
					if errors.Is(err, formsapi.ErrFormNotFound) {
						return // deleted under it
					} else if err != nil {
						t.Errorf("AddSubmission: %v", err)
						return
					}
					if first {
						added <- struct{}{} // writing has begun
						first = false
					}
				}
			})
		}
		for range 3 {
			<-added
		}
		err := s.DeleteForm(ctx, "acct", form)
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d: DeleteForm while writing: %v", round, err)
		}
	}
}
