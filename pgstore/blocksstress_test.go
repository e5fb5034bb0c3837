package pgstore_test

import (
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5/pgconn"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/matryer/is"
)

// TestSearchBlocksMixedConcurrent: at once, on one form, single writes
// and batches (whose writes fold), late commits among them, the store's
// deletions of rows in the tail and in the blocks, and a host's updates
// of find_keys (taken out of their blocks, put in the tail, folded):
// afterwards the blocks are exactly the rows' (checkBlocks) and a
// search finds every row, each once.
func TestSearchBlocksMixedConcurrent(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t, pgstore.WithSearchIndex())
	is.NoErr(s.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "mixed"}))
	pool := pgstore.Pool(s)
	tbl := quote(s.Schema()) + "."
	base := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)
	at := func(r *rand.Rand, i int) time.Time {
		if r.IntN(4) == 0 {
			return base.Add(time.Duration(r.IntN(i+1)) * time.Second) // late
		}
		return base.Add(time.Duration(i) * time.Second)
	}
	const writers, each = 3, 300
	ids := make(chan string, writers*each*2)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 44))
			for i := 0; i < each; {
				if w == 0 && i%50 == 0 { // a batch
					var subs []formsapi.Submission
					var ms []formsapi.Metadata
					for j := range 40 {
						id := fmt.Sprintf("b%d-%d-%d", w, i, j)
						subs = append(subs, formsapi.Submission{FormID: "mixed", Data: []byte(`{"id":"` + id + `","a":"needle in a batch"}`), CreatedAt: at(r, i*10+j)})
						ms = append(ms, formsapi.Metadata{ID: id})
					}
					if err := s.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
						for k := range subs {
							if !yield(subs[k], ms[k]) {
								return
							}
						}
					}); err != nil {
						errs <- err
						return
					}
					for _, m := range ms {
						ids <- m.ID
					}
					i += 10
					continue
				}
				id := fmt.Sprintf("s%d-%d", w, i)
				if err := s.AddSubmission(ctx, formsapi.Submission{FormID: "mixed", Data: []byte(`{"id":"` + id + `","a":"needle alone"}`), CreatedAt: at(r, i*10)}, formsapi.Metadata{ID: id}); err != nil {
					errs <- err
					return
				}
				ids <- id
				i++
			}
		}()
	}
	done := make(chan struct{})
	var dg sync.WaitGroup
	for d := range 2 {
		dg.Add(1)
		go func() {
			defer dg.Done()
			r := rand.New(rand.NewPCG(uint64(d), 4444))
			for {
				select {
				case <-done:
					return
				case id := <-ids:
					switch r.IntN(3) {
					case 0:
						if err := s.DeleteSubmission(ctx, storetest.AccountA, "mixed", id); err != nil {
							errs <- err
							return
						}
					case 1: // the host's update: new text, new keys
						data := `{"id":"` + id + `","a":"needle changed ` + id + `"}`
						if _, err := pool.Exec(ctx, `UPDATE `+tbl+`formsapi_submissions SET data = $1, find_keys = $2 WHERE host_id = $3`,
							data, find.IndexKeys([]byte(data), nil), id); err != nil {
							errs <- err
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	dg.Wait()
	close(errs)
	for err := range errs {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			t.Fatalf("%v\n%s\n%s", err, pe.Detail, pe.Where)
		}
		t.Fatal(err)
	}
	checkBlocks(t, s)
	var left int
	is.NoErr(pool.QueryRow(ctx, `SELECT count(*) FROM `+tbl+`formsapi_submissions`).Scan(&left))
	for _, o := range []formsapi.Order{formsapi.Oldest, formsapi.Newest} {
		got := walkAll2(t, s, "mixed", formsapi.Query{Search: "needle", Limit: 50, Order: o})
		seen := map[string]bool{}
		for _, g := range got {
			if seen[g] {
				t.Fatalf("%s found twice", g)
			}
			seen[g] = true
		}
		is.Equal(len(got), left)
	}
}
