package pagecache_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/pagecache"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/observe"
)

// feedForm is a fake form as pgstore keeps it for incremental pages: its
// submissions with their feed positions, its version, base and last feed
// position (see pagecache.Head), changed as migration 0016's triggers
// change them.
type feedForm struct {
	version, base, last int64
	subs                []feedSub // in feed order
	tombs               []tomb    // in feed order
	seq                 *int64    // the store's submission counter, shared by copies
	json                map[int64]string
	// withTombs makes read hand Splice the tombstones too, as a
	// following pgstore node's feed does; without, it hands the
	// additions alone, as pgstore's splice statement does.
	withTombs bool
}

// tomb is a deletion's tombstone (pgstore migration 0026).
type tomb struct {
	feed, of int64
	pos      keyset.Pos
}

type feedSub struct {
	feed int64
	it   item
}

func newFeedForm() *feedForm {
	return &feedForm{version: 1, base: 1, seq: new(int64), json: map[int64]string{}}
}

// clone is the form as a restore would bring it back: the same state,
// whose counters then give the same values again.
func (f *feedForm) clone() *feedForm {
	g := *f
	g.subs = slices.Clone(f.subs)
	g.tombs = slices.Clone(f.tombs)
	seq := *f.seq
	g.seq = &seq
	return &g
}

// add adds a submission created at at (a writer's clock: anywhere in the
// list), taking the next feed position.
func (f *feedForm) add(at int64) {
	*f.seq++
	f.last++
	f.version++
	it := item{keyset.Pos{At: at, Seq: *f.seq}, fmt.Sprintf(`{"v":%d,"at":%d,"seq":%d}`, f.version, at, *f.seq)}
	f.subs = append(f.subs, feedSub{feed: f.last, it: it})
}

// del deletes submission i: a tombstone takes a feed position, and the
// base stays (pgstore migration 0026).
func (f *feedForm) del(i int) {
	d := f.subs[i]
	f.subs = slices.Delete(f.subs, i, i+1)
	f.last++
	f.version++
	f.tombs = append(f.tombs, tomb{feed: f.last, of: d.feed, pos: d.it.pos})
}

// edit changes submission i in place: the base changes.
func (f *feedForm) edit(i int) {
	f.version++
	f.base = f.version
	f.subs[i].it.json = fmt.Sprintf(`{"edited":%d}`, f.version)
}

func (f *feedForm) items() []item {
	out := make([]item, len(f.subs))
	for i, s := range f.subs {
		out[i] = s.it
	}
	slices.SortFunc(out, func(a, b item) int {
		if a.pos.Less(b.pos) {
			return -1
		}
		return 1
	})
	return out
}

func (f *feedForm) head() pagecache.Head {
	h := pagecache.Head{Base: f.base, Last: f.last}
	for _, s := range f.subs {
		if s.feed == f.last {
			h.Anchor = s.it.pos
		}
	}
	return h
}

// since is what pgstore's splice statement returns: the submissions from
// feed position last to the form's last, in feed order, at most
// MaxSplice+1.
//
// With withTombs, the tombstones above last come too, in feed order with
// the submissions, as a following pgstore node's feed holds them.
func (f *feedForm) since(last int64) []pagecache.Added {
	var out []pagecache.Added
	for _, s := range f.subs {
		if s.feed >= last && s.feed <= f.last && len(out) <= pagecache.MaxSplice {
			out = append(out, pagecache.Added{Feed: s.feed, Pos: s.it.pos, Encoded: []byte(s.it.json)})
		}
	}
	if f.withTombs {
		for _, d := range f.tombs {
			if d.feed > last {
				out = append(out, pagecache.Added{Feed: d.feed, Pos: d.pos, Deleted: true, Of: d.of})
			}
		}
		slices.SortFunc(out, func(a, b pagecache.Added) int { return int(a.Feed - b.Feed) })
	}
	return out
}

// read reads q's page of f through c as pgstore does: the cache, else a
// splice, else the rows. It returns the page and what the cache did.
func (f *feedForm) read(t *testing.T, c *pagecache.Cache, q formsapi.Query) (wire.Page, observe.Cache) {
	t.Helper()
	p := wire.Page{Body: []byte("[")}
	r, err := c.Begin(f.version, 7, q, &p)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	if r.Served() {
		return p, p.Cache
	}
	if h, ok := r.Since(); ok && r.Splice(f.version, f.base, f.last, f.since(h.Last)) {
		return p, p.Cache
	}
	read := 0
	rows(&r, f.items(), q.Order, &read)
	r.DoneAt(f.version, f.head())
	return p, p.Cache
}

// TestSplicedPagesAreExact: a form written to in every way (additions at
// the head, behind it, in the middle, at the same instant; deletions and
// edits), read after each write through a cache with random queries
// (limits, both orders, Since and Until, cursors, byte budgets), gives
// the page an uncached read gives, and most pages after an addition are
// spliced, not read again.
func TestSplicedPagesAreExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 1))
	c := pagecache.New(1 << 22)
	f := newFeedForm()
	clock := int64(1000)
	for range 20 {
		clock += 10
		f.add(clock)
	}
	queries := func() []formsapi.Query {
		var qs []formsapi.Query
		for _, limit := range []int{1, 3, 10, 25} {
			for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
				qs = append(qs, formsapi.Query{Limit: limit, Order: o})
			}
		}
		qs = append(qs,
			formsapi.Query{Limit: 5, Since: time.Unix(0, 1100)},
			formsapi.Query{Limit: 5, Until: time.Unix(0, 1150), Order: formsapi.Oldest},
			formsapi.Query{Limit: 4, Cursor: keyset.Pos{At: 1100, Seq: 1 << 40}.String()},
			formsapi.Query{Limit: 4, Cursor: keyset.Pos{At: 1100, Seq: 0}.String(), Order: formsapi.Oldest},
			formsapi.Query{Limit: 8, MaxBytes: 120},
			formsapi.Query{Limit: 8, MaxBytes: 120, Order: formsapi.Oldest},
		)
		return qs
	}()
	counts := map[observe.Cache]int{}
	for step := range 400 {
		switch k := rng.IntN(20); {
		case k < 12: // at the head: the usual write
			clock += 1 + rng.Int64N(5)
			f.add(clock)
		case k < 14: // behind the head (a slow clock), or at the same instant
			f.add(clock - rng.Int64N(200))
		case k < 15:
			f.add(clock)
		case k < 16 && len(f.subs) > 5:
			f.del(rng.IntN(len(f.subs)))
			if rng.IntN(2) == 0 { // and the last addition, deleted again
				f.add(clock)
				f.del(len(f.subs) - 1)
			}
		case k < 17 && len(f.subs) > 0:
			f.edit(rng.IntN(len(f.subs)))
		case k < 18: // several writes between reads
			for range 1 + rng.IntN(pagecache.MaxSplice+4) {
				clock++
				f.add(clock)
			}
		}
		for _, q := range queries {
			if rng.IntN(3) == 0 {
				continue // not every list is read after every write
			}
			f.withTombs = rng.IntN(3) > 0
			got, how := f.read(t, c, q)
			counts[how]++
			want := uncached(t, f.items(), q)
			if string(got.Body) != string(want.Body) || got.NextCursor != want.NextCursor {
				t.Fatalf("step %d, %+v (%v):\n got %s %q\nwant %s %q", step, q, how, got.Body, got.NextCursor, want.Body, want.NextCursor)
			}
		}
	}
	t.Logf("%v", counts)
	if counts[observe.CacheSpliced] < counts[observe.CacheMiss] {
		t.Errorf("spliced %d pages, read %d in full: splicing does not carry the additions", counts[observe.CacheSpliced], counts[observe.CacheMiss])
	}
}

// TestSpliceRefused: what is not an addition since the held page is read
// in full, never spliced.
func TestSpliceRefused(t *testing.T) {
	q := formsapi.Query{Limit: 10}
	setup := func() (*pagecache.Cache, *feedForm) {
		c, f := pagecache.New(1<<20), newFeedForm()
		for i := range 30 {
			f.add(int64(1000 + i))
		}
		if _, how := f.read(t, c, q); how != observe.CacheMiss {
			t.Fatalf("first read: %v", how)
		}
		return c, f
	}
	for _, tc := range []struct {
		name  string
		write func(f *feedForm)
	}{
		{"a deletion, its tombstone not read", func(f *feedForm) { f.del(3) }},
		{"edit", func(f *feedForm) { f.edit(29) }},
		{"more additions than MaxSplice", func(f *feedForm) {
			for i := range pagecache.MaxSplice + 1 {
				f.add(int64(2000 + i))
			}
		}},
		{"an insert the triggers called no addition", func(f *feedForm) {
			f.add(2000)
			f.base = f.version
		}},
		{"a feed position skipped", func(f *feedForm) {
			f.add(2000)
			f.last++
		}},
		{"a damaged addition", func(f *feedForm) {
			f.add(2000)
			f.subs[len(f.subs)-1].it.json = `{"broken":`
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			c, f := setup()
			tc.write(f)
			got, how := f.read(t, c, q)
			is.True(how != observe.CacheSpliced)
			want := uncached(t, f.items(), q)
			is.Equal(string(got.Body), string(want.Body))
			is.Equal(got.NextCursor, want.NextCursor)
		})
	}
}

// TestSpliceAfterRestore: a node holds a page read after writes that a
// restore then took back; the restored form is written to again until
// its version, feed position and base pass the held page's, as they do
// when the counters climb again. The submission at the held page's last
// feed position is another one now, and the page is read in full, never
// spliced onto the lost history.
func TestSpliceAfterRestore(t *testing.T) {
	is := is.New(t)
	c, f := pagecache.New(1<<20), newFeedForm()
	for i := range 10 {
		f.add(int64(1000 + i))
	}
	backup := f.clone()
	f.add(1100)
	f.add(1101)
	q := formsapi.Query{Limit: 5}
	_, how := f.read(t, c, q)
	is.Equal(how, observe.CacheMiss)
	f = backup // the restore
	for i := range 4 {
		f.add(int64(1200 + i)) // other submissions at the lost ones' feed positions
	}
	got, how := f.read(t, c, q)
	is.True(how != observe.CacheSpliced)
	is.Equal(string(got.Body), string(uncached(t, f.items(), q).Body))
	// And a page held at the restored form's state is spliced again.
	f.add(1300)
	got, how = f.read(t, c, q)
	is.Equal(how, observe.CacheSpliced)
	is.Equal(string(got.Body), string(uncached(t, f.items(), q).Body))
}

// TestSpliceCostsOnlyTheAdditions: a newest-first page spliced after an
// addition reads no row of the page itself, keeps its cursor right, and
// the entry stays as long as it was (an oldest-first page past its end
// grows to the limit it was read at, no further).
func TestSpliceCostsOnlyTheAdditions(t *testing.T) {
	is := is.New(t)
	c, f := pagecache.New(1<<20), newFeedForm()
	for i := range 3 {
		f.add(int64(1000 + i))
	}
	oldest := formsapi.Query{Limit: 5, Order: formsapi.Oldest}
	newest := formsapi.Query{Limit: 5}
	f.read(t, c, oldest)
	f.read(t, c, newest)
	for i := range 6 {
		f.add(int64(2000 + i))
		for _, q := range []formsapi.Query{oldest, newest} {
			got, how := f.read(t, c, q)
			is.Equal(how, observe.CacheSpliced)
			want := uncached(t, f.items(), q)
			is.Equal(string(got.Body), string(want.Body))
			is.Equal(got.NextCursor, want.NextCursor)
		}
	}
	// Without a write, a hit at the spliced version.
	_, how := f.read(t, c, newest)
	is.Equal(how, observe.CacheHit)
	_, bytes := c.Stats()
	is.True(bytes < 2*(5*40+256+4*64)) // two entries of five small items each (and room for the handler's digests), not more
}

// TestDigestsFollowTheHeldPage: a page served whole from a held page
// carries that page's Digests (where the handler keeps its digest of the
// items, wire.Page.Digests) and how many items of it were served; a page
// read from rows carries none; a write makes another held page, spliced
// or read, whose Digests start empty, so a digest of the old items is
// never found for the new ones.
func TestDigestsFollowTheHeldPage(t *testing.T) {
	c, f := pagecache.New(1<<20), newFeedForm()
	for i := range 8 {
		f.add(int64(1000 + i))
	}
	q := formsapi.Query{Limit: 5}
	owner := new(int)
	p, how := f.read(t, c, q)
	if how != observe.CacheMiss || p.Digests != nil {
		t.Fatalf("a page read from rows: %v, Digests %p, want a miss without", how, p.Digests)
	}
	p, how = f.read(t, c, q)
	if how != observe.CacheHit || p.Digests == nil || p.DigestItems != 5 {
		t.Fatalf("a hit: %v, Digests %p of %d items, want the held page's of 5", how, p.Digests, p.DigestItems)
	}
	held, size := p.Digests, len(p.Body)-1
	held.Store(owner, 5, size, [16]byte{1})
	p, _ = f.read(t, c, q)
	if sum, ok := p.Digests.Load(owner, 5, size); p.Digests != held || !ok || sum != [16]byte{1} {
		t.Errorf("a repeat: Digests %p (want %p), digest %v %v", p.Digests, held, sum, ok)
	}
	p, _ = f.read(t, c, formsapi.Query{Limit: 3})
	if p.Digests != held || p.DigestItems != 3 {
		t.Errorf("a shorter page of the held one: Digests %p of %d items, want %p of 3", p.Digests, p.DigestItems, held)
	}
	f.add(3000)
	p, how = f.read(t, c, q)
	if how != observe.CacheSpliced || p.Digests == nil || p.Digests == held || p.DigestItems != 5 {
		t.Fatalf("after an addition: %v, Digests %p (old %p) of %d items, want a spliced page's own", how, p.Digests, held, p.DigestItems)
	}
	if _, ok := p.Digests.Load(owner, 5, size); ok {
		t.Error("the spliced page holds the old page's digest")
	}
	m := p.Mark()
	p.Rewind(m)
	if p.Digests != nil {
		t.Error("Rewind keeps the digests of a page it takes back")
	}
	f.edit(0)
	if p, how = f.read(t, c, q); how != observe.CacheMiss || p.Digests != nil {
		t.Errorf("after an edit: %v, Digests %p, want a miss without", how, p.Digests)
	}
}

// TestSpliceDeletions: with the tombstones since a held page read with
// the additions, a deletion is spliced where the held page tells what
// the list is without it (the whole list held, or the deleted submission
// past the held items, or an addition since deleted again), and read in
// full where it does not (inside the held items of a list that goes on:
// the item that moves into the page is not held).
func TestSpliceDeletions(t *testing.T) {
	setup := func(q formsapi.Query) (*pagecache.Cache, *feedForm) {
		c, f := pagecache.New(1<<20), newFeedForm()
		f.withTombs = true
		for i := range 30 {
			f.add(int64(1000 + i))
		}
		if _, how := f.read(t, c, q); how != observe.CacheMiss {
			t.Fatalf("first read: %v", how)
		}
		return c, f
	}
	newest, all := formsapi.Query{Limit: 10}, formsapi.Query{Limit: 100, Order: formsapi.Oldest}
	for _, tc := range []struct {
		name  string
		q     formsapi.Query
		write func(f *feedForm)
		how   observe.Cache
	}{
		{"past the held items", newest, func(f *feedForm) { f.del(3) }, observe.CacheSpliced},
		{"in a whole list held", all, func(f *feedForm) { f.del(3) }, observe.CacheSpliced},
		{"the newest but one, in a whole list held", all, func(f *feedForm) { f.del(28) }, observe.CacheSpliced},
		{"an addition deleted again", newest, func(f *feedForm) { f.add(2000); f.add(2001); f.del(30) }, observe.CacheSpliced},
		{"additions and deletions", all, func(f *feedForm) { f.add(2000); f.del(0); f.add(500); f.del(10) }, observe.CacheSpliced},
		{"inside the held items of a list that goes on", newest, func(f *feedForm) { f.del(25) }, observe.CacheMiss},
		{"the anchor (the submission at the held page's last position), not read", all, func(f *feedForm) { f.del(29) }, observe.CacheMiss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			c, f := setup(tc.q)
			tc.write(f)
			got, how := f.read(t, c, tc.q)
			is.Equal(how, tc.how)
			want := uncached(t, f.items(), tc.q)
			is.Equal(string(got.Body), string(want.Body))
			is.Equal(got.NextCursor, want.NextCursor)
		})
	}
}
