package formsclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/storetest"
)

// TestFilterFieldsAndCount: Filter, Fields and Count against the real
// handler over every backend.
func TestFilterFieldsAndCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store, keys := b.open(t)
			srv := serve(t, formsapi.NewHandler(store, keys), "")
			c := newClient(t, srv.base, storetest.KeyA)
			all := mustCollect(t, c.Submissions(ctx, storetest.FormBusy, formsclient.PageSize(1000)))

			one := mustCollect(t, c.Submissions(ctx, storetest.FormBusy, formsclient.Filter("email", "p7@example.com"), formsclient.PageSize(2)))
			if len(one) != 1 || !json.Valid(one[0].Data) {
				t.Fatalf("Filter(email): %d submissions, want 1", len(one))
			}
			var d struct{ N int }
			if err := json.Unmarshal(one[0].Data, &d); err != nil || d.N != 7 {
				t.Errorf("Filter(email) found n %d (%v), want 7", d.N, err)
			}
			// Numbers by value; a string "7" is not the number 7.
			if got := mustCollect(t, c.Submissions(ctx, storetest.FormBusy, formsclient.Filter("n", 7.0))); len(got) != 1 {
				t.Errorf("Filter(n, 7.0): %d, want 1", len(got))
			}
			if got := mustCollect(t, c.Submissions(ctx, storetest.FormBusy, formsclient.Filter("n", "7"))); len(got) != 0 {
				t.Errorf(`Filter(n, "7"): %d, want 0`, len(got))
			}
			// Operators: a range, a list, presence and a prefix.
			ns := func(opts ...formsclient.ListOption) []int {
				t.Helper()
				var out []int
				for _, s := range mustCollect(t, c.Submissions(ctx, storetest.FormBusy, append(opts, formsclient.PageSize(3))...)) {
					var d struct{ N int }
					if err := json.Unmarshal(s.Data, &d); err != nil {
						t.Fatal(err)
					}
					out = append(out, d.N)
				}
				slices.Sort(out)
				return out
			}
			if got := ns(formsclient.Where("n", formsclient.Gte, 10), formsclient.Where("n", formsclient.Lt, 12.5)); !slices.Equal(got, []int{10, 11, 12}) {
				t.Errorf("Where(n, Gte, 10), Where(n, Lt, 12.5): n %v, want [10 11 12]", got)
			}
			if got := ns(formsclient.WhereIn("n", 3, 7.0, "8")); !slices.Equal(got, []int{3, 7}) {
				t.Errorf(`WhereIn(n, 3, 7.0, "8"): n %v, want [3 7]`, got)
			}
			if got := ns(formsclient.WhereExists("email", false)); !slices.Equal(got, []int{5}) {
				t.Errorf("WhereExists(email, false): n %v, want [5]", got)
			}
			if got := ns(formsclient.Where("name", formsclient.Prefix, "PERSON 2"), formsclient.Where("n", formsclient.Ne, 2)); !slices.Equal(got, []int{20, 21, 22}) {
				t.Errorf("Where(name, Prefix, PERSON 2), Where(n, Ne, 2): n %v, want [20 21 22]", got)
			}
			for _, bad := range []formsclient.ListOption{formsclient.Where("n", "gtx", 1), formsclient.Where("n", formsclient.Gt, true), formsclient.Where("n", formsclient.Prefix, 1), formsclient.WhereIn("n"), formsclient.Where("", formsclient.Gt, 1)} {
				if _, err := collectErr(c.Submissions(ctx, storetest.FormBusy, bad)); err == nil || errors.As(err, new(*formsclient.Error)) {
					t.Errorf("a bad Where: %v, want an error before any request", err)
				}
			}
			// Search: case set aside, with a filter, counted.
			found := mustCollect(t, c.Submissions(ctx, storetest.FormBusy, formsclient.Search("P7@EXAMPLE"), formsclient.PageSize(1)))
			if len(found) != 1 || string(found[0].Data) != string(one[0].Data) {
				t.Errorf("Search(P7@EXAMPLE): %d submissions, want the one of Filter(email)", len(found))
			}
			if got := mustCollect(t, c.Submissions(ctx, storetest.FormBusy, formsclient.Search("p7@example"), formsclient.Filter("n", 8))); len(got) != 0 {
				t.Errorf("Search with a filter that excludes it: %d, want 0", len(got))
			}
			if n, err := c.Count(ctx, storetest.FormBusy, true, formsclient.Search("p7@example")); err != nil || n != (formsapi.Total{Value: 1, Kind: find.Exact}) {
				t.Errorf("Count(search, exact): %+v (%v), want 1 exact", n, err)
			}
			if _, err := collectErr(c.Submissions(ctx, storetest.FormBusy, formsclient.Search("ab"))); !errors.As(err, new(*formsclient.Error)) {
				t.Errorf("Search(ab): %v, want the server's 400", err)
			}
			// Fields: every submission, data cut to n.
			cut := mustCollect(t, c.Submissions(ctx, storetest.FormBusy, formsclient.Fields("n"), formsclient.PageSize(7)))
			if len(cut) != len(all) {
				t.Fatalf("Fields(n): %d submissions, want %d", len(cut), len(all))
			}
			for _, s := range cut {
				var m map[string]any
				if err := json.Unmarshal(s.Data, &m); err != nil || len(m) != 1 || m["n"] == nil {
					t.Fatalf("Fields(n): data %s", s.Data)
				}
			}
			// Count: exact and estimate.
			n, err := c.Count(ctx, storetest.FormBusy, true)
			if err != nil || n != (formsapi.Total{Value: int64(len(all)), Kind: find.Exact}) {
				t.Errorf("Count: %+v (%v), want %d exact", n, err, len(all))
			}
			n, err = c.Count(ctx, storetest.FormBusy, false, formsclient.Filter("email", "p7@example.com"))
			if err != nil || n != (formsapi.Total{Value: 1, Kind: find.Estimate}) {
				t.Errorf("Count(filter, estimate): %+v (%v), want 1 estimate", n, err)
			}
			// Refused before any request.
			before := srv.requests.Load()
			for name, seq := range map[string]func() error{
				"Filter on forms": func() error { _, err := collectErr(c.Forms(ctx, formsclient.Filter("a", 1))); return err },
				"a map value": func() error {
					_, err := collectErr(c.Submissions(ctx, storetest.FormBusy, formsclient.Filter("a", map[string]int{})))
					return err
				},
				"no field": func() error {
					_, err := collectErr(c.Submissions(ctx, storetest.FormBusy, formsclient.Filter("", 1)))
					return err
				},
				"Search on forms": func() error { _, err := collectErr(c.Forms(ctx, formsclient.Search("zoe"))); return err },
				"Search()": func() error {
					_, err := collectErr(c.Submissions(ctx, storetest.FormBusy, formsclient.Search("")))
					return err
				},
				"Fields()": func() error {
					_, err := collectErr(c.Submissions(ctx, storetest.FormBusy, formsclient.Fields()))
					return err
				},
				"Filter in Sync": func() error {
					_, err := c.Sync(ctx, storetest.FormBusy, formsclient.SyncStart, func(formsclient.Change) error { return nil }, formsclient.Filter("a", 1))
					return err
				},
			} {
				if err := seq(); err == nil {
					t.Errorf("%s: no error", name)
				}
			}
			if got := srv.requests.Load(); got != before {
				t.Errorf("%d requests for calls refused before any", got-before)
			}
			// The server's limits come back as errors.
			many := []formsclient.ListOption{}
			for _, f := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
				many = append(many, formsclient.Filter(f, 1))
			}
			var e *formsclient.Error
			if _, err := collectErr(c.Submissions(ctx, storetest.FormBusy, many...)); !errors.As(err, &e) || e.StatusCode != 400 {
				t.Errorf("nine filters: %v, want a 400", err)
			}
		})
	}
}

func collectErr[T any](seq func(func(T, error) bool)) ([]T, error) {
	var items []T
	var err error
	seq(func(v T, e error) bool {
		if e != nil {
			err = e
			return false
		}
		items = append(items, v)
		return true
	})
	return items, err
}

// TestSortBy: SortBy against the real handler over every backend: the
// iterator walks the whole list in the field's order, either way, the
// page call and its cursor too, a count ignores it, and the options it
// does not combine with are refused before any request.
func TestSortBy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store, keys := b.open(t)
			srv := serve(t, formsapi.NewHandler(store, keys), "")
			c := newClient(t, srv.base, storetest.KeyA)
			ns := func(opts ...formsclient.ListOption) []int {
				t.Helper()
				var out []int
				for _, s := range mustCollect(t, c.Submissions(ctx, storetest.FormBusy, opts...)) {
					var d struct{ N int }
					if err := json.Unmarshal(s.Data, &d); err != nil {
						t.Fatal(err)
					}
					out = append(out, d.N)
				}
				return out
			}
			all := ns(formsclient.PageSize(1000))
			asc := ns(formsclient.SortBy("n", false), formsclient.PageSize(7))
			desc := ns(formsclient.SortBy("n", true), formsclient.PageSize(7))
			if len(asc) != len(all) || len(desc) != len(all) || !slices.IsSorted(asc) {
				t.Fatalf("SortBy(n): %d and %d submissions of %d, ascending sorted: %v", len(asc), len(desc), len(all), slices.IsSorted(asc))
			}
			slices.Reverse(desc)
			if !slices.Equal(asc, desc) {
				t.Errorf("SortBy(n, true) is not the reverse of SortBy(n, false)")
			}
			items, resp, err := c.SubmissionsPage(ctx, storetest.FormBusy, formsclient.SortBy("n", true), formsclient.PageSize(2))
			if err != nil || len(items) != 2 || resp.NextCursor == "" {
				t.Fatalf("SubmissionsPage(SortBy(n, true)): %d items, %v", len(items), err)
			}
			items2, _, err := c.SubmissionsPage(ctx, storetest.FormBusy, formsclient.Cursor(resp.NextCursor), formsclient.PageSize(2))
			if err != nil || len(items2) != 2 {
				t.Fatalf("the sorted page's cursor: %d items, %v", len(items2), err)
			}
			var d struct{ N int }
			if err := json.Unmarshal(items2[0].Data, &d); err != nil || d.N != asc[len(asc)-3] {
				t.Errorf("the second sorted page starts at n %d (%v), want %d", d.N, err, asc[len(asc)-3])
			}
			n, err := c.Count(ctx, storetest.FormBusy, true, formsclient.SortBy("n", false))
			if err != nil || n.Value != int64(len(all)) {
				t.Errorf("Count with SortBy: %+v, %v, want %d", n, err, len(all))
			}
			for name, opts := range map[string][]formsclient.ListOption{
				"SortBy with Oldest": {formsclient.SortBy("n", false), formsclient.Oldest()},
				"SortBy of no field": {formsclient.SortBy("", false)},
			} {
				for _, err := range c.Submissions(ctx, storetest.FormBusy, opts...) {
					if err == nil {
						t.Errorf("%s: no error", name)
					}
					break
				}
			}
			for _, err := range c.Forms(ctx, formsclient.SortBy("n", false)) {
				if err == nil {
					t.Errorf("SortBy on the forms list: no error")
				}
				break
			}
		})
	}
}
