package formsapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/internal/wire"
)

// blockingKeys knows one key; a lookup of any other counts itself and
// waits until release is closed (or its ctx ends), then fails.
type blockingKeys struct {
	entered chan string
	release chan struct{}
}

func (b blockingKeys) ResolveKey(ctx context.Context, key string) (string, error) {
	if key == "known-key" {
		return "acct", nil
	}
	b.entered <- key
	select {
	case <-b.release:
		return "", ErrInvalidKey
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// blockingStore is blockingKeys as one of this module's stores that is
// also its key resolver, so that the handler takes its combined lookup of
// key and form, which blocks the same way.
type blockingStore struct {
	stubStore
	blockingKeys
}

func (b *blockingStore) FastPath() storecontract.Self { return storecontract.Self{Store: b} }

func (b *blockingStore) AppendSubmissions(context.Context, string, string, Query, *wire.Page) error {
	return nil
}

func (b *blockingStore) AppendFeed(_ context.Context, _, _ string, q wire.FeedQuery, _ *wire.Page) (int64, bool, error) {
	return q.After, false, nil
}

func (b *blockingStore) FeedHead(context.Context, string, string, *wire.Form) (int64, uint64, error) {
	return 0, 0, nil
}

func (b *blockingStore) Authorize(ctx context.Context, key string) (Grant, error) {
	account, err := b.ResolveKey(ctx, key)
	return Grant{AccountID: account}, err
}

func (b *blockingStore) AuthorizeForm(ctx context.Context, key, _ string) (Grant, wire.Form, error) {
	if key != "known-key" {
		key = "form:" + key // so that the test sees which lookup was made
	}
	g, err := b.Authorize(ctx, key)
	return g, wire.Form{Found: err == nil}, err
}

// TestUnknownKeysWaitForASlot fills every lookup slot with keys that are
// not registered and checks that one more such key never reaches the
// resolver while they hold it (it gives up when its request does), and
// that a key seen to work goes straight to its lookup meanwhile; for the
// handler's combined lookup of key and form too.
func TestUnknownKeysWaitForASlot(t *testing.T) {
	t.Run("ResolveKey", func(t *testing.T) {
		keys := blockingKeys{entered: make(chan string, 100), release: make(chan struct{})}
		unknownKeysWait(t, newAPI(stubStore{}, keys), keys, "", "unknown-")
	})
	t.Run("AuthorizeForm", func(t *testing.T) {
		s := &blockingStore{blockingKeys: blockingKeys{entered: make(chan string, 100), release: make(chan struct{})}}
		a := newAPI(s, s)
		if a.formAuthz == nil {
			t.Fatal("the combined lookup is not taken")
		}
		unknownKeysWait(t, a, s.blockingKeys, "f", "form:unknown-")
	})
}

func unknownKeysWait(t *testing.T, a *api, keys blockingKeys, formID, entered string) {
	is := is.New(t)
	ctx := context.Background()
	_, _, _, err := a.authorize(ctx, "known-key", formID, false)
	is.NoErr(err) // remembered from now on

	slots := cap(a.gate.slots)
	var wg sync.WaitGroup
	errs := make(chan error, slots+1)
	for i := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _, err := a.authorize(ctx, fmt.Sprintf("unknown-%d", i), formID, false)
			errs <- err
		}()
	}
	for range slots {
		k := <-keys.entered                    // every slot is taken by a blocked lookup
		is.True(strings.HasPrefix(k, entered)) // of the kind this handler makes
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	_, _, _, err = a.authorize(done, "unknown-one-more", formID, false)
	is.True(errors.Is(err, context.Canceled)) // gave up waiting for a slot
	is.Equal(len(keys.entered), 0)            // and never reached the resolver

	g, _, _, err := a.authorize(ctx, "known-key", formID, false)
	is.NoErr(err)                 // a key seen to work does not wait behind them
	is.Equal(g.AccountID, "acct") // its own grant

	close(keys.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		is.True(errors.Is(err, ErrInvalidKey)) // each unknown key was looked up and refused
	}
}

// TestKeyGateForgetsRefusedKeys: a key that stops working (revoked) is no
// longer let past the gate.
func TestKeyGateForgetsRefusedKeys(t *testing.T) {
	is := is.New(t)
	g := newKeyGate()
	h := g.hash("k")
	g.remember(h)
	is.True(g.known(h))
	g.forget(h)
	is.True(!g.known(h))
	for i := range maxKnownKeys + 1 {
		g.remember(uint64(i))
	}
	is.True(len(g.seen) <= maxKnownKeys) // bounded
}

type stubStore struct{}

func (stubStore) ListForms(context.Context, string, Query) (Page[Form], error) {
	return Page[Form]{}, nil
}

func (stubStore) ListSubmissions(context.Context, string, string, Query) (Page[Submission], error) {
	return Page[Submission]{}, nil
}
