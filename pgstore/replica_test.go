package pgstore_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// countedPool returns a pool of dsn whose statements are counted, closed
// when the test ends.
func countedPool(t *testing.T, dsn string) (*pgxpool.Pool, *wireCount) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c := &wireCount{}
	cfg.HealthCheckPeriod = time.Hour
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	cfg.ConnConfig.Tracer = c
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, c
}

// replicaNode is an API node over the pair's primary, reading the
// standby, with the statements on each counted, and a node over the
// primary alone without a cache, which serves every page as the primary
// has it now, to compare with.
type replicaNode struct {
	pair             *pgtest.Pair
	store            *pgstore.Store
	h, truth         http.Handler
	primary, standby *wireCount
	schema           string
}

func newReplicaNode(t *testing.T, opts ...pgstore.Option) replicaNode {
	t.Helper()
	pair, schema := pgtest.ReplicaSchema(t)
	standby, onStandby := countedPool(t, pair.Standby)
	s, onPrimary := countedStore(t, pair.Primary, schema, append(opts, pgstore.WithReplica(standby))...)
	load(t, s, storetest.DefaultSeed())
	secret := []byte(rand.Text())
	plain, err := pgstore.Open(ctx, pair.Primary, pgstore.WithSchema(schema), pgstore.WithCacheSize(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	pair.CaughtUp(t)
	return replicaNode{pair: pair, store: s, primary: onPrimary, standby: onStandby, schema: schema,
		h:     formsapi.NewHandler(s, s, formsapi.WithCursorSecret(secret)),
		truth: formsapi.NewHandler(plain, plain, formsapi.WithCursorSecret(secret))}
}

// syncToken matches a sync token, which differs between two answers of
// the same page (it is sealed with a random nonce).
var syncToken = regexp.MustCompile(`"syncToken":"[^"]*"`)

// read GETs target from the node, checks that the answer is the
// primary's as it is now, byte for byte, and returns how many statements
// it ran on the primary and on the standby.
func (n replicaNode) read(t *testing.T, target string) (onPrimary, onStandby int, body string) {
	t.Helper()
	n.primary.take()
	n.standby.take()
	res := get(n.h, target, storetest.KeyA)
	p, _ := n.primary.take()
	r, _ := n.standby.take()
	want := get(n.truth, target, storetest.KeyA)
	if res.status != http.StatusOK || want.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s (the primary alone: %d %s)", target, res.status, res.body, want.status, want.body)
	}
	if syncToken.ReplaceAllString(string(res.body), "") != syncToken.ReplaceAllString(string(want.body), "") {
		t.Fatalf("GET %s with a replica:\n%s\nthe primary has:\n%s", target, res.body, want.body)
	}
	return len(p), len(r), string(res.body)
}

// TestReplicaServesReads runs a node over a real primary and hot standby
// (internal/pgtest.Replica): pages the cache does not hold, feed pages,
// exports and forms lists are read on the standby, and only the key's
// lookup (and the export's feed head) on the primary; a page the cache
// holds costs the standby nothing.
func TestReplicaServesReads(t *testing.T) {
	t.Parallel()
	n := newReplicaNode(t)
	small := "/v1/forms/" + storetest.FormSmall + "/submissions?limit=10"
	for _, c := range []struct {
		target             string
		primary, onStandby int
	}{
		{small, 1, 1},                // a miss: the lookup, then the page on the standby
		{small, 1, 0},                // a hit: the lookup alone
		{small + "&order=asc", 1, 1}, // another page, another miss
		{"/v1/forms?limit=5", 1, 1},  // the forms list too
		{"/v1/forms?limit=5", 1, 0},  // and its cached page
		{"/v1/forms/" + storetest.FormSmall + "/submissions?sync=start", 1, 1}, // the feed is never cached
		{"/v1/forms/" + storetest.FormSmall + "/export", 2, 1},                 // the lookup and the feed head; the lines from the standby
	} {
		p, r, _ := n.read(t, c.target)
		if p != c.primary || r != c.onStandby {
			t.Errorf("GET %s: %d statements on the primary and %d on the standby, want %d and %d", c.target, p, r, c.primary, c.onStandby)
		}
	}

	// Without a read cache every page is a miss, read on the standby.
	n = newReplicaNode(t, pgstore.WithCacheSize(0))
	for _, target := range []string{small, small, "/v1/forms?limit=5", "/v1/forms?limit=5"} {
		if p, r, _ := n.read(t, target); p != 1 || r != 1 {
			t.Errorf("GET %s without a cache: %d statements on the primary and %d on the standby, want 1 and 1", target, p, r)
		}
	}
}

// TestReplicaNeverStale pauses the standby's replay, writes on the
// primary, and checks that every read is the primary's current answer:
// the standby's page, of an older version of the form, is never used (the
// read goes to the primary). Once replay resumes and the standby has
// caught up, its pages are used again.
func TestReplicaNeverStale(t *testing.T) {
	n := newReplicaNode(t)
	is := is.New(t)
	small := "/v1/forms/" + storetest.FormSmall + "/submissions?limit=10"
	feed := "/v1/forms/" + storetest.FormSmall + "/submissions?sync=start"
	export := "/v1/forms/" + storetest.FormSmall + "/export"
	forms := "/v1/forms?limit=5"
	for _, target := range []string{small, feed, export, forms} {
		n.read(t, target) // the standby serves each (TestReplicaServesReads)
	}

	before := n.store.ReplicaReads()
	n.pair.PauseReplay(t)
	is.NoErr(n.store.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(`{"while":"paused"}`), CreatedAt: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)}, formsapi.Metadata{ID: "paused-1"}))
	is.NoErr(n.store.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "added-while-paused", Title: "Paused", CreatedAt: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)}))
	for _, target := range []string{small, feed, export, forms} {
		p, r, body := n.read(t, target) // the primary's answer, byte for byte
		if !strings.Contains(body, "paused") {
			t.Errorf("GET %s while replay is paused does not show the write: %s", target, body)
		}
		// The standby was asked and its page, of the old version, dropped.
		if r != 1 || p < 2 {
			t.Errorf("GET %s while replay is paused: %d statements on the primary and %d on the standby, want the page on both", target, p, r)
		}
	}

	after := n.store.ReplicaReads()
	is.Equal(after.Stale-before.Stale, uint64(4))   // each read found the standby behind
	is.Equal(after.Served-before.Served, uint64(0)) // and none was served from it
	n.pair.ResumeReplay(t)
	n.pair.CaughtUp(t)
	is.NoErr(n.store.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(`{"after":"resumed"}`), CreatedAt: time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC)}, formsapi.Metadata{ID: "resumed-1"}))
	n.pair.CaughtUp(t)
	p, r, body := n.read(t, small)
	is.Equal(n.store.ReplicaReads().Served-after.Served, uint64(1))
	is.True(strings.Contains(body, "resumed"))
	is.Equal([2]int{p, r}, [2]int{1, 1}) // the standby serves again
}

// TestReplicaDown reads through a replica pool that fails every
// statement: every read is served from the primary.
func TestReplicaDown(t *testing.T) {
	t.Parallel()
	pair, schema := pgtest.ReplicaSchema(t)
	standby, _ := countedPool(t, pair.Standby)
	s, _ := countedStore(t, pair.Primary, schema, pgstore.WithReplica(standby))
	load(t, s, storetest.DefaultSeed())
	standby.Close()
	h := formsapi.NewHandler(s, s)
	for _, target := range []string{
		"/v1/forms/" + storetest.FormSmall + "/submissions",
		"/v1/forms/" + storetest.FormSmall + "/submissions?sync=start",
		"/v1/forms/" + storetest.FormSmall + "/export",
		"/v1/forms",
	} {
		if res := get(h, target, storetest.KeyA); res.status != http.StatusOK {
			t.Errorf("GET %s with the replica's pool closed: %d %s", target, res.status, res.body)
		}
	}
	if r := s.ReplicaReads(); r != (pgstore.ReplicaReads{Failed: 4}) {
		t.Errorf("ReplicaReads = %+v, want the 4 reads failed on the replica", r)
	}
}

// TestFollowRoundsReadTheReplica: a following node (WithFollow) with a
// replica runs its rounds on the standby once the standby has replayed
// the primary's WAL up to where it stood when the round began, and asks
// the primary for that position alone; with the standby's replay paused,
// its rounds read the primary, and every answer still shows the write
// committed before it (the primary's answer, byte for byte). It pauses
// the pair's replay, so it does not run in parallel.
func TestFollowRoundsReadTheReplica(t *testing.T) {
	n := newReplicaNode(t, pgstore.WithFollow(0), pgstore.WithReplicaRounds())
	is := is.New(t)
	small := "/v1/forms/" + storetest.FormSmall + "/submissions?limit=10"
	n.read(t, small) // a first round and the page, now held
	write := func(id, data string, year int) {
		t.Helper()
		is.NoErr(n.store.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(data), CreatedAt: time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)}, formsapi.Metadata{ID: id}))
	}

	write("on-standby", `{"round":"on the standby"}`, 2031)
	n.pair.CaughtUp(t)
	before := n.store.FollowStats()
	p, r, body := n.read(t, small)
	after := n.store.FollowStats()
	is.True(strings.Contains(body, "on the standby"))
	if p != 1 || r < 2 || after.OnReplica != before.OnReplica+1 || after.OffReplica != before.OffReplica {
		t.Errorf("a round with the standby caught up: %d statements on the primary, %d on the standby, %+v after %+v; want the primary's position alone on the primary, the round on the standby", p, r, after, before)
	}

	n.pair.PauseReplay(t)
	write("paused", `{"round":"while replay is paused"}`, 2032)
	before = after
	p, _, body = n.read(t, small)
	after = n.store.FollowStats()
	is.True(strings.Contains(body, "while replay is paused")) // and the rest as the primary has it (read)
	if p < 2 || after.OffReplica != before.OffReplica+1 || after.OnReplica != before.OnReplica {
		t.Errorf("a round with the standby paused: %d statements on the primary, %+v after %+v; want the round on the primary", p, after, before)
	}
	n.pair.ResumeReplay(t)
	n.pair.CaughtUp(t)
	before = after
	n.read(t, small)
	if after = n.store.FollowStats(); after.OnReplica != before.OnReplica+1 {
		t.Errorf("after replay resumed: %+v after %+v; want the round on the standby again", after, before)
	}
}

// TestFollowReplicaRoundMissesNoOpenTransaction: a transaction open on
// the primary while a round runs on the standby (a key's revocation) is
// read by a later round once it commits. A hot standby's snapshot lists
// no transaction in progress, so a round that took its position from the
// standby skipped it for good and kept accepting the revoked key (helper
// attack51 found it); the round's position is the primary's snapshot.
func TestFollowReplicaRoundMissesNoOpenTransaction(t *testing.T) {
	n := newReplicaNode(t, pgstore.WithFollow(0), pgstore.WithReplicaRounds())
	is := is.New(t)
	small := "/v1/forms/" + storetest.FormSmall + "/submissions?limit=10"
	n.read(t, small)

	conn, err := pgx.Connect(ctx, n.pair.Primary)
	is.NoErr(err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	h := sha256.Sum256([]byte(storetest.KeyA))
	tag, err := tx.Exec(ctx, `UPDATE `+pgx.Identifier{n.schema, "formsapi_keys"}.Sanitize()+` SET revoked_at = $1 WHERE key_hash = $2 AND revoked_at IS NULL`, time.Now().UnixNano(), h[:])
	is.NoErr(err)
	is.Equal(tag.RowsAffected(), int64(1))
	// A later transaction commits while the revocation is open: the
	// standby's snapshot then has a horizon past the revocation's ID.
	is.NoErr(n.store.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(`{"while":"a revocation is open"}`), CreatedAt: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)}, formsapi.Metadata{ID: "open-1"}))
	n.pair.CaughtUp(t)
	before := n.store.FollowStats()
	_, _, body := n.read(t, small) // still the key's: the revocation has not committed
	is.True(strings.Contains(body, "a revocation is open"))
	if after := n.store.FollowStats(); after.OnReplica != before.OnReplica+1 {
		t.Fatalf("the round did not run on the standby: %+v after %+v", after, before)
	}

	is.NoErr(tx.Commit(ctx))
	n.pair.CaughtUp(t)
	for range 3 {
		if res := get(n.h, small, storetest.KeyA); res.status != http.StatusUnauthorized {
			t.Fatalf("a key revoked before the request, through a round on the standby: %d %s, want 401", res.status, res.body)
		}
	}
}

// TestFollowReplicaNotAStandby: a replica pool that reaches a server not
// in recovery (the primary itself, or a promoted standby, whose replay
// position stays where recovery ended) never serves a round; after
// replicaMisses (8) rounds in a row that could not use it, the rounds
// leave it alone for a while rather than ask it each time.
func TestFollowReplicaNotAStandby(t *testing.T) {
	t.Parallel()
	pair, schema := pgtest.ReplicaSchema(t)
	notStandby, asked := countedPool(t, pair.Primary)
	var ahead atomic.Int64 // the store's clock, moved by the test: no waiting
	start := time.Now()
	s, _ := countedStore(t, pair.Primary, schema, pgstore.WithFollow(0), pgstore.WithReplica(notStandby), pgstore.WithReplicaRounds(),
		pgstore.WithClock(func() time.Time { return start.Add(time.Duration(ahead.Load())) }))
	load(t, s, storetest.DefaultSeed())
	h := formsapi.NewHandler(s, s)
	checks := func(requests int) (n int) {
		t.Helper()
		asked.take()
		for range requests {
			if res := get(h, "/v1/forms/"+storetest.FormSmall+"/submissions?limit=5", storetest.KeyA); res.status != http.StatusOK {
				t.Fatalf("GET: %d %s", res.status, res.body)
			}
		}
		statements, _ := asked.take()
		for _, q := range statements {
			if strings.Contains(q, "pg_is_in_recovery") {
				n++
			}
		}
		return n
	}
	if n := checks(12); n != 8 {
		t.Errorf("12 rounds asked a server not in recovery %d times whether it had replayed, want 8 and then none", n)
	}
	ahead.Add(int64(2 * time.Second)) // past the rest
	if n := checks(1); n != 1 {
		t.Errorf("a round after the rest asked %d times, want 1", n)
	}
	if st := s.FollowStats(); st.OnReplica != 0 || st.OffReplica < 13 {
		t.Errorf("%+v: want no round on a server not in recovery", st)
	}
}

// hangingRounds is a pgx tracer whose connections hang every statement
// of a round (those that read the change log) until the statement's
// context ends: a replica that stops answering mid-round.
type hangingRounds struct{}

func (hangingRounds) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "formsapi_changes") {
		<-ctx.Done()
	}
	return ctx
}

func (hangingRounds) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestFollowReplicaHangsMidRound: a replica that hangs in the round's
// own statement holds the round no longer than the replica's part of it
// is given (100 ms): the round reads the primary and the request is
// answered (helper attack52 found the statement ran under the request's
// context, so a hanging replica held every waiting request, and the
// round lock, until the requests' deadline).
func TestFollowReplicaHangsMidRound(t *testing.T) {
	t.Parallel()
	pair, schema := pgtest.ReplicaSchema(t)
	cfg, err := pgxpool.ParseConfig(pair.Standby)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = hangingRounds{}
	hanging, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hanging.Close)
	s, _ := countedStore(t, pair.Primary, schema, pgstore.WithFollow(0), pgstore.WithReplica(hanging), pgstore.WithReplicaRounds())
	load(t, s, storetest.DefaultSeed())
	pair.CaughtUp(t)
	// The store's calls end after 30 s, so that a round held by the
	// replica fails the test (a 503) rather than hang it.
	h := formsapi.NewHandler(s, s, formsapi.WithStoreTimeout(30*time.Second))
	before := s.FollowStats()
	if res := get(h, "/v1/forms/"+storetest.FormSmall+"/submissions?limit=5", storetest.KeyA); res.status != http.StatusOK {
		t.Fatalf("GET with a replica hanging mid-round: %d %s", res.status, res.body)
	}
	if after := s.FollowStats(); after.OffReplica <= before.OffReplica || after.OnReplica != before.OnReplica {
		t.Errorf("%+v after %+v: want the round off the hanging replica", after, before)
	}
}

// TestFollowRoundsOnThePrimaryByDefault: without WithReplicaRounds a
// following node with a replica runs its rounds on the primary, as
// before the option (monotonic reads kept).
func TestFollowRoundsOnThePrimaryByDefault(t *testing.T) {
	t.Parallel()
	n := newReplicaNode(t, pgstore.WithFollow(0))
	n.read(t, "/v1/forms/"+storetest.FormSmall+"/submissions?limit=10")
	if st := n.store.FollowStats(); st.Rounds == 0 || st.OnReplica != 0 || st.OffReplica != 0 {
		t.Errorf("%+v: want rounds, none of them on the replica or tried there", st)
	}
}
