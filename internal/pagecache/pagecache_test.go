package pagecache_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/pagecache"
	"github.com/formsapi/formsapi/internal/wire"
)

// item is a row of a fake form: its position and stored JSON.
type item struct {
	pos  keyset.Pos
	json string
}

// list returns n items at times 1..n, {"v":version,"n":i}, so that the
// items of two versions differ.
func list(version int64, n int) []item {
	out := make([]item, n)
	for i := range out {
		out[i] = item{keyset.Pos{At: int64(i + 1), Seq: int64(i + 1)}, fmt.Sprintf(`{"v":%d,"n":%d}`, version, i+1)}
	}
	return out
}

// rows reads a fake form as a store reads its table: the items strictly
// between the Read's bounds, in q's order, at most fetch of them, and
// counts the rows read in *read.
func rows(r *pagecache.Read, items []item, order formsapi.Order, read *int) {
	lo, hi, fetch := r.Range()
	in := slices.Clone(items)
	if order == formsapi.Newest {
		slices.Reverse(in)
	}
	n := 0
	for _, it := range in {
		if !lo.Less(it.pos) || !it.pos.Less(hi) {
			continue
		}
		if n == fetch {
			return
		}
		n++
		*read++
		if !r.Row(it.pos, []byte(it.json)) {
			return
		}
	}
}

// page reads q's page of items (at version) through c, as a store does,
// and returns the page and how many rows it read from the "database".
func page(t *testing.T, c *pagecache.Cache, version int64, items []item, q formsapi.Query) (wire.Page, int) {
	t.Helper()
	p := wire.Page{Body: []byte("[")}
	r, err := c.Begin(version, 7, q, &p)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	read := 0
	if !r.Served() {
		rows(&r, items, q.Order, &read)
		r.Done(version)
	}
	return p, read
}

// uncached is the page a store without a cache serves.
func uncached(t *testing.T, items []item, q formsapi.Query) wire.Page {
	t.Helper()
	p, _ := page(t, nil, 0, items, q)
	return p
}

func TestServedOnlyAtItsVersion(t *testing.T) {
	is := is.New(t)
	c := pagecache.New(1 << 20)
	v1, v2 := list(1, 30), list(2, 31)
	q := formsapi.Query{Limit: 10}
	first, read := page(t, c, 1, v1, q)
	is.Equal(read, 11) // a miss reads the page and one row more
	again, read := page(t, c, 1, v1, q)
	is.Equal(read, 0)                                // a hit reads nothing
	is.Equal(string(again.Body), string(first.Body)) // the same page
	is.Equal(again.NextCursor, first.NextCursor)     // and cursor
	next, read := page(t, c, 2, v2, q)
	is.Equal(read, 11)                                           // another version is a miss
	is.Equal(string(next.Body), string(uncached(t, v2, q).Body)) // and shows that version's items
	is.True(strings.Contains(string(next.Body), `"v":2`))
	entries, bytes := c.Stats()
	is.Equal(entries, 1) // one list
	is.True(bytes > 0)
	is.Equal(c.Versions(), map[int64][]int64{7: {2}}) // held at the newer version: it took the old one's place
	_, read = page(t, c, 1, v1, q)
	is.Equal(read, 11)                                // the old version is gone
	is.Equal(c.Versions(), map[int64][]int64{7: {1}}) // and a version read lower than the one held is taken as the form's now (see TestWentBack)
}

// TestWentBack: a store reads a form's version lower than one the cache
// holds for a list of it, as after a restore from a backup; the cache
// drops every page of that form, of every list, and never serves them
// again, even once the restored form's version climbs back to a dropped
// page's: the same value then names another state. Other forms keep
// their pages. The same for forms lists.
func TestWentBack(t *testing.T) {
	is := is.New(t)
	c := pagecache.New(1 << 20)
	before, after := list(1, 30), list(2, 30) // the form's states at versions 5 and 9, then 9 again after the restore
	newest, oldest := formsapi.Query{Limit: 10}, formsapi.Query{Limit: 10, Order: formsapi.Oldest}
	page(t, c, 9, before, newest)
	page(t, c, 9, before, oldest)
	other := wire.Page{Body: []byte("[")}
	r, err := c.Begin(4, 8, newest, &other) // another form's page
	is.NoErr(err)
	rows(&r, before, newest.Order, new(int))
	r.Done(4)
	is.Equal(c.WentBack(), int64(0))

	// Restored: the form is back at version 5, and a store reads it.
	_, read := page(t, c, 5, before, newest)
	is.Equal(read, 11) // a miss, as any other version is
	is.Equal(c.WentBack(), int64(1))
	is.Equal(c.Versions(), map[int64][]int64{7: {5}, 8: {4}}) // both of form 7's version 9 pages dropped, form 8's kept

	// One write: version 9 again, of another state. Neither list serves
	// what it held at 9 before.
	for _, q := range []formsapi.Query{newest, oldest} {
		got, read := page(t, c, 9, after, q)
		is.True(read > 0) // read from the database
		is.Equal(string(got.Body), string(uncached(t, after, q).Body))
	}

	// Forms lists: the account's pages go, another account's stay.
	all, pos := forms(1, 3)
	q := formsapi.Query{Limit: 10}
	p, at, more := formsPage(all, pos, q)
	c.KeepForms(9, "acct", q, p.Items, at, more)
	c.KeepForms(9, "acct", oldest, p.Items, at, more)
	c.KeepForms(9, "other", q, p.Items, at, more)
	_, ok := c.Forms(5, "acct", q)
	is.True(!ok)
	is.Equal(c.WentBack(), int64(2))
	_, ok = c.Forms(9, "acct", oldest)
	is.True(!ok) // the list's other page went too
	_, ok = c.Forms(9, "other", q)
	is.True(ok)

	var none *pagecache.Cache
	is.Equal(none.WentBack(), int64(0))
}

func TestLimitsShareAPage(t *testing.T) {
	items := list(1, 30)
	for _, order := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
		c := pagecache.New(1 << 20)
		// Short pages first, then longer ones that extend them, then short
		// again: each must be the page a store without a cache serves.
		for _, c2 := range []struct{ limit, read int }{
			{3, 4},   // a miss: 3 and one more
			{10, 8},  // 3 held: the 7 after them and one more
			{7, 0},   // held
			{11, 2},  // 10 held
			{29, 19}, // 11 held
			{30, 1},  // 29 held, and the 30th is the last
			{31, 0},  // the whole list is held
			{100, 0}, // and any limit over it
			{1, 0},
		} {
			q := formsapi.Query{Limit: c2.limit, Order: order}
			want := uncached(t, items, q)
			got, read := page(t, c, 1, items, q)
			if string(got.Body) != string(want.Body) || got.NextCursor != want.NextCursor {
				t.Errorf("%v, limit %d: got %s (cursor %q), want %s (cursor %q)", order, c2.limit, got.Body, got.NextCursor, want.Body, want.NextCursor)
			}
			if read != c2.read {
				t.Errorf("%v, limit %d: read %d rows, want %d", order, c2.limit, read, c2.read)
			}
		}
		// The whole list is held, with no item after it: any limit at all.
		if _, read := page(t, c, 1, items, formsapi.Query{Limit: 1000, Order: order}); read != 0 {
			t.Errorf("%v: read %d rows though the whole list is held", order, read)
		}
	}
}

func TestCursorsAndFilters(t *testing.T) {
	items := list(1, 40)
	c := pagecache.New(1 << 20)
	for _, q := range []formsapi.Query{
		{Limit: 5, Cursor: keyset.Pos{At: 20, Seq: 20}.String()},
		{Limit: 5, Order: formsapi.Oldest, Cursor: keyset.Pos{At: 20, Seq: 20}.String()},
		{Limit: 50, Order: formsapi.Oldest, Cursor: keyset.Pos{At: 38, Seq: 38}.String()},
	} {
		for range 2 { // a miss, then a hit
			want := uncached(t, items, q)
			got, _ := page(t, c, 1, items, q)
			if string(got.Body) != string(want.Body) || got.NextCursor != want.NextCursor {
				t.Errorf("%+v: got %s (%q), want %s (%q)", q, got.Body, got.NextCursor, want.Body, want.NextCursor)
			}
		}
	}
	entries, _ := c.Stats()
	if entries != 3 {
		t.Errorf("%d entries, want 3: each cursor is its own list", entries)
	}
	p := wire.Page{}
	if _, err := c.Begin(1, 7, formsapi.Query{Limit: 0}, &p); err == nil {
		t.Error("a limit of 0 was taken")
	}
	if _, err := c.Begin(1, 7, formsapi.Query{Limit: 1, Cursor: "not a cursor"}, &p); err == nil {
		t.Error("a malformed cursor was taken")
	}
}

func TestDamagedPagesAreNotCached(t *testing.T) {
	is := is.New(t)
	c := pagecache.New(1 << 20)
	items := list(1, 5)
	items[2].json = `{"broken"`
	q := formsapi.Query{Limit: 10}
	for range 2 {
		p, read := page(t, c, 1, items, q)
		is.Equal(read, 5)           // read from the database every time
		is.Equal(len(p.Skipped), 1) // so that every read reports the damage
		is.Equal(p.Skipped[0].Seq, int64(3))
	}
	entries, _ := c.Stats()
	is.Equal(entries, 0)
}

// TestExtendedAtAnotherVersion: a page that starts with items held at one
// version and reads the rest at another is served, but never cached: no
// version describes it.
func TestExtendedAtAnotherVersion(t *testing.T) {
	is := is.New(t)
	c := pagecache.New(1 << 20)
	items := list(1, 30)
	page(t, c, 1, items, formsapi.Query{Limit: 5})

	p := wire.Page{}
	r, err := c.Begin(1, 7, formsapi.Query{Limit: 8}, &p)
	is.NoErr(err)
	is.True(!r.Served()) // 5 held, 8 wanted
	read := 0
	rows(&r, items, formsapi.Newest, &read)
	is.Equal(read, 4)                                 // the rest only
	r.Done(2)                                         // the rest was read at version 2
	is.Equal(c.Versions(), map[int64][]int64{7: {1}}) // the 5 of version 1 stay; the mixed page is not stored
	_, read = page(t, c, 1, items, formsapi.Query{Limit: 8})
	is.Equal(read, 4) // still only 5 held
	_, read = page(t, c, 1, items, formsapi.Query{Limit: 8})
	is.Equal(read, 0) // now the 8 of version 1 are
}

// TestByteBudget: pages ended by a byte budget are served from the cache
// when the same budget ends them, and the rest is read otherwise.
func TestByteBudget(t *testing.T) {
	items := list(1, 20) // items of 13 or 14 bytes
	c := pagecache.New(1 << 20)
	for _, q := range []formsapi.Query{
		{Limit: 20, MaxBytes: 60},
		{Limit: 20, MaxBytes: 60},
		{Limit: 3},
		{Limit: 20, MaxBytes: 1},
		{Limit: 20},
		{Limit: 20, MaxBytes: 100},
	} {
		want := uncached(t, items, q)
		got, _ := page(t, c, 1, items, q)
		if string(got.Body) != string(want.Body) || got.NextCursor != want.NextCursor {
			t.Errorf("%+v: got %s (%q), want %s (%q)", q, got.Body, got.NextCursor, want.Body, want.NextCursor)
		}
	}
	// A budgeted page is held with the size of the item it stopped at,
	// so the same budget is answered from the cache.
	c = pagecache.New(1 << 20)
	q := formsapi.Query{Limit: 20, MaxBytes: 60}
	page(t, c, 1, items, q)
	if _, read := page(t, c, 1, items, q); read != 0 {
		t.Errorf("the same budget read %d rows again", read)
	}
}

func TestBounded(t *testing.T) {
	is := is.New(t)
	const max = 64 << 10
	c := pagecache.New(max)
	big := make([]item, 10)
	for i := range big {
		big[i] = item{keyset.Pos{At: int64(i + 1), Seq: int64(i + 1)}, `{"pad":"` + strings.Repeat("x", 600) + `"}`}
	}
	for i := range 200 { // distinct lists of about 6 kB
		p := wire.Page{}
		q := formsapi.Query{Limit: 10, Until: until(i)}
		r, err := c.Begin(1, int64(i), q, &p)
		is.NoErr(err)
		read := 0
		rows(&r, big, q.Order, &read)
		r.Done(1)
		_, bytes := c.Stats()
		if bytes > max {
			t.Fatalf("after %d pages the cache holds %d bytes, over its %d", i+1, bytes, max)
		}
	}
	entries, bytes := c.Stats()
	is.True(entries >= 1 && bytes >= 6_000) // still in use: old pages made room for new ones
	// A page larger than an eighth of the cache is not kept, let alone one
	// larger than the whole cache.
	for _, size := range []int{max/8 + 1, max} {
		c := pagecache.New(max)
		huge := []item{{keyset.Pos{At: 1, Seq: 1}, `{"pad":"` + strings.Repeat("x", size) + `"}`}}
		page(t, c, 1, huge, formsapi.Query{Limit: 1, Order: formsapi.Oldest})
		entries, _ = c.Stats()
		is.Equal(entries, 0) // not kept
	}
}

func TestNilCacheReadsEverything(t *testing.T) {
	is := is.New(t)
	var c *pagecache.Cache
	is.True(pagecache.New(0) == nil) // 0 is no cache
	items := list(1, 10)
	for range 2 {
		p, read := page(t, c, 1, items, formsapi.Query{Limit: 5})
		is.Equal(read, 6)
		is.Equal(p.NextCursor, keyset.Pos{At: 6, Seq: 6}.String())
	}
	entries, _ := c.Stats()
	is.Equal(entries, 0)
}

// TestNeverStaleUnderConcurrency runs readers against a writer that keeps
// changing one form, with versions that only grow, as the stores'
// triggers give them. A reader reads the current version, looks in the
// cache, and reads what it must later, as a store does, when the form
// may have changed again: the rows are as new as the version or newer,
// never older.
//
// In pgstore's way (the rows carry the version they were read at, and a
// Mixed page is read again whole), every page must be exactly the page of
// one version, at least as new as the one read first. In sqlitestore's way
// (tagged with the version read before the rows), every item must be of
// such a version. A page served from the cache at an older version fails
// either.
func TestNeverStaleUnderConcurrency(t *testing.T) {
	for _, exact := range []bool{true, false} {
		t.Run(map[bool]string{true: "pgstore", false: "sqlitestore"}[exact], func(t *testing.T) {
			neverStale(t, exact)
		})
	}
}

func neverStale(t *testing.T, exact bool) {
	c := pagecache.New(1 << 20)
	var current atomic.Int64
	current.Store(1)
	versionItems := func(v int64) []item { return list(v, 5+int(v%7)) }
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var reads, hits, mixed atomic.Int64
	wg.Go(func() {
		for v := int64(2); v < 60; v++ {
			for target := reads.Load() + 10; reads.Load() < target && !t.Failed(); {
				runtime.Gosched() // let the readers read this version a while
			}
			current.Store(v)
		}
		close(stop)
	})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				v := current.Load()
				q := formsapi.Query{Limit: 1 + rand.IntN(12), Order: formsapi.Order(rand.IntN(2))}
				p := wire.Page{Body: []byte("[")}
				r, err := c.Begin(v, 7, q, &p)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Served() {
					hits.Add(1)
				} else {
					at, read := current.Load(), 0 // the rows are read later: as new or newer
					rows(&r, versionItems(at), q.Order, &read)
					switch {
					case !exact:
						r.Done(v)
					case r.Mixed(at):
						mixed.Add(1)
						p = wire.Page{Body: []byte("[")}
						if r, err = c.BeginWhole(at, 7, q, &p); err != nil {
							t.Error(err)
							return
						}
						if !r.Served() {
							at = current.Load()
							rows(&r, versionItems(at), q.Order, &read)
							r.Done(at)
						}
					default:
						r.Done(at)
					}
				}
				if !pageOf(t, p, q, v, current.Load(), versionItems, exact) {
					t.Errorf("version %d, %+v: page %s is stale", v, q, p.Body)
					return
				}
				reads.Add(1)
			}
		})
	}
	wg.Wait()
	if hits.Load() == 0 {
		t.Error("no page was served from the cache: the test tested nothing")
	}
	t.Logf("%d of %d pages served from the cache; %d mixed pages read again", hits.Load(), reads.Load(), mixed.Load())
}

// pageOf reports whether p is the page of q at one version from v to
// newest (exact), or holds only items of such versions.
func pageOf(t *testing.T, p wire.Page, q formsapi.Query, v, newest int64, items func(int64) []item, exact bool) bool {
	if exact {
		for w := v; w <= newest; w++ {
			if want := uncached(t, items(w), q); string(want.Body) == string(p.Body) && want.NextCursor == p.NextCursor {
				return true
			}
		}
		return false
	}
	var got []struct{ V int64 }
	if err := json.Unmarshal(append(p.Body, ']'), &got); err != nil {
		t.Fatalf("page %s: %v", p.Body, err)
	}
	for _, it := range got {
		if it.V < v || it.V > newest {
			return false
		}
	}
	return true
}

// until is a distinct Until for list i, after every fake item.
func until(i int) time.Time { return time.Unix(0, int64(1_000+i)) }

func TestForget(t *testing.T) {
	is := is.New(t)
	c := pagecache.New(1 << 20)
	items := list(1, 30)
	page(t, c, 1, items, formsapi.Query{Limit: 10})
	page(t, c, 1, items, formsapi.Query{Limit: 10, Order: formsapi.Oldest})
	entries, _ := c.Stats()
	is.Equal(entries, 2)
	c.Forget(8) // another form: nothing goes
	entries, _ = c.Stats()
	is.Equal(entries, 2)
	c.Forget(7)
	entries, bytes := c.Stats()
	is.Equal(entries, 0) // every page of the form is gone from memory
	is.Equal(bytes, 0)
	_, read := page(t, c, 1, items, formsapi.Query{Limit: 10})
	is.Equal(read, 11) // and is read again
	var none *pagecache.Cache
	none.Forget(7) // no cache: nothing to do
}

// forms returns an account's forms list as a store reads it: n forms at
// times 1..n, titled with version so that the forms of two versions
// differ, and their positions.
func forms(version int64, n int) ([]formsapi.Form, []keyset.Pos) {
	fs, pos := make([]formsapi.Form, n), make([]keyset.Pos, n)
	for i := range fs {
		fs[i] = formsapi.Form{ID: fmt.Sprintf("f%d", i+1), Title: fmt.Sprintf("v%d", version), CreatedAt: time.Unix(0, int64(i+1))}
		pos[i] = keyset.Pos{At: int64(i + 1), Seq: int64(i + 1)}
	}
	return fs, pos
}

// formsPage is q's page of the list of all, as a store's statement gives
// it, with the positions of its forms and whether more follow.
func formsPage(all []formsapi.Form, pos []keyset.Pos, q formsapi.Query) (formsapi.Page[formsapi.Form], []keyset.Pos, bool) {
	lo, hi, err := keyset.Bounds(q)
	if err != nil {
		panic(err)
	}
	var idx []int
	for i := range all {
		if lo.Less(pos[i]) && pos[i].Less(hi) {
			idx = append(idx, i)
		}
	}
	if q.Order == formsapi.Newest {
		slices.Reverse(idx)
	}
	p := formsapi.Page[formsapi.Form]{Items: []formsapi.Form{}}
	var at []keyset.Pos
	for _, i := range idx[:min(q.Limit, len(idx))] {
		p.Items = append(p.Items, all[i])
		at = append(at, pos[i])
	}
	more := len(idx) > q.Limit
	if more {
		p.NextCursor = at[len(at)-1].String()
	}
	return p, at, more
}

// TestFormsLists: a forms list is served only at the version it was kept
// at, for any limit up to the forms held (any at all when none follow),
// with the cursor the store's statement would give; each account, order,
// filter and cursor is a list of its own; a page served is the caller's;
// and forms lists share the cache's bytes with pages of submissions
// without ever being taken for one.
func TestFormsLists(t *testing.T) {
	is := is.New(t)
	c := pagecache.New(1 << 20)
	all, pos := forms(1, 30)
	for _, order := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
		read := formsapi.Query{Limit: 10, Order: order}
		_, ok := c.Forms(1, "acct", read)
		is.True(!ok) // nothing held yet
		p, at, more := formsPage(all, pos, read)
		c.KeepForms(1, "acct", read, p.Items, at, more)
		for _, limit := range []int{1, 9, 10} {
			q := formsapi.Query{Limit: limit, Order: order}
			got, ok := c.Forms(1, "acct", q)
			want, _, _ := formsPage(all, pos, q)
			is.True(ok) // held
			is.Equal(got, want)
		}
		_, ok = c.Forms(1, "acct", formsapi.Query{Limit: 11, Order: order})
		is.True(!ok) // more than held, and more follow
		_, ok = c.Forms(2, "acct", read)
		is.True(!ok) // another version
		_, ok = c.Forms(1, "other", read)
		is.True(!ok) // another account
		cursor := formsapi.Query{Limit: 10, Order: order, Cursor: pos[15].String()}
		_, ok = c.Forms(1, "acct", cursor)
		is.True(!ok) // another position in the list
		window := formsapi.Query{Limit: 10, Order: order, Since: time.Unix(0, 3)}
		_, ok = c.Forms(1, "acct", window)
		is.True(!ok) // another range
	}

	// A whole list, with nothing after it, answers any limit.
	short, spos := forms(3, 4)
	q := formsapi.Query{Limit: 100}
	p, at, more := formsPage(short, spos, q)
	c.KeepForms(3, "short", q, p.Items, at, more)
	got, ok := c.Forms(3, "short", formsapi.Query{Limit: 1000})
	is.True(ok)
	is.Equal(got, p)
	got.Items[0].Title = "changed by the caller"
	again, _ := c.Forms(3, "short", formsapi.Query{Limit: 4})
	is.Equal(again.Items[0].Title, "v3") // what was served is the caller's own
	p.Items[1].Title = "changed by the store's caller"
	again, _ = c.Forms(3, "short", formsapi.Query{Limit: 4})
	is.Equal(again.Items[1].Title, "v3") // and so is what was kept

	// An empty list is held too.
	c.KeepForms(4, "empty", q, []formsapi.Form{}, nil, false)
	got, ok = c.Forms(4, "empty", formsapi.Query{Limit: 5})
	is.True(ok)
	is.Equal(len(got.Items), 0)
	is.Equal(got.NextCursor, "")

	// Beside pages of submissions: Forget and Versions concern those only.
	page(t, c, 1, list(1, 5), formsapi.Query{Limit: 5})
	is.Equal(c.Versions(), map[int64][]int64{7: {1}})
	c.Forget(7, 0)
	_, ok = c.Forms(3, "short", q)
	is.True(ok)
	entries, _ := c.Stats()
	is.Equal(entries, 4) // acct in two orders, short, empty: the page of submissions is gone
	c.ForgetForms("acct")
	entries, _ = c.Stats()
	is.Equal(entries, 2) // short and empty
	_, ok = c.Forms(1, "acct", formsapi.Query{Limit: 10})
	is.True(!ok)

	// A nil cache holds nothing; nor does a limit below 1 or a bad cursor.
	var none *pagecache.Cache
	none.KeepForms(1, "acct", q, p.Items, at, more)
	_, ok = none.Forms(1, "acct", q)
	is.True(!ok)
	_, ok = c.Forms(3, "short", formsapi.Query{Limit: 0})
	is.True(!ok)
	_, ok = c.Forms(3, "short", formsapi.Query{Limit: 1, Cursor: "not a cursor"})
	is.True(!ok)
}

// TestFormsListsBounded: forms lists count against the cache's bytes, and
// one larger than an eighth of the cache is not kept.
func TestFormsListsBounded(t *testing.T) {
	is := is.New(t)
	const max = 64 << 10
	c := pagecache.New(max)
	all, pos := forms(1, 20)
	for i := range all {
		all[i].Title = strings.Repeat("x", 200)
	}
	for i := range 200 { // distinct lists of about 6 kB
		q := formsapi.Query{Limit: 20}
		p, at, more := formsPage(all, pos, q)
		c.KeepForms(1, fmt.Sprintf("acct-%d", i), q, p.Items, at, more)
		if _, bytes := c.Stats(); bytes > max {
			t.Fatalf("after %d lists the cache holds %d bytes, over its %d", i+1, bytes, max)
		}
	}
	entries, bytes := c.Stats()
	is.True(entries >= 1 && bytes >= 6_000) // still in use
	c = pagecache.New(max)
	all[0].Title = strings.Repeat("x", max/8)
	q := formsapi.Query{Limit: 20}
	p, at, more := formsPage(all, pos, q)
	c.KeepForms(1, "acct", q, p.Items, at, more)
	entries, _ = c.Stats()
	is.Equal(entries, 0) // too large to keep
}
