package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
)

// storeClauses checks the Store contract, one subtest per clause, each on
// a fresh store from open loaded with DefaultSeed but for the clauses that
// only read, which share one. Stores that also have
// the Writer methods are further checked for pages that stay right while
// submissions are added between them.
func storeClauses(t *testing.T, open Open, cfg *config) {
	seed := DefaultSeed()
	x := expectations(seed)
	ctx := context.Background()
	reads := readers(t, open, seed)

	t.Run("ListForms/OnlyTheAccountsForms", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, account := range []string{AccountA, AccountB} {
			got := walkForms(t, s, account, formsapi.Query{Limit: MaxLimit})
			want := x.formIDs(account)
			if ids := sortedFormIDs(got); !slices.Equal(ids, want) {
				t.Errorf("forms of %s: got %v, want %v", account, ids, want)
			}
		}
	})
	t.Run("ListForms/Fields", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, f := range walkForms(t, s, AccountA, formsapi.Query{Limit: MaxLimit}) {
			want, ok := x.forms[f.ID]
			if !ok {
				t.Errorf("unexpected form %q", f.ID)
				continue
			}
			if msg := diffForm(want.Form, f); msg != "" {
				t.Errorf("form %q: %s", f.ID, msg)
			}
		}
	})
	t.Run("ListForms/AccountWithoutForms", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		p, err := s.ListForms(ctx, AccountEmpty, formsapi.Query{Limit: 10})
		if err != nil {
			t.Fatalf("ListForms of an account without forms: %v (want an empty page, not an error)", err)
		}
		if len(p.Items) != 0 || p.NextCursor != "" {
			t.Errorf("got %d forms and cursor %q, want none", len(p.Items), p.NextCursor)
		}
	})
	t.Run("ListForms/Order", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		checkOrder(t, "forms", func(o formsapi.Order) []time.Time {
			return formTimes(walkForms(t, s, AccountA, formsapi.Query{Limit: MaxLimit, Order: o}))
		}, func(o formsapi.Order) []string {
			return formKeys(walkForms(t, s, AccountA, formsapi.Query{Limit: MaxLimit, Order: o}))
		})
	})
	t.Run("ListForms/Pagination", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
			all := formKeys(walkForms(t, s, AccountA, formsapi.Query{Limit: MaxLimit, Order: o}))
			for limit := 1; limit <= len(all)+1; limit++ {
				got := formKeys(walkForms(t, s, AccountA, formsapi.Query{Limit: limit, Order: o}))
				if !slices.Equal(got, all) {
					t.Errorf("order %s, limit %d: pages give %v, one page gives %v", o, limit, got, all)
				}
			}
		}
	})
	t.Run("ListForms/Filters", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, r := range x.ranges() {
			for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
				q := formsapi.Query{Limit: 2, Order: o, Since: r.since, Until: r.until}
				got := sortedFormIDs(walkForms(t, s, AccountA, q))
				want := x.formIDsIn(AccountA, q)
				if !slices.Equal(got, want) {
					t.Errorf("%s, order %s: got %v, want %v", r.name, o, got, want)
				}
			}
		}
	})
	t.Run("ListForms/InvalidCursor", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, c := range invalidCursors {
			_, err := s.ListForms(ctx, AccountA, formsapi.Query{Limit: 10, Cursor: c})
			if !errors.Is(err, formsapi.ErrInvalidCursor) {
				t.Errorf("cursor %q: got error %v, want ErrInvalidCursor", c, err)
			}
		}
	})

	t.Run("ListForms/Limit", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, limit := range badLimits {
			checkBadLimit(t, "ListForms", limit, func() (int, error) {
				p, err := s.ListForms(ctx, AccountA, formsapi.Query{Limit: limit})
				return len(p.Items), err
			})
		}
	})

	t.Run("ListSubmissions/UnknownForm", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		p, err := s.ListSubmissions(ctx, AccountA, FormNone, formsapi.Query{Limit: 10})
		if !errors.Is(err, formsapi.ErrFormNotFound) {
			t.Errorf("got error %v, want ErrFormNotFound", err)
		}
		if len(p.Items) != 0 {
			t.Errorf("got %d submissions with the error, want none", len(p.Items))
		}
	})
	t.Run("ListSubmissions/AnotherAccountsForm", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, c := range []struct{ account, form string }{{AccountA, FormB}, {AccountB, FormBusy}, {AccountEmpty, FormBusy}, {"", FormBusy}} {
			p, err := s.ListSubmissions(ctx, c.account, c.form, formsapi.Query{Limit: 10})
			if !errors.Is(err, formsapi.ErrFormNotFound) {
				t.Errorf("account %q, form %q: got error %v, want ErrFormNotFound", c.account, c.form, err)
			}
			if len(p.Items) != 0 {
				t.Errorf("account %q, form %q: got %d submissions, want none", c.account, c.form, len(p.Items))
			}
		}
	})
	t.Run("ListSubmissions/FormWithoutSubmissions", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		p, err := s.ListSubmissions(ctx, AccountA, FormEmpty, formsapi.Query{Limit: 10})
		if err != nil {
			t.Fatalf("got error %v, want an empty page", err)
		}
		if len(p.Items) != 0 || p.NextCursor != "" {
			t.Errorf("got %d submissions and cursor %q, want none", len(p.Items), p.NextCursor)
		}
	})
	t.Run("ListSubmissions/Fields", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, form := range []string{FormBusy, FormSmall} {
			got := walkSubmissions(t, s, AccountA, form, formsapi.Query{Limit: MaxLimit})
			if len(got) != len(x.subs[form]) {
				t.Errorf("form %s: got %d submissions, want %d", form, len(got), len(x.subs[form]))
			}
			for _, sub := range got {
				want, ok := x.byData[Canonical(sub.Data)]
				if !ok {
					t.Errorf("form %s: unexpected submission data %s", form, sub.Data)
					continue
				}
				if msg := diffSubmission(want.Submission, sub); msg != "" {
					t.Errorf("form %s, data %s: %s", form, sub.Data, msg)
				}
			}
		}
	})
	t.Run("ListSubmissions/NoMetadata", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, form := range []string{FormBusy, FormSmall} {
			for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
				got := walkSubmissions(t, s, AccountA, form, formsapi.Query{Limit: 4, Order: o})
				b, err := json.Marshal(got)
				if err != nil {
					t.Fatalf("marshal: %v", err)
				}
				if bytes.Contains(b, []byte(Canary)) {
					t.Errorf("form %s: internal metadata in the result: %s", form, b)
				}
			}
		}
	})
	t.Run("ListSubmissions/Order", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		list := func(o formsapi.Order) []formsapi.Submission {
			return walkSubmissions(t, s, AccountA, FormBusy, formsapi.Query{Limit: MaxLimit, Order: o})
		}
		checkOrder(t, "submissions", func(o formsapi.Order) []time.Time { return submissionTimes(list(o)) },
			func(o formsapi.Order) []string { return submissionKeys(list(o)) })
	})
	t.Run("ListSubmissions/Pagination", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
			all := submissionKeys(walkSubmissions(t, s, AccountA, FormBusy, formsapi.Query{Limit: MaxLimit, Order: o}))
			for limit := 1; limit <= len(all)+1; limit++ {
				got := submissionKeys(walkSubmissions(t, s, AccountA, FormBusy, formsapi.Query{Limit: limit, Order: o}))
				if !slices.Equal(got, all) {
					t.Errorf("order %s, limit %d: the pages give\n%v\nbut one page gives\n%v", o, limit, got, all)
				}
			}
		}
	})
	t.Run("ListSubmissions/Filters", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, r := range x.ranges() {
			for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
				for _, limit := range []int{3, MaxLimit} {
					q := formsapi.Query{Limit: limit, Order: o, Since: r.since, Until: r.until}
					got := submissionKeys(walkSubmissions(t, s, AccountA, FormBusy, q))
					want := x.submissionKeysIn(FormBusy, q)
					if sorted := slices.Sorted(slices.Values(got)); !slices.Equal(sorted, want) {
						t.Errorf("%s, order %s, limit %d: got %v, want %v", r.name, o, limit, sorted, want)
					}
				}
			}
		}
	})
	t.Run("ListSubmissions/ByteBudget", func(t *testing.T) {
		cfg.parallel(t)
		checkByteBudget(t, reads)
	})
	t.Run("ListSubmissions/InvalidCursor", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, c := range invalidCursors {
			_, err := s.ListSubmissions(ctx, AccountA, FormBusy, formsapi.Query{Limit: 10, Cursor: c})
			if !errors.Is(err, formsapi.ErrInvalidCursor) {
				t.Errorf("cursor %q: got error %v, want ErrInvalidCursor", c, err)
			}
		}
	})
	t.Run("ListSubmissions/Limit", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		for _, limit := range badLimits {
			checkBadLimit(t, "ListSubmissions", limit, func() (int, error) {
				p, err := s.ListSubmissions(ctx, AccountA, FormBusy, formsapi.Query{Limit: limit})
				return len(p.Items), err
			})
		}
	})
	t.Run("ListSubmissions/AddedBetweenPages", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		w, ok := s.(interface {
			AddSubmission(context.Context, formsapi.Submission, formsapi.Metadata) error
		})
		if !ok {
			t.Skip("the store has no AddSubmission method; writes between pages cannot be checked")
		}
		for _, o := range []formsapi.Order{formsapi.Newest, formsapi.Oldest} {
			checkAddedBetweenPages(t, s, w, o)
		}
	})
	t.Run("NotAliased", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		q := formsapi.Query{Limit: MaxLimit}
		before := walkSubmissions(t, s, AccountA, FormBusy, q)
		want, _ := json.Marshal(before)
		for i := range before {
			for j := range before[i].Data {
				before[i].Data[j] = 'X'
			}
			for j := range before[i].Attachments {
				before[i].Attachments[j].FileURL = "mutated"
			}
			before[i].FormID = "mutated"
		}
		after, _ := json.Marshal(walkSubmissions(t, s, AccountA, FormBusy, q))
		if !bytes.Equal(after, want) {
			t.Errorf("changing returned submissions changed the store:\nbefore %s\nafter  %s", want, after)
		}
		forms := walkForms(t, s, AccountA, q)
		wantForms, _ := json.Marshal(forms)
		for i := range forms {
			forms[i].Title = "mutated"
		}
		if got, _ := json.Marshal(walkForms(t, s, AccountA, q)); !bytes.Equal(got, wantForms) {
			t.Errorf("changing returned forms changed the store")
		}
	})
	t.Run("Context", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		expired, cancel := context.WithDeadline(ctx, time.Unix(0, 0))
		defer cancel()
		for _, c := range []struct {
			ctx  context.Context
			want error
		}{{canceled, context.Canceled}, {expired, context.DeadlineExceeded}} {
			if _, err := s.ListForms(c.ctx, AccountA, formsapi.Query{Limit: 10}); !errors.Is(err, c.want) {
				t.Errorf("ListForms: got error %v, want %v", err, c.want)
			}
			if _, err := s.ListSubmissions(c.ctx, AccountA, FormBusy, formsapi.Query{Limit: 10}); !errors.Is(err, c.want) {
				t.Errorf("ListSubmissions: got error %v, want %v", err, c.want)
			}
		}
	})
	t.Run("ConcurrentReads", func(t *testing.T) {
		cfg.parallel(t)
		s := reads
		q := formsapi.Query{Limit: 5, Order: formsapi.Oldest}
		want := submissionKeys(walkSubmissions(t, s, AccountA, FormBusy, q))
		wantForms := formKeys(walkForms(t, s, AccountA, q))
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					if got := submissionKeys(walkSubmissions(t, s, AccountA, FormBusy, q)); !slices.Equal(got, want) {
						t.Errorf("concurrent walk of submissions: got %v, want %v", got, want)
						return
					}
					if got := formKeys(walkForms(t, s, AccountA, q)); !slices.Equal(got, wantForms) {
						t.Errorf("concurrent walk of forms: got %v, want %v", got, wantForms)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
	findClauses(t, open, cfg)
	findWriteClauses(t, open, cfg)
	searchClauses(t, open, cfg)
	totalClauses(t, open, cfg)
	sortClauses(t, open, cfg)
}

// badLimits are limits below 1, which the handler never sends: a store
// returns an error rather than guess.
var badLimits = []int{0, -1, math.MinInt}

// checkBadLimit checks that list, asked for a page of limit items,
// returns an error and no items, and does not panic.
func checkBadLimit(t *testing.T, what string, limit int, list func() (int, error)) {
	t.Helper()
	defer func() {
		if v := recover(); v != nil {
			t.Errorf("%s with limit %d panics (%v), want an error", what, limit, v)
		}
	}()
	n, err := list()
	if err == nil || n != 0 {
		t.Errorf("%s with limit %d: got %d items and error %v, want an error and no items", what, limit, n, err)
	}
}

// invalidCursors are strings no store issues as a cursor.
var invalidCursors = []string{"not a cursor", "\x00", "....", strings.Repeat("z", 2000), "' OR 1=1 --"}

// keyClauses checks the KeyResolver contract on resolvers from open, each
// loaded with DefaultSeed.
func keyClauses(t *testing.T, open func(t *testing.T, seed Seed) formsapi.KeyResolver, cfg *config) {
	seed := DefaultSeed()
	ctx := context.Background()
	resolves := func(t *testing.T, r formsapi.KeyResolver, key, want string) {
		t.Helper()
		got, err := r.ResolveKey(ctx, key)
		if err != nil || got != want {
			t.Errorf("ResolveKey: got (%q, %v), want (%q, nil)", got, err, want)
		}
	}
	invalid := func(t *testing.T, r formsapi.KeyResolver, key string) {
		t.Helper()
		got, err := r.ResolveKey(ctx, key)
		if !errors.Is(err, formsapi.ErrInvalidKey) || got != "" {
			t.Errorf("ResolveKey(%.12q…): got (%q, %v), want ErrInvalidKey", key, got, err)
		}
		// The Errors clause: an error's text goes to logs, never a key.
		if err != nil && len(key) > 8 && strings.Contains(err.Error(), strings.TrimSpace(key)) {
			t.Errorf("ResolveKey(%.12q…): the error's text holds the key: %v", key, err)
		}
	}
	reads := open(t, seed) // for the clauses that only read (see [Open])
	t.Run("KnownKeys", func(t *testing.T) {
		cfg.parallel(t)
		r := reads
		resolves(t, r, KeyA, AccountA)
		resolves(t, r, KeyA2, AccountA)
		resolves(t, r, KeyB, AccountB)
	})
	t.Run("UnknownKey", func(t *testing.T) {
		cfg.parallel(t)
		invalid(t, reads, KeyNotAdded)
	})
	t.Run("RevokedKey", func(t *testing.T) {
		cfg.parallel(t)
		invalid(t, reads, KeyRevoked)
	})
	t.Run("Lookalikes", func(t *testing.T) {
		cfg.parallel(t)
		r := reads
		flip := []byte(KeyA)
		flip[0] ^= 0x20 // change the case of a letter
		for _, k := range []string{"", string(flip), KeyA + "x", KeyA[:len(KeyA)-1], " " + KeyA, strings.ToUpper(KeyB)} {
			invalid(t, r, k)
		}
	})
	t.Run("CanceledContext", func(t *testing.T) {
		cfg.parallel(t)
		r := reads
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if got, err := r.ResolveKey(cctx, KeyA); !errors.Is(err, context.Canceled) {
			t.Errorf("got (%q, %v), want context.Canceled", got, err)
		} else if strings.Contains(err.Error(), KeyA) {
			t.Errorf("the error's text holds the key: %v", err) // the Errors clause
		}
	})
	t.Run("RevocationTakesEffectAtOnce", func(t *testing.T) {
		cfg.parallel(t)
		r := open(t, seed)
		rv, ok := r.(interface {
			RevokeKey(context.Context, string) error
		})
		if !ok {
			t.Skip("the resolver has no RevokeKey method; revocation cannot be checked")
		}
		resolves(t, r, KeyA2, AccountA)
		if err := rv.RevokeKey(ctx, KeyA2); err != nil {
			t.Fatalf("RevokeKey: %v", err)
		}
		invalid(t, r, KeyA2)
		resolves(t, r, KeyA, AccountA)
		if err := rv.RevokeKey(ctx, KeyA2); !errors.Is(err, formsapi.ErrInvalidKey) {
			t.Errorf("revoking a revoked key: got %v, want ErrInvalidKey", err)
		}
	})
}

func checkAddedBetweenPages(t *testing.T, s formsapi.Store, w interface {
	AddSubmission(context.Context, formsapi.Submission, formsapi.Metadata) error
}, o formsapi.Order) {
	t.Helper()
	ctx := context.Background()
	q := formsapi.Query{Limit: 5, Order: o}
	before := submissionKeys(walkSubmissions(t, s, AccountA, FormBusy, q))
	first, err := s.ListSubmissions(ctx, AccountA, FormBusy, q)
	if err != nil || first.NextCursor == "" {
		t.Fatalf("first page: cursor %q, error %v", first.NextCursor, err)
	}
	last := first.Items[len(first.Items)-1].CreatedAt
	// New items before, at and after the position already read, in both
	// directions: none may make the rest of the walk skip or repeat.
	added := map[string]time.Time{}
	for i, at := range []time.Time{last, last.Add(-time.Nanosecond), last.Add(time.Nanosecond), base.Add(-time.Hour), base.Add(time.Hour)} {
		data := fmt.Sprintf(`{"n":%d,"added":"%s"}`, 1000+i, o)
		if err := w.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(data), CreatedAt: at}, canaryMetadata(i)); err != nil {
			t.Fatalf("AddSubmission: %v", err)
		}
		added[Canonical([]byte(data))] = at
	}
	got := submissionKeys(first.Items)
	q.Cursor = first.NextCursor
	for pages := 0; q.Cursor != ""; pages++ {
		if pages > busyCount+10 {
			t.Fatalf("order %s: the walk does not end", o)
		}
		p, err := s.ListSubmissions(ctx, AccountA, FormBusy, q)
		if err != nil {
			t.Fatalf("order %s: next page: %v", o, err)
		}
		got = append(got, submissionKeys(p.Items)...)
		q.Cursor = p.NextCursor
	}
	seen := map[string]int{}
	for _, k := range got {
		seen[k]++
		if seen[k] == 2 {
			t.Errorf("order %s: %s returned twice across pages after writes", o, k)
		}
	}
	for _, k := range before {
		if seen[k] == 0 {
			t.Errorf("order %s: %s skipped after writes between pages", o, k)
		}
	}
	// An added item that sorts after the cursor comes later in the walk;
	// one that sorts before it does not. One at the cursor's very time
	// sorts by the store's tie-breaker, either way.
	for k, at := range added {
		if at.Equal(last) {
			continue
		}
		after := at.Before(last) == (o == formsapi.Newest)
		if after && seen[k] != 1 {
			t.Errorf("order %s: %s, added after the first page and sorting after it, returned %d times, want once", o, k, seen[k])
		}
		if !after && seen[k] != 0 {
			t.Errorf("order %s: %s, added after the first page and sorting before it, returned %d times, want never", o, k, seen[k])
		}
	}
}

// checkOrder checks that Newest is ordered newest first, Oldest oldest
// first, the zero Order means Newest, and Oldest is exactly Newest reversed.
func checkOrder(t *testing.T, what string, times func(formsapi.Order) []time.Time, keys func(formsapi.Order) []string) {
	t.Helper()
	newest, oldest := times(formsapi.Newest), times(formsapi.Oldest)
	for i := 1; i < len(newest); i++ {
		if newest[i].After(newest[i-1]) {
			t.Errorf("%s newest first: item %d (%s) is newer than item %d (%s)", what, i, newest[i], i-1, newest[i-1])
		}
	}
	for i := 1; i < len(oldest); i++ {
		if oldest[i].Before(oldest[i-1]) {
			t.Errorf("%s oldest first: item %d (%s) is older than item %d (%s)", what, i, oldest[i], i-1, oldest[i-1])
		}
	}
	kn, ko := keys(formsapi.Newest), keys(formsapi.Oldest)
	slices.Reverse(ko)
	if !slices.Equal(kn, ko) {
		t.Errorf("%s: oldest first is not newest first reversed:\nnewest %v\noldest reversed %v", what, kn, ko)
	}
	if again := keys(formsapi.Newest); !slices.Equal(kn, again) {
		t.Errorf("%s: two lists give different orders: %v, then %v", what, kn, again)
	}
}

// walk reads every page of a list, checking that each page but the last is
// full and that the last has no cursor.
func walk[T any](t *testing.T, q formsapi.Query, list func(formsapi.Query) (formsapi.Page[T], error)) []T {
	t.Helper()
	var all []T
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("more than 1000 pages: the cursor does not advance")
		}
		p, err := list(q)
		if err != nil {
			t.Fatalf("page %d (cursor %q): %v", pages, q.Cursor, err)
		}
		if len(p.Items) > q.Limit {
			t.Fatalf("page %d has %d items, more than the limit %d", pages, len(p.Items), q.Limit)
		}
		all = append(all, p.Items...)
		if p.NextCursor == "" {
			return all
		}
		if len(p.Items) < q.Limit {
			t.Fatalf("page %d has %d items, fewer than the limit %d, and yet a next cursor", pages, len(p.Items), q.Limit)
		}
		q.Cursor = p.NextCursor
	}
}

func walkForms(t *testing.T, s formsapi.Store, account string, q formsapi.Query) []formsapi.Form {
	t.Helper()
	return walk(t, q, func(q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
		return s.ListForms(context.Background(), account, q)
	})
}

func walkSubmissions(t *testing.T, s formsapi.Store, account, form string, q formsapi.Query) []formsapi.Submission {
	t.Helper()
	return walk(t, q, func(q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
		return s.ListSubmissions(context.Background(), account, form, q)
	})
}

// expect indexes the seed for the checks.
type expect struct {
	seed   Seed
	forms  map[string]SeedForm
	subs   map[string][]SeedSubmission // by form ID
	byData map[string]SeedSubmission   // by canonical data
}

func expectations(seed Seed) *expect {
	x := &expect{seed: seed, forms: map[string]SeedForm{}, subs: map[string][]SeedSubmission{}, byData: map[string]SeedSubmission{}}
	for _, f := range seed.Forms {
		x.forms[f.Form.ID] = f
	}
	for _, s := range seed.Submissions {
		x.subs[s.Submission.FormID] = append(x.subs[s.Submission.FormID], s)
		x.byData[Canonical(s.Submission.Data)] = s
	}
	return x
}

func (x *expect) formIDs(account string) []string {
	return x.formIDsIn(account, formsapi.Query{})
}

func (x *expect) formIDsIn(account string, q formsapi.Query) []string {
	ids := []string{}
	for _, f := range x.seed.Forms {
		if f.AccountID == account && keyset.Contains(q, f.Form.CreatedAt) {
			ids = append(ids, f.Form.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

func (x *expect) submissionKeysIn(form string, q formsapi.Query) []string {
	keys := []string{}
	for _, s := range x.subs[form] {
		if keyset.Contains(q, s.Submission.CreatedAt) {
			keys = append(keys, Canonical(s.Submission.Data))
		}
	}
	sort.Strings(keys)
	return keys
}

type timeRange struct {
	name         string
	since, until time.Time
}

// ranges are bounds that fall on, between and outside the seed's times,
// including ones equal to a time several items share.
func (x *expect) ranges() []timeRange {
	return []timeRange{
		{"since on a shared time", base.Add(2 * time.Minute), time.Time{}},
		{"until on a shared time", time.Time{}, base.Add(2 * time.Minute)},
		{"since and until on shared times", base.Add(time.Minute), base.Add(4 * time.Minute)},
		{"between times", base.Add(90 * time.Second), base.Add(150 * time.Second)},
		{"nanosecond bound", base.Add(5*time.Minute + 123456789*time.Nanosecond), time.Time{}},
		{"since after everything", base.Add(365 * 24 * time.Hour), time.Time{}},
		{"until before everything", time.Time{}, base.Add(-365 * 24 * time.Hour)},
		{"since an hour", base.Add(time.Hour), time.Time{}},
		{"until an hour", time.Time{}, base.Add(time.Hour)},
		{"since before 1678", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Time{}},
		{"until after 2262", time.Time{}, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)},
		{"since after 2262", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), time.Time{}},
		{"until before 1678", time.Time{}, time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"bounds in another zone", base.Add(time.Minute).In(time.FixedZone("X", -7*3600)), base.Add(3 * time.Minute).In(time.FixedZone("Y", 5*3600))},
	}
}

func sortedFormIDs(forms []formsapi.Form) []string {
	ids := formKeys(forms)
	sort.Strings(ids)
	return ids
}

func formKeys(forms []formsapi.Form) []string {
	ids := make([]string, len(forms))
	for i, f := range forms {
		ids[i] = f.ID
	}
	return ids
}

func formTimes(forms []formsapi.Form) []time.Time {
	ts := make([]time.Time, len(forms))
	for i, f := range forms {
		ts[i] = f.CreatedAt
	}
	return ts
}

func submissionKeys(subs []formsapi.Submission) []string {
	keys := make([]string, len(subs))
	for i, s := range subs {
		keys[i] = Canonical(s.Data)
	}
	return keys
}

func submissionTimes(subs []formsapi.Submission) []time.Time {
	ts := make([]time.Time, len(subs))
	for i, s := range subs {
		ts[i] = s.CreatedAt
	}
	return ts
}

// Canonical re-encodes JSON with sorted object keys, no spaces and numbers
// as written, so that tests can compare data a store may keep in any
// equivalent form. Invalid JSON gives a string that says so and never
// equals the canonical form of valid JSON.
func Canonical(data []byte) string {
	var v any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return "invalid JSON: " + string(data)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func diffForm(want, got formsapi.Form) string {
	var d []string
	if got.ID != want.ID || got.Title != want.Title || got.Icon != want.Icon || got.NotificationEmail != want.NotificationEmail {
		d = append(d, fmt.Sprintf("got %+v, want %+v", got, want))
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		d = append(d, fmt.Sprintf("createdAt %s, want %s", got.CreatedAt, want.CreatedAt))
	}
	return strings.Join(d, "; ")
}

func diffSubmission(want, got formsapi.Submission) string {
	var d []string
	if got.FormID != want.FormID {
		d = append(d, fmt.Sprintf("formId %q, want %q", got.FormID, want.FormID))
	}
	if Canonical(got.Data) != Canonical(want.Data) {
		d = append(d, fmt.Sprintf("data %s, want %s", got.Data, want.Data))
	}
	if len(got.Attachments) != len(want.Attachments) || (len(got.Attachments) > 0 && !slices.Equal(got.Attachments, want.Attachments)) {
		d = append(d, fmt.Sprintf("attachments %+v, want %+v", got.Attachments, want.Attachments))
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		d = append(d, fmt.Sprintf("createdAt %s, want %s", got.CreatedAt, want.CreatedAt))
	}
	return strings.Join(d, "; ")
}
