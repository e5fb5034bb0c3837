package sqlitestore_test

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/sqlitestore"
)

// spliceRig is a file with form f of account acct, written by store a
// (another Store on the file, as another process would be) and by a
// host's own handle (host), and read by store b, with a read cache, and
// store c, without one: every page of b must be c's.
type spliceRig struct {
	t       *testing.T
	a, b, c *sqlitestore.Store
	host    *sql.DB
	clock   time.Time
	n       int
}

func newSpliceRig(t *testing.T, initial int) *spliceRig {
	t.Helper()
	path := dbPath(t)
	g := &spliceRig{t: t, a: mustOpen(t, path), clock: t0}
	g.b = mustOpen(t, path)
	g.c = mustOpen(t, path, sqlitestore.WithCacheSize(0))
	g.host = hostDB(t, path)
	if err := g.a.AddForm(ctx, "acct", formsapi.Form{ID: "f"}); err != nil {
		t.Fatal(err)
	}
	for range initial {
		g.clock = g.clock.Add(time.Second)
		g.add(g.clock, 10)
	}
	return g
}

// add adds a submission created at at through store a, with host ID hN.
func (g *spliceRig) add(at time.Time, size int) {
	g.t.Helper()
	g.n++
	data := fmt.Sprintf(`{"n":%d,"pad":%q}`, g.n, strings.Repeat("x", size))
	if err := g.a.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(data), CreatedAt: at}, formsapi.Metadata{ID: fmt.Sprint("h", g.n)}); err != nil {
		g.t.Fatal(err)
	}
}

// sql runs a statement of the host's.
func (g *spliceRig) sql(stmt string, args ...any) {
	g.t.Helper()
	if _, err := g.host.ExecContext(ctx, stmt, args...); err != nil {
		g.t.Fatalf("%s: %v", stmt, err)
	}
}

// hostInsert inserts a submission created at at in plain SQL, at feed
// position feedPos (an SQL expression over formsapi_forms' columns; "0"
// leaves the numbering to the trigger).
func (g *spliceRig) hostInsert(at time.Time, feedPos string) {
	g.t.Helper()
	g.n++
	s := formsapi.Submission{FormID: "f", Data: []byte(fmt.Sprintf(`{"n":%d,"via":"host"}`, g.n)), CreatedAt: at}
	encoded, err := formsapi.AppendSubmissionJSON(nil, s)
	if err != nil {
		g.t.Fatal(err)
	}
	g.sql(`INSERT INTO formsapi_submissions (form_seq, feed_pos, created_at, data, json)
SELECT seq, `+feedPos+`, ?, ?, ? FROM formsapi_forms WHERE id = 'f'`, at.UnixNano(), string(s.Data), encoded)
}

// page reads q's page of form f from s through the handler's fast path.
func page(t *testing.T, s *sqlitestore.Store, q formsapi.Query) (body, next string, cache observe.Cache) {
	t.Helper()
	var p wire.Page
	if err := s.AppendSubmissions(ctx, "acct", "f", q, &p); err != nil {
		t.Fatalf("%+v: %v", q, err)
	}
	return string(p.Body), p.NextCursor, p.Cache
}

// same checks that store b's page of q is store c's, cursor and all
// (the raw keyset cursor: the same cursor is the same next page), and
// returns what b's cache did.
func (g *spliceRig) same(step string, q formsapi.Query) observe.Cache {
	g.t.Helper()
	bb, nb, cache := page(g.t, g.b, q)
	bc, nc, _ := page(g.t, g.c, q)
	if bb != bc || nb != nc {
		g.t.Fatalf("%s, %+v (%s): store b served\n%s (next %q)\nstore c\n%s (next %q)", step, q, cache, bb, nb, bc, nc)
	}
	return cache
}

// TestSplicedPages: store a writes (AddSubmission at the head of the list
// and behind it, DeleteSubmission, a form deleted and made again), and so
// does a host in plain SQL (an insert that takes the next feed position
// as AddSubmission does, one numbered by the trigger, one that does not
// take the next position, updates, deletions, a REPLACE, a mass
// deletion), while
// store b, whose cache holds pages of every shape (both orders, several
// limits, Since and Until, a deep page, a byte budget), serves them
// after every write. Every page of store b is store c's, which has no
// cache, and so is the page after its cursor. After an addition at the
// end of the feed store b splices every list it held, never reading a
// page; after a write that is no addition or deletion, it splices none.
func TestSplicedPages(t *testing.T) {
	g := newSpliceRig(t, 40)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	qs := []formsapi.Query{
		{Limit: 10}, {Limit: 25}, {Limit: 1}, {Limit: 100}, {Limit: 100, MaxBytes: 3000},
		{Limit: 10, Order: formsapi.Oldest}, {Limit: 100, Order: formsapi.Oldest},
		{Limit: 5, Since: at(20)}, {Limit: 5, Until: at(30), Order: formsapi.Oldest},
		{Limit: 100, Since: at(35), Order: formsapi.Oldest},
	}
	_, first, _ := page(t, g.c, formsapi.Query{Limit: 10})
	qs = append(qs, formsapi.Query{Limit: 10, Cursor: first}) // a deep page
	const lists = 6                                           // the lists of qs: those of one order and range share a page
	check := func(step string) map[observe.Cache]int {
		t.Helper()
		outcomes := map[observe.Cache]int{}
		for _, q := range qs {
			outcomes[g.same(step, q)]++
		}
		return outcomes
	}
	onlySpliced := func(step string, o map[observe.Cache]int) {
		t.Helper()
		if o[observe.CacheSpliced] != lists || o[observe.CacheHit] != len(qs)-lists {
			t.Errorf("%s: %v, want %d lists spliced and the other pages hits", step, o, lists)
		}
	}
	noneSpliced := func(step string, o map[observe.Cache]int) {
		t.Helper()
		if o[observe.CacheSpliced] != 0 || o[observe.CacheMiss] == 0 {
			t.Errorf("%s: %v, want no list spliced", step, o)
		}
	}
	check("start") // fills store b's cache

	rng := rand.New(rand.NewPCG(28, 2))
	deletions := 0
	for i := range 80 {
		step := fmt.Sprint(i)
		switch k := i % 15; k {
		case 0, 1, 2: // the usual write, at the head
			g.clock = g.clock.Add(time.Second)
			g.add(g.clock, rng.IntN(300))
			onlySpliced(step+": AddSubmission at the head", check(step))
		case 3: // a writer whose clock is behind: inside the list
			g.add(g.clock.Add(-time.Duration(rng.IntN(40))*time.Second-time.Millisecond), 10)
			onlySpliced(step+": AddSubmission behind the head", check(step))
		case 4:
			g.clock = g.clock.Add(time.Second)
			g.hostInsert(g.clock, "feed_last + 1")
			onlySpliced(step+": an insert in plain SQL at the next feed position", check(step))
		case 5:
			g.clock = g.clock.Add(time.Second)
			g.hostInsert(g.clock, "0")
			onlySpliced(step+": an insert in plain SQL numbered by the trigger", check(step))
		case 6: // three writes between two reads
			for range 3 {
				g.clock = g.clock.Add(time.Second)
				g.add(g.clock, 10)
			}
			onlySpliced(step+": three additions", check(step))
		case 7: // deletions splice where the held page can lose the item
			g.sql(`DELETE FROM formsapi_submissions WHERE seq = (SELECT max(seq) FROM formsapi_submissions WHERE data NOT LIKE '%host%')`)
			deletions += check(step)[observe.CacheSpliced]
		case 8:
			if err := g.a.DeleteSubmission(ctx, "acct", "f", fmt.Sprint("h", 1+rng.IntN(g.n))); err != nil && !strings.Contains(err.Error(), "not found") {
				t.Fatal(err)
			}
			deletions += check(step)[observe.CacheSpliced]
		case 9:
			g.sql(`UPDATE formsapi_submissions SET json = CAST(replace(CAST(json AS TEXT), '"n":', '"edited":true,"n":') AS BLOB)
WHERE seq = (SELECT min(seq) + ? FROM formsapi_submissions)`, rng.IntN(10))
			noneSpliced(step+": an update in plain SQL", check(step))
		case 10: // a host's insert at a position of its own, not the next
			g.clock = g.clock.Add(time.Second)
			pos := "feed_last + 1000 + " + fmt.Sprint(i) // above the last
			if i/15%2 == 1 {
				// Below it: the position of the last tombstone, which no
				// splice reads again once an addition came after it.
				g.add(g.clock, 10)
				onlySpliced(step+": an addition after a tombstone", check(step))
				g.clock = g.clock.Add(time.Second)
				pos = "(SELECT max(feed_pos) FROM formsapi_tombstones t WHERE t.form_seq = formsapi_forms.seq)"
			}
			g.hostInsert(g.clock, pos)
			noneSpliced(step+": an insert at a position of its own", check(step))
		case 11: // created_at moved: no page is what it was
			g.sql(`UPDATE formsapi_submissions SET created_at = created_at + 1 WHERE seq = (SELECT max(seq) FROM formsapi_submissions)`)
			noneSpliced(step+": created_at moved in plain SQL", check(step))
		case 12: // a tombstone's position changed by hand
			g.sql(`UPDATE formsapi_tombstones SET of_at = of_at - 1 WHERE feed_pos = (SELECT max(feed_pos) FROM formsapi_tombstones)`)
			g.clock = g.clock.Add(time.Second)
			g.add(g.clock, 10)
			noneSpliced(step+": a tombstone changed by hand", check(step))
		case 13: // a tombstone of a submission still there, made by hand at the next position
			g.sql(`UPDATE formsapi_forms SET feed_last = feed_last + 1 WHERE id = 'f'`)
			g.sql(`INSERT INTO formsapi_tombstones (form_seq, feed_pos, of_pos, of_at, of_seq)
SELECT f.seq, f.feed_last, s.feed_pos, s.created_at, s.seq FROM formsapi_forms f JOIN formsapi_submissions s ON s.form_seq = f.seq
WHERE f.id = 'f' ORDER BY s.created_at DESC LIMIT 1`)
			check(step) // no version changed: the pages held are the pages
			g.clock = g.clock.Add(time.Second)
			g.add(g.clock, 10)
			noneSpliced(step+": a tombstone made by hand", check(step))
		case 14: // a REPLACE of a submission by its host ID: its deletion fires no trigger
			g.clock = g.clock.Add(time.Second)
			g.n++
			sub := formsapi.Submission{FormID: "f", Data: []byte(fmt.Sprintf(`{"n":%d,"via":"replace"}`, g.n)), CreatedAt: g.clock}
			encoded, err := formsapi.AppendSubmissionJSON(nil, sub)
			if err != nil {
				t.Fatal(err)
			}
			g.sql(`INSERT OR REPLACE INTO formsapi_submissions (form_seq, feed_pos, created_at, data, json, host_id)
SELECT f.seq, f.feed_last + 1, ?, ?, ?, (SELECT host_id FROM formsapi_submissions
    WHERE form_seq = f.seq AND host_id <> '' ORDER BY created_at DESC LIMIT 1 OFFSET 2)
FROM formsapi_forms f WHERE f.id = 'f'`, g.clock.UnixNano(), string(sub.Data), encoded)
			noneSpliced(step+": a REPLACE", check(step))
		}
	}
	if deletions == 0 {
		t.Error("no deletion was spliced")
	}

	// A mass deletion: more tombstones than a splice takes.
	g.sql(`DELETE FROM formsapi_submissions WHERE seq % 2 = 0`)
	noneSpliced("a mass deletion", check("a mass deletion"))
	g.clock = g.clock.Add(time.Second)
	g.add(g.clock, 10)
	onlySpliced("an addition after the mass deletion", check("an addition after the mass deletion"))

	// An UPDATE OR REPLACE that gives a submission of another form the
	// seq of one of f's deletes that one without a trigger (no
	// tombstone).
	if err := g.a.AddForm(ctx, "acct", formsapi.Form{ID: "g"}); err != nil {
		t.Fatal(err)
	}
	if err := g.a.AddSubmission(ctx, formsapi.Submission{FormID: "g", Data: []byte(`{"in":"g"}`), CreatedAt: t0}, formsapi.Metadata{}); err != nil {
		t.Fatal(err)
	}
	check("a submission of g")
	g.sql(`UPDATE OR REPLACE formsapi_submissions SET seq = (SELECT s.seq FROM formsapi_submissions s JOIN formsapi_forms f ON f.seq = s.form_seq
    WHERE f.id = 'f' ORDER BY s.created_at DESC LIMIT 1 OFFSET 1)
WHERE form_seq = (SELECT seq FROM formsapi_forms WHERE id = 'g')`)
	noneSpliced("f's submission replaced by g's", check("f's submission replaced by g's"))
	g.clock = g.clock.Add(time.Second)
	g.add(g.clock, 10)
	onlySpliced("an addition after an UPDATE OR REPLACE", check("an addition after an UPDATE OR REPLACE"))

	// The form deleted and made again: the same ID, and the same seq
	// (SQLite gives the largest rowid again), its feed from 1 again, past
	// the held pages' heads after enough additions.
	if err := g.a.DeleteForm(ctx, "acct", "f"); err != nil {
		t.Fatal(err)
	}
	if err := g.a.AddForm(ctx, "acct", formsapi.Form{ID: "f"}); err != nil {
		t.Fatal(err)
	}
	for i := range 120 {
		g.clock = g.clock.Add(time.Second)
		g.add(g.clock, 10)
		if o := check(fmt.Sprint("made again, ", i)); i == 0 {
			noneSpliced("the form made again", o)
		}
	}
}

// TestSplicedPagesRandom: a random sequence of additions (at the head and
// behind it), deletions (the store's and the host's) and updates, by
// another store and the host, each followed by reads of random pages of
// store b, each compared with store c's read in full.
func TestSplicedPagesRandom(t *testing.T) {
	g := newSpliceRig(t, 30)
	rng := rand.New(rand.NewPCG(7, 11))
	spliced := 0
	for i := range 400 {
		switch r := rng.IntN(20); {
		case r < 10:
			g.clock = g.clock.Add(time.Second)
			g.add(g.clock, rng.IntN(200))
		case r < 13:
			g.add(g.clock.Add(-time.Duration(rng.IntN(100))*time.Second), rng.IntN(200))
		case r < 16:
			if err := g.a.DeleteSubmission(ctx, "acct", "f", fmt.Sprint("h", 1+rng.IntN(g.n))); err != nil && !strings.Contains(err.Error(), "not found") {
				t.Fatal(err)
			}
		case r < 18:
			g.sql(`DELETE FROM formsapi_submissions WHERE seq IN (SELECT seq FROM formsapi_submissions ORDER BY created_at DESC LIMIT 1 OFFSET ?)`, rng.IntN(20))
		case r < 19:
			g.sql(`UPDATE formsapi_submissions SET json = CAST(replace(CAST(json AS TEXT), '"n":', '"u":1,"n":') AS BLOB)
WHERE seq IN (SELECT seq FROM formsapi_submissions ORDER BY created_at DESC LIMIT 1 OFFSET ?)`, rng.IntN(20))
		default:
			g.clock = g.clock.Add(time.Second)
			g.hostInsert(g.clock, "0")
		}
		for range 1 + rng.IntN(4) {
			q := formsapi.Query{Limit: []int{1, 5, 10, 50, 100}[rng.IntN(5)]}
			if rng.IntN(2) == 0 {
				q.Order = formsapi.Oldest
			}
			if rng.IntN(4) == 0 {
				q.Since = t0.Add(time.Duration(rng.IntN(100)) * time.Second)
			}
			if g.same(fmt.Sprint(i), q) == observe.CacheSpliced {
				spliced++
			}
		}
	}
	if spliced < 100 {
		t.Errorf("%d pages spliced, want at least 100", spliced)
	}
}
