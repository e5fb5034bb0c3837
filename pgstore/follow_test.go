package pgstore_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestFollowContract holds a store made WithFollow to the groups of the
// contract that read keys, grants and forms and write them, and to
// Nodes: every answer of its handler goes through its rounds and its
// copy.
func TestFollowContract(t *testing.T) {
	pgtest.DSN(t)
	t.Parallel()
	open := func(t *testing.T, seed storetest.Seed) formsapi.Store {
		dsn, schema := pooledSchema(t, pgstore.WithSortIndex())
		return load(t, mustOpenIn(t, dsn, schema, pgstore.WithFollow(0), pgstore.WithSortIndex(), pgstore.WithClock(seed.Clock.Now)), seed)
	}
	// Nodes: its searched and filtered pages while another node, one
	// that does not follow, writes.
	storetest.Run(t, open, storetest.Groups("FastPath", "Keys", "Grants", "Lifecycle", "Nodes"), storetest.WithNode(anotherNode))
}

// TestFollowIsExact: a node that follows the change log answers every
// request as new as every write committed before it arrived, whichever
// node or connection wrote it (added and deleted submissions, forms
// added and deleted, keys revoked, a transaction that committed after
// the node's last round had begun, a TRUNCATE), and answers a request
// whose key its copy holds with no lookup of its own.
// With WithRoundBatch (rounds spaced by the request rate), the same.
func TestFollowIsExact(t *testing.T) {
	t.Parallel()
	t.Run("Spacing", func(t *testing.T) { t.Parallel(); followIsExact(t, pgstore.WithFollow(0)) })
	t.Run("Batch", func(t *testing.T) {
		t.Parallel()
		followIsExact(t, pgstore.WithFollow(0), pgstore.WithRoundBatch(4, time.Millisecond))
	})
}

func followIsExact(t *testing.T, opts ...pgstore.Option) {
	is := is.New(t)
	dsn, schema := pooledSchema(t)
	writer := mustOpenIn(t, dsn, schema)
	if err := storetest.Load(ctx, writer, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	follower := mustOpenIn(t, dsn, schema, opts...)
	h := formsapi.NewHandler(follower, follower)
	list := "/v1/forms/" + storetest.FormBusy + "/submissions?limit=5"

	first := decodePage(t, get(h, list, storetest.KeyA))
	is.True(len(first.Submissions) == 5)
	before := follower.FollowStats()
	again := decodePage(t, get(h, list, storetest.KeyA))
	is.Equal(items(again), items(first))
	after := follower.FollowStats()
	is.Equal(after.Rounds, before.Rounds+1) // the request waited for a round
	is.Equal(after.Misses, before.Misses)   // and had no lookup of its own in it

	t.Run("AddedAndDeleted", func(t *testing.T) {
		is := is.New(t)
		newest := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC) // newest first: the page's first
		is.NoErr(writer.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`{"follow":1}`), CreatedAt: newest}, formsapi.Metadata{ID: "followed-1"}))
		p := decodePage(t, get(h, list, storetest.KeyA))
		is.True(strings.Contains(string(p.Submissions[0]), `"follow":1`)) // the write committed before the request is in its answer
		is.Equal(items(page{Submissions: p.Submissions[1:]}), items(page{Submissions: first.Submissions[:4]}))
		is.NoErr(writer.DeleteSubmission(ctx, storetest.AccountA, storetest.FormBusy, "followed-1"))
		is.Equal(items(decodePage(t, get(h, list, storetest.KeyA))), items(first)) // and so is its deletion
	})

	t.Run("Revoked", func(t *testing.T) {
		is := is.New(t)
		key, err := formsapi.NewKey()
		is.NoErr(err)
		is.NoErr(writer.AddKey(ctx, key, storetest.AccountA))
		is.Equal(get(h, list, key).status, http.StatusOK) // copied
		is.NoErr(writer.RevokeKey(ctx, key))
		is.Equal(get(h, list, key).status, http.StatusUnauthorized)
	})

	t.Run("LateCommit", func(t *testing.T) {
		// A transaction that began, and wrote, before a round's snapshot
		// and committed after it: the snapshot names it in progress, and
		// the next round reads its change, although later transactions
		// committed first.
		is := is.New(t)
		key, err := formsapi.NewKey()
		is.NoErr(err)
		is.NoErr(writer.AddKey(ctx, key, storetest.AccountA))
		is.Equal(get(h, list, key).status, http.StatusOK)
		conn, err := pgx.Connect(ctx, dsn)
		is.NoErr(err)
		defer conn.Close(ctx)
		tx, err := conn.Begin(ctx)
		is.NoErr(err)
		defer tx.Rollback(ctx)
		hash := keyformat.Hash(key)
		_, err = tx.Exec(ctx, fmt.Sprintf(`UPDATE %s.formsapi_keys SET revoked_at = 1 WHERE key_hash = $1`, quote(schema)), hash[:])
		is.NoErr(err)
		// A later transaction commits: the round's snapshot is past the
		// open one's xid.
		is.NoErr(writer.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(`{"late":1}`), CreatedAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}, formsapi.Metadata{}))
		is.Equal(get(h, list, key).status, http.StatusOK) // not committed: the key is live
		is.NoErr(tx.Commit(ctx))
		is.Equal(get(h, list, key).status, http.StatusUnauthorized) // committed before this request: refused
	})

	t.Run("Forms", func(t *testing.T) {
		is := is.New(t)
		forms := func() int {
			var p page
			is.NoErr(json.Unmarshal(get(h, "/v1/forms?limit=100", storetest.KeyA).body, &p))
			return len(p.Forms)
		}
		n := forms()
		is.NoErr(writer.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "followed", Title: "Followed"}))
		is.Equal(forms(), n+1) // the list is as new as the write
		is.Equal(get(h, "/v1/forms/followed/submissions", storetest.KeyA).status, http.StatusOK)
		is.NoErr(writer.DeleteForm(ctx, storetest.AccountA, "followed"))
		is.Equal(get(h, "/v1/forms/followed/submissions", storetest.KeyA).status, http.StatusNotFound)
		is.Equal(forms(), n)
	})

	t.Run("Truncate", func(t *testing.T) {
		is := is.New(t)
		resets := follower.FollowStats().Resets
		conn, err := pgx.Connect(ctx, dsn)
		is.NoErr(err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, fmt.Sprintf(`TRUNCATE %s.formsapi_keys`, quote(schema)))
		is.NoErr(err)
		is.Equal(get(h, list, storetest.KeyA).status, http.StatusUnauthorized) // every key gone
		is.Equal(follower.FollowStats().Resets, resets+1)                      // the copy dropped whole
	})
}

// A round with nothing to look up, after one that read no log row, probes
// the log first (the cheapest statement a round sends) and runs the
// round's statement only when the probe finds a row: a write, and a
// transaction that was in progress at the last round's snapshot and
// committed after it, are in the next answer all the same.
func TestFollowProbeIsExact(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pooledSchema(t)
	writer := mustOpenIn(t, dsn, schema)
	if err := storetest.Load(ctx, writer, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}
	follower := mustOpenIn(t, dsn, schema, pgstore.WithFollow(0))
	h := formsapi.NewHandler(follower, follower)
	list := "/v1/forms/" + storetest.FormBusy + "/submissions?limit=5"
	key, err := formsapi.NewKey()
	is.NoErr(err)
	is.NoErr(writer.AddKey(ctx, key, storetest.AccountA))
	is.Equal(get(h, list, key).status, http.StatusOK) // copied
	is.Equal(get(h, list, key).status, http.StatusOK) // a round that read the log (the key's row, maybe) or nothing
	probed := follower.FollowStats().Probed
	is.Equal(get(h, list, key).status, http.StatusOK)
	is.Equal(follower.FollowStats().Probed, probed+1) // nothing written: the probe alone

	// A write: the probe finds its row, and the round reads it.
	is.NoErr(writer.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`{"probed":1}`), CreatedAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}, formsapi.Metadata{}))
	p := decodePage(t, get(h, list, key))
	is.True(strings.Contains(string(p.Submissions[0]), `"probed":1`))
	is.Equal(follower.FollowStats().Probed, probed+1)
	is.Equal(get(h, list, key).status, http.StatusOK) // after a round that read a row: no probe
	is.Equal(get(h, list, key).status, http.StatusOK) // after one that read none: the probe
	probed = follower.FollowStats().Probed
	is.True(probed >= 2)

	// A late commit: the revocation's transaction is in progress at the
	// probe's snapshot, which becomes the round's; the next probe finds
	// its row by the snapshot's list of transactions in progress.
	conn, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	hash := keyformat.Hash(key)
	_, err = tx.Exec(ctx, fmt.Sprintf(`UPDATE %s.formsapi_keys SET revoked_at = 1 WHERE key_hash = $1`, quote(schema)), hash[:])
	is.NoErr(err)
	is.Equal(get(h, list, key).status, http.StatusOK) // not committed: live
	is.Equal(follower.FollowStats().Probed, probed+1)
	is.NoErr(tx.Commit(ctx))
	is.Equal(get(h, list, key).status, http.StatusUnauthorized) // committed before this request: refused
	is.Equal(follower.FollowStats().Probed, probed+1)           // the probe found the row: the round's statement read it
}
