package pgstore_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
)

// TestWaitNotify: on a node made WithNotify, a write through another
// node wakes its waiter at once: the check's interval (an hour) never
// passes and the test never calls Check. When its listening connection
// is ended, the node listens again, and another node's revocation then
// wakes the key's waiter. With and without WithFollow (the check is a
// round there).
func TestWaitNotify(t *testing.T) {
	t.Parallel()
	for _, follow := range []bool{false, true} {
		t.Run(fmt.Sprintf("follow=%t", follow), func(t *testing.T) {
			t.Parallel()
			dsn, schema := pgtest.Schema(t)
			opts := []pgstore.Option{pgstore.WithWaitCheck(time.Hour), pgstore.WithNotify("")}
			if follow {
				opts = append(opts, pgstore.WithFollow(0))
			}
			s := mustOpenIn(t, dsn, schema, opts...)
			other := mustOpenIn(t, dsn, schema)
			if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "f", Title: "f"}); err != nil {
				t.Fatal(err)
			}
			key, _ := formsapi.NewKey()
			if err := s.AddKey(ctx, key, "acct"); err != nil {
				t.Fatal(err)
			}
			hub := pgstore.WaitHub(s)
			woken := func(c <-chan struct{}, what string) {
				t.Helper()
				select {
				case <-c:
				case <-time.After(30 * time.Second):
					t.Fatalf("%s: no wake-up in 30 s", what)
				}
			}

			w := hub.Watch("f", pgstore.KeyHash(key), 0)
			defer w.Release()
			// A waiter reads its page first, through the node: a
			// following node's round, which the waiter's read comes
			// after (a node's first round reads no log: it has no
			// snapshot to read it from).
			if err := hub.Check(ctx); err != nil {
				t.Fatal(err)
			}
			checks := hub.Stats().Checks
			if err := other.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: json.RawMessage(`{}`)}, formsapi.Metadata{}); err != nil {
				t.Fatal(err)
			}
			woken(w.Form, "another node's submission")

			// End the listening connection: the node's own, found by
			// its channel, the one of this schema's change log.
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var oid uint32
			if err := conn.QueryRow(ctx, "SELECT $1::regclass::oid", pgx.Identifier{schema, "formsapi_changes"}.Sanitize()).Scan(&oid); err != nil {
				t.Fatal(err)
			}
			listen := fmt.Sprintf(`LISTEN "formsapi_changes_%d"`, oid)
			var ended int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1) t`, listen).Scan(&ended); err != nil {
				t.Fatal(err)
			}
			if ended != 1 {
				t.Fatalf("%d listening connections ended, want 1", ended)
			}

			k := hub.Watch("f", pgstore.KeyHash(key), 1)
			defer k.Release()
			if err := other.RevokeKey(ctx, key); err != nil {
				t.Fatal(err)
			}
			woken(k.Key, "another node's revocation, after the listening connection ended")
			if hub.Stats().Checks == checks {
				t.Error("woken without a check")
			}
		})
	}
}
