package pgstore

import (
	"context"
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
	mu   sync.Mutex
	snap snapshot // of the last round applied; zero before the first

	keys  map[[32]byte]followKey // live keys only
	forms map[string]followForm  // by form ID, forms that exist only
	lists map[string]pgtype.Int8 // by account: its forms list's version, NULL for none

	// What the round being applied found gone (a key revoked or
	// deleted, a form deleted): the lookups of its snapshot that the
	// copy would have answered are answered so, not looked up again.
	goneKeys  map[[32]byte]bool
	goneForms map[string]bool

	rounds, misses, resets atomic.Int64
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
		goneKeys: map[[32]byte]bool{}, goneForms: map[string]bool{}}
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
}

// FollowStats returns the counts of a store made WithFollow, and zeros
// for another.
func (s *Store) FollowStats() FollowStats {
	f := s.follow
	if f == nil {
		return FollowStats{}
	}
	return FollowStats{Rounds: f.rounds.Load(), Misses: f.misses.Load(), Resets: f.resets.Load()}
}

// newFollowLookups returns the queue of key lookups of a following store:
// each batch is one round.
func (s *Store) newFollowLookups(spacing time.Duration) *coalesce.Batcher[keyLookup] {
	return &coalesce.Batcher[keyLookup]{Run: s.round, Max: maxFollowBatch, Spacing: spacing}
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
}

// round runs one round for batch: it reads the log since the last
// round's snapshot and the lookups the copy cannot answer, in one
// statement, applies what it read to the copy, and answers every lookup.
func (s *Store) round(ctx context.Context, batch []*keyLookup) {
	f := s.follow
	f.mu.Lock()
	prev := f.snap
	clear(f.goneKeys)
	clear(f.goneForms)
	var miss []*keyLookup
	for _, l := range batch {
		if !f.answer(l) {
			miss = append(miss, l)
		}
	}
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
	err := retry(ctx, func() error {
		rows = rows[:0]
		var rs pgx.Rows
		var err error
		if len(miss) == 0 {
			rs, err = s.pool.Query(ctx, s.sql.roundLog, xmax, xip)
		} else {
			rs, err = s.pool.Query(ctx, s.sql.round, xmax, xip, hashes, forms)
		}
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			var r roundRow
			if err := rs.Scan(&r.n, &r.kind, &r.ref, &r.snap, &r.account, &r.forms, &r.expires, &r.seq, &r.version, &r.incarnation, &r.list); err != nil {
				return err
			}
			rows = append(rows, r)
		}
		return rs.Err()
	})
	if err == nil {
		err = f.apply(prev, rows, miss)
	}
	f.rounds.Add(1)
	f.misses.Add(int64(len(miss)))
	if err != nil {
		for _, l := range batch {
			l.row, l.err = keyRow{}, fmt.Errorf("pgstore: follow the change log: %w", err)
		}
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range batch {
		if l.n == 0 && f.answer(l) {
			continue
		}
		if l.n == 0 {
			// A hit whose entries this round dropped (a reset, or a
			// map full): its lookup was not read, and must be.
			l.row, l.err = keyRow{}, errRetryLookup
		}
	}
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
	reset := prev.text != "" && snap.xmax < prev.xmax // positions went back: a restore, PITR or failover
	for _, r := range rows {
		if r.kind.Valid && r.kind.Int16 == changeAll {
			reset = true
		}
	}
	if reset {
		f.resets.Add(1)
		clear(f.keys)
		clear(f.forms)
		clear(f.lists)
	}
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
	return nil
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
}
