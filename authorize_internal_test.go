package formsapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/matryer/is"
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

// TestUnknownKeysWaitForASlot fills every lookup slot with keys that are
// not registered and checks that one more such key never reaches the
// resolver while they hold it (it gives up when its request does), and
// that a key seen to work goes straight to its lookup meanwhile.
func TestUnknownKeysWaitForASlot(t *testing.T) {
	is := is.New(t)
	keys := blockingKeys{entered: make(chan string, 100), release: make(chan struct{})}
	a := newAPI(stubStore{}, keys)
	ctx := context.Background()
	_, err := a.authorize(ctx, "known-key")
	is.NoErr(err) // remembered from now on

	slots := cap(a.gate.slots)
	var wg sync.WaitGroup
	errs := make(chan error, slots+1)
	for i := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.authorize(ctx, fmt.Sprintf("unknown-%d", i))
			errs <- err
		}()
	}
	for range slots {
		<-keys.entered // every slot is taken by a blocked lookup
	}

	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = a.authorize(done, "unknown-one-more")
	is.True(errors.Is(err, context.Canceled)) // gave up waiting for a slot
	is.Equal(len(keys.entered), 0)            // and never reached the resolver

	g, err := a.authorize(ctx, "known-key")
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
