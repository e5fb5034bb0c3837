package redisround_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/internal/redistest"
	"github.com/formsapi/formsapi/internal/testenv"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/pgstore/redisround"
	"github.com/formsapi/formsapi/storetest"
)

// TestMain runs the tests, then says in one line how many skipped for a
// missing server (see testenv.Main).
func TestMain(m *testing.M) { testenv.Main(m) }

var ctx = context.Background()

// fleet is a writer and following nodes over one schema, sharing rounds
// through one Redis prefix.
type fleet struct {
	t      *testing.T
	dsn    string
	schema string
	prefix string
	writer *pgstore.Store
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	dsn, schema := pgtest.Schema(t)
	prefix := redistest.Prefix(t)
	fl := &fleet{t: t, dsn: dsn, schema: schema, prefix: prefix}
	fl.writer = fl.open()
	if err := storetest.Load(ctx, fl.writer, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	return fl
}

func (fl *fleet) open(opts ...pgstore.Option) *pgstore.Store {
	fl.t.Helper()
	s, err := pgstore.Open(ctx, fl.dsn, append([]pgstore.Option{pgstore.WithSchema(fl.schema)}, opts...)...)
	if err != nil {
		fl.t.Fatal(err)
	}
	fl.t.Cleanup(func() { s.Close() })
	return s
}

// node opens a following node sharing rounds through x (a new exchange
// on a client of its own when nil). It never campaigns by itself after
// Open (the test does) and waits for a published round as long as the
// test may take, so that every fallback is one the test caused.
func (fl *fleet) node(x pgstore.RoundExchange) (*pgstore.Store, http.Handler) {
	fl.t.Helper()
	if x == nil {
		x = redisround.New(redistest.Client(fl.t), redisround.WithPrefix(fl.prefix))
	}
	s := fl.open(pgstore.WithFollow(0), pgstore.WithSharedRounds(x), pgstore.WithLeaseRenew(-1), pgstore.WithShareWait(time.Hour))
	return s, formsapi.NewHandler(s, s)
}

type response struct {
	status int
	body   string
}

func get(h http.Handler, target, key string) response {
	r := httptest.NewRequest("GET", target, nil)
	r.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return response{w.Code, w.Body.String()}
}

const list = "/v1/forms/" + storetest.FormBusy + "/submissions?limit=5"

// newest returns the data of the first submission of the busy form's
// newest-first page on h.
func newest(t *testing.T, h http.Handler) string {
	t.Helper()
	res := get(h, list, storetest.KeyA)
	if res.status != http.StatusOK {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	var p struct {
		Submissions []struct {
			Data json.RawMessage `json:"data"`
		} `json:"submissions"`
	}
	if err := json.Unmarshal([]byte(res.body), &p); err != nil || len(p.Submissions) == 0 {
		t.Fatalf("body %s: %v", res.body, err)
	}
	return string(p.Submissions[0].Data)
}

var written atomic.Int64

// write adds a submission to the busy form, newest of all, and returns
// its data.
func (fl *fleet) write() string {
	fl.t.Helper()
	n := written.Add(1)
	data := fmt.Sprintf(`{"shared":%d}`, n)
	at := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Second)
	if err := fl.writer.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(data), CreatedAt: at}, formsapi.Metadata{}); err != nil {
		fl.t.Fatal(err)
	}
	return data
}

// seesWrite checks that a write committed before a request is in the
// answer of every node.
func seesWrite(t *testing.T, fl *fleet, hs ...http.Handler) {
	t.Helper()
	want := fl.write()
	for i, h := range hs {
		if got := newest(t, h); got != want {
			t.Fatalf("node %d answered %s after %s committed", i, got, want)
		}
	}
}

// TestSharedRoundsAreExact: three nodes, one the leader; a write
// committed before a request is in every node's answer, and a revoked
// key is refused by every node, the followers served by the leader's
// published rounds with no round of their own.
func TestSharedRoundsAreExact(t *testing.T) {
	t.Parallel()
	fl := newFleet(t)
	a, ha := fl.node(nil)
	b, hb := fl.node(nil)
	c, hc := fl.node(nil)
	if !a.SharedStats().Leader || b.SharedStats().Leader || c.SharedStats().Leader {
		t.Fatalf("the first node opened is the only leader: %+v %+v %+v", a.SharedStats(), b.SharedStats(), c.SharedStats())
	}
	for _, s := range []*pgstore.Store{a, b, c} {
		if !s.SharedStats().Listening {
			t.Fatal("a node started without its subscription")
		}
	}
	seesWrite(t, fl, ha, hb, hc) // copies the key and form: rounds of each node's own
	bRounds, cRounds := b.FollowStats().Rounds, c.FollowStats().Rounds
	bShared := b.SharedStats()
	for range 3 {
		seesWrite(t, fl, ha, hb, hc)
	}
	if got := b.FollowStats().Rounds; got != bRounds {
		t.Errorf("the follower ran %d rounds of its own", got-bRounds)
	}
	if got := c.FollowStats().Rounds; got != cRounds {
		t.Errorf("the other follower ran %d rounds of its own", got-cRounds)
	}
	if got := b.SharedStats(); got.Tickets != bShared.Tickets+3 || got.Fallbacks != bShared.Fallbacks {
		t.Errorf("the follower's shared rounds: %+v, before %+v", got, bShared)
	}
	if a.SharedStats().Published == 0 {
		t.Error("the leader published nothing")
	}

	// A key revoked before a request is refused by every node.
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.writer.AddKey(ctx, key, storetest.AccountA); err != nil {
		t.Fatal(err)
	}
	for i, h := range []http.Handler{ha, hb, hc} {
		if got := get(h, list, key).status; got != http.StatusOK {
			t.Fatalf("node %d: a new key: %d", i, got)
		}
	}
	bRounds = b.FollowStats().Rounds
	if err := fl.writer.RevokeKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	for i, h := range []http.Handler{hb, hc, ha} {
		if got := get(h, list, key).status; got != http.StatusUnauthorized {
			t.Fatalf("node %d accepted a key revoked before the request: %d", i, got)
		}
	}
	if got := b.FollowStats().Rounds; got != bRounds {
		t.Errorf("the follower refused the revoked key with %d rounds of its own, not the published round", got-bRounds)
	}
}

// TestSharedRoundsLeaderLost: the leader's lease lost (expired, or the
// leader gone), a follower runs its own rounds, exactly, until a node
// takes the lease; the new leader's rounds then serve the others,
// the old leader among them, after at most one round of their own (the
// gap of the leader's change).
func TestSharedRoundsLeaderLost(t *testing.T) {
	t.Parallel()
	fl := newFleet(t)
	a, ha := fl.node(nil)
	b, hb := fl.node(nil)
	c, hc := fl.node(nil)
	seesWrite(t, fl, ha, hb, hc)
	seesWrite(t, fl, ha, hb, hc)

	// The lease expires (the leader stopped renewing it).
	rc := redistest.Client(t)
	if err := rc.Del(ctx, fl.prefix+"lease").Err(); err != nil {
		t.Fatal(err)
	}
	before := b.SharedStats()
	seesWrite(t, fl, hb, hc)
	if got := b.SharedStats(); got.Fallbacks != before.Fallbacks+1 || got.Tickets != before.Tickets {
		t.Errorf("with no leader, the follower's shared rounds: %+v, before %+v", got, before)
	}

	// Another node takes the lease; the old leader finds it taken.
	if !b.Campaign(ctx) {
		t.Fatal("no node held the lease, and b did not take it")
	}
	if a.Campaign(ctx) {
		t.Fatal("a took the lease b holds")
	}
	seesWrite(t, fl, ha, hb, hc) // a and c: at most a round of their own, the leader changed
	aBefore, cBefore := a.SharedStats(), c.SharedStats()
	for range 2 {
		seesWrite(t, fl, ha, hb, hc)
	}
	if got := a.SharedStats(); got.Tickets != aBefore.Tickets+2 || got.Fallbacks != aBefore.Fallbacks {
		t.Errorf("the old leader, following: %+v, before %+v", got, aBefore)
	}
	if got := c.SharedStats(); got.Tickets != cBefore.Tickets+2 || got.Fallbacks != cBefore.Fallbacks {
		t.Errorf("the follower after the change: %+v, before %+v", got, cBefore)
	}
	if !b.SharedStats().Leader || b.SharedStats().Published == 0 {
		t.Errorf("the new leader: %+v", b.SharedStats())
	}

	// The leader closes: it resigns, and the others run their own rounds.
	b.Close()
	before = c.SharedStats()
	seesWrite(t, fl, hc, ha)
	if got := c.SharedStats(); got.Fallbacks != before.Fallbacks+1 {
		t.Errorf("after the leader closed: %+v, before %+v", got, before)
	}
}

// TestSharedRoundsRedisDown: a node whose Redis is down, from the start
// or after a while, runs its own rounds and answers exactly.
func TestSharedRoundsRedisDown(t *testing.T) {
	t.Parallel()
	fl := newFleet(t)
	a, ha := fl.node(nil)
	bClient := redistest.Client(t)
	b, hb := fl.node(redisround.New(bClient, redisround.WithPrefix(fl.prefix)))
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer down.Close()
	c, hc := fl.node(redisround.New(down, redisround.WithPrefix(fl.prefix)))
	if c.SharedStats().Leader || c.SharedStats().Listening {
		t.Fatalf("a node without Redis: %+v", c.SharedStats())
	}
	seesWrite(t, fl, ha, hb, hc)
	seesWrite(t, fl, ha, hb, hc)
	if got := c.SharedStats(); got.Tickets != 0 {
		t.Errorf("a node without Redis served tickets: %+v", got)
	}
	if got := b.SharedStats(); got.Tickets == 0 {
		t.Errorf("the node with Redis shared nothing: %+v", got)
	}

	// b's Redis goes down.
	bClient.Close()
	before := b.FollowStats().Rounds
	seesWrite(t, fl, ha, hb, hc)
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.writer.AddKey(ctx, key, storetest.AccountA); err != nil {
		t.Fatal(err)
	}
	if got := get(hb, list, key).status; got != http.StatusOK {
		t.Fatalf("a new key: %d", got)
	}
	if err := fl.writer.RevokeKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if got := get(hb, list, key).status; got != http.StatusUnauthorized {
		t.Fatalf("with its Redis down, the node accepted a revoked key: %d", got)
	}
	if got := b.FollowStats().Rounds; got < before+3 {
		t.Errorf("with its Redis down, the node ran %d rounds of its own for 3 requests", got-before)
	}
	_ = a
}

// dropping is an exchange that loses the next published rounds it is
// told to, as a node whose subscription dropped would.
type dropping struct {
	pgstore.RoundExchange
	drop atomic.Int64
}

func (d *dropping) Listen(ctx context.Context, subscribed func(), round func([]byte), wake func()) error {
	return d.RoundExchange.Listen(ctx, subscribed, func(b []byte) {
		if d.drop.Add(-1) >= 0 {
			return
		}
		d.drop.Store(0)
		round(b)
	}, wake)
}

// TestSharedRoundsGap: a follower that missed a published round cannot
// apply the next one (its copy is older than what that round was read
// after): it runs a round of its own, reading the log from its own
// snapshot, exactly, and applies the published rounds again after.
func TestSharedRoundsGap(t *testing.T) {
	t.Parallel()
	fl := newFleet(t)
	a, ha := fl.node(nil)
	d := &dropping{RoundExchange: redisround.New(redistest.Client(t), redisround.WithPrefix(fl.prefix))}
	b, hb := fl.node(d)
	seesWrite(t, fl, ha, hb)
	seesWrite(t, fl, ha, hb)
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.writer.AddKey(ctx, key, storetest.AccountA); err != nil {
		t.Fatal(err)
	}
	if got := get(hb, list, key).status; got != http.StatusOK { // b copies the key
		t.Fatalf("a new key: %d", got)
	}
	before := b.SharedStats()
	d.drop.Store(1)
	if err := fl.writer.RevokeKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	seesWrite(t, fl, ha) // the leader's round, with the revocation, which b loses
	seesWrite(t, fl, hb) // b: the next round has a gap before it
	if got := get(hb, list, key).status; got != http.StatusUnauthorized {
		t.Fatalf("after a lost round, the follower accepted a key revoked before the request: %d", got)
	}
	got := b.SharedStats()
	if got.Gaps < before.Gaps+1 || got.Fallbacks != before.Fallbacks+1 {
		t.Errorf("after a lost round: %+v, before %+v", got, before)
	}
	before = got
	seesWrite(t, fl, ha, hb)
	seesWrite(t, fl, hb)
	if got := b.SharedStats(); got.Tickets != before.Tickets+2 || got.Fallbacks != before.Fallbacks {
		t.Errorf("after its own round, the follower did not apply the published ones: %+v, before %+v", got, before)
	}
	if a.SharedStats().Published == 0 {
		t.Error("the leader published nothing")
	}
	if !strings.HasPrefix(fl.prefix, "formsapi:test:") {
		t.Errorf("prefix %q is not the test's own", fl.prefix)
	}
}

// TestSharedRoundsNewLeaderFirstRound: a node restarted (its copy
// empty) takes the lease as it opens, and its first round reads no log,
// having no snapshot before it; a follower whose copy is older than
// that round's snapshot must not take it for its own (its copy would
// miss the writes between the two), and runs a round of its own: a
// write committed before its request is in its answer.
func TestSharedRoundsNewLeaderFirstRound(t *testing.T) {
	t.Parallel()
	fl := newFleet(t)
	a, ha := fl.node(nil)
	b, hb := fl.node(nil)
	seesWrite(t, fl, ha, hb)
	seesWrite(t, fl, ha, hb) // b's copy holds the key and the form, served by a's rounds
	if !a.SharedStats().Leader || b.SharedStats().Leader {
		t.Fatalf("the first node opened leads: %+v %+v", a.SharedStats(), b.SharedStats())
	}

	// The leader restarts: it resigns, and the node opened again takes
	// the lease with an empty copy.
	a.Close()
	n, hn := fl.node(nil)
	if !n.SharedStats().Leader {
		t.Fatalf("the node opened again does not lead: %+v", n.SharedStats())
	}
	before := b.SharedStats()
	seesWrite(t, fl, hb) // b's ticket wakes n, whose first round is published
	if got := b.SharedStats(); got.Gaps != before.Gaps+1 || got.Fallbacks != before.Fallbacks+1 || got.Applied != before.Applied {
		t.Errorf("the new leader's first round, at the follower: %+v, before %+v", got, before)
	}
	// From the new leader's next rounds on, b is served by them again.
	seesWrite(t, fl, hn, hb)
	before = b.SharedStats()
	seesWrite(t, fl, hb)
	if got := b.SharedStats(); got.Tickets != before.Tickets+1 || got.Fallbacks != before.Fallbacks {
		t.Errorf("after the new leader's first round, the follower: %+v, before %+v", got, before)
	}
}
