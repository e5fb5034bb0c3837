package sqlitestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// TestSortWalkUnderWrites: a sorted walk by a named field of the index,
// in either direction and in pages of a few, while another store on the
// file (another process's) keeps adding submissions (some with the
// field as a number, a string, a boolean, null, an object or none, some
// created before the walk's rows), lists each submission stored before
// the walk began exactly once and no submission twice.
func TestSortWalkUnderWrites(t *testing.T) {
	path := dbPath(t)
	s := load(t, mustOpen(t, path, sqlitestore.WithSortIndex("n", "other")), storetest.DefaultSeed())
	w := mustOpen(t, path, sqlitestore.WithSortIndex("n", "other"))
	form := storetest.FormBusy
	value := func(r *rand.Rand) string {
		switch r.IntN(7) {
		case 0:
			return `"n":` + fmt.Sprint(r.IntN(20)-10)
		case 1:
			return `"n":"` + string(rune('a'+r.IntN(5))) + `"`
		case 2:
			return `"n":true`
		case 3:
			return `"n":null`
		case 4:
			return `"n":{"x":1}`
		case 5:
			return `"n":` + fmt.Sprint(r.Float64())
		}
		return `"m":1`
	}
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(st *sqlitestore.Store, r *rand.Rand, id string) {
		at := base.Add(time.Duration(r.IntN(1000)) * time.Second)
		data := fmt.Sprintf(`{"id":%q,%s}`, id, value(r))
		if err := st.AddSubmission(context.Background(), formsapi.Submission{FormID: form, Data: []byte(data), CreatedAt: at}, formsapi.Metadata{ID: id}); err != nil {
			t.Error(err)
		}
	}
	r := rand.New(rand.NewPCG(47, 1))
	before := map[string]bool{}
	for i := range 150 {
		id := fmt.Sprintf("pre%d", i)
		add(s, r, id)
		before[id] = true
	}
	for _, sort := range []string{"n", "-n"} {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(47, 2))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				add(w, r, fmt.Sprintf("%s-during%d", sort, i))
			}
		}()
		seen := map[string]int{}
		q := formsapi.Query{Limit: 4, Sort: sort}
		for pages := 0; ; pages++ {
			p, err := s.ListSubmissions(context.Background(), storetest.AccountA, form, q)
			if err != nil {
				t.Fatal(err)
			}
			for _, sub := range p.Items {
				var d struct{ ID string }
				_ = json.Unmarshal(sub.Data, &d)
				if d.ID != "" {
					seen[d.ID]++
				}
			}
			if p.NextCursor == "" {
				break
			}
			q.Cursor = p.NextCursor
		}
		close(stop)
		wg.Wait()
		for id, n := range seen {
			if n > 1 {
				t.Errorf("sort=%s: %s listed %d times", sort, id, n)
			}
		}
		for id := range before {
			if seen[id] != 1 {
				t.Errorf("sort=%s: %s, stored before the walk, listed %d times", sort, id, seen[id])
			}
		}
	}
}
