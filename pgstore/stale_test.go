package pgstore_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestBoundedStaleness: a following node with a staleness bound
// (WithStaleness) answers from its copy without a round while its last
// good round started within the bound by its clock, and says how old the
// answer is (Data-Age); the answer may miss a write made meanwhile, never
// one older than the bound; past half the bound an answer starts a round
// in the background; past the bound a request waits for a round, so a
// revocation holds; and a node whose rounds fail stops answering from its
// copy once the bound has passed.
func TestBoundedStaleness(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	b := newBounded(t, time.Second)
	writer, node, clock, h, key := b.writer, b.node, b.clock, b.h, b.key
	list := "/v1/forms/" + storetest.FormBusy + "/submissions?limit=5"

	res := get(h, list, key) // nothing copied yet: a round
	first := decodePage(t, res)
	is.Equal(res.header.Get("Data-Age"), "")
	is.Equal(node.FollowStats().Rounds, int64(1))

	res = get(h, list, key) // from the copy, no round
	is.Equal(items(decodePage(t, res)), items(first))
	is.Equal(res.header.Get("Data-Age"), "0.000")
	is.Equal(node.FollowStats().Rounds, int64(1))
	is.Equal(node.FollowStats().Stale, int64(1))

	// A write within the bound may be missed: the copy still has the
	// form's version from before it.
	newest := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	is.NoErr(writer.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`{"stale":1}`), CreatedAt: newest}, formsapi.Metadata{ID: "stale-1"}))
	clock.Advance(400 * time.Millisecond)
	res = get(h, list, key)
	is.Equal(items(decodePage(t, res)), items(first))
	is.Equal(res.header.Get("Data-Age"), "0.400")
	is.Equal(node.FollowStats().Rounds, int64(1))

	// Past half the bound, an answer from the copy starts a round in the
	// background, which brings the write in.
	clock.Advance(200 * time.Millisecond)
	res = get(h, list, key)
	is.Equal(res.header.Get("Data-Age"), "0.600")
	waitFor(t, func() bool { return node.FollowStats().Rounds == 2 })
	res = get(h, list, key)
	is.Equal(res.header.Get("Data-Age"), "0.000") // the background round started at the clock's now
	is.True(strings.Contains(string(decodePage(t, res).Submissions[0]), `"stale":1`))

	// Forms lists are answered from the copy too once it holds the list.
	is.Equal(get(h, "/v1/forms", key).header.Get("Data-Age"), "") // a round: the list was not copied
	is.Equal(get(h, "/v1/forms", key).header.Get("Data-Age"), "0.000")

	// A revocation within the bound may be missed; past it, never.
	is.NoErr(writer.RevokeKey(ctx, key))
	clock.Advance(900 * time.Millisecond)
	is.Equal(get(h, list, key).status, http.StatusOK)
	waitFor(t, func() bool { return node.FollowStats().Rounds == 4 }) // the background round it started
	is.Equal(get(h, list, key).status, http.StatusUnauthorized)       // that round saw the revocation
	clock.Advance(1100 * time.Millisecond)
	rounds := node.FollowStats().Rounds
	is.Equal(get(h, list, storetest.KeyA).status, http.StatusOK) // past the bound: a round
	is.Equal(node.FollowStats().Rounds, rounds+1)

	// Rounds that fail: the copy answers until the bound has passed since
	// the last good round, then requests fail as a failed lookup does (this
	// failure is a 500; an unreachable database's, a 503).
	conn, err := pgx.Connect(ctx, b.dsn)
	is.NoErr(err)
	t.Cleanup(func() { conn.Close(ctx) })
	rename := func(from, to string) {
		_, err := conn.Exec(ctx, fmt.Sprintf("ALTER TABLE %s.%s RENAME TO %s", pgx.Identifier{b.schema}.Sanitize(), from, to))
		is.NoErr(err)
	}
	rename("formsapi_changes", "formsapi_changes_gone")
	t.Cleanup(func() { rename("formsapi_changes_gone", "formsapi_changes") })
	clock.Advance(700 * time.Millisecond)
	is.Equal(get(h, list, storetest.KeyA).status, http.StatusOK) // from the copy, and a round that fails
	clock.Advance(400 * time.Millisecond)
	is.Equal(get(h, list, storetest.KeyA).status, http.StatusInternalServerError) // the failed lookup's answer
}

// bounded is a node with a staleness bound (WithStaleness) on a moved
// clock, beside a writer over the same seeded schema, and a key of
// AccountA the writer added.
type bounded struct {
	dsn, schema  string
	writer, node *pgstore.Store
	clock        *storetest.Clock
	h            http.Handler
	key          string
}

func newBounded(t *testing.T, bound time.Duration) bounded {
	t.Helper()
	is := is.New(t)
	dsn, schema := pooledSchema(t)
	b := bounded{dsn: dsn, schema: schema, writer: mustOpenIn(t, dsn, schema), clock: storetest.NewClock(time.Now().UTC())}
	is.NoErr(storetest.Load(ctx, b.writer, storetest.DefaultSeed()))
	b.node = mustOpenIn(t, dsn, schema, pgstore.WithStaleness(bound), pgstore.WithClock(b.clock.Now))
	b.h = formsapi.NewHandler(b.node, b.node)
	var err error
	b.key, err = formsapi.NewKey()
	is.NoErr(err)
	is.NoErr(b.writer.AddKey(ctx, b.key, storetest.AccountA))
	return b
}

// waitFor waits until cond holds, for work a test started in the
// background, failing the test after ten seconds of wall time.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("the condition did not hold within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBoundedStalenessListsOnly: on a node with a staleness bound, a key
// revoked after its copy was made still reads the lists within the bound
// (Data-Age), but the summary and the export, which docs/fleet.md says
// stay exact, refuse it at once: 401, no Data-Age. Before, every route
// with a form in its path took the combined lookup from the copy.
func TestBoundedStalenessListsOnly(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	b := newBounded(t, time.Hour)
	writer, h, key := b.writer, b.h, b.key
	form := "/v1/forms/" + storetest.FormBusy
	is.Equal(get(h, form+"/submissions?limit=5", key).status, http.StatusOK) // a round copies the key and the form

	is.NoErr(writer.RevokeKey(ctx, key))
	res := get(h, form+"/submissions?limit=5", key)
	is.Equal(res.status, http.StatusOK) // the list, from the copy: within the bound
	is.Equal(res.header.Get("Data-Age"), "0.000")
	for _, path := range []string{form + "/summary", form + "/export"} {
		res := get(h, path, key)
		if res.status != http.StatusUnauthorized || res.header.Get("Data-Age") != "" {
			t.Errorf("%s with a revoked key: %d, Data-Age %q; want 401, exact", path, res.status, res.header.Get("Data-Age"))
		}
	}
	// A live key still reads them, exactly.
	for _, path := range []string{form + "/summary", form + "/export"} {
		res := get(h, path, storetest.KeyA)
		if res.status != http.StatusOK || res.header.Get("Data-Age") != "" {
			t.Errorf("%s: %d, Data-Age %q; want 200, exact", path, res.status, res.header.Get("Data-Age"))
		}
	}
}

// TestBoundedStalenessClockBack: when the store's clock goes back (a
// host's WithClock stepped back by NTP), the copy's age cannot be told,
// so the node waits for a round, and a revocation holds; before, the age
// read as 0 until the clock caught up, an hour of answers from a copy
// older than the bound. The round then restarts the age from its start.
func TestBoundedStalenessClockBack(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	b := newBounded(t, time.Second)
	writer, node, clock, h, key := b.writer, b.node, b.clock, b.h, b.key
	list := "/v1/forms/" + storetest.FormBusy + "/submissions?limit=5"
	is.Equal(get(h, list, key).status, http.StatusOK)            // a round copies the key
	is.Equal(get(h, list, storetest.KeyA).status, http.StatusOK) // and KeyA

	is.NoErr(writer.RevokeKey(ctx, key))
	clock.Advance(-time.Hour)
	res := get(h, list, key)
	if res.status != http.StatusUnauthorized {
		t.Fatalf("a revoked key after the clock went back: %d, Data-Age %q; want 401 (a round)", res.status, res.header.Get("Data-Age"))
	}
	// The round restarted the age on the clock as it reads now.
	rounds := node.FollowStats().Rounds
	res = get(h, list, storetest.KeyA)
	is.Equal(res.status, http.StatusOK)
	is.Equal(res.header.Get("Data-Age"), "0.000")
	is.Equal(node.FollowStats().Rounds, rounds)
}
