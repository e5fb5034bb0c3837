package pgstore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/pgstore"
)

// TestFeedPositionsCommitInOrder adds submissions to one form from eight
// goroutines while a reader looks at the form's feed positions again and
// again: every snapshot must show exactly 1..n, never a gap that a later
// commit would fill, and at the end the positions are 1..total. That is
// what the sync feed needs from feed_pos: a reader that has seen position
// n has seen every position before it.
func TestFeedPositionsCommitInOrder(t *testing.T) {
	t.Parallel()
	s := mustOpen(t)
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "fed"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "other"}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 40
	check := fmt.Sprintf(`SELECT count(*), COALESCE(MIN(feed_pos), 1), COALESCE(MAX(feed_pos), 0)
FROM %[1]s.formsapi_submissions WHERE form_seq = (SELECT seq FROM %[1]s.formsapi_forms WHERE id = $1)`, quote(s.Schema()))
	var done atomic.Bool
	var snapshots int
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for !done.Load() {
			var n, lo, hi int64
			if err := pgstore.Pool(s).QueryRow(ctx, check, "fed").Scan(&n, &lo, &hi); err != nil {
				t.Error(err)
				return
			}
			if lo != 1 || n != hi {
				t.Errorf("a snapshot shows %d positions from %d to %d: a gap", n, lo, hi)
				return
			}
			snapshots++
		}
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				form := "fed"
				if i%5 == 4 {
					form = "other" // another form's counter does not disturb this one
				}
				sub := formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))}
				if err := s.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	done.Store(true)
	<-readerDone
	for form, want := range map[string]int64{"fed": writers * each * 4 / 5, "other": writers * each / 5} {
		var n, lo, hi int64
		if err := pgstore.Pool(s).QueryRow(ctx, check, form).Scan(&n, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		if n != want || lo != 1 || hi != want {
			t.Errorf("form %s: %d positions from %d to %d, want 1 to %d", form, n, lo, hi, want)
		}
	}
	t.Logf("%d snapshots, none with a gap", snapshots)
}
