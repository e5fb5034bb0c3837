package sqlitestore_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/waittest"
	"github.com/formsapi/formsapi/sqlitestore"
)

// waitFixture opens a file with a form and a key, a handler over it with
// opts, and, when other, a second store on the same file (another
// process, as SQLite sees it: its own connections) that writes.
func waitFixture(t *testing.T, other bool, opts ...formsapi.Option) waittest.Fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "forms.db")
	// The check's interval never passes in a test: Check stands for it.
	s, err := sqlitestore.Open(path, sqlitestore.WithWaitCheck(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	writer := s
	if other {
		if writer, err = sqlitestore.Open(path); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { writer.Close() })
	}
	return waittest.StoreFixture(t, formsapi.NewHandler(s, s, opts...), sqlitestore.WaitHub(s), writer, other)
}

// TestWaitOwnWrites: the store's own writes wake its waiters directly.
func TestWaitOwnWrites(t *testing.T) {
	t.Parallel()
	waittest.Run(t, func(t *testing.T, opts ...formsapi.Option) waittest.Fixture { return waitFixture(t, false, opts...) })
}

// TestWaitOtherProcess: another process's writes on the same file wake
// the waiters at the store's next check, one statement for all of them.
func TestWaitOtherProcess(t *testing.T) {
	t.Parallel()
	waittest.Run(t, func(t *testing.T, opts ...formsapi.Option) waittest.Fixture { return waitFixture(t, true, opts...) })
}

// TestWaitCheckIsOneStatement: one check reads every form and key waited
// on at once, and names only what changed.
func TestWaitCheckIsOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "forms.db")
	s, err := sqlitestore.Open(path, sqlitestore.WithWaitCheck(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keys := map[string][32]byte{}
	for _, id := range []string{"a", "b", "c"} {
		if err := s.AddForm(ctx, "acct", formsapi.Form{ID: id, Title: id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"k1", "k2"} {
		k, _ := formsapi.NewKey()
		if err := s.AddKey(ctx, k, "acct"); err != nil {
			t.Fatal(err)
		}
		keys[name] = sqlitestore.KeyHash(k)
		if name == "k2" {
			other, err := sqlitestore.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := other.RevokeKey(ctx, k); err != nil {
				t.Fatal(err)
			}
			if err := other.AddSubmission(ctx, formsapi.Submission{FormID: "b", Data: json.RawMessage(`{}`)}, formsapi.Metadata{}); err != nil {
				t.Fatal(err)
			}
			other.Close()
		}
	}
	hub := sqlitestore.WaitHub(s)
	a := hub.Watch("a", keys["k1"], 0)
	b := hub.Watch("b", keys["k1"], 0)
	c := hub.Watch("gone", keys["k2"], 0)
	defer a.Release()
	defer b.Release()
	defer c.Release()
	before := hub.Stats().Checks
	if err := hub.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if n := hub.Stats().Checks - before; n != 1 {
		t.Errorf("%d checks for three forms and two keys, want 1", n)
	}
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	if closed(a.Form) || !closed(b.Form) || !closed(c.Form) {
		t.Errorf("woken: a (no change) %t, b (a submission) %t, gone (no form) %t", closed(a.Form), closed(b.Form), closed(c.Form))
	}
	if closed(a.Key) || !closed(c.Key) {
		t.Errorf("woken: k1 (live) %t, k2 (revoked) %t", closed(a.Key), closed(c.Key))
	}
}
