package formsapi_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/storetest"
)

// ours stands for a store of this module with every part of the private
// contract: memstore's reads, and the combined lookups that sqlitestore
// (AuthorizeForm) and pgstore (both) have, without a database.
type ours struct{ *memstore.Store }

func (o *ours) FastPath() storecontract.Self {
	return storecontract.Self{Store: o, Secret: o.Store.FastPath().Secret}
}

func (o *ours) AuthorizeForm(ctx context.Context, key, _ string) (formsapi.Grant, wire.Form, error) {
	g, err := o.Authorize(ctx, key)
	return g, wire.Form{}, err
}

func (o *ours) AuthorizeForms(ctx context.Context, key string) (formsapi.Grant, wire.Forms, error) {
	g, err := o.Authorize(ctx, key)
	return g, wire.Forms{}, err
}

func (o *ours) ListFormsAt(ctx context.Context, accountID string, q formsapi.Query, _ *wire.Forms) (formsapi.Page[formsapi.Form], error) {
	return o.ListForms(ctx, accountID, q)
}

// A host's types: ones that embed a store of this module (by pointer,
// in a struct passed by value), some of them not comparable (a slice
// field), and one of its own, which forwards to the public interfaces.
type (
	hostEmbeds      struct{ *memstore.Store }
	hostEmbedsSlice struct {
		*memstore.Store
		tags []string
	}
	hostEmbedsOursSlice struct {
		*ours
		tags []string
	}
	hostOwnSlice struct {
		formsapi.Store
		formsapi.FeedStore
		formsapi.FieldStore
		formsapi.Counter
		formsapi.KeyAuthorizer
		tags []string
	}
	// hostShadows embeds a store and declares a method of the private
	// contract's name with its own signature, which hides the promoted
	// one: it has FastPath, but not the whole fast path.
	hostShadows struct{ *memstore.Store }
)

func (hostShadows) FeedHead() {}

func ownSlice(m *memstore.Store) hostOwnSlice {
	return hostOwnSlice{m, m, m, m, m, []string{"own"}}
}

// TestCapabilitiesAsBefore holds capabilitiesOf, the one place the handler
// decides what it reads store, feed and keys through (issue 40), to what
// the derivations it replaced decided (kept in
// capabilities_internal_test.go), for every pairing of this module's
// stores (one, another, one with the combined lookups), a host's types
// that embed one (comparable or not), a host's own store and a plain
// KeyResolverFunc, with and without WithFeed. Deciding must not panic on
// a value that is not comparable, either.
//
// The one difference is for the better: a type that embeds a store and
// hides part of the fast path with a method of its own (hostShadows) was
// taken before for a host's own store (the old test asked for the whole
// fast path, not the handshake), so its promoted Counter, FeedStore and
// FieldStore, the embedded store's, were read past its overrides, and as
// keys its promoted Authorize was asked alone, past its ResolveKey; now
// the handshake alone (FastPath) tells that it embeds a store, so none of
// them is taken and, as keys, it is asked both.
func TestCapabilitiesAsBefore(t *testing.T) {
	mem1, mem2 := memstore.New(), memstore.New()
	ours1, ours2 := &ours{memstore.New()}, &ours{memstore.New()}
	shadow := hostShadows{mem1}
	stores := []formsapi.Store{mem1, mem2, ours1, hostEmbeds{mem1}, hostEmbedsSlice{mem1, []string{"a"}}, hostEmbedsOursSlice{ours1, []string{"a"}}, ownSlice(mem1), shadow}
	feeds := []formsapi.FeedStore{nil, mem1, mem2, ours1, ours2, hostEmbeds{mem1}, hostEmbedsSlice{mem1, nil}, hostEmbedsOursSlice{ours1, nil}, ownSlice(mem1), shadow}
	keys := []formsapi.KeyResolver{mem1, mem2, ours1, ours2, hostEmbeds{mem1}, hostEmbedsSlice{mem1, nil}, hostEmbedsOursSlice{ours1, nil}, ownSlice(mem1), formsapi.KeyResolverFunc(mem1.ResolveKey), shadow}
	var differ int
	for si, s := range stores {
		for fi, f := range feeds {
			for ki, k := range keys {
				name := fmt.Sprintf("store %d %T, feed %d %T, keys %d %T", si, s, fi, f, ki, k)
				now, before := formsapi.Capabilities(s, f, k)
				if now == before {
					continue
				}
				_, shadowStore := s.(hostShadows)
				_, shadowFeed := f.(hostShadows)
				_, shadowKeys := k.(hostShadows)
				if !shadowStore && !shadowFeed && !shadowKeys {
					t.Errorf("%s:\nnow    %s\nbefore %s", name, now, before)
				}
				differ++
			}
		}
	}
	// The shadowing type, as the store (feed and count, without WithFeed),
	// as WithFeed's feed (its fields) and as keys (both): the difference
	// shows, so the test would see any other.
	if differ == 0 {
		t.Error("no pairing decides differently from before, not even hostShadows's")
	}
	now, _ := formsapi.Capabilities(shadow, nil, mem2)
	if !strings.HasPrefix(now, "pages=checked(store=formsapi_test.hostShadows{@") {
		t.Errorf("hostShadows as the store: %s", now)
	}
	for _, unwanted := range []string{"count=formsapi_test.hostShadows", "fields=formsapi_test.hostShadows", "feed=checked"} {
		if strings.Contains(now, unwanted) {
			t.Errorf("hostShadows as the store: %s has %s, the embedded store's, past the host's overrides", now, unwanted)
		}
	}
}

// TestHostStoreNotComparable serves every route over a host's store that
// embeds one of this module's stores in a struct that cannot be compared
// (a slice field), given by value as the store, the feed and the keys:
// the handshake compares what a store's FastPath returns with the value
// given, which must not panic on such a value, and the handler must read
// it through its own methods.
func TestHostStoreNotComparable(t *testing.T) {
	t.Parallel()
	host := hostEmbedsSlice{seeded(t), []string{"tag"}}
	for _, set := range []struct {
		name string
		feed bool // WithFeed names the host's value
		opts []formsapi.Option
	}{
		{"alone", false, nil},
		{"WithFeed", true, []formsapi.Option{formsapi.WithFeed(host)}},
		{"WithObserver", false, []formsapi.Option{formsapi.WithObserver(&recordingObserver{})}},
		{"WithFeed and WithObserver", true, []formsapi.Option{formsapi.WithFeed(host), formsapi.WithObserver(&recordingObserver{})}},
	} {
		h := formsapi.NewHandler(host, host, set.opts...)
		feed := map[bool]int{true: 200, false: 501}[set.feed]
		for _, c := range []struct {
			target string
			status int
		}{
			{"/v1/forms", 200},
			{"/v1/forms/" + storetest.FormBusy + "/submissions", 200},
			// The feed and the count are the embedded store's: the feed is
			// served only when WithFeed names the host's value, the count
			// never.
			{"/v1/forms/" + storetest.FormBusy + "/submissions?total=exact", 501},
			{"/v1/forms/" + storetest.FormBusy + "/submissions?sync=start", feed},
			{"/v1/forms/" + storetest.FormBusy + "/export", feed},
		} {
			res := do(t, h, "GET", c.target, bearer(storetest.KeyA)...)
			if res.status != c.status {
				t.Errorf("%s, GET %s: %d, want %d", set.name, c.target, res.status, c.status)
			}
		}
	}
}

// callsObserver keeps every Call it is told of, whole.
type callsObserver struct {
	mu    sync.Mutex
	calls []observe.Call
	reqs  []observe.Request
}

func (o *callsObserver) Call(ctx context.Context, c observe.Call) (context.Context, func(error)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, c)
	return context.WithValue(ctx, opKey{}, c.Op), func(error) {}
}

func (o *callsObserver) Request(_ context.Context, r observe.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reqs = append(o.reqs, r)
}

// opFeed records the op its SyncSubmissions' callers' contexts carry.
type opFeed struct {
	formsapi.FeedStore
	seen *[]any
}

func (f opFeed) SyncSubmissions(ctx context.Context, a, form string, after int64, limit int) (formsapi.FeedPage, error) {
	*f.seen = append(*f.seen, ctx.Value(opKey{}))
	return f.FeedStore.SyncSubmissions(ctx, a, form, after, limit)
}

// TestObserverSeesTheFeedHead: an export's read of where the form's feed
// ends, now called and observed in export.go (a.observeCall) rather than
// by a wrapper of the feed, is reported once, as feed_head with the
// request's account and form, over this module's store and over a host's
// feed alike; the request is reported with its form; and a host's feed,
// walked to its end, is called with the context the observer returned.
func TestObserverSeesTheFeedHead(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	var seen []any
	host := opFeed{s, &seen}
	for _, c := range []struct {
		name string
		opts []formsapi.Option
	}{
		{"the store's own", nil},
		{"a host's feed", []formsapi.Option{formsapi.WithFeed(host)}},
	} {
		o := &callsObserver{}
		h := formsapi.NewHandler(s, s, append(c.opts, formsapi.WithObserver(o))...)
		seen = nil
		res := do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/export", bearer(storetest.KeyA)...)
		if res.status != 200 {
			t.Fatalf("%s: export: %d", c.name, res.status)
		}
		var heads []observe.Call
		for _, call := range o.calls {
			if call.Op == observe.OpFeedHead {
				heads = append(heads, call)
			}
		}
		want := observe.Call{Op: observe.OpFeedHead, AccountID: storetest.AccountA, FormID: storetest.FormBusy}
		if len(heads) != 1 || heads[0] != want {
			t.Errorf("%s: feed_head calls %+v, want one %+v", c.name, heads, want)
		}
		if len(o.reqs) != 1 || o.reqs[0].FormID != storetest.FormBusy || o.reqs[0].AccountID != storetest.AccountA {
			t.Errorf("%s: requests %+v, want one of %s's %s", c.name, o.reqs, storetest.AccountA, storetest.FormBusy)
		}
		if c.opts != nil && (len(seen) == 0 || seen[0] != observe.OpFeedHead) {
			t.Errorf("%s: the feed's calls carried %v, want the walk's first with %q", c.name, seen, observe.OpFeedHead)
		}
	}
}
