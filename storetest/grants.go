package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/formsapi/formsapi"
)

// GrantStore is a store with scoped and expiring keys: memstore,
// sqlitestore and pgstore are each one.
type GrantStore interface {
	formsapi.KeyManager
	RevokeKey(ctx context.Context, key string) error
}

// RunGrants checks the KeyAuthorizer and KeyManager contracts on stores
// from open, each loaded with DefaultSeed: grants of unscoped, scoped and
// expiring keys, refused AddKeyWith calls that change nothing (among them
// account IDs beyond formsapi.DefaultLimits), ListKeys, and last-used
// times.
func RunGrants(t *testing.T, open func(t *testing.T, seed Seed) GrantStore) {
	seed := DefaultSeed()
	ctx := context.Background()
	grant := func(t *testing.T, s GrantStore, key string) formsapi.Grant {
		t.Helper()
		g, err := s.Authorize(ctx, key)
		if err != nil {
			t.Fatalf("Authorize: %v", err)
		}
		if account, err := s.ResolveKey(ctx, key); err != nil || account != g.AccountID {
			t.Errorf("ResolveKey disagrees with Authorize: (%q, %v), grant of %q", account, err, g.AccountID)
		}
		return g
	}
	invalid := func(t *testing.T, s GrantStore, key string) {
		t.Helper()
		if g, err := s.Authorize(ctx, key); !errors.Is(err, formsapi.ErrInvalidKey) || g.AccountID != "" || g.Forms != nil {
			t.Errorf("Authorize: got (%+v, %v), want ErrInvalidKey", g, err)
		}
		if account, err := s.ResolveKey(ctx, key); !errors.Is(err, formsapi.ErrInvalidKey) {
			t.Errorf("ResolveKey: got (%q, %v), want ErrInvalidKey", account, err)
		}
	}

	t.Run("UnscopedKeys", func(t *testing.T) {
		s := open(t, seed)
		for key, account := range map[string]string{KeyA: AccountA, KeyA2: AccountA, KeyB: AccountB} {
			g := grant(t, s, key)
			if g.AccountID != account || g.Forms != nil || !g.ExpiresAt.IsZero() {
				t.Errorf("grant %+v, want account %q, every form (nil), no expiry", g, account)
			}
		}
	})
	t.Run("InvalidKeys", func(t *testing.T) {
		s := open(t, seed)
		invalid(t, s, KeyNotAdded)
		invalid(t, s, KeyRevoked)
		invalid(t, s, "")
	})
	t.Run("ScopedKey", func(t *testing.T) {
		s := open(t, seed)
		key := mustNewKey()
		if err := s.AddKeyWith(ctx, key, AccountA, formsapi.KeyOptions{Forms: []string{FormSmall, FormBusy, FormSmall, "not-yet-created"}}); err != nil {
			t.Fatalf("AddKeyWith: %v", err)
		}
		g := grant(t, s, key)
		got := slices.Sorted(slices.Values(g.Forms))
		if want := []string{FormBusy, "not-yet-created", FormSmall}; g.AccountID != AccountA || !slices.Equal(got, want) {
			t.Errorf("grant %+v, want account %q and forms %v", g, AccountA, want)
		}
		if !g.Allows(FormBusy) || g.Allows(FormEmpty) {
			t.Errorf("grant %+v allows the wrong forms", g)
		}
	})
	t.Run("ExpiryKept", func(t *testing.T) {
		s := open(t, seed)
		key := mustNewKey()
		at := time.Now().Add(time.Hour + 123456789*time.Nanosecond).In(time.FixedZone("X", -7*3600))
		if err := s.AddKeyWith(ctx, key, AccountB, formsapi.KeyOptions{ExpiresAt: at}); err != nil {
			t.Fatalf("AddKeyWith: %v", err)
		}
		g := grant(t, s, key)
		if want := at.Truncate(time.Microsecond); !g.ExpiresAt.Equal(want) || g.Forms != nil || g.AccountID != AccountB {
			t.Errorf("grant %+v, want account %q, every form, expiry %s", g, AccountB, want)
		}
	})
	t.Run("ExpiredKey", func(t *testing.T) {
		s := open(t, seed)
		key := mustNewKey()
		at := time.Now().Add(150 * time.Millisecond)
		if err := s.AddKeyWith(ctx, key, AccountA, formsapi.KeyOptions{ExpiresAt: at}); err != nil {
			t.Fatalf("AddKeyWith: %v", err)
		}
		// Used while live (on a slow machine it may have expired already),
		// so that a store that caches grants must expire the cached one.
		if _, err := s.Authorize(ctx, key); err != nil && (!errors.Is(err, formsapi.ErrInvalidKey) || time.Now().Before(at)) {
			t.Fatalf("Authorize before expiry: %v", err)
		}
		time.Sleep(time.Until(at) + 10*time.Millisecond)
		invalid(t, s, key)
	})
	t.Run("NotAliased", func(t *testing.T) {
		s := open(t, seed)
		key := mustNewKey()
		forms := []string{FormBusy, FormSmall}
		if err := s.AddKeyWith(ctx, key, AccountA, formsapi.KeyOptions{Forms: forms}); err != nil {
			t.Fatalf("AddKeyWith: %v", err)
		}
		forms[0] = FormEmpty // the caller's slice is the caller's
		g := grant(t, s, key)
		for i := range g.Forms {
			g.Forms[i] = "changed"
		}
		if g2 := grant(t, s, key); !slices.Equal(slices.Sorted(slices.Values(g2.Forms)), []string{FormBusy, FormSmall}) {
			t.Errorf("the key's forms changed with a caller's slice: %v", g2.Forms)
		}
	})
	t.Run("CanceledContext", func(t *testing.T) {
		s := open(t, seed)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if g, err := s.Authorize(cctx, KeyA); !errors.Is(err, context.Canceled) {
			t.Errorf("Authorize: got (%+v, %v), want context.Canceled", g, err)
		}
	})

	past := time.Now().Add(-time.Minute)
	tooMany := make([]string, formsapi.DefaultLimits.MaxKeyForms+1)
	for i := range tooMany {
		tooMany[i] = "form-" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
	}
	refused := []struct {
		name    string
		key     string
		o       formsapi.KeyOptions
		want    error
		account string
		says    string // any message when ""
	}{
		{"EmptyForms", "", formsapi.KeyOptions{Forms: []string{}}, formsapi.ErrInvalidInput, AccountA, ""},
		{"MalformedFormID", "", formsapi.KeyOptions{Forms: []string{FormBusy, "a/b"}}, formsapi.ErrInvalidInput, AccountA, ""},
		{"TooManyForms", "", formsapi.KeyOptions{Forms: tooMany}, formsapi.ErrInvalidInput, AccountA, ""},
		{"ExpiresInThePast", "", formsapi.KeyOptions{ExpiresAt: past}, formsapi.ErrInvalidInput, AccountA, ""},
		{"MalformedKey", "a key", formsapi.KeyOptions{}, formsapi.ErrInvalidInput, AccountA, ""},
		{"DuplicateKey", KeyA, formsapi.KeyOptions{Forms: []string{FormBusy}}, formsapi.ErrKeyExists, AccountA, ""},
		{"RevokedKey", KeyRevoked, formsapi.KeyOptions{Forms: []string{FormBusy}}, formsapi.ErrKeyExists, AccountA, ""},
		{"EmptyAccountID", "", formsapi.KeyOptions{}, formsapi.ErrInvalidInput, "", ""},
		{"AccountIDOneByteOverMaxAccountIDBytes", "", formsapi.KeyOptions{}, formsapi.ErrInvalidInput, accountOfSize(formsapi.DefaultLimits.MaxAccountIDBytes + 1), "MaxAccountIDBytes"},
		{"AccountIDControl", "", formsapi.KeyOptions{}, formsapi.ErrInvalidInput, badAccounts[0], "control"},
		{"AccountIDInvalidUTF8", "", formsapi.KeyOptions{}, formsapi.ErrInvalidInput, badAccounts[1], "UTF-8"},
	}
	for _, c := range refused {
		t.Run("Refused/"+c.name, func(t *testing.T) {
			s := open(t, seed)
			key := c.key
			if key == "" {
				key = mustNewKey()
			}
			// The account's keys, and AccountA's; ListKeys of an account
			// ID that is not text may fail, and no key can be added to one.
			accounts := []string{AccountA}
			if c.account != AccountA && utf8.ValidString(c.account) {
				accounts = append(accounts, c.account)
			}
			count := func() int {
				t.Helper()
				n := 0
				for _, a := range accounts {
					keys, err := s.ListKeys(ctx, a)
					if err != nil {
						t.Fatalf("ListKeys(%q): %v", a, err)
					}
					n += len(keys)
				}
				return n
			}
			before := count()
			err := s.AddKeyWith(ctx, key, c.account, c.o)
			if !errors.Is(err, c.want) {
				t.Errorf("AddKeyWith: got %v, want %v", err, c.want)
			}
			if c.says != "" && !errorSays(err, c.says) {
				t.Errorf("the error %.300q does not say %q", err, c.says)
			}
			if after := count(); after != before {
				t.Errorf("a refused AddKeyWith changed the account's keys: %d before, %d after", before, after)
			}
			if c.key == "" {
				invalid(t, s, key)
			}
		})
	}

	t.Run("AccountIDAtTheLimit", func(t *testing.T) {
		s := open(t, seed)
		key := mustNewKey()
		account := accountOfSize(formsapi.DefaultLimits.MaxAccountIDBytes)
		if err := s.AddKeyWith(ctx, key, account, formsapi.KeyOptions{Forms: []string{FormBusy}}); err != nil {
			t.Fatalf("AddKeyWith for an account ID of exactly MaxAccountIDBytes: %v", err)
		}
		if g := grant(t, s, key); g.AccountID != account || !slices.Equal(g.Forms, []string{FormBusy}) {
			t.Errorf("grant %+v, want account %q and form %q", g, account, FormBusy)
		}
		keys, err := s.ListKeys(ctx, account)
		if err != nil || len(keys) != 1 || keys[0].AccountID != account {
			t.Errorf("ListKeys(%.20q…): (%+v, %v), want the one key", account, keys, err)
		}
	})
	t.Run("ListKeys", func(t *testing.T) {
		s := open(t, seed)
		scoped := mustNewKey()
		expires := time.Now().Add(48 * time.Hour).Truncate(time.Microsecond)
		start := time.Now().Add(-time.Second)
		if err := s.AddKeyWith(ctx, scoped, AccountA, formsapi.KeyOptions{Forms: []string{FormSmall}, ExpiresAt: expires}); err != nil {
			t.Fatalf("AddKeyWith: %v", err)
		}
		keys, err := s.ListKeys(ctx, AccountA)
		if err != nil {
			t.Fatalf("ListKeys: %v", err)
		}
		byID := map[string]formsapi.KeyInfo{}
		var ids []string
		for _, k := range keys {
			byID[k.ID] = k
			ids = append(ids, k.ID)
			if k.AccountID != AccountA {
				t.Errorf("key %.8s… of account %q listed for %q", k.ID, k.AccountID, AccountA)
			}
		}
		want := []string{formsapi.KeyID(KeyA), formsapi.KeyID(KeyA2), formsapi.KeyID(KeyRevoked), formsapi.KeyID(scoped)}
		if !slices.Equal(slices.Sorted(slices.Values(ids)), slices.Sorted(slices.Values(want))) {
			t.Fatalf("ListKeys(%q) lists %d keys, want the account's %d (revoked included, no other account's)", AccountA, len(ids), len(want))
		}
		if ids[len(ids)-1] != formsapi.KeyID(scoped) {
			t.Errorf("the newest key is not last: keys are listed oldest first")
		}
		k := byID[formsapi.KeyID(scoped)]
		if !slices.Equal(k.Forms, []string{FormSmall}) || !k.ExpiresAt.Equal(expires) || !k.RevokedAt.IsZero() ||
			k.CreatedAt.Before(start) || k.CreatedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("scoped key: %+v", k)
		}
		if r := byID[formsapi.KeyID(KeyRevoked)]; r.RevokedAt.IsZero() {
			t.Errorf("revoked key listed without RevokedAt: %+v", r)
		}
		if a := byID[formsapi.KeyID(KeyA)]; a.Forms != nil || !a.ExpiresAt.IsZero() || !a.RevokedAt.IsZero() {
			t.Errorf("unrestricted key: %+v", a)
		}
		none, err := s.ListKeys(ctx, AccountEmpty)
		if err != nil || len(none) != 0 {
			t.Errorf("ListKeys of an account without keys: (%v, %v), want an empty list", none, err)
		}
	})
	t.Run("LastUsed", func(t *testing.T) {
		s := open(t, seed)
		lastUsed := func(key string) time.Time {
			t.Helper()
			keys, err := s.ListKeys(ctx, AccountA)
			if err != nil {
				t.Fatalf("ListKeys: %v", err)
			}
			for _, k := range keys {
				if k.ID == formsapi.KeyID(key) {
					return k.LastUsedAt
				}
			}
			t.Fatalf("key not listed")
			return time.Time{}
		}
		if at := lastUsed(KeyA2); !at.IsZero() {
			t.Errorf("a key never used has LastUsedAt %s", at)
		}
		before := time.Now().Add(-time.Millisecond)
		grant(t, s, KeyA2)
		after := time.Now().Add(time.Millisecond)
		at := lastUsed(KeyA2)
		if at.Before(before) || at.After(after) {
			t.Errorf("LastUsedAt %s after a use between %s and %s", at, before, after)
		}
		if at := lastUsed(KeyA); !at.IsZero() {
			t.Errorf("a key not used has LastUsedAt %s", at)
		}
	})
}
