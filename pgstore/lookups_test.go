package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/internal/testenv"
	"github.com/formsapi/formsapi/pgstore"
)

// TestKeyLookupsBatched holds one key lookup in flight (its statement
// waits on a lock on the forms table) while others arrive: they wait, and
// go together in one statement when it returns, each with its own answer,
// exactly as if it had run alone: live and revoked keys, unknown keys,
// forms of the key's account and of another, no form asked for, the same
// key twice; without a form, the version of the account's forms list, or
// none when its row is gone. A key revoked after the first lookup started but before the
// others arrived is refused to them: a waiting lookup never sees the
// database as it was before its request. A waiting lookup whose context
// ends returns at once, while the statement ahead is still blocked.
func TestKeyLookupsBatched(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pooledSchema(t)
	other, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	is.NoErr(err) // a second node, for the setup and the revocation
	defer other.Close()
	s, c := countedStore(t, dsn, schema)
	keys := map[string]string{}
	for _, k := range []struct{ name, account string }{{"a", "acct-a"}, {"b", "acct-b"}, {"c", "acct-c"}, {"revoked", "acct-a"}, {"revokedLate", "acct-a"}} {
		key, err := formsapi.NewKey()
		is.NoErr(err)
		is.NoErr(other.AddKeyWith(ctx, key, k.account, formsapi.KeyOptions{})) // add key
		keys[k.name] = key
	}
	unknown, err := formsapi.NewKey()
	is.NoErr(err)
	keys["unknown"] = unknown
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	is.NoErr(other.AddForm(ctx, "acct-a", formsapi.Form{ID: "fa", CreatedAt: t0})) // add form of a
	is.NoErr(other.AddForm(ctx, "acct-b", formsapi.Form{ID: "fb", CreatedAt: t0})) // add form of b
	is.NoErr(other.RevokeKey(ctx, keys["revoked"]))
	_, err = pgstore.Pool(other).Exec(ctx, "DELETE FROM "+quote(schema)+".formsapi_form_lists WHERE account_id = 'acct-c'")
	is.NoErr(err) // acct-c's forms list has no version: it cannot be told
	lists := map[string]int64{}
	for _, account := range []string{"acct-a", "acct-b"} {
		var v int64
		is.NoErr(pgstore.Pool(other).QueryRow(ctx, "SELECT version FROM "+quote(schema)+".formsapi_form_lists WHERE account_id = $1", account).Scan(&v))
		lists[account] = v
	}

	// The first lookup's statement joins the forms table: lock it.
	blocker, err := pgx.Connect(ctx, dsn)
	is.NoErr(err)
	defer blocker.Close(ctx)
	tx, err := blocker.Begin(ctx)
	is.NoErr(err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, "LOCK TABLE "+quote(schema)+".formsapi_forms IN ACCESS EXCLUSIVE MODE")
	is.NoErr(err)
	c.take()
	first := make(chan error, 1)
	go func() {
		g, f, err := s.AuthorizeForm(ctx, keys["a"], "fa")
		if err == nil && (g.AccountID != "acct-a" || !f.Found) {
			err = errors.New("wrong answer")
		}
		first <- err
	}()
	pgtest.WaitForLock(t, dsn, "query LIKE $1", "%"+schema+"%")
	is.NoErr(other.RevokeKey(ctx, keys["revokedLate"])) // committed before the next lookups arrive

	type lookup struct {
		key, formID string // formID "": AuthorizeForms
		account     string // "": refused
		found       bool   // the form, or the forms list's version
	}
	cases := []lookup{
		{"a", "fa", "acct-a", true},
		{"a", "fa", "acct-a", true},
		{"a", "fb", "acct-a", false}, // another account's form
		{"a", "nope", "acct-a", false},
		{"a", "", "acct-a", true},
		{"b", "fb", "acct-b", true},
		{"b", "", "acct-b", true},
		{"c", "", "acct-c", false},
		{"c", "fa", "acct-c", false},
		{"revoked", "fa", "", false},
		{"revokedLate", "fa", "", false},
		{"revokedLate", "", "", false},
		{"unknown", "fa", "", false},
	}
	var wg sync.WaitGroup
	for _, tc := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var (
				g   formsapi.Grant
				f   struct{ Found bool }
				err error
			)
			if tc.formID == "" {
				g2, at, err2 := s.AuthorizeForms(ctx, keys[tc.key])
				g, f.Found, err = g2, at.Known, err2
				if at.Known && at.Version != lists[tc.account] {
					t.Errorf("key %s: forms list version %d, want %d", tc.key, at.Version, lists[tc.account])
				}
			} else {
				g2, f2, err2 := s.AuthorizeForm(ctx, keys[tc.key], tc.formID)
				g, f.Found, err = g2, f2.Found, err2
			}
			switch {
			case tc.account == "" && !errors.Is(err, formsapi.ErrInvalidKey):
				t.Errorf("key %s, form %q: %v, want ErrInvalidKey", tc.key, tc.formID, err)
			case tc.account != "" && err != nil:
				t.Errorf("key %s, form %q: %v", tc.key, tc.formID, err)
			case tc.account != "" && (g.AccountID != tc.account || f.Found != tc.found):
				t.Errorf("key %s, form %q: account %q, form found %v; want %q, %v", tc.key, tc.formID, g.AccountID, f.Found, tc.account, tc.found)
			}
		}()
	}
	testenv.WaitFor(t, func() bool { return pgstore.WaitingLookups(s) == len(cases) })

	// One more, given up while it waits: it returns now, the lock still held.
	gone, cancel := context.WithCancel(ctx)
	abandoned := make(chan error, 1)
	go func() {
		_, _, err := s.AuthorizeForm(gone, keys["a"], "fa")
		abandoned <- err
	}()
	testenv.WaitFor(t, func() bool { return pgstore.WaitingLookups(s) == len(cases)+1 })
	cancel()
	is.True(errors.Is(<-abandoned, context.Canceled)) // a waiting lookup ends with its context

	is.NoErr(tx.Rollback(ctx))
	is.NoErr(<-first) // the lookup that was in flight
	wg.Wait()
	statements, _ := c.take()
	var single, batched int
	for _, st := range statements {
		switch {
		case strings.Contains(st, "unnest("):
			batched++
		case strings.Contains(st, "formsapi_keys"):
			single++
		}
	}
	is.Equal(single, 1)  // the lookup in flight, alone
	is.Equal(batched, 1) // every lookup that waited, in one statement
}
