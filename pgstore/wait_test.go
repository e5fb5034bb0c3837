package pgstore_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/internal/waittest"
	"github.com/formsapi/formsapi/pgstore"
)

// waitFixture opens a schema with a form and a key, and a handler over
// a store of it with opts; writes go through that store, or through
// another node's store on the same schema when other.
func waitFixture(t *testing.T, other bool, nodeOpts []pgstore.Option, opts ...formsapi.Option) waittest.Fixture {
	t.Helper()
	dsn, schema := pgtest.Schema(t)
	// The check's interval never passes in a test: Check stands for it.
	s := mustOpenIn(t, dsn, schema, append(nodeOpts, pgstore.WithWaitCheck(time.Hour))...)
	writer := s
	if other {
		writer = mustOpenIn(t, dsn, schema)
	}
	return waittest.StoreFixture(t, formsapi.NewHandler(s, s, opts...), pgstore.WaitHub(s), writer, other)
}

// TestWaitOwnWrites: the node's own writes wake its waiters directly.
func TestWaitOwnWrites(t *testing.T) {
	t.Parallel()
	waittest.Run(t, func(t *testing.T, opts ...formsapi.Option) waittest.Fixture {
		return waitFixture(t, false, nil, opts...)
	})
}

// TestWaitOtherNode: another node's writes wake the waiters at the
// node's next check, one statement for all of them.
func TestWaitOtherNode(t *testing.T) {
	t.Parallel()
	waittest.Run(t, func(t *testing.T, opts ...formsapi.Option) waittest.Fixture {
		return waitFixture(t, true, nil, opts...)
	})
}

// TestWaitFollowingNode: on a node that follows the change log, another
// node's writes wake the waiters in the round that applies them (the
// check runs a round), and a revocation in the round that applies it.
func TestWaitFollowingNode(t *testing.T) {
	t.Parallel()
	waittest.Run(t, func(t *testing.T, opts ...formsapi.Option) waittest.Fixture {
		return waitFixture(t, true, []pgstore.Option{pgstore.WithFollow(0)}, opts...)
	})
}

// TestWaitCheckIsOneStatement: one check reads every form and key waited
// on, names only what changed, and costs one statement however many wait.
func TestWaitCheckIsOneStatement(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
	s := mustOpenIn(t, dsn, schema, pgstore.WithWaitCheck(time.Hour))
	other := mustOpenIn(t, dsn, schema)
	for _, id := range []string{"a", "b"} {
		if err := s.AddForm(ctx, "acct", formsapi.Form{ID: id, Title: id}); err != nil {
			t.Fatal(err)
		}
	}
	k1, _ := formsapi.NewKey()
	k2, _ := formsapi.NewKey()
	for _, k := range []string{k1, k2} {
		if err := s.AddKey(ctx, k, "acct"); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.RevokeKey(ctx, k2); err != nil {
		t.Fatal(err)
	}
	if err := other.AddSubmission(ctx, formsapi.Submission{FormID: "b", Data: json.RawMessage(`{}`)}, formsapi.Metadata{}); err != nil {
		t.Fatal(err)
	}
	hub := pgstore.WaitHub(s)
	a := hub.Watch("a", pgstore.KeyHash(k1), 0)
	b := hub.Watch("b", pgstore.KeyHash(k1), 0)
	gone := hub.Watch("gone", pgstore.KeyHash(k2), 0)
	for _, w := range []interface{ Release() }{a, b, gone} {
		defer w.Release()
	}
	if err := hub.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if n := hub.Stats().Checks; n != 1 {
		t.Errorf("%d checks, want 1", n)
	}
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	if closed(a.Form) || !closed(b.Form) || !closed(gone.Form) {
		t.Errorf("woken: a (no change) %t, b (a submission) %t, gone (no form) %t", closed(a.Form), closed(b.Form), closed(gone.Form))
	}
	if closed(a.Key) || !closed(gone.Key) {
		t.Errorf("woken: k1 (live) %t, k2 (revoked) %t", closed(a.Key), closed(gone.Key))
	}
}
