package pgstore_test

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/pgstore"
)

// TestSplicedPagesAcrossNodes: node a writes (AddSubmission, at the head
// of the list and behind it), and so does a host in plain SQL (an insert
// that takes the next feed position as AddSubmission does, one that does
// not, updates and deletions), while node b, whose cache holds pages of
// every shape (both orders, several limits, Since and Until, a deep page,
// a byte budget), serves them after every write. Every page of node b is
// the page of node c, which has no cache, and so is the page after its
// cursor; after an addition at the end of the feed, node b reads only the
// splice statement for each page it held, never the page.
func TestSplicedPagesAcrossNodes(t *testing.T) {
	t.Parallel()
	dsn, schema := pooledSchema(t)
	secret := []byte(crand.Text())
	a := newNode(t, dsn, schema, secret)
	bStore, count := countedStore(t, dsn, schema)
	b := formsapi.NewHandler(bStore, bStore, formsapi.WithCursorSecret(secret), formsapi.WithPageBytes(64<<10))
	cStore := mustOpenIn(t, dsn, schema, pgstore.WithCacheSize(0))
	c := formsapi.NewHandler(cStore, cStore, formsapi.WithCursorSecret(secret), formsapi.WithPageBytes(64<<10))
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.store.AddKey(ctx, key, "acct"); err != nil {
		t.Fatal(err)
	}
	if err := a.store.AddForm(ctx, "acct", formsapi.Form{ID: "f"}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := t0
	n := 0
	add := func(at time.Time, size int) {
		t.Helper()
		n++
		data := fmt.Sprintf(`{"n":%d,"pad":%q}`, n, strings.Repeat("x", size))
		if err := a.store.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(data), CreatedAt: at}, formsapi.Metadata{ID: fmt.Sprint("h", n)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 40 {
		clock = clock.Add(time.Second)
		add(clock, 10)
	}
	host, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(ctx) })
	q := quote(schema)
	sql := func(stmt string, args ...any) {
		t.Helper()
		if _, err := host.Exec(ctx, stmt, args...); err != nil {
			t.Fatalf("%s: %v", firstLine(stmt), err)
		}
	}
	hostInsert := func(at time.Time, feedPos string) {
		t.Helper()
		n++
		s := formsapi.Submission{FormID: "f", Data: []byte(fmt.Sprintf(`{"n":%d,"via":"host"}`, n)), CreatedAt: at}
		encoded, err := formsapi.AppendSubmissionJSON(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		if feedPos == "" { // as AddSubmission does: the next position, under the form's row lock
			sql(`WITH f AS (UPDATE `+q+`.formsapi_forms SET feed_last = feed_last + 1 WHERE id = 'f' RETURNING seq, feed_last)
INSERT INTO `+q+`.formsapi_submissions (form_seq, feed_pos, created_at, data, json) SELECT seq, feed_last, $1, $2, $3 FROM f`,
				at.UnixNano(), string(s.Data), encoded)
			return
		}
		sql(`INSERT INTO `+q+`.formsapi_submissions (form_seq, feed_pos, created_at, data, json)
SELECT seq, `+feedPos+`, $1, $2, $3 FROM `+q+`.formsapi_forms WHERE id = 'f'`, at.UnixNano(), string(s.Data), encoded)
	}

	at := func(i int) string {
		return url.QueryEscape(t0.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano))
	}
	targets := []string{
		"?limit=10", "?limit=25", "?limit=1", "?limit=100",
		"?limit=10&order=asc", "?limit=100&order=asc",
		"?limit=5&since=" + at(20), "?limit=5&until=" + at(30) + "&order=asc",
		"?limit=100&since=" + at(35) + "&order=asc",
	}
	// A deep page: the second page of ten, newest first, by node c's cursor.
	first := decodePage(t, get(c, "/v1/forms/f/submissions?limit=10", key))
	targets = append(targets, "?limit=10&cursor="+url.QueryEscape(first.NextCursor))

	// readsOnlySplices reads every target on node b and checks that it
	// ran the splice statement once for each list it held (targets of one
	// list but for their limit share a page), and no page statement.
	const lists = 6
	splice, pageDesc, pageAsc := pgstore.SpliceSQL(bStore), pgstore.ListSQL(bStore, "encoded", formsapi.Newest), pgstore.ListSQL(bStore, "encoded", formsapi.Oldest)
	readsOnlySplices := func(step string) {
		t.Helper()
		count.take()
		splices := 0
		for _, target := range targets {
			get(b, "/v1/forms/f/submissions"+target, key)
			statements, _ := count.take()
			for _, s := range statements {
				switch s {
				case splice:
					splices++
				case pageDesc, pageAsc:
					t.Errorf("%s: node b read a page of %s in full", step, target)
				}
			}
		}
		if splices != lists {
			t.Errorf("%s: %d splices for %d lists held", step, splices, lists)
		}
	}
	check := func(step string) {
		t.Helper()
		for _, target := range targets {
			samePages(t, b, c, key, step, target)
		}
	}
	check("start") // fills node b's cache

	rng := rand.New(rand.NewPCG(28, 2))
	for i := range 60 {
		switch k := i % 10; {
		case k < 4: // the usual write, at the head
			clock = clock.Add(time.Second)
			add(clock, rng.IntN(3000))
			readsOnlySplices(fmt.Sprint(i, ": AddSubmission at the head"))
		case k == 4: // a node whose clock is behind: inside the list
			add(clock.Add(-time.Duration(rng.IntN(40))*time.Second-time.Millisecond), 10)
			readsOnlySplices(fmt.Sprint(i, ": AddSubmission behind the head"))
		case k == 5:
			clock = clock.Add(time.Second)
			hostInsert(clock, "")
			readsOnlySplices(fmt.Sprint(i, ": an insert in plain SQL at the next feed position"))
		case k == 6: // three writes between two reads
			for range 3 {
				clock = clock.Add(time.Second)
				add(clock, 10)
			}
		case k == 7:
			sql(`DELETE FROM ` + q + `.formsapi_submissions WHERE seq = (SELECT max(seq) FROM ` + q + `.formsapi_submissions WHERE data NOT LIKE '%host%')`)
		case k == 8:
			sql(`UPDATE `+q+`.formsapi_submissions SET json = convert_to(replace(convert_from(json, 'UTF8'), '"n":', '"edited":true,"n":'), 'UTF8')
WHERE seq = (SELECT min(seq) + $1 FROM `+q+`.formsapi_submissions)`, rng.IntN(10))
		case k == 9: // a host's insert at a position of its own, not the next
			clock = clock.Add(time.Second)
			hostInsert(clock, "feed_last + 1000 + "+fmt.Sprint(i))
		}
		check(fmt.Sprint(i))
	}
}

// withCursor returns target with its cursor set to cursor.
// samePages checks that node b's page of the submissions of form f at
// target (a query string) is node c's, and that the page after each one's
// cursor is the same too, read from node c; step says when, in a failure.
func samePages(t *testing.T, b, c http.Handler, key, step, target string) {
	t.Helper()
	pb := decodePage(t, get(b, "/v1/forms/f/submissions"+target, key))
	pc := decodePage(t, get(c, "/v1/forms/f/submissions"+target, key))
	if items(pb) != items(pc) || (pb.NextCursor == "") != (pc.NextCursor == "") {
		t.Fatalf("%s, %s: node b served\n%s (next %q)\nnode c\n%s (next %q)", step, target, items(pb), pb.NextCursor, items(pc), pc.NextCursor)
	}
	if pb.NextCursor != "" {
		nb := decodePage(t, get(c, "/v1/forms/f/submissions"+withCursor(t, target, pb.NextCursor), key))
		nc := decodePage(t, get(c, "/v1/forms/f/submissions"+withCursor(t, target, pc.NextCursor), key))
		if items(nb) != items(nc) {
			t.Fatalf("%s, %s: the page after node b's cursor is not the page after node c's", step, target)
		}
	}
}

func withCursor(t *testing.T, target, cursor string) string {
	v, err := url.ParseQuery(target[1:])
	if err != nil {
		t.Fatal(err)
	}
	v.Set("cursor", cursor)
	return "?" + v.Encode()
}
