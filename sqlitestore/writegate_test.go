package sqlitestore_test

import (
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/storetest"
)

// TestWritersQueueOnAHostHandle runs many writers of one store on a
// host's handle whose pool has a connection each, with a busy_timeout of
// 100 ms: the store's writes must queue in the store, not poll for
// SQLite's lock, where a writer can find it taken every time it looks
// and fail with SQLITE_BUSY though no write held it for long (the
// FeedCopyWhileWriting flake). With the store's own writers queued, none
// ever meets another in SQLite, so none waits there at all.
func TestWritersQueueOnAHostHandle(t *testing.T) {
	path := dbPath(t)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(100)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := load(t, mustNew(t, db), storetest.DefaultSeed())
	const writers, adds = 8, 24
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range adds {
				id := fmt.Sprintf("g%d-%d", w, i)
				sub := formsapi.Submission{FormID: storetest.FormEmpty, Data: []byte(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))}
				if err := s.AddSubmission(ctx, sub, formsapi.Metadata{ID: id}); err != nil {
					errs <- err
					return
				}
				if i%2 == 1 { // a deletion holds the lock longer: secure_delete and a checkpoint
					if err := s.DeleteSubmission(ctx, storetest.AccountA, storetest.FormEmpty, id); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a writer: %v", err)
	}
	p, err := s.ListSubmissions(ctx, storetest.AccountA, storetest.FormEmpty, formsapi.Query{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(p.Items), writers*adds/2; got != want {
		t.Errorf("the form holds %d submissions, want %d", got, want)
	}
}
