package pgstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
)

// WithNotify makes the store listen for PostgreSQL's notices of changes
// to its schema (migration 0033: every transaction that writes the change
// log sends one at commit, whoever writes) on a connection of its own,
// and run the check of its waiting sync requests (WithWaitCheck) as soon
// as one arrives, instead of at the end of the interval: a write through
// another node, or a host's SQL, reaches a waiter in about a round trip
// and a check rather than within the interval. Nothing is sent while no
// request waits, neither the check nor the notices: writers notify only
// while some listening node has a request waiting (a lease the node
// renews every 20 s while one waits, and as the first one comes, a
// minute ahead), since a notifying commit takes a lock that every other
// notifying commit of the cluster waits for. The notices never replace
// the check: a node that misses one (its listening connection lost, a
// pooler between, a write made as the first request came) finds the
// change at its next check, as without this option.
//
// dsn is where the listening connection goes; "" uses the store's own
// connection settings (Open's DSN, or New's pool's). A pooler in
// transaction mode (PgBouncer) does not deliver notices to a session:
// give a DSN that reaches PostgreSQL directly. The connection is made in
// the background and made again, with a growing pause of up to 5 s,
// whenever it fails, or does not answer the ping it gets every 20 s
// (a peer gone without a word); Open and New do not wait for it. It
// panics if dsn cannot be parsed.
func WithNotify(dsn string) Option {
	var cc *pgx.ConnConfig
	if dsn != "" {
		var err error
		if cc, err = pgx.ParseConfig(dsn); err != nil {
			// Never the DSN or the parser's error, which may quote it.
			panic("pgstore: WithNotify: the DSN cannot be parsed")
		}
	}
	return func(c *config) { c.notify, c.notifyConn, c.noticeRenew = true, cc, noticeRenew }
}

// notices counts what the listener did, for tests, and keeps the state
// the lease's renewals share.
type notices struct {
	connects, received, failures atomic.Uint64
	ticks                        atomic.Uint64 // renewal periods passed while listening
	pid                          atomic.Uint32 // the listening backend's

	listening atomic.Bool  // the listener's connection listens
	renewed   atomic.Int64 // a renewal's last start, as sinceStart()+1; 0: none
}

// processStart is what sinceStart measures from, on the monotonic clock.
var processStart = time.Now()

// sinceStart is the time since processStart in nanoseconds, plus one,
// so that 0 may mean never.
func sinceStart() int64 { return int64(time.Since(processStart)) + 1 }

// startNotify starts the listener when cfg asks for it.
func (s *Store) startNotify(cfg config) {
	if !cfg.notify {
		return
	}
	cc := cfg.notifyConn
	if cc == nil {
		cc = s.pool.Config().ConnConfig
	}
	cc = cc.Copy()
	// A wait that ends to renew the lease sets the socket's deadline,
	// and sends no cancel request (a connection of its own each time).
	cc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.closing.Err() != nil {
		return
	}
	renew := cfg.noticeRenew
	// The lease follows the waiters: a waiter that finds the hub empty
	// brings it ahead before it reads its page (see wantNotices).
	s.wait.SetFirstHook(func() { s.wantNotices(renew) })
	s.background.Add(1)
	go s.listenNotices(cc, renew)
}

// maxNoticePause bounds the pause before the listener connects again.
const maxNoticePause = 5 * time.Second

// listenNotices keeps a connection listening for the schema's notices until
// the store closes, and pokes the waiters' check for each notice and
// after each (re)connection, which may have missed some.
func (s *Store) listenNotices(cc *pgx.ConnConfig, renew time.Duration) {
	defer s.background.Done()
	pause := 100 * time.Millisecond
	for {
		if s.listenOnce(cc, renew) {
			pause = 100 * time.Millisecond
		}
		if s.closing.Err() != nil {
			return
		}
		s.notices.failures.Add(1)
		select {
		case <-s.closing.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, maxNoticePause)
	}
}

// listenOnce connects, listens and waits for notices until the
// connection fails or the store closes. It reports whether it listened.
func (s *Store) listenOnce(cc *pgx.ConnConfig, renew time.Duration) (listened bool) {
	ctx := s.closing
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return false
	}
	defer func() {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(c)
	}()
	var oid uint32
	if err := conn.QueryRow(ctx, "SELECT $1::regclass::oid", qualify(s.schema, "formsapi_changes")).Scan(&oid); err != nil {
		return false
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{noticeChannel(oid)}.Sanitize()); err != nil {
		return false
	}
	// Writers notify while the lease is ahead of their clock: renewed
	// now if a request waits, before the poke, and every renew while
	// this connection listens and a request waits (and by wantNotices
	// when one comes).
	s.notices.listening.Store(true)
	defer s.notices.listening.Store(false)
	if s.waiting() {
		if err := s.renewNotices(ctx); err != nil {
			return false
		}
	}
	s.notices.pid.Store(conn.PgConn().PID())
	s.notices.connects.Add(1)
	s.wait.Poke() // what committed while nothing listened
	renewed := time.Now()
	for {
		wctx, cancel := context.WithTimeout(ctx, renew-time.Since(renewed))
		_, err := conn.WaitForNotification(wctx)
		expired := wctx.Err() != nil // before cancel, which sets it
		cancel()
		if err != nil && ctx.Err() == nil && expired && !conn.IsClosed() {
			// The time to renew, not a failure: the connection stays, if
			// it still answers. A wait for notices sends nothing, and a
			// connection whose peer is gone without a word (a host that
			// died, a firewall that dropped its state) would wait for
			// ever while the pool renewed the lease: writers notifying
			// for no one, this node's waiters left to the interval. So
			// the connection answers a ping, within renew (a second at
			// least), before the lease is renewed, or is made again.
			// And the lease is renewed only while a request waits: a
			// notifying commit takes a lock that every other notifying
			// commit of the cluster waits for, so concurrent writers
			// commit one at a time while notices are sent.
			if err := s.pingAndRenew(ctx, conn, max(renew, time.Second)); err != nil {
				return true
			}
			s.notices.ticks.Add(1)
			renewed = time.Now()
			continue
		}
		if err != nil {
			return true
		}
		s.notices.received.Add(1)
		s.wait.Poke()
	}
}

// pingAndRenew checks that the listening connection conn still answers
// and, if a request waits, renews the lease, each within bound.
func (s *Store) pingAndRenew(ctx context.Context, conn *pgx.Conn, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		return err
	}
	if !s.waiting() {
		return nil
	}
	return s.renewNotices(ctx)
}

// waiting reports whether a request waits on the store's hub.
func (s *Store) waiting() bool {
	forms, keys := s.wait.Waiting()
	return forms+keys > 0
}

// maxWantWait bounds the renewal a waiter makes (wantNotices).
const maxWantWait = 5 * time.Second

// wantNotices is the hub's first hook (feedwait.Hub.SetFirstHook): a
// request waits where none did, before it reads its page. Unless the
// lease was renewed (or a renewal began) within renew, when it is still
// 40 s ahead at least, it is renewed now, so that a write committed
// after the waiter's read notifies; then the check is poked for what
// committed before the renewal. Nothing while the listener does not
// listen: no one would hear the notices. One waiter renews at a time;
// the others, which registered after it, go on (a write they miss meanwhile
// reaches them at the check's interval, as a lost notice does).
func (s *Store) wantNotices(renew time.Duration) {
	if !s.notices.listening.Load() {
		return
	}
	last := s.notices.renewed.Load()
	if last != 0 && sinceStart()-last < int64(renew) {
		return
	}
	ctx, cancel := context.WithTimeout(s.closing, maxWantWait)
	defer cancel()
	if s.renewNoticesIf(ctx, last) {
		s.wait.Poke()
	}
}

// noticeRenew is how often a listening store renews the lease that
// makes writers notify (migration 0033's notify_until, set a minute
// ahead of PostgreSQL's clock).
const noticeRenew = 20 * time.Second

// renewNotices moves the lease a minute ahead (never back: another node
// may have moved it further).
func (s *Store) renewNotices(ctx context.Context) error {
	s.notices.renewed.Store(sinceStart())
	return s.execRenewal(ctx)
}

// execRenewal is the lease's renewal statement.
func (s *Store) execRenewal(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `UPDATE `+qualify(s.schema, "formsapi_settings")+` SET value = greatest(value, extract(epoch FROM now())::bigint + 60) WHERE name = 'notify_until'`)
	return err
}

// renewNoticesIf is renewNotices unless another renewal began since
// last (notices.renewed as the caller read it): it reports whether it
// renewed the lease.
func (s *Store) renewNoticesIf(ctx context.Context, last int64) bool {
	if !s.notices.renewed.CompareAndSwap(last, sinceStart()) {
		return false
	}
	return s.execRenewal(ctx) == nil
}

// noticeChannel is the channel of the notices of the schema whose
// change log has the OID oid (migration 0033).
func noticeChannel(oid uint32) string {
	return "formsapi_changes_" + strconv.FormatUint(uint64(oid), 10)
}
