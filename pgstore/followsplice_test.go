package pgstore_test

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
)

// TestFollowSplicesExactly: node b follows the change log and holds pages
// of every shape (both orders, several limits, Since and Until, a deep
// page) of form f, while node a adds and deletes submissions (at the head
// of the list and behind it, one or several between two reads, more than
// a feed keeps at once), a host inserts, updates and deletes in plain
// SQL, and a host's transaction that began before one of node b's rounds
// and wrote f commits after it (the round's snapshot lists it in
// progress, and a later transaction has committed first). On many random
// interleavings, every page of node b is the page of node c, which has
// no cache, and so is the page after its cursor; after additions at the
// end of the feed node b brings its pages up to date from its rounds
// alone, with no statement but the round's, and after deletions it
// splices the pages that hold what the list is without them.
func TestFollowSplicesExactly(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			followSplices(t, seed)
		})
	}
}

func followSplices(t *testing.T, seed uint64) {
	dsn, schema := pgtest.Schema(t)
	secret := []byte(crand.Text())
	a := newNode(t, dsn, schema, secret)
	bStore, count := countedStore(t, dsn, schema, pgstore.WithFollow(0))
	b := formsapi.NewHandler(bStore, bStore, formsapi.WithCursorSecret(secret))
	cStore := mustOpenIn(t, dsn, schema, pgstore.WithCacheSize(0))
	c := formsapi.NewHandler(cStore, cStore, formsapi.WithCursorSecret(secret))
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.store.AddKey(ctx, key, "acct"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"f", "g"} {
		if err := a.store.AddForm(ctx, "acct", formsapi.Form{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(38, seed))
	t0 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := t0
	n := 0
	var live []string // metadata IDs of f's submissions that node a added
	add := func(form string, at time.Time) {
		t.Helper()
		n++
		data := fmt.Sprintf(`{"n":%d,"pad":%q}`, n, strings.Repeat("x", rng.IntN(200)))
		id := fmt.Sprint("s", n)
		if err := a.store.AddSubmission(ctx, formsapi.Submission{FormID: form, Data: []byte(data), CreatedAt: at}, formsapi.Metadata{ID: id}); err != nil {
			t.Fatal(err)
		}
		if form == "f" {
			live = append(live, id)
		}
	}
	for range 40 {
		clock = clock.Add(time.Second)
		add("f", clock)
	}
	host, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(ctx) })
	q := quote(schema)
	// hostInsert inserts in plain SQL, taking the next feed position as
	// AddSubmission does, in tx if it is not nil.
	hostInsert := func(tx pgx.Tx, at time.Time) {
		t.Helper()
		n++
		s := formsapi.Submission{FormID: "f", Data: []byte(fmt.Sprintf(`{"n":%d,"via":"host"}`, n)), CreatedAt: at}
		encoded, err := formsapi.AppendSubmissionJSON(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		stmt := `WITH f AS (UPDATE ` + q + `.formsapi_forms SET feed_last = feed_last + 1 WHERE id = 'f' RETURNING seq, feed_last)
INSERT INTO ` + q + `.formsapi_submissions (form_seq, feed_pos, created_at, data, json) SELECT seq, feed_last, $1, $2, $3 FROM f`
		if tx != nil {
			_, err = tx.Exec(ctx, stmt, at.UnixNano(), string(s.Data), encoded)
		} else {
			_, err = host.Exec(ctx, stmt, at.UnixNano(), string(s.Data), encoded)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	sql := func(stmt string, args ...any) {
		t.Helper()
		if _, err := host.Exec(ctx, stmt, args...); err != nil {
			t.Fatalf("%s: %v", firstLine(stmt), err)
		}
	}

	at := func(i int) string {
		return url.QueryEscape(t0.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano))
	}
	targets := []string{
		"?limit=10", "?limit=25", "?limit=1", "?limit=100",
		"?limit=10&order=asc", "?limit=100&order=asc",
		"?limit=5&since=" + at(20), "?limit=5&until=" + at(30) + "&order=asc",
	}
	first := decodePage(t, get(c, "/v1/forms/f/submissions?limit=10", key))
	targets = append(targets, "?limit=10&cursor="+url.QueryEscape(first.NextCursor))

	check := func(step string) {
		t.Helper()
		for _, target := range targets {
			samePages(t, b, c, key, step, target)
		}
	}
	// onlyRounds reads every target on node b and checks that it ran no
	// statement but its rounds: every page it held was brought up to
	// date from the rows its rounds read.
	splice, pageDesc, pageAsc := pgstore.SpliceSQL(bStore), pgstore.ListSQL(bStore, "encoded", formsapi.Newest), pgstore.ListSQL(bStore, "encoded", formsapi.Oldest)
	onlyRounds := func(step string) {
		t.Helper()
		count.take()
		before := bStore.FollowStats().Spliced
		for _, target := range targets {
			get(b, "/v1/forms/f/submissions"+target, key)
		}
		statements, _ := count.take()
		for _, s := range statements {
			switch s {
			case splice, pageDesc, pageAsc:
				t.Errorf("%s: node b read a page or a splice by statement", step)
			}
		}
		if bStore.FollowStats().Spliced == before {
			t.Errorf("%s: no page spliced from the rounds", step)
		}
	}
	check("start") // fills node b's cache, and starts f's feed
	check("again")

	deletions, deletionsSpliced := 0, int64(0)
	for i := range 40 {
		step := fmt.Sprint(i)
		switch k := rng.IntN(12); {
		case k < 4: // the usual write, at the head
			clock = clock.Add(time.Second)
			add("f", clock)
			onlyRounds(step + ": AddSubmission at the head")
		case k == 4: // a node whose clock is behind: inside the list
			add("f", clock.Add(-time.Duration(rng.IntN(40))*time.Second-time.Millisecond))
			onlyRounds(step + ": AddSubmission behind the head")
		case k == 5: // several between two reads
			for range 1 + rng.IntN(4) {
				clock = clock.Add(time.Second)
				add("f", clock)
			}
			onlyRounds(step + ": several additions")
		case k == 6: // more than a feed keeps: read again in full
			for range pgstore.MaxFeedRows + 1 + rng.IntN(3) {
				clock = clock.Add(time.Second)
				add("f", clock)
			}
		case k == 7 && len(live) > 0: // a deletion, anywhere in the list
			j := rng.IntN(len(live))
			if err := a.store.DeleteSubmission(ctx, "acct", "f", live[j]); err != nil {
				t.Fatal(err)
			}
			live = append(live[:j], live[j+1:]...)
			deletions++
			before := bStore.FollowStats().Spliced
			check(step + ": a deletion")
			deletionsSpliced += bStore.FollowStats().Spliced - before
		case k == 8: // additions and a deletion between two reads
			clock = clock.Add(time.Second)
			add("f", clock)
			j := len(live) - 1 - rng.IntN(min(len(live), 3))
			if err := a.store.DeleteSubmission(ctx, "acct", "f", live[j]); err != nil {
				t.Fatal(err)
			}
			live = append(live[:j], live[j+1:]...)
			clock = clock.Add(time.Second)
			add("f", clock)
		case k == 9:
			clock = clock.Add(time.Second)
			hostInsert(nil, clock)
		case k == 10:
			sql(`UPDATE `+q+`.formsapi_submissions SET json = convert_to(replace(convert_from(json, 'UTF8'), '"n":', '"edited":true,"n":'), 'UTF8')
WHERE seq = (SELECT min(seq) + $1 FROM `+q+`.formsapi_submissions)`, rng.IntN(10))
		default: // a late commit
			tx, err := host.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			clock = clock.Add(time.Second)
			hostInsert(tx, clock) // an xid now, and f's row locked until commit
			add("g", clock)       // a later transaction commits first
			check(step + ": before the late commit")
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			onlyRounds(step + ": after the late commit") // read by the next round, and spliced
		}
		check(step)
	}
	// A deletion is spliced where the held page tells the list without
	// it (the whole list held, the deleted submission past the held
	// items); inside the held items of a list that goes on, it is read.
	if deletions > 0 && deletionsSpliced == 0 {
		t.Errorf("%d deletions, and no page spliced after them", deletions)
	}
}
