package pgstore_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/internal/redistest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/pgstore/redisround"
	"github.com/formsapi/formsapi/storetest"
)

// TestSharedRoundsOnTheReplica: the leader of shared rounds
// (WithSharedRounds) with WithReplicaRounds reads its rounds on the
// standby and publishes them; a follower applies them with no round of
// its own; a write committed and a key revoked before a request are in
// both nodes' answers.
func TestSharedRoundsOnTheReplica(t *testing.T) {
	t.Parallel()
	pair, schema := pgtest.ReplicaSchema(t)
	standby, _ := countedPool(t, pair.Standby)
	writer := load(t, mustOpenIn(t, pair.Primary, schema), storetest.DefaultSeed())
	prefix := redistest.Prefix(t)
	node := func() (*pgstore.Store, http.Handler) {
		x := redisround.New(redistest.Client(t), redisround.WithPrefix(prefix))
		s := mustOpenIn(t, pair.Primary, schema, pgstore.WithFollow(0), pgstore.WithSharedRounds(x),
			pgstore.WithLeaseRenew(-1), pgstore.WithShareWait(time.Hour), pgstore.WithReplica(standby), pgstore.WithReplicaRounds(),
			// Other tests write to the pair's primary meanwhile: their
			// WAL, not yet on the standby, is in the round's position.
			pgstore.WithReplicaRoundWait(30*time.Second, time.Minute))
		return s, formsapi.NewHandler(s, s)
	}
	leader, hl := node()
	follower, hf := node()
	if !leader.SharedStats().Leader || follower.SharedStats().Leader {
		t.Fatalf("the first node opened leads: %+v, %+v", leader.SharedStats(), follower.SharedStats())
	}
	list := "/v1/forms/" + storetest.FormBusy + "/submissions?limit=5"
	at := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	sees := func(data string) {
		t.Helper()
		for i, h := range []http.Handler{hl, hf} {
			if res := get(h, list, storetest.KeyA); res.status != http.StatusOK || !strings.Contains(string(res.body), data) {
				t.Fatalf("node %d after %s committed: %d %s", i, data, res.status, res.body)
			}
		}
	}
	write := func(data string) {
		t.Helper()
		at = at.Add(time.Second)
		if err := writer.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(data), CreatedAt: at}, formsapi.Metadata{}); err != nil {
			t.Fatal(err)
		}
		// Until the standby has replayed all the primary has inserted:
		// with no writer after this one, WAL inserted and not yet
		// flushed (until the WAL writer's next turn, up to 200 ms) keeps
		// the standby behind a round's position longer than the round
		// waits, and the round reads the primary (docs/fleet.md).
		pair.CaughtUp(t)
	}
	write(`{"shared":"first"}`)
	sees(`"first"`) // each node's own rounds copy the key and form
	rounds, onReplica := follower.FollowStats().Rounds, leader.FollowStats().OnReplica
	for _, d := range []string{"second", "third"} {
		write(`{"shared":"` + d + `"}`)
		sees(`"` + d + `"`)
	}
	if got := follower.FollowStats().Rounds; got != rounds {
		t.Errorf("the follower ran %d rounds of its own", got-rounds)
	}
	if got := leader.FollowStats().OnReplica; got <= onReplica {
		t.Errorf("the leader's rounds did not read the standby: %+v", leader.FollowStats())
	}

	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.AddKey(ctx, key, storetest.AccountA); err != nil {
		t.Fatal(err)
	}
	for i, h := range []http.Handler{hl, hf} {
		if got := get(h, list, key).status; got != http.StatusOK {
			t.Fatalf("node %d: a new key: %d", i, got)
		}
	}
	if err := writer.RevokeKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	for i, h := range []http.Handler{hf, hl} {
		if got := get(h, list, key).status; got != http.StatusUnauthorized {
			t.Fatalf("node %d accepted a key revoked before the request: %d", i, got)
		}
	}
}
