package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/webhook"
)

// pollStore holds Run's second claim of endpoints (Run claims at the
// start of every round) until release is closed, and says when it came.
type pollStore struct {
	*memstore.Store
	claims  atomic.Int64
	second  chan struct{}
	release chan struct{}
}

func (s *pollStore) ClaimEndpoints(ctx context.Context, now time.Time, d time.Duration, max int) ([]webhook.Lease, error) {
	if s.claims.Add(1) == 2 {
		s.second <- struct{}{}
		<-s.release
	}
	return s.Store.ClaimEndpoints(ctx, now, d, max)
}

// TestRunPassesOnlyAtPolls: once a pass has ended, Run waits for the
// next poll before it claims or passes again, so an idle dispatcher reads
// nothing between polls. It used to start the next round as soon as a
// pass ended: a loop that held a core and kept the database busy with
// nothing to deliver. The polls are the test's own ticks; when Run has
// seen the first pass end, it must take a tick before its second claim
// (which the store holds, so that Run cannot take the tick after it).
func TestRunPassesOnlyAtPolls(t *testing.T) {
	r := newRig(t, "contact")
	rc := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer rc.Close()
	r.endpoint(rc.URL, "contact")
	r.add("contact", "s1") // the first pass delivers it, then has nothing to do
	store := &pollStore{Store: r.store, second: make(chan struct{}, 1), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	ticks, ended := make(chan time.Time), make(chan struct{})
	passDone := func() {
		select {
		case ended <- struct{}{}:
		case <-ctx.Done():
		}
	}
	d := webhook.NewDispatcher(store, store, r.secret, r.options(webhook.WithTicks(ticks), webhook.WithPassDone(passDone))...)
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	<-ended // Run saw the first pass end
	select {
	case <-store.second:
		t.Error("Run claimed endpoints again when a pass ended, without a poll")
	case ticks <- time.Time{}:
	}
	close(store.release)
	select {
	case <-ended: // the poll's pass
	case <-store.second:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
