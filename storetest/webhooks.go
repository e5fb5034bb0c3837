package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/webhook"
	"github.com/formsapi/formsapi/webhook/hookstore"
)

// hookStore is a store that keeps webhook endpoints.
type hookStore interface {
	formsapi.Store
	webhook.Store
}

func isHookStore(s formsapi.Store) bool { _, ok := s.(webhook.Store); return ok }

// hookClauses checks the webhook.Store contract, one subtest per clause,
// each on a fresh store from open.
func hookClauses(t *testing.T, open func(t *testing.T) hookStore, cfg *config) {
	ctx := context.Background()
	cet := time.FixedZone("CET", 3600)
	at := time.Date(2025, 6, 1, 12, 0, 0, 123456789, cet)
	endpoint := func(account, id string, minutes int) webhook.Endpoint {
		return webhook.Endpoint{
			ID: id, AccountID: account, URL: "https://hooks.example.com/" + id,
			Forms:     []string{FormSmall, FormBusy},
			Secrets:   []webhook.EndpointSecret{{Secret: testSecret(id + "new")}, {Secret: testSecret(id + "old"), Until: at.Add(time.Hour)}},
			CreatedAt: at.Add(time.Duration(minutes) * time.Minute),
		}
	}
	add := func(t *testing.T, s hookStore, e webhook.Endpoint, streams ...webhook.Stream) {
		t.Helper()
		if err := s.AddEndpoint(ctx, e, streams); err != nil {
			t.Fatalf("AddEndpoint(%s): %v", e.ID, err)
		}
	}
	get := func(t *testing.T, s hookStore, account, id string) (webhook.Endpoint, []webhook.Stream) {
		t.Helper()
		e, st, err := s.Endpoint(ctx, account, id)
		if err != nil {
			t.Fatalf("Endpoint(%s): %v", id, err)
		}
		return e, st
	}
	notFound := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, webhook.ErrEndpointNotFound) {
			t.Errorf("%s: got error %v, want ErrEndpointNotFound", what, err)
		}
	}
	lost := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, webhook.ErrLeaseLost) {
			t.Errorf("%s: got error %v, want ErrLeaseLost", what, err)
		}
	}
	claimOne := func(t *testing.T, s hookStore, now time.Time) webhook.Lease {
		t.Helper()
		ls, err := s.ClaimEndpoints(ctx, now, time.Minute, 1)
		if err != nil || len(ls) != 1 {
			t.Fatalf("ClaimEndpoints: got %d leases and error %v, want one lease", len(ls), err)
		}
		return ls[0]
	}
	stream := func(form string, cursor int64) webhook.Stream {
		// An incarnation with its top bit set, as this module's stores
		// give new forms: kept whole, not as a negative number's.
		return webhook.Stream{FormID: form, Incarnation: 1<<63 | uint64(cursor)<<20 | 0xbeef, Cursor: cursor, Floor: 2, Attempts: 3, NextAt: at.Add(5 * time.Minute),
			FailingSince: at.Add(-time.Hour), LastSuccess: at.Add(-2 * time.Hour), Resync: cursor == 13,
			Judging: cursor != 13, Unsent: 1, Judged: cursor + 1<<40}
	}

	t.Run("Fields", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		full := endpoint(AccountA, "ep_full", 0)
		full.Disabled, full.DisabledReason, full.DisabledAt = true, "the host's reason", at.Add(time.Second)
		full.Filter = "filter%5Brating%5D%5Bgte%5D=4&q=zo%C3%AB" // kept as given, byte for byte
		bare := webhook.Endpoint{ID: "ep_bare", AccountID: AccountA, URL: "https://h.example.com/x",
			Forms: []string{}, Secrets: []webhook.EndpointSecret{{Secret: testSecret("x")}}, CreatedAt: at.Add(time.Minute)}
		streams := []webhook.Stream{stream(FormSmall, 7), stream(FormBusy, 13)}
		add(t, s, full, streams...)
		add(t, s, bare)
		bare.Forms = nil
		for _, want := range []webhook.Endpoint{full, bare} {
			got, _ := get(t, s, AccountA, want.ID)
			if msg := diffEndpoint(want, got); msg != "" {
				t.Errorf("Endpoint(%s): %s", want.ID, msg)
			}
		}
		_, st := get(t, s, AccountA, full.ID)
		slices.SortFunc(streams, func(a, b webhook.Stream) int { return strings.Compare(a.FormID, b.FormID) })
		if msg := diffStreams(streams, st); msg != "" {
			t.Errorf("streams: %s", msg)
		}
		list, err := s.Endpoints(ctx, AccountA)
		if err != nil || len(list) != 2 {
			t.Fatalf("Endpoints: got %d and error %v, want 2", len(list), err)
		}
		if msg := diffEndpoint(full, list[0]); msg != "" {
			t.Errorf("Endpoints[0]: %s", msg)
		}
	})
	t.Run("Add/Exists", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		e := endpoint(AccountA, "ep_dup", 0)
		add(t, s, e)
		other := endpoint(AccountB, "ep_dup", 5)
		other.URL = "https://other.example.com/"
		if err := s.AddEndpoint(ctx, other, nil); !errors.Is(err, webhook.ErrEndpointExists) {
			t.Errorf("AddEndpoint of a stored ID (another account): got error %v, want ErrEndpointExists", err)
		}
		if err := s.AddEndpoint(ctx, e, nil); !errors.Is(err, webhook.ErrEndpointExists) {
			t.Errorf("AddEndpoint twice: got error %v, want ErrEndpointExists", err)
		}
		got, _ := get(t, s, AccountA, e.ID)
		if msg := diffEndpoint(e, got); msg != "" {
			t.Errorf("after the refused adds: %s", msg)
		}
		if l, _ := s.Endpoints(ctx, AccountB); len(l) != 0 {
			t.Errorf("a refused add left %d endpoints of %s", len(l), AccountB)
		}
	})
	t.Run("Isolation", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		add(t, s, endpoint(AccountA, "ep_a", 0))
		add(t, s, endpoint(AccountB, "ep_b", 0))
		_, _, err := s.Endpoint(ctx, AccountB, "ep_a")
		notFound(t, "Endpoint of another account's endpoint", err)
		_, _, err = s.Endpoint(ctx, AccountA, "ep_none")
		notFound(t, "Endpoint of an unknown ID", err)
		_, err = s.UpdateEndpoint(ctx, AccountB, "ep_a", func(e *webhook.Endpoint) error { e.URL = "https://evil.example.com/"; return nil })
		notFound(t, "UpdateEndpoint of another account's endpoint", err)
		notFound(t, "DeleteEndpoint of another account's endpoint", s.DeleteEndpoint(ctx, AccountB, "ep_a"))
		notFound(t, "ResetStream of another account's endpoint", s.ResetStream(ctx, AccountB, "ep_a", webhook.Stream{FormID: FormBusy}))
		for account, want := range map[string]string{AccountA: "ep_a", AccountB: "ep_b"} {
			l, err := s.Endpoints(ctx, account)
			if err != nil || len(l) != 1 || l[0].ID != want {
				t.Errorf("Endpoints(%s): got %v, %v; want only %s", account, ids(l), err, want)
			}
		}
		got, st := get(t, s, AccountA, "ep_a")
		if got.URL != "https://hooks.example.com/ep_a" || len(st) != 0 {
			t.Errorf("another account's calls changed the endpoint: %+v, %+v", got, st)
		}
	})
	t.Run("List", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		l, err := s.Endpoints(ctx, AccountEmpty)
		if err != nil || len(l) != 0 {
			t.Errorf("Endpoints of an account without endpoints: got %v, %v; want none and no error", ids(l), err)
		}
		for _, e := range []webhook.Endpoint{endpoint(AccountA, "ep_3", 2), endpoint(AccountA, "ep_2", 1), endpoint(AccountA, "ep_1", 2), endpoint(AccountA, "ep_0", 3)} {
			add(t, s, e)
		}
		l, err = s.Endpoints(ctx, AccountA)
		if want := []string{"ep_2", "ep_1", "ep_3", "ep_0"}; err != nil || !slices.Equal(ids(l), want) {
			t.Errorf("Endpoints: got %v, %v; want %v (by CreatedAt, then ID)", ids(l), err, want)
		}
	})
	t.Run("Update", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		e := endpoint(AccountA, "ep_u", 0)
		add(t, s, e, stream(FormBusy, 4))
		want := e
		want.Secrets = []webhook.EndpointSecret{{Secret: testSecret("newer")}, {Secret: testSecret("ep_unew"), Until: at.Add(48 * time.Hour)}}
		want.Disabled, want.DisabledReason, want.DisabledAt = true, "410 Gone", at.Add(time.Hour)
		want.Filter = "filter%5Bstatus%5D=%22open%22"
		got, err := s.UpdateEndpoint(ctx, AccountA, e.ID, func(x *webhook.Endpoint) error {
			if msg := diffEndpoint(e, *x); msg != "" {
				t.Errorf("update was called with %s", msg)
			}
			x.Secrets, x.Disabled, x.DisabledReason, x.DisabledAt = want.Secrets, true, want.DisabledReason, want.DisabledAt
			x.Filter = want.Filter
			x.ID, x.AccountID, x.CreatedAt = "ep_other", AccountB, at.Add(99*time.Hour) // kept as stored
			return nil
		})
		if err != nil {
			t.Fatalf("UpdateEndpoint: %v", err)
		}
		if msg := diffEndpoint(want, got); msg != "" {
			t.Errorf("UpdateEndpoint's result: %s", msg)
		}
		stored, st := get(t, s, AccountA, e.ID)
		if msg := diffEndpoint(want, stored); msg != "" {
			t.Errorf("after UpdateEndpoint: %s", msg)
		}
		if msg := diffStreams([]webhook.Stream{stream(FormBusy, 4)}, st); msg != "" {
			t.Errorf("UpdateEndpoint changed a stream: %s", msg)
		}
		refuse := errors.New("refused by update")
		_, err = s.UpdateEndpoint(ctx, AccountA, e.ID, func(x *webhook.Endpoint) error {
			x.URL, x.Filter = "https://changed.example.com/", "q=changed"
			return refuse
		})
		if !errors.Is(err, refuse) {
			t.Errorf("UpdateEndpoint whose update fails: got error %v, want update's", err)
		}
		if stored, _ := get(t, s, AccountA, e.ID); stored.URL != want.URL || stored.Filter != want.Filter {
			t.Errorf("a failed update changed the URL to %q, the filter to %q", stored.URL, stored.Filter)
		}
	})
	t.Run("Update/Concurrent", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		e := endpoint(AccountA, "ep_c", 0)
		e.Secrets = nil
		add(t, s, e)
		var wg sync.WaitGroup
		const n = 8
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.UpdateEndpoint(ctx, AccountA, e.ID, func(x *webhook.Endpoint) error {
					x.Secrets = append(x.Secrets, webhook.EndpointSecret{Secret: testSecret(fmt.Sprint(i))})
					return nil
				})
				if err != nil {
					t.Errorf("UpdateEndpoint %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if got, _ := get(t, s, AccountA, e.ID); len(got.Secrets) != n {
			t.Errorf("after %d concurrent updates that each add a secret: %d secrets, want %d", n, len(got.Secrets), n)
		}
	})
	t.Run("Delete", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		add(t, s, endpoint(AccountA, "ep_d", 0), stream(FormBusy, 1))
		l := claimOne(t, s, at)
		if err := s.DeleteEndpoint(ctx, AccountA, "ep_d"); err != nil {
			t.Fatalf("DeleteEndpoint: %v", err)
		}
		_, _, err := s.Endpoint(ctx, AccountA, "ep_d")
		notFound(t, "Endpoint after DeleteEndpoint", err)
		notFound(t, "DeleteEndpoint twice", s.DeleteEndpoint(ctx, AccountA, "ep_d"))
		lost(t, "SaveStream under the deleted endpoint's lease", s.SaveStream(ctx, "ep_d", l.Gen, stream(FormBusy, 2), at, time.Minute))
		_, err = s.RenewLease(ctx, "ep_d", l.Gen, at, time.Minute)
		lost(t, "RenewLease of a deleted endpoint", err)
		if ls, _ := s.ClaimEndpoints(ctx, at.Add(time.Hour), time.Minute, 10); len(ls) != 0 {
			t.Errorf("ClaimEndpoints found %d endpoints after the only one was deleted", len(ls))
		}
		// Its ID may be used again, from nothing.
		add(t, s, endpoint(AccountA, "ep_d", 1))
		if _, st := get(t, s, AccountA, "ep_d"); len(st) != 0 {
			t.Errorf("a deleted endpoint's streams outlived it: %+v", st)
		}
	})
	t.Run("Claim", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		add(t, s, endpoint(AccountA, "ep_1", 0), stream(FormBusy, 5))
		add(t, s, endpoint(AccountB, "ep_2", 0))
		off := endpoint(AccountA, "ep_off", 0)
		off.Disabled, off.DisabledReason = true, "off"
		add(t, s, off)
		ls, err := s.ClaimEndpoints(ctx, at, time.Minute, 1)
		if err != nil || len(ls) != 1 {
			t.Fatalf("ClaimEndpoints with max 1: got %d, %v", len(ls), err)
		}
		rest, err := s.ClaimEndpoints(ctx, at, time.Minute, 10)
		if err != nil || len(rest) != 1 {
			t.Fatalf("ClaimEndpoints of the rest: got %d, %v; want the one enabled endpoint left", len(rest), err)
		}
		got := ids([]webhook.Endpoint{ls[0].Endpoint, rest[0].Endpoint})
		if slices.Sort(got); !slices.Equal(got, []string{"ep_1", "ep_2"}) {
			t.Errorf("claimed %v, want ep_1 and ep_2 (never a disabled one)", got)
		}
		for _, l := range append(ls, rest...) {
			if !l.Until.Equal(at.Add(time.Minute)) {
				t.Errorf("lease of %s until %s, want %s", l.Endpoint.ID, l.Until, at.Add(time.Minute))
			}
			if l.Endpoint.ID == "ep_1" && (len(l.Streams) != 1 || l.Streams[0].Cursor != 5) {
				t.Errorf("the lease of ep_1 carries streams %+v, want its one stream at 5", l.Streams)
			}
		}
		if again, _ := s.ClaimEndpoints(ctx, at.Add(59*time.Second), time.Minute, 10); len(again) != 0 {
			t.Errorf("claimed %v again while their leases ran", leaseIDs(again))
		}
		later, err := s.ClaimEndpoints(ctx, at.Add(time.Minute), time.Minute, 10)
		if err != nil || len(later) != 2 {
			t.Fatalf("ClaimEndpoints once the leases ran out: got %d, %v; want 2", len(later), err)
		}
		old := map[string]int64{ls[0].Endpoint.ID: ls[0].Gen, rest[0].Endpoint.ID: rest[0].Gen}
		for _, l := range later {
			if l.Gen <= old[l.Endpoint.ID] {
				t.Errorf("claimed %s again with generation %d, not above %d", l.Endpoint.ID, l.Gen, old[l.Endpoint.ID])
			}
		}
	})
	t.Run("Claim/Concurrent", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		const endpoints, claimers = 12, 6
		for i := range endpoints {
			add(t, s, endpoint(AccountA, fmt.Sprintf("ep_%02d", i), i))
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range endpoints {
					ls, err := s.ClaimEndpoints(ctx, at, time.Minute, 2)
					if err != nil {
						t.Errorf("ClaimEndpoints: %v", err)
						return
					}
					mu.Lock()
					for _, l := range ls {
						seen[l.Endpoint.ID]++
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(seen) != endpoints {
			t.Errorf("%d concurrent claimers got %d of the %d endpoints", claimers, len(seen), endpoints)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("endpoint %s was claimed %d times for overlapping leases", id, n)
			}
		}
	})
	t.Run("Renew", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		add(t, s, endpoint(AccountA, "ep_r", 0), stream(FormBusy, 9))
		l := claimOne(t, s, at)
		got, err := s.RenewLease(ctx, "ep_r", l.Gen, at.Add(2*time.Minute), time.Minute) // ran out, not yet claimed
		if err != nil {
			t.Fatalf("RenewLease of a lease that ran out unclaimed: %v", err)
		}
		if got.Gen != l.Gen || !got.Until.Equal(at.Add(3*time.Minute)) || len(got.Streams) != 1 || got.Endpoint.ID != "ep_r" {
			t.Errorf("RenewLease: got gen %d until %s with %d streams, want gen %d until %s with 1", got.Gen, got.Until, len(got.Streams), l.Gen, at.Add(3*time.Minute))
		}
		if ls, _ := s.ClaimEndpoints(ctx, at.Add(150*time.Second), time.Minute, 10); len(ls) != 0 {
			t.Errorf("claimed a renewed lease before it ran out")
		}
		_, err = s.RenewLease(ctx, "ep_r", l.Gen+1, at, time.Minute)
		lost(t, "RenewLease under another generation", err)
		_, err = s.RenewLease(ctx, "ep_none", 1, at, time.Minute)
		lost(t, "RenewLease of an unknown endpoint", err)
	})
	t.Run("Fencing", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		add(t, s, endpoint(AccountA, "ep_f", 0), stream(FormBusy, 3))
		paused := claimOne(t, s, at)
		if err := s.SaveStream(ctx, "ep_f", paused.Gen, stream(FormBusy, 4), at, time.Minute); err != nil {
			t.Fatalf("SaveStream under the live lease: %v", err)
		}
		if err := s.SaveStream(ctx, "ep_f", paused.Gen, stream(FormSmall, 1), at.Add(30*time.Second), time.Minute); err != nil {
			t.Fatalf("SaveStream of a new stream: %v", err)
		}
		// The save extended the lease: not claimable at its old end.
		if ls, _ := s.ClaimEndpoints(ctx, at.Add(70*time.Second), time.Minute, 1); len(ls) != 0 {
			t.Errorf("claimed at %s a lease that SaveStream extended to %s", at.Add(70*time.Second), at.Add(90*time.Second))
		}
		taker := claimOne(t, s, at.Add(2*time.Minute))
		lost(t, "SaveStream of a node paused past its lease", s.SaveStream(ctx, "ep_f", paused.Gen, stream(FormBusy, 99), at.Add(3*time.Minute), time.Minute))
		if err := s.SaveStream(ctx, "ep_f", taker.Gen, stream(FormBusy, 5), at.Add(2*time.Minute), time.Minute); err != nil {
			t.Fatalf("SaveStream of the new holder: %v", err)
		}
		_, st := get(t, s, AccountA, "ep_f")
		want := []webhook.Stream{stream(FormBusy, 5), stream(FormSmall, 1)}
		if msg := diffStreams(want, st); msg != "" {
			t.Errorf("streams: %s", msg)
		}
	})
	t.Run("Release", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		add(t, s, endpoint(AccountA, "ep_rel", 0))
		l := claimOne(t, s, at)
		if err := s.ReleaseLease(ctx, "ep_rel", l.Gen+7); err != nil {
			t.Errorf("ReleaseLease under another generation: %v, want nil", err)
		}
		if ls, _ := s.ClaimEndpoints(ctx, at, time.Minute, 1); len(ls) != 0 {
			t.Errorf("a release under another generation freed the lease")
		}
		if err := s.ReleaseLease(ctx, "ep_rel", l.Gen); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		again := claimOne(t, s, at)
		if again.Gen <= l.Gen {
			t.Errorf("claimed after release with generation %d, not above %d", again.Gen, l.Gen)
		}
	})
	t.Run("Reset", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		add(t, s, endpoint(AccountA, "ep_z", 0), stream(FormBusy, 40))
		l := claimOne(t, s, at)
		rewound := webhook.Stream{FormID: FormBusy, Cursor: 10}
		if err := s.ResetStream(ctx, AccountA, "ep_z", rewound); err != nil {
			t.Fatalf("ResetStream: %v", err)
		}
		lost(t, "SaveStream under the lease a reset ended", s.SaveStream(ctx, "ep_z", l.Gen, stream(FormBusy, 41), at, time.Minute))
		_, err := s.RenewLease(ctx, "ep_z", l.Gen, at, time.Minute)
		lost(t, "RenewLease of the lease a reset ended", err)
		if _, st := get(t, s, AccountA, "ep_z"); len(st) != 1 || st[0] != rewound {
			t.Errorf("after ResetStream: streams %+v, want %+v", st, rewound)
		}
		next := claimOne(t, s, at) // the reset freed it at once
		if next.Gen <= l.Gen {
			t.Errorf("claimed after a reset with generation %d, not above %d", next.Gen, l.Gen)
		}
	})
	passedOf := func(t *testing.T, s hookStore) hookstore.PassedStore {
		t.Helper()
		p, ok := s.(hookstore.PassedStore)
		if !ok {
			t.Skip("the store is no hookstore.PassedStore: its filtered endpoints are sent every deletion")
		}
		return p
	}
	// held returns which of 1 to 40 are in the spans of form's stream.
	held := func(t *testing.T, p hookstore.PassedStore, id, form string) []int64 {
		t.Helper()
		all := make([]int64, 40)
		for i := range all {
			all[i] = int64(40 - i) // in no order: the answer is ascending
		}
		in, err := p.Passed(ctx, id, form, all)
		if err != nil {
			t.Fatalf("Passed: %v", err)
		}
		return in
	}
	span := func(from, to int64) []int64 {
		var out []int64
		for p := from; p <= to; p++ {
			out = append(out, p)
		}
		return out
	}
	t.Run("Passed", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		p := passedOf(t, s)
		add(t, s, endpoint(AccountA, "ep_p", 0), stream(FormBusy, 3))
		add(t, s, endpoint(AccountA, "ep_q", 1), stream(FormBusy, 3))
		l := claimOne(t, s, at)
		if l.Endpoint.ID != "ep_p" {
			t.Fatalf("claimed %s first, want ep_p", l.Endpoint.ID)
		}
		save := func(st webhook.Stream, v hookstore.Verdicts) {
			t.Helper()
			if err := p.SaveVerdicts(ctx, "ep_p", l.Gen, st, v, at, time.Minute); err != nil {
				t.Fatalf("SaveVerdicts(%+v): %v", v, err)
			}
		}
		save(stream(FormBusy, 9), hookstore.Verdicts{Pass: []hookstore.Span{{From: 2, To: 4}, {From: 6, To: 9}}})
		save(stream(FormBusy, 12), hookstore.Verdicts{Pass: []hookstore.Span{{From: 10, To: 12}}}) // merged with 6..9
		save(stream(FormSmall, 5), hookstore.Verdicts{Pass: []hookstore.Span{{From: 1, To: 5}}})
		if got, want := held(t, p, "ep_p", FormBusy), append(span(2, 4), span(6, 12)...); !slices.Equal(got, want) {
			t.Errorf("after two saves: positions %v in spans, want %v", got, want)
		}
		if _, st := get(t, s, AccountA, "ep_p"); len(st) != 2 || diffStreams([]webhook.Stream{stream(FormBusy, 12)}, st[:1]) != "" {
			t.Errorf("SaveVerdicts wrote streams %+v, want %+v first", st, stream(FormBusy, 12))
		}
		// Unpass splits a span, shortens one, drops one of one position,
		// and leaves a position in none alone.
		save(stream(FormBusy, 13), hookstore.Verdicts{Pass: []hookstore.Span{{From: 15, To: 15}}, Unpass: []int64{8, 2, 5, 12, 15}})
		if got, want := held(t, p, "ep_p", FormBusy), []int64{3, 4, 6, 7, 9, 10, 11}; !slices.Equal(got, want) {
			t.Errorf("after Unpass: positions %v in spans, want %v", got, want)
		}
		save(stream(FormBusy, 14), hookstore.Verdicts{Pass: []hookstore.Span{{From: 12, To: 14}}}) // merged with 9..11
		save(stream(FormBusy, 20), hookstore.Verdicts{Unpass: []int64{10}, Pass: []hookstore.Span{{From: 20, To: 20}}})
		if got, want := held(t, p, "ep_p", FormBusy), []int64{3, 4, 6, 7, 9, 11, 12, 13, 14, 20}; !slices.Equal(got, want) {
			t.Errorf("after a merge and a split of it: positions %v in spans, want %v", got, want)
		}
		if got := held(t, p, "ep_p", FormSmall); !slices.Equal(got, span(1, 5)) {
			t.Errorf("the other form's stream: positions %v in spans, want 1 to 5", got)
		}
		if got := held(t, p, "ep_q", FormBusy); len(got) != 0 {
			t.Errorf("another endpoint's stream: positions %v in spans, want none", got)
		}
		if got := held(t, p, "ep_none", FormBusy); len(got) != 0 {
			t.Errorf("an endpoint not there: positions %v in spans, want none", got)
		}
		// Fencing: a save under a lease taken over changes nothing.
		taker := claimOne(t, s, at.Add(2*time.Minute))
		_ = taker
		lost(t, "SaveVerdicts of a node paused past its lease", p.SaveVerdicts(ctx, "ep_p", l.Gen, stream(FormBusy, 99),
			hookstore.Verdicts{Clear: true, Pass: []hookstore.Span{{From: 30, To: 31}}}, at.Add(3*time.Minute), time.Minute))
		if got, want := held(t, p, "ep_p", FormBusy), []int64{3, 4, 6, 7, 9, 11, 12, 13, 14, 20}; !slices.Equal(got, want) {
			t.Errorf("after a fenced-off save: positions %v in spans, want %v", got, want)
		}
		// Clear, then pass, in one save.
		if err := p.SaveVerdicts(ctx, "ep_p", taker.Gen, stream(FormBusy, 25), hookstore.Verdicts{Clear: true, Pass: []hookstore.Span{{From: 24, To: 25}}}, at.Add(2*time.Minute), time.Minute); err != nil {
			t.Fatalf("SaveVerdicts of the new holder: %v", err)
		}
		if got := held(t, p, "ep_p", FormBusy); !slices.Equal(got, span(24, 25)) {
			t.Errorf("after Clear: positions %v in spans, want 24 and 25", got)
		}
	})
	t.Run("Passed/Reset", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		p := passedOf(t, s)
		add(t, s, endpoint(AccountA, "ep_pr", 0), stream(FormBusy, 3), stream(FormSmall, 3))
		l := claimOne(t, s, at)
		for _, form := range []string{FormBusy, FormSmall} {
			if err := p.SaveVerdicts(ctx, "ep_pr", l.Gen, stream(form, 9), hookstore.Verdicts{Pass: []hookstore.Span{{From: 4, To: 9}}}, at, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		judging := stream(FormBusy, 5) // a replay from position 5: the verdicts stay
		if err := s.ResetStream(ctx, AccountA, "ep_pr", judging); err != nil {
			t.Fatal(err)
		}
		if got := held(t, p, "ep_pr", FormBusy); !slices.Equal(got, span(4, 9)) {
			t.Errorf("after a reset of a judging stream: positions %v in spans, want 4 to 9", got)
		}
		if err := s.ResetStream(ctx, AccountA, "ep_pr", webhook.Stream{FormID: FormSmall}); err != nil { // from the start
			t.Fatal(err)
		}
		if got := held(t, p, "ep_pr", FormSmall); len(got) != 0 {
			t.Errorf("after a reset to a stream that does not judge: positions %v in spans, want none", got)
		}
		if err := s.DeleteEndpoint(ctx, AccountA, "ep_pr"); err != nil {
			t.Fatal(err)
		}
		add(t, s, endpoint(AccountA, "ep_pr", 0), stream(FormBusy, 3)) // the same ID again
		if got := held(t, p, "ep_pr", FormBusy); len(got) != 0 {
			t.Errorf("an endpoint deleted and added again: positions %v in spans, want none", got)
		}
	})
	t.Run("NotAliased", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		e := endpoint(AccountA, "ep_n", 0)
		add(t, s, e)
		e.Forms[0], e.Secrets[0].Secret = "mutated", testSecret("mutated") // the caller's slices after the add
		got, _ := get(t, s, AccountA, "ep_n")
		got.Forms[1], got.Secrets[1].Secret = "mutated", testSecret("mutated")
		list, _ := s.Endpoints(ctx, AccountA)
		list[0].Forms[0] = "mutated"
		want := endpoint(AccountA, "ep_n", 0)
		if again, _ := get(t, s, AccountA, "ep_n"); diffEndpoint(want, again) != "" {
			t.Errorf("changing slices given to or returned by the store changed it: %s", diffEndpoint(want, again))
		}
	})
	t.Run("Context", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t)
		add(t, s, endpoint(AccountA, "ep_ctx", 0))
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		calls := map[string]error{}
		calls["AddEndpoint"] = s.AddEndpoint(canceled, endpoint(AccountA, "ep_new", 0), nil)
		_, calls["Endpoints"] = s.Endpoints(canceled, AccountA)
		_, _, calls["Endpoint"] = s.Endpoint(canceled, AccountA, "ep_ctx")
		_, calls["UpdateEndpoint"] = s.UpdateEndpoint(canceled, AccountA, "ep_ctx", func(*webhook.Endpoint) error { return nil })
		_, calls["ClaimEndpoints"] = s.ClaimEndpoints(canceled, at, time.Minute, 1)
		_, calls["RenewLease"] = s.RenewLease(canceled, "ep_ctx", 1, at, time.Minute)
		calls["SaveStream"] = s.SaveStream(canceled, "ep_ctx", 1, stream(FormBusy, 1), at, time.Minute)
		calls["ResetStream"] = s.ResetStream(canceled, AccountA, "ep_ctx", stream(FormBusy, 1))
		calls["DeleteEndpoint"] = s.DeleteEndpoint(canceled, AccountA, "ep_ctx")
		for name, err := range calls {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s with a canceled context: got error %v, want context.Canceled", name, err)
			}
		}
		if _, _, err := s.Endpoint(ctx, AccountA, "ep_ctx"); err != nil {
			t.Errorf("a canceled DeleteEndpoint deleted the endpoint: %v", err)
		}
	})
}

func ids(l []webhook.Endpoint) []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = e.ID
	}
	return out
}

func leaseIDs(l []webhook.Lease) []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = e.Endpoint.ID
	}
	return out
}

// diffEndpoint says how got differs from want, "" when it does not.
func diffEndpoint(want, got webhook.Endpoint) string {
	switch {
	case got.ID != want.ID || got.AccountID != want.AccountID || got.URL != want.URL:
		return fmt.Sprintf("got ID %q, account %q, URL %q; want %q, %q, %q", got.ID, got.AccountID, got.URL, want.ID, want.AccountID, want.URL)
	case !slices.Equal(got.Forms, want.Forms) && len(got.Forms)+len(want.Forms) > 0:
		return fmt.Sprintf("got forms %q, want %q", got.Forms, want.Forms)
	case len(got.Secrets) != len(want.Secrets):
		return fmt.Sprintf("got %d secrets, want %d", len(got.Secrets), len(want.Secrets))
	case got.Disabled != want.Disabled || got.DisabledReason != want.DisabledReason || !got.DisabledAt.Equal(want.DisabledAt):
		return fmt.Sprintf("got disabled %v (%q at %s), want %v (%q at %s)", got.Disabled, got.DisabledReason, got.DisabledAt, want.Disabled, want.DisabledReason, want.DisabledAt)
	case got.Filter != want.Filter:
		return fmt.Sprintf("got filter %q, want %q", got.Filter, want.Filter)
	case !got.CreatedAt.Equal(want.CreatedAt):
		return fmt.Sprintf("got createdAt %s, want %s", got.CreatedAt, want.CreatedAt)
	}
	for i := range want.Secrets {
		if got.Secrets[i].Secret.Reveal() != want.Secrets[i].Secret.Reveal() || !got.Secrets[i].Until.Equal(want.Secrets[i].Until) {
			return fmt.Sprintf("secret %d: got until %s, want until %s (or another value)", i, got.Secrets[i].Until, want.Secrets[i].Until)
		}
	}
	return ""
}

// diffStreams says how got differs from want, "" when it does not.
func diffStreams(want, got []webhook.Stream) string {
	if len(got) != len(want) {
		return fmt.Sprintf("got %d streams %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		w, g := want[i], got[i]
		if g.FormID != w.FormID || g.Incarnation != w.Incarnation || g.Cursor != w.Cursor || g.Floor != w.Floor || g.Attempts != w.Attempts || g.Resync != w.Resync ||
			g.Judging != w.Judging || g.Unsent != w.Unsent || g.Judged != w.Judged ||
			!g.NextAt.Equal(w.NextAt) || !g.FailingSince.Equal(w.FailingSince) || !g.LastSuccess.Equal(w.LastSuccess) {
			return fmt.Sprintf("stream %d: got %+v, want %+v", i, g, w)
		}
	}
	return ""
}

// testSecret returns a signing secret made from name, the same for the
// same name.
func testSecret(name string) webhook.Secret {
	key := sha256.Sum256([]byte(name))
	s, err := webhook.ParseSecret(webhook.SecretPrefix + base64.StdEncoding.EncodeToString(key[:]))
	if err != nil {
		panic(err)
	}
	return s
}
