package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/formsapi/formsapi/internal/coalesce"
	"github.com/formsapi/formsapi/internal/feedwait"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/pagecache"
)

// A node that follows the change log (WithFollow; docs/fleet.md, "Nodes
// that follow the log") keeps a copy of the keys, forms and forms lists
// its requests have looked up, and brings it up to date in rounds: one
// statement for every request waiting, which reads what the log says
// changed since the snapshot of the node's last round (migration 0025),
// with the current state of each, and the lookups of the requests the
// copy cannot answer. A request waits for a round that starts after it
// arrived (internal/coalesce), and is then answered from the copy: as
// new as a lookup of its own, but without a statement, or a row, of its
// own when the copy holds its key.
//
// Exactness: the round's statement reads the log, the state of what it
// names and the lookups in one snapshot, and names the log rows whose
// transaction the last round's snapshot did not see (at or past its xmax,
// or in progress then). Whatever committed before the request arrived is
// in the round's snapshot; if the last round saw it, the copy has it
// already, and if not, its log row is read now. What the copy holds is
// state read in the last round's snapshot, replaced as a whole by a later
// one: applying a log row twice changes nothing.

// Feeds. A write changes its form's version, and every node holding a
// page of the form would read the write's rows itself at its next read of
// the page (pagecache's splice, a statement per page per node). A
// following node reads them in its rounds instead: for each form it
// holds pages of, it keeps a feed (formFeed), the form's head (version,
// base, feed_last) in the last round's snapshot and the submissions added
// at the last few feed positions up to it, and sends each round the
// position each feed is at; the round's statement returns, for the forms
// the log names, their new head and the submissions added since that
// position. A page of the form held at an older head is then spliced
// from the feed (pagecache.Read.Splice) when the request's version is
// the feed's, with no statement.
//
// Exactness: what the feed holds was read in round snapshots, in order,
// each with the form's head; a form the log does not name did not change
// between two rounds, so its feed is its state in the last round's
// snapshot too. The feed's rows are appended only while base stays what
// it was (base changes, to a value it never had, with every change to the
// form's submissions but an addition at the end of its feed) and when
// they are every position from the feed's last to the new one; anything
// else starts the feed again at the new head. A page whose head has the
// feed's base was read when base had that value, so only additions came
// between it and the feed's version, which are the feed's rows above the
// page's last position: the splice pagecache checks (the anchor, every
// position once) then gives exactly the page a read at that version
// gives. TestFollowSplicesExactly compares them.

// maxFeedRows bounds the rows a feed keeps, and the rows a round reads
// for one form: a form that gained more since a round starts its feed
// again, and its pages are spliced or read by statement, as without
// feeds.
const maxFeedRows = pagecache.MaxSplice

// fedRounds is how many rounds in a row may find no form with a feed
// changed before the node's rounds leave the feeds out of their
// statement (the lean one), until a round finds one again: about a
// third of a second of rounds 5 ms apart.
const fedRounds = 64

// maxFeedBytes bounds the bytes of the rows one feed keeps, and
// maxFeedsBytes those of all of them; maxFeeds bounds the forms with
// feeds, each a name in every round's statement.
const (
	maxFeedBytes  = 64 << 10
	maxFeedsBytes = 8 << 20
	maxFeeds      = 1024
)

// formFeed is a form's feed (see Feeds above): its head in the snapshot
// of the last round that read it, and the submissions at feed positions
// from+1 to last.
type formFeed struct {
	seq, version, base int64
	from, last         int64
	anchor             keyset.Pos        // of the submission at from; Seq 0 when none is there
	anchored           bool              // whether anchor is known
	rows               []pagecache.Added // the submissions and tombstones at from+1 .. last, one per position
	bytes              int
}

// maxFollowBatch bounds the requests of one round; the lookups of misses
// among them are rows of its statement.
const maxFollowBatch = 256

// followCopyMax bounds each of the copy's maps: past it, a map is
// cleared, and its entries are looked up again as requests need them.
const followCopyMax = 1 << 16

// Change kinds of formsapi_changes (migration 0025).
const (
	changeAll  = 0
	changeKey  = 1
	changeForm = 2
	changeList = 3
)

// follower is a node's copy of the rows its key lookups read, and the
// snapshot it was read in.
type follower struct {
	// roundMu orders the rounds applied to the copy: a round of the
	// node's own holds it from its start to its apply, a published
	// round (shared.go) while it is applied.
	roundMu sync.Mutex
	mu      sync.Mutex
	snap    snapshot // of the last round applied; zero before the first

	keys  map[[32]byte]followKey // live keys only
	forms map[string]followForm  // by form ID, forms that exist only
	lists map[string]pgtype.Int8 // by account: its forms list's version, NULL for none

	// What the round being applied found gone (a key revoked or
	// deleted, a form deleted): the lookups of its snapshot that the
	// copy would have answered are answered so, not looked up again.
	goneKeys  map[[32]byte]bool
	goneForms map[string]bool

	feeds        map[string]*formFeed // by form ID: forms whose pages the node holds
	feedBytes    int                  // of every feed's rows
	quiet        int                  // rounds since one found a form with a feed changed
	feedArgBytes int                  // of the last round's feedArgs
	// busy says the last round applied read some log rows: the next
	// round then runs its statement at once rather than probe first
	// (round).
	busy bool

	// Bounded staleness (WithStaleness): the bound, 0 for exact mode;
	// when the last round that succeeded started (the store's clock),
	// zero before one; and whether a round started from the copy's
	// answers (fromCopy) is in flight.
	staleness  time.Duration
	fresh      time.Time
	refreshing atomic.Bool

	rounds, misses, resets, spliced, stale, probed atomic.Int64
	onReplica, offReplica                          atomic.Int64 // see FollowStats
	// replicaMissed counts the rounds in a row that could not use the
	// replica, and replicaRest is when the rounds try it again after
	// replicaMisses of them (roundOnReplica); under mu.
	replicaMissed int
	replicaRest   time.Time
	// replicaWait and replicaTimeout are replicaRoundWait and
	// replicaRoundTimeout; tests whose primary other tests write to
	// meanwhile wait longer (export_test.go).
	replicaWait, replicaTimeout time.Duration

	// shared is the node's part in shared rounds (WithSharedRounds),
	// nil without.
	shared *sharing

	// wake is the store's hub of the sync feed's waiting requests, woken
	// by each round applied (apply).
	wake *feedwait.Hub
}

type followKey struct {
	account string
	forms   []string
	expires *int64
}

type followForm struct {
	account                   string
	seq, version, incarnation int64
}

func newFollower() *follower {
	return &follower{keys: map[[32]byte]followKey{}, forms: map[string]followForm{}, lists: map[string]pgtype.Int8{},
		goneKeys: map[[32]byte]bool{}, goneForms: map[string]bool{}, feeds: map[string]*formFeed{}}
}

// snapshot is a PostgreSQL snapshot (pg_snapshot): every transaction
// below xmin, and every one below xmax not in xip, had ended when it was
// taken. The zero snapshot is no snapshot.
type snapshot struct {
	text       string // as PostgreSQL writes it: xmin:xmax:xip,...
	xmin, xmax uint64
	xip        []string
}

// parseSnapshot reads a pg_snapshot's text form.
func parseSnapshot(s string) (snapshot, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return snapshot{}, fmt.Errorf("pgstore: a snapshot %q not of the form xmin:xmax:xip", s)
	}
	xmin, err1 := strconv.ParseUint(parts[0], 10, 64)
	xmax, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return snapshot{}, fmt.Errorf("pgstore: snapshot %q: %w", s, err)
	}
	var xip []string
	if parts[2] != "" {
		xip = strings.Split(parts[2], ",")
	}
	return snapshot{text: s, xmin: xmin, xmax: xmax, xip: xip}, nil
}

// FollowStats counts a following node's rounds (see WithFollow).
type FollowStats struct {
	Rounds int64 // statements run, each for every request waiting
	Misses int64 // lookups the copy could not answer, read in the rounds' statements
	Resets int64 // times the copy was dropped whole: a TRUNCATE, or positions that went back
	// Spliced counts pages brought up to a form's version from the rows
	// of its feed that the rounds read, with no statement of their own.
	Spliced int64
	// Stale counts lookups answered from the copy without waiting for a
	// round (WithStaleness).
	Stale int64
	// Probed counts the rounds that found the log empty by the probe
	// alone (sqlRoundProbe), the cheapest statement a round sends.
	Probed int64
	// OnReplica counts the rounds read on the replica (WithReplicaRounds),
	// and OffReplica those that found it behind the primary's position,
	// failing or not a standby, and read the primary instead.
	OnReplica, OffReplica int64
}

// FollowStats returns the counts of a store made WithFollow, and zeros
// for another.
func (s *Store) FollowStats() FollowStats {
	f := s.follow
	if f == nil {
		return FollowStats{}
	}
	return FollowStats{Rounds: f.rounds.Load(), Misses: f.misses.Load(), Resets: f.resets.Load(), Spliced: f.spliced.Load(), Stale: f.stale.Load(), Probed: f.probed.Load(),
		OnReplica: f.onReplica.Load(), OffReplica: f.offReplica.Load()}
}

// newFollowLookups returns the queue of key lookups of a following store:
// each batch is one round.
func (s *Store) newFollowLookups(spacing time.Duration, target int, maxSpacing time.Duration) *coalesce.Batcher[keyLookup] {
	return &coalesce.Batcher[keyLookup]{Run: s.round, Max: maxFollowBatch, Spacing: spacing, Target: target, MaxSpacing: maxSpacing}
}

// answer sets l's row from the copy, reporting false when the copy cannot
// answer it. f.mu must be held.
func (f *follower) answer(l *keyLookup) bool {
	var h [32]byte
	copy(h[:], l.hash)
	k, ok := f.keys[h]
	if !ok {
		if f.goneKeys[h] {
			l.row, l.err = keyRow{}, pgx.ErrNoRows
			return true
		}
		return false
	}
	row := keyRow{expires: k.expires}
	row.g.AccountID, row.g.Forms = k.account, slices.Clone(k.forms) // the caller's to change
	if l.formID == "" {
		v, ok := f.lists[k.account]
		if !ok {
			return false
		}
		row.list = v
	} else {
		fm, ok := f.forms[l.formID]
		if !ok && !f.goneForms[l.formID] {
			return false // no such form, or not read yet: a row of the round
		}
		if ok && fm.account == k.account {
			row.seq = pgtype.Int8{Int64: fm.seq, Valid: true}
			row.version = pgtype.Int8{Int64: fm.version, Valid: true}
			row.incarnation = pgtype.Int8{Int64: fm.incarnation, Valid: true}
		}
	}
	l.row, l.err = row, nil
	return true
}

// roundRow is a row of sqlRound.
type roundRow struct {
	n           int64 // 0 for the snapshot's and the log's rows, else the lookup's number from 1
	kind        pgtype.Int2
	ref         []byte
	snap        pgtype.Text
	account     pgtype.Text
	forms       []string
	expires     *int64
	seq         pgtype.Int8
	version     pgtype.Int8
	incarnation pgtype.Int8
	list        pgtype.Int8
	// A feed's head (kind 4: base, last, and the anchor's at and iseq)
	// or a submission added to it (kind 5: feed, at, iseq, json).
	base, last, feed, at, iseq pgtype.Int8
	json                       []byte
}

// round runs one round for batch: it reads the log since the last
// round's snapshot and the lookups the copy cannot answer, in one
// statement, applies what it read to the copy, and answers every lookup.
func (s *Store) round(ctx context.Context, batch []*keyLookup) {
	if s.follow.shared != nil {
		s.sharedRound(ctx, batch)
		return
	}
	s.ownRound(ctx, batch)
}

// ownRound is round: it returns the snapshot the round read after and
// the rows it read (nil when it failed). A node that shares rounds (WithSharedRounds) runs it for the
// lookups its copy cannot answer, and as the leader, and whenever it
// cannot be served by a published round.
func (s *Store) ownRound(ctx context.Context, batch []*keyLookup) (snapshot, []roundRow) {
	f := s.follow
	// Rounds of the node's own and the published rounds it applies
	// (shared.go) are applied one at a time, each from the snapshot the
	// last one left.
	f.roundMu.Lock()
	defer f.roundMu.Unlock()
	// Taken before the statement, whose snapshot is at least this new:
	// what bounded staleness measures an answer's age from.
	start := s.now()
	f.mu.Lock()
	prev := f.snap
	clear(f.goneKeys)
	clear(f.goneForms)
	var miss []*keyLookup
	for _, l := range batch {
		if l.tick {
			continue // a round for waiters: nothing to look up
		}
		if !f.answer(l) {
			miss = append(miss, l)
		}
	}
	// The feeds' part of the statement only while the rounds find forms
	// with feeds changed (within the last fedRounds): an idle node's
	// rounds run the lean statement, and a form changed in such a round
	// has its feed read in a later one, its pages spliced by statement
	// meanwhile.
	var feeds []byte
	fed := len(f.feeds) > 0 && f.quiet < fedRounds
	if fed {
		feeds = f.feedArgs()
	}
	// A round with nothing to look up after one that read no log row
	// probes the log first: when it is still empty, the probe's snapshot
	// is the round's (see sqlRoundProbe).
	probe := len(miss) == 0 && prev.text != "" && !f.busy
	f.mu.Unlock()
	hashes := make([][]byte, len(miss))
	forms := make([]string, len(miss))
	for i, l := range miss {
		hashes[i], forms[i] = l.hash, l.formID
	}
	var xmax pgtype.Text
	xip := []string{}
	if prev.text != "" {
		xmax = pgtype.Text{String: strconv.FormatUint(prev.xmax, 10), Valid: true}
		xip = prev.xip
	}
	var rows []roundRow
	read := func(ctx context.Context, q roundQuerier) error {
		rows = rows[:0]
		if probe {
			var snap string
			var changed bool
			if err := q.QueryRow(ctx, s.sql.roundProbe, xmax, xip).Scan(&snap, &changed); err != nil {
				return err
			}
			if !changed {
				rows = append(rows, roundRow{snap: pgtype.Text{String: snap, Valid: true}})
				f.probed.Add(1)
				return nil
			}
		}
		var rs pgx.Rows
		var err error
		switch {
		case len(miss) == 0 && fed:
			rs, err = q.Query(ctx, s.sql.roundLog, xmax, xip, feeds, maxFeedRows+1)
		case len(miss) == 0:
			rs, err = q.Query(ctx, s.sql.roundLogLean, xmax, xip)
		case fed:
			rs, err = q.Query(ctx, s.sql.round, xmax, xip, feeds, maxFeedRows+1, hashes, forms)
		default:
			rs, err = q.Query(ctx, s.sql.roundLean, xmax, xip, hashes, forms)
		}
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var r roundRow
			if err := rs.Scan(&r.n, &r.kind, &r.ref, &r.snap, &r.account, &r.forms, &r.expires, &r.seq, &r.version, &r.incarnation, &r.list,
				&r.base, &r.last, &r.feed, &r.at, &r.iseq, &r.json); err != nil {
				return err
			}
			rows = append(rows, r)
		}
		return rs.Err()
	}
	err := retry(ctx, func() error {
		if s.roundReplica != nil {
			snap, done, err := s.roundOnReplica(ctx, read)
			if err != nil {
				return err
			}
			if done {
				// The round's position is the primary's snapshot, not
				// the replica's (see roundOnReplica).
				for i := range rows {
					if rows[i].snap.Valid {
						rows[i].snap.String = snap
					}
				}
				return nil
			}
		}
		return read(ctx, s.pool)
	})
	if err == nil {
		err = f.apply(prev, rows, miss)
	}
	if err == nil {
		// The start of the last round that succeeded (rounds run one at
		// a time), even when the clock went back since the one before.
		f.mu.Lock()
		f.fresh = start
		f.mu.Unlock()
	}
	f.rounds.Add(1)
	f.misses.Add(int64(len(miss)))
	if err != nil {
		for _, l := range batch {
			l.row, l.err = keyRow{}, fmt.Errorf("pgstore: follow the change log: %w", err)
		}
		return prev, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answerAll(batch)
	return prev, rows
}

// A round waits for its replica up to replicaRoundWait, asking every
// replicaPoll: beside a steady writer the primary's insert position is
// always a little ahead of what the standby has replayed (the WAL is
// flushed, sent and replayed after it is inserted), about a millisecond
// on the test machine, and a round that went to the primary at once
// found the standby behind in two rounds of three (BENCHMARKS.md). The
// replica's part of a round, the wait and the statements, ends after
// replicaRoundTimeout, and the round reads the primary: a replica that
// hangs, or a pool it has no connection free in, holds no round longer.
// After replicaMisses rounds in a row that could not use it, a node's
// rounds leave the replica alone for replicaRest.
const (
	replicaRoundWait    = 5 * time.Millisecond
	replicaPoll         = 500 * time.Microsecond
	replicaRoundTimeout = 100 * time.Millisecond
	replicaMisses       = 8
	replicaRest         = time.Second
)

// roundQuerier is where a round's statements run: the primary's pool, or
// a connection of the replica that has replayed what the round needs.
type roundQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// roundOnReplica runs read, a round's statements, on a connection of the
// replica (WithReplica, WithReplicaRounds) once the replica has replayed the primary's WAL
// up to where the primary had inserted it when the round began, as
// etcd's read index asks the leader once for every read waiting. It
// first asks the primary, in one statement that touches no table, for
// its snapshot and then its WAL insert position, which holds every
// commit the snapshot sees (an asynchronous one's too): the replica,
// replayed past it, sees at least what the snapshot does. The round's
// position is that snapshot, returned as snap, not the replica's own: a
// hot standby's pg_current_snapshot() lists no transaction in progress
// (PostgreSQL keeps them apart from the list it returns during recovery),
// so a transaction open at a replica's round would never be read again
// once it committed. The rows read on the replica may hold changes
// committed after snap; the next round, reading from snap, reads them
// again, and applying a change twice leaves the copy as once (a change
// names what changed, whose current state the round reads).
//
// done reports that read ran on the replica and succeeded. A replica
// still behind after replicaRoundWait, failing, slower than
// replicaRoundTimeout, not in recovery (promoted, or the primary itself),
// or resting after replicaMisses such rounds in a row, leaves done false
// and the round reads the primary. Only the primary's statement failing,
// or ctx ending, is the round's error.
func (s *Store) roundOnReplica(ctx context.Context, read func(context.Context, roundQuerier) error) (snap string, done bool, err error) {
	f := s.follow
	now := s.now()
	f.mu.Lock()
	resting := now.Before(f.replicaRest) && !now.Before(f.replicaRest.Add(-replicaRest))
	f.mu.Unlock()
	if resting {
		f.offReplica.Add(1)
		return "", false, nil
	}
	var lsn string
	if err := s.pool.QueryRow(ctx, sqlRoundPosition).Scan(&snap, &lsn); err != nil {
		return "", false, err
	}
	rctx, cancel := context.WithTimeout(ctx, f.replicaTimeout)
	defer cancel()
	off := func() (string, bool, error) {
		if err := ctx.Err(); err != nil {
			return "", false, err
		}
		f.offReplica.Add(1)
		f.mu.Lock()
		if f.replicaMissed++; f.replicaMissed >= replicaMisses {
			f.replicaMissed, f.replicaRest = 0, s.now().Add(replicaRest)
		}
		f.mu.Unlock()
		return "", false, nil
	}
	conn, err := s.roundReplica.Acquire(rctx)
	if err != nil {
		return off()
	}
	defer conn.Release()
	// The wait by the monotonic clock, polls' round trips included (the
	// store's clock, a seam for tests, need not move).
	until := time.Now().Add(f.replicaWait)
	for {
		var past pgtype.Bool // NULL on a server not in recovery
		if err := conn.QueryRow(rctx, sqlReplayedPast, lsn).Scan(&past); err != nil || !past.Valid {
			return off()
		}
		if past.Bool {
			break
		}
		if !time.Now().Before(until) {
			return off()
		}
		t := time.NewTimer(replicaPoll)
		select {
		case <-rctx.Done():
			t.Stop()
			return off()
		case <-t.C:
		}
	}
	if err := read(rctx, conn); err != nil {
		return off()
	}
	f.onReplica.Add(1)
	f.mu.Lock()
	f.replicaMissed = 0
	f.mu.Unlock()
	return snap, true, nil
}

// answerAll answers the lookups of batch that the copy holds, after a
// round: those that had a row of their own in it (n > 0) have their
// answer already. f.mu must be held.
func (f *follower) answerAll(batch []*keyLookup) {
	for _, l := range batch {
		if l.tick || l.n == 0 && f.answer(l) {
			continue
		}
		if l.n == 0 {
			// A hit whose entries this round dropped (a reset, or a
			// map full): its lookup was not read, and must be.
			l.row, l.err = keyRow{}, errRetryLookup
		}
	}
}

// fromCopy answers l from the copy without a round, as bounded
// staleness allows (WithStaleness): when the last good round started at
// most f.staleness before now and the copy holds what l asks. It returns
// the answer's age and whether it answered, and whether a round should
// be started to keep the copy fresh (the age is past half the bound and
// no such round is in flight; the caller then runs one).
func (f *follower) fromCopy(l *keyLookup, now time.Time) (age time.Duration, ok, refresh bool) {
	if f.staleness <= 0 {
		return 0, false, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fresh.IsZero() {
		return 0, false, false
	}
	// A clock that went back (a host's WithClock stepped back) cannot
	// tell the copy's age: a round, which restarts it.
	age = now.Sub(f.fresh)
	if age < 0 || age > f.staleness || !f.answer(l) {
		return 0, false, false
	}
	f.stale.Add(1)
	refresh = age >= f.staleness/2 && f.refreshing.CompareAndSwap(false, true)
	return age, true, refresh
}

// errRetryLookup is a lookup's error when the round it waited for
// dropped the copy it would have been answered from; authorize reads it
// in the next round.
var errRetryLookup = errors.New("pgstore: the copy was dropped in the round: look up again")

// apply applies a round's rows, read after the snapshot prev, to the copy
// and answers the lookups of miss from their rows.
func (f *follower) apply(prev snapshot, rows []roundRow, miss []*keyLookup) error {
	var snap snapshot
	for _, r := range rows {
		if r.snap.Valid {
			var err error
			if snap, err = parseSnapshot(r.snap.String); err != nil {
				return err
			}
		}
	}
	if snap.text == "" {
		return errors.New("the round's statement returned no snapshot")
	}
	for i, l := range miss {
		l.n = int64(i + 1)
		l.row, l.err = keyRow{}, pgx.ErrNoRows
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if prev.text != f.snap.text {
		return errors.New("another round was applied meanwhile")
	}
	f.applyLocked(prev, snap, rows, miss)
	return nil
}

// applyLocked applies a round's rows, read in the snapshot snap after
// the snapshot prev (the copy's), and answers the lookups of miss, whose
// n is set, from their rows. f.mu must be held.
func (f *follower) applyLocked(prev, snap snapshot, rows []roundRow, miss []*keyLookup) {
	reset := prev.text != "" && snap.xmax < prev.xmax // positions went back: a restore, PITR or failover
	for _, r := range rows {
		if r.kind.Valid && r.kind.Int16 == changeAll {
			reset = true
		}
	}
	// The round's changes wake the waiters of what they name
	// (wait.go): the forms and keys the log names, whether the copy
	// holds them or not, and everyone after a reset.
	defer func() {
		if f.wake == nil {
			return
		}
		if reset {
			f.wake.WakeAll()
			return
		}
		for _, r := range rows {
			switch {
			case !r.kind.Valid:
			case r.kind.Int16 == changeForm:
				f.wake.WakeForm(string(r.ref))
			case r.kind.Int16 == changeKey && len(r.ref) == 32:
				f.wake.WakeKey([32]byte(r.ref))
			}
		}
	}()
	if reset {
		f.resets.Add(1)
		clear(f.keys)
		clear(f.forms)
		clear(f.lists)
		clear(f.feeds)
		f.feedBytes = 0
	}
	f.applyFeeds(rows)
	for _, r := range rows {
		if !r.kind.Valid {
			continue // the snapshot, or a lookup
		}
		switch r.kind.Int16 {
		case changeKey:
			var h [32]byte
			if len(r.ref) != len(h) {
				continue
			}
			copy(h[:], r.ref)
			if _, ok := f.keys[h]; !ok {
				if r.account.Valid {
					delete(f.goneKeys, h) // live again (a host's SQL): not gone, not copied
				}
				continue // not copied: nothing to bring up to date
			}
			if !r.account.Valid {
				delete(f.keys, h) // revoked or deleted
				f.goneKeys[h] = true
				continue
			}
			f.keys[h] = followKey{account: r.account.String, forms: r.forms, expires: r.expires}
		case changeForm:
			id := string(r.ref)
			if _, ok := f.forms[id]; !ok {
				if r.seq.Valid {
					delete(f.goneForms, id) // made again: not gone, not copied
				}
				continue
			}
			if !r.seq.Valid {
				delete(f.forms, id)
				f.goneForms[id] = true
				continue
			}
			f.forms[id] = followForm{account: r.account.String, seq: r.seq.Int64, version: r.version.Int64, incarnation: r.incarnation.Int64}
		case changeList:
			account := string(r.ref)
			if _, ok := f.lists[account]; ok {
				f.lists[account] = r.list
			}
		}
	}
	for _, r := range rows {
		if r.n < 1 || r.n > int64(len(miss)) {
			continue
		}
		l := miss[r.n-1]
		if !r.account.Valid {
			continue // no live key: pgx.ErrNoRows
		}
		row := keyRow{expires: r.expires, seq: r.seq, version: r.version, incarnation: r.incarnation, list: r.list}
		row.g.AccountID, row.g.Forms = r.account.String, slices.Clone(r.forms) // the caller's; the copy keeps r.forms
		l.row, l.err = row, nil
		var h [32]byte
		copy(h[:], l.hash)
		f.keys[h] = followKey{account: r.account.String, forms: r.forms, expires: r.expires}
		if l.formID == "" {
			f.lists[r.account.String] = r.list
		} else if r.seq.Valid {
			f.forms[l.formID] = followForm{account: r.account.String, seq: r.seq.Int64, version: r.version.Int64, incarnation: r.incarnation.Int64}
		}
	}
	f.bound()
	f.snap = snap
	f.busy = slices.ContainsFunc(rows, func(r roundRow) bool { return r.kind.Valid })
}

// bound clears a map of the copy that has grown past followCopyMax.
// f.mu must be held.
func (f *follower) bound() {
	if len(f.keys) > followCopyMax {
		clear(f.keys)
	}
	if len(f.forms) > followCopyMax {
		clear(f.forms)
	}
	if len(f.lists) > followCopyMax {
		clear(f.lists)
	}
	if len(f.goneKeys) > followCopyMax || len(f.goneForms) > followCopyMax {
		clear(f.goneKeys) // what is gone is then looked up again
		clear(f.goneForms)
	}
}

// feedArgs returns the round's argument for the feeds: for each form
// with a feed, a zero byte, its ID, a zero byte and the feed position the
// feed is at, 8 bytes big endian (see sqlRoundLog). f.mu must be held.
func (f *follower) feedArgs() []byte {
	b := make([]byte, 0, f.feedArgBytes)
	for id, fd := range f.feeds {
		b = append(b, 0)
		b = append(b, id...)
		b = append(b, 0)
		b = binary.BigEndian.AppendUint64(b, uint64(fd.last))
	}
	f.feedArgBytes = len(b)
	return b
}

// applyFeeds brings the feeds up to the round's rows: each changed
// form's head (the rows of kind 2, one for each submission and tombstone
// read for a form with a feed, or one). f.mu must be held.
func (f *follower) applyFeeds(rows []roundRow) {
	var (
		heads map[string]roundRow
		added map[string][]pagecache.Added
	)
	for _, r := range rows {
		if !r.kind.Valid || r.kind.Int16 != changeForm {
			continue
		}
		if heads == nil {
			heads, added = map[string]roundRow{}, map[string][]pagecache.Added{}
		}
		id := string(r.ref)
		if _, ok := heads[id]; !ok {
			heads[id] = r
		}
		if r.feed.Valid {
			a := pagecache.Added{Feed: r.feed.Int64, Pos: keyset.Pos{At: r.at.Int64, Seq: r.iseq.Int64}, Encoded: r.json}
			if r.list.Valid { // a tombstone: Pos is the deleted submission's, Seq 0 if not kept
				a.Deleted, a.Of = true, r.list.Int64
			}
			added[id] = append(added[id], a)
		}
	}
	f.quiet = min(f.quiet+1, fedRounds)
	for id, h := range heads {
		if _, ok := f.feeds[id]; ok {
			f.quiet = 0
		}
		if h.expires != nil || !h.seq.Valid {
			f.advance(id, h, added[id])
		}
	}
	if f.feedBytes > maxFeedsBytes {
		for _, fd := range f.feeds {
			fd.trim(0)
		}
		f.feedBytes = 0
	}
}

// advance brings id's feed to head, a changed form's row of a round, and
// the submissions and tombstones read after the feed's position with it.
// f.mu must be held.
func (f *follower) advance(id string, head roundRow, rows []pagecache.Added) {
	fd := f.feeds[id]
	if fd == nil {
		return // dropped meanwhile
	}
	if !head.seq.Valid || !head.version.Valid || !head.base.Valid || !head.last.Valid {
		f.feedBytes -= fd.bytes
		delete(f.feeds, id) // the form is gone
		return
	}
	seq, version, base, last := head.seq.Int64, head.version.Int64, head.base.Int64, head.last.Int64
	slices.SortFunc(rows, func(a, b pagecache.Added) int { return int(min(max(a.Feed-b.Feed, -1), 1)) })
	appends := seq == fd.seq && base == fd.base && version >= fd.version && last >= fd.last &&
		fedSince(fd.last, last, rows)
	f.feedBytes -= fd.bytes
	if appends {
		// One row per position: an addition deleted again in the same
		// round has none, and takes a tombstone of itself (pagecache's
		// Splice passes over it).
		j := 0
		for p := fd.last + 1; p <= last; p++ {
			a := pagecache.Added{Feed: p, Deleted: true, Of: p}
			if j < len(rows) && rows[j].Feed == p {
				a = rows[j]
				j++
			}
			fd.rows = append(fd.rows, a)
			fd.bytes += len(a.Encoded)
		}
		fd.version, fd.last = version, last
		fd.trim(maxFeedRows)
	} else {
		// Started now, or anything but additions came between, or too
		// many: the feed starts again at the head; pages at older heads
		// are spliced or read by statement.
		*fd = formFeed{seq: seq, version: version, base: base, from: last, last: last}
		if n := len(rows); n > 0 && rows[n-1].Feed == last { // what is at last, read
			fd.anchored = true
			if !rows[n-1].Deleted {
				fd.anchor = rows[n-1].Pos
			}
		}
	}
	f.feedBytes += fd.bytes
}

// fedSince reports whether rows, in feed order, are what a round read
// of a feed at position since whose form is now at last: every position
// above since once, a submission or a tombstone that says where its
// submission was, or an addition since that a tombstone says was deleted
// again.
func fedSince(since, last int64, rows []pagecache.Added) bool {
	var gone map[int64]bool
	for _, a := range rows {
		if a.Pos.Seq == 0 {
			return false // a tombstone made before migration 0026
		}
		if a.Deleted && a.Of > since {
			if gone == nil {
				gone = map[int64]bool{}
			}
			gone[a.Of] = true
		}
	}
	i := 0
	for p := since + 1; p <= last; p++ {
		switch {
		case i < len(rows) && rows[i].Feed == p:
			i++
		case !gone[p]:
			return false
		}
	}
	return i == len(rows)
}

// at returns the position of the submission at the feed's position p,
// from+1 to last; Seq 0 when none was there.
func (fd *formFeed) at(p int64) keyset.Pos {
	if p == fd.from {
		return fd.anchor
	}
	if a := fd.rows[p-fd.from-1]; !a.Deleted {
		return a.Pos
	}
	return keyset.Pos{}
}

// trim drops the feed's first rows until it keeps at most n rows and
// maxFeedBytes; the row at its new from is its anchor.
func (fd *formFeed) trim(n int) {
	k := 0
	for bytes := fd.bytes; k < len(fd.rows) && (len(fd.rows)-k > n || bytes > maxFeedBytes); k++ {
		bytes -= len(fd.rows[k].Encoded)
	}
	if k == 0 {
		return
	}
	fd.from, fd.anchor, fd.anchored = fd.rows[k-1].Feed, fd.at(fd.rows[k-1].Feed), true
	for _, a := range fd.rows[:k] {
		fd.bytes -= len(a.Encoded)
	}
	fd.rows = slices.Clone(fd.rows[k:])
}

// want starts a feed of the form id (its seq seq), or starts it again if
// it is at an older version: the node has just kept a page of it, read
// with the form's version and head h in one snapshot, from which the
// feed starts. A feed may start
// at a snapshot before or after the last round's: the rounds read its
// rows by feed position, not by snapshot, and a request splices from it
// only at the feed's version (see window). A nil f (a store that does
// not follow) keeps no feeds.
func (f *follower) want(id string, seq, version int64, h pagecache.Head) {
	if f == nil || seq == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fd, ok := f.feeds[id]; ok && fd.seq == seq {
		switch {
		case version == fd.version && h.Last == fd.from && !fd.anchored:
			fd.anchor, fd.anchored = h.Anchor, true // the same state: its anchor, which the round did not read
		case version > fd.version && h.Last >= fd.last:
			f.feedBytes -= fd.bytes // a later state: the feed starts there
			*fd = formFeed{seq: seq, version: version, base: h.Base, from: h.Last, last: h.Last, anchor: h.Anchor, anchored: true}
		}
		return
	}
	if fd, ok := f.feeds[id]; ok {
		f.feedBytes -= fd.bytes
	} else if len(f.feeds) >= maxFeeds {
		clear(f.feeds)
		f.feedBytes = 0
	}
	f.feeds[id] = &formFeed{seq: seq, version: version, base: h.Base, from: h.Last, last: h.Last, anchor: h.Anchor, anchored: true}
}

// window returns what pagecache.Read.Splice needs to bring a page of the
// form id (seq seq) held at head h to version: the feed's rows from h's
// last position (the anchor first, when a submission is there) and the
// feed's base and last position, if the feed is at version and holds
// them. A nil f holds none.
func (f *follower) window(id string, seq, version int64, h pagecache.Head) (rows []pagecache.Added, base, last int64, ok bool) {
	if f == nil || seq == 0 {
		return nil, 0, 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fd := f.feeds[id]
	if fd == nil || fd.seq != seq || fd.version != version || fd.base != h.Base || h.Last < fd.from || h.Last > fd.last ||
		h.Last == fd.from && !fd.anchored {
		return nil, 0, 0, false
	}
	i := h.Last - fd.from // rows[i-1] is at h.Last
	anchor := fd.at(h.Last)
	rows = make([]pagecache.Added, 0, int64(len(fd.rows))-i+1)
	if anchor.Seq != 0 {
		rows = append(rows, pagecache.Added{Feed: h.Last, Pos: anchor})
	}
	rows = append(rows, fd.rows[i:]...)
	return rows, fd.base, fd.last, true
}
