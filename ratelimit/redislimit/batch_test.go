package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/formsapi/formsapi/internal/redistest"
	"github.com/formsapi/formsapi/internal/testenv"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/ratelimit/redislimit"
)

// holdHook holds the first command the client sends until release is
// closed, and records the scripts' pipelines, as the name of their
// commands and how many. It answers the first pipeline of scripts by hash
// itself, with NOSCRIPT for each, as a Redis that has not loaded the
// script (a restart, SCRIPT FLUSH, a new replica) would.
type holdHook struct {
	mu        sync.Mutex
	held      bool
	holding   chan struct{} // closed when the first command is held
	release   chan struct{}
	pipelines []string
}

type noScript struct{}

func (noScript) Error() string { return "NOSCRIPT No matching script. Please use EVAL." }
func (noScript) RedisError()   {}

func (h *holdHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		first := !h.held
		h.held = true
		h.mu.Unlock()
		if first {
			close(h.holding)
			<-h.release
		}
		return next(ctx, cmd)
	}
}

func (h *holdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		name := cmds[0].Name()
		if name != "evalsha" && name != "eval" {
			return next(ctx, cmds) // a connection's set-up
		}
		h.mu.Lock()
		h.pipelines = append(h.pipelines, fmt.Sprintf("%d %s", len(cmds), name))
		first := len(h.pipelines) == 1
		h.mu.Unlock()
		if first {
			for _, c := range cmds {
				c.SetErr(noScript{})
			}
			return nil
		}
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*holdHook)(nil)

// TestConcurrentDecisionsShareAPipeline holds one decision in flight and
// sends five more for the same bucket meanwhile: they wait, go to Redis
// in one pipeline, and are decided one after another in the order they
// came, against the quota the first one left. Every script of the
// pipeline is refused as unknown (NOSCRIPT: not run) and sent again in
// full: no decision is lost or spent twice.
func TestConcurrentDecisionsShareAPipeline(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	hook := &holdHook{holding: make(chan struct{}), release: make(chan struct{})}
	client.AddHook(hook)
	prefix := redistest.Prefix(t)
	l := redislimit.New(client, redislimit.WithPrefix(prefix))
	p := ratelimit.Policy{Name: "default", Quota: 3, Window: time.Hour}

	type result struct {
		d   ratelimit.Decision
		err error
	}
	first := make(chan result, 1)
	go func() {
		d, err := l.Allow(ctx, "account:a", p)
		first <- result{d, err}
	}()
	<-hook.holding
	const waiting = 5
	results := make([]chan result, waiting)
	for i := range results {
		results[i] = make(chan result, 1)
		go func() {
			d, err := l.Allow(ctx, "account:a", p)
			results[i] <- result{d, err}
		}()
		testenv.WaitFor(t, func() bool { return redislimit.Waiting(l) == i+1 })
	}
	close(hook.release)

	if r := <-first; r.err != nil || !r.d.Allowed || r.d.Remaining != 2 {
		t.Fatalf("the decision in flight: %+v, %v", r.d, r.err)
	}
	for i, ch := range results {
		r := <-ch
		if r.err != nil {
			t.Fatalf("decision %d: %v", i, r.err)
		}
		// The quota is 3 and the first decision took one: the next two
		// in arrival order are allowed, the rest refused.
		if want := i < 2; r.d.Allowed != want {
			t.Errorf("decision %d: allowed %v, want %v", i, r.d.Allowed, want)
		}
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if want := []string{"5 evalsha", "5 eval"}; !slices.Equal(hook.pipelines, want) {
		t.Errorf("pipelines %q, want %q: the scripts by hash, then again in full", hook.pipelines, want)
	}
}

// TestWaitingDecisionEndsWithItsContext: a decision waiting behind one
// that hangs returns when its own context ends.
func TestWaitingDecisionEndsWithItsContext(t *testing.T) {
	t.Parallel()
	addr, accepted := hangingServer(t)
	client := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: -1, WriteTimeout: -1, MaxRetries: -1})
	defer client.Close()
	l := redislimit.New(client)
	p := ratelimit.Policy{Name: "default", Quota: 3, Window: time.Hour}
	hung, cancelHung := context.WithCancel(ctx)
	defer cancelHung()
	go l.Allow(hung, "account:a", p)
	<-accepted // the first decision is in flight, and hangs
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := l.Allow(wctx, "account:b", p)
		done <- err
	}()
	testenv.WaitFor(t, func() bool { return redislimit.Waiting(l) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiting decision returned %v", err)
	}
}

// TestAbandonedRoundTripHoldsNoOne: a round trip that go-redis does not
// end (a connection that hangs, with no read timeout), once every
// decision in it has given up, holds no later decision: those go to
// Redis on another connection rather than wait for it.
func TestAbandonedRoundTripHoldsNoOne(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	hook := &holdHook{holding: make(chan struct{}), release: make(chan struct{})}
	client.AddHook(hook)
	defer close(hook.release)
	l := redislimit.New(client, redislimit.WithPrefix(redistest.Prefix(t)))
	p := ratelimit.Policy{Name: "default", Quota: 3, Window: time.Hour}

	hung, cancelHung := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := l.Allow(hung, "account:a", p)
		done <- err
	}()
	<-hook.holding // the first decision's round trip hangs
	cancelHung()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the abandoned decision returned %v", err)
	}
	// Bounded only so that a wedged limiter fails rather than hangs the
	// package: the decision needs one round trip.
	next, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	d, err := l.Allow(next, "account:b", p)
	if err != nil || !d.Allowed {
		t.Fatalf("the decision after an abandoned round trip: %+v, %v", d, err)
	}
}

// TestQueuedTooLongIsOverloaded: a decision that waits in the node's
// queue for half of the time its context had left, behind a round trip
// still within its own bound, returns ErrOverloaded without going to
// Redis; the round trip it waited for is not affected.
func TestQueuedTooLongIsOverloaded(t *testing.T) {
	t.Parallel()
	client := redistest.Client(t)
	hook := &holdHook{holding: make(chan struct{}), release: make(chan struct{})}
	client.AddHook(hook)
	l := redislimit.New(client, redislimit.WithPrefix(redistest.Prefix(t)))
	p := ratelimit.Policy{Name: "default", Quota: 3, Window: time.Hour}

	slow, cancelSlow := context.WithTimeout(ctx, time.Hour)
	defer cancelSlow()
	first := make(chan error, 1)
	go func() {
		_, err := l.Allow(slow, "account:a", p)
		first <- err
	}()
	<-hook.holding // its round trip is in flight, and may take half an hour
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := l.Allow(short, "account:b", p)
	if !errors.Is(err, ratelimit.ErrOverloaded) {
		t.Fatalf("the decision queued past half its time returned %v, want ErrOverloaded", err)
	}
	if n := redislimit.Waiting(l); n != 0 {
		t.Fatalf("%d decisions still wait", n)
	}
	close(hook.release)
	if err := <-first; err != nil {
		t.Fatalf("the decision in flight: %v", err)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.pipelines) != 0 {
		t.Fatalf("pipelines %q: the overloaded decision went to Redis", hook.pipelines)
	}
}
