package pgstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// WithNotify makes the store listen for PostgreSQL's notices of changes
// to its schema (migration 0033: every transaction that writes the change
// log sends one at commit, whoever writes) on a connection of its own,
// and run the check of its waiting sync requests (WithWaitCheck) as soon
// as one arrives, instead of at the end of the interval: a write through
// another node, or a host's SQL, reaches a waiter in about a round trip
// and a check rather than within the interval. Nothing is sent while no
// request waits, and the notices never replace the check: a node that
// misses one (its listening connection lost, a pooler between) finds the
// change at its next check, as without this option.
//
// dsn is where the listening connection goes; "" uses the store's own
// connection settings (Open's DSN, or New's pool's). A pooler in
// transaction mode (PgBouncer) does not deliver notices to a session:
// give a DSN that reaches PostgreSQL directly. The connection is made in
// the background and made again, with a growing pause of up to 5 s,
// whenever it fails; Open and New do not wait for it. It panics if dsn
// cannot be parsed.
func WithNotify(dsn string) Option {
	var cc *pgx.ConnConfig
	if dsn != "" {
		var err error
		if cc, err = pgx.ParseConfig(dsn); err != nil {
			// Never the DSN or the parser's error, which may quote it.
			panic("pgstore: WithNotify: the DSN cannot be parsed")
		}
	}
	return func(c *config) { c.notify, c.notifyConn = true, cc }
}

// notices counts what the listener did, for tests.
type notices struct {
	connects, received, failures atomic.Uint64
}

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
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.closing.Err() != nil {
		return
	}
	s.background.Add(1)
	go s.listenNotices(cc)
}

// maxNoticePause bounds the pause before the listener connects again.
const maxNoticePause = 5 * time.Second

// listenNotices keeps a connection listening for the schema's notices until
// the store closes, and pokes the waiters' check for each notice and
// after each (re)connection, which may have missed some.
func (s *Store) listenNotices(cc *pgx.ConnConfig) {
	defer s.background.Done()
	pause := 100 * time.Millisecond
	for {
		if s.listenOnce(cc) {
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
func (s *Store) listenOnce(cc *pgx.ConnConfig) (listened bool) {
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
	s.notices.connects.Add(1)
	s.wait.Poke() // what committed while nothing listened
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true
		}
		s.notices.received.Add(1)
		s.wait.Poke()
	}
}

// noticeChannel is the channel of the notices of the schema whose
// change log has the OID oid (migration 0033).
func noticeChannel(oid uint32) string {
	return "formsapi_changes_" + strconv.FormatUint(uint64(oid), 10)
}
