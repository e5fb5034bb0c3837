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

// grantClauses checks the KeyAuthorizer and KeyManager contracts on stores
// from open, each loaded with DefaultSeed: grants of unscoped, scoped and
// expiring keys, refused AddKeyWith calls that change nothing (among them
// account IDs beyond formsapi.DefaultLimits), ListKeys, and last-used
// times.
//
// Each clause gives open a fresh Seed.Clock. Expiry is checked by moving
// that clock, so the clauses that need it skip on a store that never
// reads it; CreatedAt, RevokedAt and LastUsedAt are checked exactly on a
// store that does, and within a second of the wall clock on one that
// does not.
func grantClauses(t *testing.T, open func(t *testing.T, seed Seed) grantStore, cfg *config) {
	ctx := context.Background()
	// clocked opens a store on DefaultSeed and a fresh clock.
	clocked := func(t *testing.T) (grantStore, *Clock) {
		t.Helper()
		seed := DefaultSeed()
		seed.Clock = newClock()
		return open(t, seed), seed.Clock
	}
	// keepsTime reports whether s keeps time by clock: whether it has read
	// it, once asked to authorize a live key (of AccountB, whose keys no
	// clause lists) if it had not yet.
	keepsTime := func(s grantStore, clock *Clock) bool {
		if !clock.read() {
			s.Authorize(ctx, KeyB)
		}
		return clock.read()
	}
	// needsClock skips a clause that must move the store's clock.
	needsClock := func(t *testing.T, s grantStore, clock *Clock) {
		t.Helper()
		if !keepsTime(s, clock) {
			t.Skip("the store never read seed.Clock: have the factory give it seed.Clock.Now as its clock (see storetest.Clock) to check expiry without waiting for it")
		}
	}
	// stamped checks that got is when an event happened: exactly want on a
	// store that keeps time by the suite's clock, else within a second of
	// the wall clock's from and now.
	stamped := func(t *testing.T, what string, got time.Time, exact bool, want, from time.Time) {
		t.Helper()
		if exact && !got.Equal(want) {
			t.Errorf("%s is %s, want %s: the time of the store's clock then", what, got, want)
		}
		if !exact && (got.Before(from.Add(-time.Second)) || got.After(time.Now().Add(time.Second))) {
			t.Errorf("%s is %s, not the time it happened (from %s)", what, got, from)
		}
	}
	grant := func(t *testing.T, s grantStore, key string) formsapi.Grant {
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
	invalid := func(t *testing.T, s grantStore, key string) {
		t.Helper()
		if g, err := s.Authorize(ctx, key); !errors.Is(err, formsapi.ErrInvalidKey) || g.AccountID != "" || g.Forms != nil {
			t.Errorf("Authorize: got (%+v, %v), want ErrInvalidKey", g, err)
		}
		if account, err := s.ResolveKey(ctx, key); !errors.Is(err, formsapi.ErrInvalidKey) {
			t.Errorf("ResolveKey: got (%q, %v), want ErrInvalidKey", account, err)
		}
	}

	t.Run("UnscopedKeys", func(t *testing.T) {
		cfg.parallel(t)
		s, _ := clocked(t)
		for key, account := range map[string]string{KeyA: AccountA, KeyA2: AccountA, KeyB: AccountB} {
			g := grant(t, s, key)
			if g.AccountID != account || g.Forms != nil || !g.ExpiresAt.IsZero() {
				t.Errorf("grant %+v, want account %q, every form (nil), no expiry", g, account)
			}
		}
	})
	t.Run("InvalidKeys", func(t *testing.T) {
		cfg.parallel(t)
		s, _ := clocked(t)
		invalid(t, s, KeyNotAdded)
		invalid(t, s, KeyRevoked)
		invalid(t, s, "")
	})
	t.Run("ScopedKey", func(t *testing.T) {
		cfg.parallel(t)
		s, _ := clocked(t)
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
		cfg.parallel(t)
		s, clock := clocked(t)
		key := mustNewKey()
		at := clock.peek().Add(time.Hour + 123456789*time.Nanosecond).In(time.FixedZone("X", -7*3600))
		if err := s.AddKeyWith(ctx, key, AccountB, formsapi.KeyOptions{ExpiresAt: at}); err != nil {
			t.Fatalf("AddKeyWith: %v", err)
		}
		g := grant(t, s, key)
		if want := at.Truncate(time.Microsecond); !g.ExpiresAt.Equal(want) || g.Forms != nil || g.AccountID != AccountB {
			t.Errorf("grant %+v, want account %q, every form, expiry %s", g, AccountB, want)
		}
	})
	t.Run("ExpiredKey", func(t *testing.T) {
		cfg.parallel(t)
		s, clock := clocked(t)
		needsClock(t, s, clock)
		key := mustNewKey()
		if err := s.AddKeyWith(ctx, key, AccountA, formsapi.KeyOptions{ExpiresAt: clock.peek().Add(time.Hour)}); err != nil {
			t.Fatalf("AddKeyWith: %v", err)
		}
		// Used while live, so that a store that caches grants must expire
		// the cached one.
		grant(t, s, key)
		clock.Advance(time.Hour - time.Microsecond)
		grant(t, s, key) // live to the last microsecond
		clock.Advance(time.Microsecond)
		invalid(t, s, key) // expired at ExpiresAt itself
		clock.Advance(time.Hour)
		invalid(t, s, key)
	})
	t.Run("NotAliased", func(t *testing.T) {
		cfg.parallel(t)
		s, _ := clocked(t)
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
		cfg.parallel(t)
		s, _ := clocked(t)
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
		says    string        // any message when ""
		advance time.Duration // the store's clock moves this far first; needs a store that keeps time by it
	}{
		{"EmptyForms", "", formsapi.KeyOptions{Forms: []string{}}, formsapi.ErrInvalidInput, AccountA, "", 0},
		{"MalformedFormID", "", formsapi.KeyOptions{Forms: []string{FormBusy, "a/b"}}, formsapi.ErrInvalidInput, AccountA, "", 0},
		{"TooManyForms", "", formsapi.KeyOptions{Forms: tooMany}, formsapi.ErrInvalidInput, AccountA, "", 0},
		{"ExpiresInThePast", "", formsapi.KeyOptions{ExpiresAt: past}, formsapi.ErrInvalidInput, AccountA, "", 0},
		{"MalformedKey", "a key", formsapi.KeyOptions{}, formsapi.ErrInvalidInput, AccountA, "", 0},
		{"DuplicateKey", KeyA, formsapi.KeyOptions{Forms: []string{FormBusy}}, formsapi.ErrKeyExists, AccountA, "", 0},
		{"RevokedKey", KeyRevoked, formsapi.KeyOptions{Forms: []string{FormBusy}}, formsapi.ErrKeyExists, AccountA, "", 0},
		{"EmptyAccountID", "", formsapi.KeyOptions{}, formsapi.ErrInvalidInput, "", "", 0},
		{"AccountIDOneByteOverMaxAccountIDBytes", "", formsapi.KeyOptions{}, formsapi.ErrInvalidInput, accountOfSize(formsapi.DefaultLimits.MaxAccountIDBytes + 1), "MaxAccountIDBytes", 0},
		{"AccountIDControl", "", formsapi.KeyOptions{}, formsapi.ErrInvalidInput, badAccounts[0], "control", 0},
		{"AccountIDInvalidUTF8", "", formsapi.KeyOptions{}, formsapi.ErrInvalidInput, badAccounts[1], "UTF-8", 0},
		// After the wall clock, but not after the store's: the store would
		// never grant it.
		{"ExpiresBeforeTheStoresClock", "", formsapi.KeyOptions{ExpiresAt: time.Now().Add(time.Hour)}, formsapi.ErrInvalidInput, AccountA, "", 2 * time.Hour},
	}
	for _, c := range refused {
		t.Run("Refused/"+c.name, func(t *testing.T) {
			cfg.parallel(t)
			s, clock := clocked(t)
			if c.advance != 0 {
				needsClock(t, s, clock)
				clock.Advance(c.advance)
			}
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
		cfg.parallel(t)
		s, _ := clocked(t)
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
		cfg.parallel(t)
		s, clock := clocked(t)
		exact := keepsTime(s, clock)
		seeded := clock.peek() // when the seed's keys were added and revoked
		clock.Advance(90 * time.Second)
		created := clock.peek()
		scoped := mustNewKey()
		expires := created.Add(48 * time.Hour)
		start := time.Now()
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
		if !slices.Equal(k.Forms, []string{FormSmall}) || !k.ExpiresAt.Equal(expires) || !k.RevokedAt.IsZero() {
			t.Errorf("scoped key: %+v", k)
		}
		stamped(t, "the new key's CreatedAt", k.CreatedAt, exact, created, start)
		if r := byID[formsapi.KeyID(KeyRevoked)]; r.RevokedAt.IsZero() {
			t.Errorf("revoked key listed without RevokedAt: %+v", r)
		} else if exact && (!r.RevokedAt.Equal(seeded) || !r.CreatedAt.Equal(seeded)) {
			t.Errorf("the seed's revoked key was created at %s and revoked at %s, want both %s: the time of the store's clock", r.CreatedAt, r.RevokedAt, seeded)
		}
		if a := byID[formsapi.KeyID(KeyA)]; a.Forms != nil || !a.ExpiresAt.IsZero() || !a.RevokedAt.IsZero() {
			t.Errorf("unrestricted key: %+v", a)
		}
		none, err := s.ListKeys(ctx, AccountEmpty)
		if err != nil || len(none) != 0 {
			t.Errorf("ListKeys of an account without keys: (%v, %v), want an empty list", none, err)
		}

		clock.Advance(time.Minute)
		revoked, start := clock.peek(), time.Now()
		if err := s.RevokeKey(ctx, scoped); err != nil {
			t.Fatalf("RevokeKey: %v", err)
		}
		keys, err = s.ListKeys(ctx, AccountA)
		if err != nil {
			t.Fatalf("ListKeys after RevokeKey: %v", err)
		}
		for _, k := range keys {
			if k.ID == formsapi.KeyID(scoped) {
				stamped(t, "the revoked key's RevokedAt", k.RevokedAt, exact, revoked, start)
			}
		}
	})
	t.Run("LastUsed", func(t *testing.T) {
		cfg.parallel(t)
		s, clock := clocked(t)
		exact := keepsTime(s, clock)
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
		clock.Advance(5 * time.Second)
		used, start := clock.peek(), time.Now()
		grant(t, s, KeyA2)
		stamped(t, "LastUsedAt after a use", lastUsed(KeyA2), exact, used, start)
		if at := lastUsed(KeyA); !at.IsZero() {
			t.Errorf("a key not used has LastUsedAt %s", at)
		}
	})
}
