package pgstore_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/pgtest"
	"github.com/formsapi/formsapi/pgstore"
)

// TestWaitNotify: on a node made WithNotify, a write through another
// node wakes its waiter at once: the check's interval (an hour) never
// passes and the test never calls Check. When its listening connection
// is ended, the node listens again, and another node's revocation then
// wakes the key's waiter. With and without WithFollow (the check is a
// round there).
func TestWaitNotify(t *testing.T) {
	t.Parallel()
	for _, follow := range []bool{false, true} {
		t.Run(fmt.Sprintf("follow=%t", follow), func(t *testing.T) {
			t.Parallel()
			dsn, schema := pgtest.Schema(t)
			opts := []pgstore.Option{pgstore.WithWaitCheck(time.Hour), pgstore.WithNotify("")}
			if follow {
				opts = append(opts, pgstore.WithFollow(0))
			}
			s := mustOpenIn(t, dsn, schema, opts...)
			other := mustOpenIn(t, dsn, schema)
			if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "f", Title: "f"}); err != nil {
				t.Fatal(err)
			}
			key, _ := formsapi.NewKey()
			if err := s.AddKey(ctx, key, "acct"); err != nil {
				t.Fatal(err)
			}
			hub := pgstore.WaitHub(s)
			woken := func(c <-chan struct{}, what string) {
				t.Helper()
				select {
				case <-c:
				case <-time.After(30 * time.Second):
					c, r, f, _ := pgstore.Notices(s)
					t.Fatalf("%s: no wake-up in 30 s (listener: %d connections, %d notices, %d failures; %d checks)", what, c, r, f, hub.Stats().Checks)
				}
			}

			w := hub.Watch("f", pgstore.KeyHash(key), 0)
			defer w.Release()
			// A waiter reads its page first, through the node: a
			// following node's round, which the waiter's read comes
			// after (a node's first round reads no log: it has no
			// snapshot to read it from).
			if err := hub.Check(ctx); err != nil {
				t.Fatal(err)
			}
			checks := hub.Stats().Checks
			if err := other.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: json.RawMessage(`{}`)}, formsapi.Metadata{}); err != nil {
				t.Fatal(err)
			}
			woken(w.Form, "another node's submission")

			// End the listening connection (the node has listened: its
			// notice woke the waiter above).
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			_, _, _, pid := pgstore.Notices(s)
			var ended bool
			if err := conn.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&ended); err != nil || !ended {
				t.Fatalf("the listening backend %d not ended: %t, %v", pid, ended, err)
			}

			k := hub.Watch("f", pgstore.KeyHash(key), 1)
			defer k.Release()
			if err := other.RevokeKey(ctx, key); err != nil {
				t.Fatal(err)
			}
			woken(k.Key, "another node's revocation, after the listening connection ended")
			if hub.Stats().Checks == checks {
				t.Error("woken without a check")
			}
		})
	}
}

// TestNotifyLease: writers notify only while some node listens and a
// request waits there. A store without WithNotify leaves the lease at 0,
// so its writes send no notice; a store made WithNotify with a request
// waiting moves it ahead of PostgreSQL's clock, and renews it: set back
// to 0 behind its back, it is ahead again at the next renewal (every
// 50 ms here).
func TestNotifyLease(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
	plain := mustOpenIn(t, dsn, schema)
	if err := plain.AddForm(ctx, "acct", formsapi.Form{ID: "f", Title: "f"}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	settings := pgx.Identifier{schema, "formsapi_settings"}.Sanitize()
	ahead := func() (bool, error) {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT value > extract(epoch FROM now()) FROM `+settings+` WHERE name = 'notify_until'`).Scan(&ok)
		return ok, err
	}
	if ok, err := ahead(); err != nil || ok {
		t.Fatalf("without a listening store: lease ahead %t (%v), want false", ok, err)
	}
	listening := mustOpenIn(t, dsn, schema, pgstore.WithNotify(""), pgstore.WithNoticeRenew(50*time.Millisecond))
	key, _ := formsapi.NewKey()
	w := pgstore.WaitHub(listening).Watch("f", pgstore.KeyHash(key), 0)
	defer w.Release()
	until := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			ok, err := ahead()
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the lease is not ahead after 30 s", what)
			}
			time.Sleep(10 * time.Millisecond) // polling for the listener's statement, not for time to pass
		}
	}
	until("a listening store")
	if _, err := conn.Exec(ctx, `UPDATE `+settings+` SET value = 0 WHERE name = 'notify_until'`); err != nil {
		t.Fatal(err)
	}
	until("after the lease was set back")
}

// frozenProxy forwards TCP connections to target until freeze, which
// stops the connections open then from carrying anything, either way,
// without closing them (a peer gone without a word: a host that died, a
// firewall that dropped the connection's state); those opened after it
// forward as before.
type frozenProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	open   []chan struct{} // closed when the connection freezes
}

func newFrozenProxy(t *testing.T, target string) *frozenProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &frozenProxy{ln: ln, target: target}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			frozen := make(chan struct{})
			p.mu.Lock()
			p.open = append(p.open, frozen)
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				defer dst.Close()
				defer src.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					select {
					case <-frozen:
						<-done // holds the connection, carries nothing
						return
					default:
					}
					if n > 0 {
						if _, werr := dst.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
	return p
}

// freeze stops the connections open now.
func (p *frozenProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.open {
		close(f)
	}
	p.open = nil
}

// TestNotifyListenerHangs: the listening connection stops carrying
// anything without closing (its peer gone without a word), while the
// store's pool still works. The node must notice that it no longer
// listens and listen again, so that another node's write wakes its
// waiter, rather than renew the lease through its pool for ever while
// its notices go nowhere (every writer paying for them, and the waiter
// woken only at the check's interval, here an hour).
func TestNotifyListenerHangs(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := newFrozenProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	s := mustOpenIn(t, dsn, schema, pgstore.WithWaitCheck(time.Hour), pgstore.WithNotify(u.String()), pgstore.WithNoticeRenew(100*time.Millisecond))
	other := mustOpenIn(t, dsn, schema)
	if err := s.AddForm(ctx, "acct", formsapi.Form{ID: "f", Title: "f"}); err != nil {
		t.Fatal(err)
	}
	key, _ := formsapi.NewKey()
	if err := s.AddKey(ctx, key, "acct"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, _, _, _ := pgstore.Notices(s); c > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the store did not listen in 30 s")
		}
		time.Sleep(10 * time.Millisecond) // polling for the listener's connection, not for time to pass
	}
	p.freeze()

	hub := pgstore.WaitHub(s)
	w := hub.Watch("f", pgstore.KeyHash(key), 0)
	defer w.Release()
	if err := hub.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: json.RawMessage(`{}`)}, formsapi.Metadata{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Form:
	case <-time.After(30 * time.Second):
		c, r, f, _ := pgstore.Notices(s)
		t.Fatalf("another node's submission woke no waiter in 30 s after the listening connection hung (listener: %d connections, %d notices, %d failures)", c, r, f)
	}
}

// TestNotifyLeaseFollowsWaiters: a notifying commit takes a lock that
// every other notifying commit of the cluster waits for, so writers
// notify only while a listening node has a request waiting, not merely
// while it listens. A listening node with no waiter leaves the lease
// behind PostgreSQL's clock through its renewals; a waiter brings it
// ahead before Watch returns (so that a write after it notifies), and
// once no one waits it is renewed no more.
func TestNotifyLeaseFollowsWaiters(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.Schema(t)
	s := mustOpenIn(t, dsn, schema, pgstore.WithWaitCheck(time.Hour), pgstore.WithNotify(""), pgstore.WithNoticeRenew(50*time.Millisecond))
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	settings := pgx.Identifier{schema, "formsapi_settings"}.Sanitize()
	ahead := func() bool {
		t.Helper()
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT value > extract(epoch FROM now()) FROM `+settings+` WHERE name = 'notify_until'`).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// ticks waits for n more of the listener's renewal periods.
	ticks := func(n uint64) {
		t.Helper()
		from := pgstore.NoticeTicks(s)
		for deadline := time.Now().Add(30 * time.Second); pgstore.NoticeTicks(s) < from+n; {
			if time.Now().After(deadline) {
				t.Fatalf("the listener passed %d of %d renewal periods in 30 s", pgstore.NoticeTicks(s)-from, n)
			}
			time.Sleep(10 * time.Millisecond) // polling for the listener's periods, not for time to pass
		}
	}
	ticks(3)
	if ahead() {
		t.Fatal("the lease is ahead while the listening node has no waiter: every writer notifies for no one")
	}
	key, _ := formsapi.NewKey()
	w := pgstore.WaitHub(s).Watch("f", pgstore.KeyHash(key), 0)
	if !ahead() {
		t.Fatal("a waiter registered, and the lease is not ahead: a write after it sends no notice")
	}
	w.Release()
	// A renewal the listener began while the waiter was there may commit
	// after the release: one period ends it before the lease is set back.
	ticks(1)
	if _, err := conn.Exec(ctx, `UPDATE `+settings+` SET value = 0 WHERE name = 'notify_until'`); err != nil {
		t.Fatal(err)
	}
	ticks(3)
	if ahead() {
		t.Error("the lease was renewed after the last waiter left")
	}
}
