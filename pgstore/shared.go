package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Shared rounds (WithSharedRounds; docs/fleet.md, "Rounds shared between
// the nodes"): following nodes take turns at nothing; one of them, the
// leader (a lease in the exchange), runs the rounds and publishes what
// each read, and the others apply what it published instead of running
// their own, as etcd's followers serve reads by the leader's read index.
//
// A node whose requests wait takes a ticket t (one per round of its own,
// which it no longer runs) and waits for a published round whose T is at
// least t: the leader reads T, the tickets taken so far, before its
// round's statement, so such a round's snapshot was taken after the
// ticket, hence after the requests arrived, and once the node has
// applied it (or holds a copy at least as new) it answers them as its
// own round would have. A published round carries the snapshot it was
// read after (the leader's last) and its own: the node applies it only
// when the first is no newer than its copy's and the second no older, so
// that the copy is then exactly what a round of its own in that snapshot
// would have left (a thing the round did not name did not change
// between the two snapshots). A leader's first round, read after no
// snapshot, reads no log: it is applied only to an empty copy (a copy
// older than its snapshot would be tagged with it and miss what changed
// between the two). Anything else (a round missed, a leader
// changed, no leader, the exchange failing or not answering within a
// bound) and the node runs a round of its own, as without the option:
// exactness never depends on the exchange.

// RoundExchange is what following nodes share their rounds through
// (WithSharedRounds): a leader lease, a counter of tickets, and a
// channel that carries the rounds published and the tickets' wake-ups
// to every node. Package pgstore/redisround implements it over Redis.
// Its methods are called concurrently.
type RoundExchange interface {
	// Campaign takes the leader lease when no node holds it, or renews
	// it when this node does, and reports whether this node holds it.
	Campaign(ctx context.Context) (bool, error)
	// Resign gives the lease up if this node holds it.
	Resign(ctx context.Context) error
	// Ticket takes the next ticket (the counter, incremented) and wakes
	// the leader (Listen's wake on every node); it reports whether some
	// node holds the lease.
	Ticket(ctx context.Context) (t int64, led bool, err error)
	// Tickets returns the last ticket taken (0 before any).
	Tickets(ctx context.Context) (int64, error)
	// Publish sends a published round to every node listening.
	Publish(ctx context.Context, round []byte) error
	// Listen subscribes to the rounds published and the wake-ups, calls
	// subscribed once it has, then calls round for each round published
	// and wake for each ticket taken, in the order they were sent, until
	// ctx ends or the subscription fails, and returns why. What is sent
	// while no node listens is lost.
	Listen(ctx context.Context, subscribed func(), round func([]byte), wake func()) error
}

// WithSharedRounds makes a following node (WithFollow, which it
// implies, rounds spacing 0 unless WithFollow says otherwise) share its
// rounds with the other nodes of x: one node at a time, the leader, runs
// the rounds and publishes them, and the others wait for a published
// round that started after their requests arrived instead of running a
// statement of their own (docs/fleet.md, "Rounds shared between the
// nodes"). A node with no leader, or whose exchange fails, runs its own
// rounds as without the option. Close resigns the lease.
func WithSharedRounds(x RoundExchange) Option {
	return func(c *config) {
		c.exchange = x
		c.follow = c.follow || x != nil
	}
}

// DefaultShareWait is how long a node waits for a published round that
// serves its ticket before it runs a round of its own, unless
// WithShareWait says otherwise; DefaultLeaseRenew is how often a node
// campaigns for the lease (a leader renews it), unless WithLeaseRenew
// says otherwise. The Redis exchange's lease lasts three times that.
const (
	DefaultShareWait  = 100 * time.Millisecond
	DefaultLeaseRenew = time.Second
)

// WithShareWait sets how long a node that shares rounds waits for a
// published round that serves its ticket (a leader that has gone, a
// round lost) before it runs a round of its own (DefaultShareWait when
// 0 or less).
func WithShareWait(d time.Duration) Option {
	return func(c *config) { c.shareWait = d }
}

// WithLeaseRenew sets how often a node that shares rounds campaigns for
// the leader lease, or renews it (DefaultLeaseRenew when 0 or less); a
// negative d never does after the first, at Open or New, and leaves the
// rest to the host (tests). The lease must outlast it: redisround's
// lasts three times DefaultLeaseRenew unless told otherwise.
func WithLeaseRenew(d time.Duration) Option {
	return func(c *config) { c.leaseRenew = d }
}

// sharing is a node's part in shared rounds.
type sharing struct {
	x     RoundExchange
	wait  time.Duration // see WithShareWait
	renew time.Duration // see WithLeaseRenew

	leader    atomic.Bool // this node holds the lease, as of its last campaign
	listening atomic.Bool // its subscription is up
	pending   atomic.Bool // a leader's round for the tickets woken is queued

	mu      sync.Mutex
	served  int64         // tickets up to this one are served by the copy as it is
	seen    int64         // the highest T of a round published and not applied
	changed chan struct{} // closed and replaced when served, seen or listening change

	tickets, published, applied, gaps, fallbacks atomic.Int64
}

// notify wakes the rounds that wait for a ticket. s.mu must be held.
func (sh *sharing) notify() {
	close(sh.changed)
	sh.changed = make(chan struct{})
}

// startSharing starts a node's campaign and its subscription.
func (s *Store) startSharing(cfg config) {
	sh := &sharing{x: cfg.exchange, wait: cfg.shareWait, renew: cfg.leaseRenew, changed: make(chan struct{})}
	if sh.wait <= 0 {
		sh.wait = DefaultShareWait
	}
	if sh.renew == 0 {
		sh.renew = DefaultLeaseRenew
	}
	s.follow.shared = sh
	s.campaign(s.closing)
	// The node starts subscribed (or having failed to), so that its
	// first requests may share rounds.
	first := make(chan struct{})
	s.background.Add(2)
	go func() {
		defer s.background.Done()
		s.listen(first)
	}()
	select {
	case <-first:
	case <-time.After(exchangeTimeout):
	}
	go func() {
		defer s.background.Done()
		if sh.renew < 0 {
			return
		}
		t := time.NewTicker(sh.renew)
		defer t.Stop()
		for {
			select {
			case <-s.closing.Done():
				return
			case <-t.C:
				s.campaign(s.closing)
			}
		}
	}()
}

// exchangeTimeout bounds a call to the exchange.
const exchangeTimeout = 2 * time.Second

// Campaign takes the leader lease of a node that shares rounds
// (WithSharedRounds) when no node holds it, or renews it when this node
// does, now, and reports whether the node holds it: what the node does
// every WithLeaseRenew interval, for a host that campaigns itself. A
// node that cannot reach the exchange is no leader. It returns false
// for a store without shared rounds.
func (s *Store) Campaign(ctx context.Context) bool {
	if s.follow == nil || s.follow.shared == nil {
		return false
	}
	return s.campaign(ctx)
}

// campaign is Campaign for a store that shares rounds.
func (s *Store) campaign(ctx context.Context) bool {
	sh := s.follow.shared
	ctx, cancel := context.WithTimeout(ctx, exchangeTimeout)
	defer cancel()
	led, err := sh.x.Campaign(ctx)
	led = led && err == nil
	sh.leader.Store(led)
	return led
}

// listen keeps the node subscribed to the exchange until Close, again
// after each failure (a renew's interval later, or a second without
// renewals).
func (s *Store) listen(first chan struct{}) {
	sh := s.follow.shared
	again := sh.renew
	if again <= 0 {
		again = DefaultLeaseRenew
	}
	var once sync.Once
	started := func() { once.Do(func() { close(first) }) }
	for s.closing.Err() == nil {
		_ = sh.x.Listen(s.closing, func() { sh.setListening(true); started() }, s.applyPublished, s.woken)
		sh.setListening(false)
		started()
		select {
		case <-s.closing.Done():
		case <-time.After(again):
		}
	}
}

func (sh *sharing) setListening(on bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.listening.Store(on)
	sh.notify()
}

// woken is a ticket's wake-up: the leader queues a round for it, unless
// one is queued that has not read the tickets yet.
func (s *Store) woken() {
	sh := s.follow.shared
	if !sh.leader.Load() || !sh.pending.CompareAndSwap(false, true) {
		return
	}
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.closing.Err() != nil {
		return
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		ctx, cancel := context.WithTimeout(s.closing, refreshTimeout)
		defer cancel()
		_ = s.lookups.Do(ctx, &keyLookup{tick: true}) // a failed round: the waiting nodes run their own
	}()
}

// sharedRound is the round of a node that shares rounds: the leader's
// (leadRound), or a ticket served by a published round, or, when the
// copy cannot answer a lookup or no published round serves the ticket,
// a round of its own.
func (s *Store) sharedRound(ctx context.Context, batch []*keyLookup) {
	f, sh := s.follow, s.follow.shared
	if sh.leader.Load() {
		s.leadRound(ctx, batch)
		return
	}
	if !sh.listening.Load() || !f.answers(batch) {
		s.ownRound(ctx, batch)
		return
	}
	start := s.now()
	tctx, cancel := context.WithTimeout(ctx, exchangeTimeout)
	t, led, err := sh.x.Ticket(tctx)
	cancel()
	if err != nil || !led {
		sh.fallbacks.Add(1)
		s.ownRound(ctx, batch)
		return
	}
	sh.tickets.Add(1)
	timer := time.NewTimer(sh.wait)
	defer timer.Stop()
	for {
		sh.mu.Lock()
		served, seen, changed := sh.served >= t, sh.seen >= t, sh.changed
		sh.mu.Unlock()
		if served {
			f.mu.Lock()
			f.answerAll(batch)
			f.fresh = start // a round that started after this
			f.mu.Unlock()
			return
		}
		if seen || !sh.listening.Load() {
			sh.fallbacks.Add(1)
			s.ownRound(ctx, batch)
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			sh.fallbacks.Add(1)
			s.ownRound(ctx, batch)
			return
		case <-ctx.Done():
			for _, l := range batch {
				l.row, l.err = keyRow{}, fmt.Errorf("pgstore: wait for a shared round: %w", ctx.Err())
			}
			return
		}
	}
}

// answers reports whether the copy answers every lookup of batch, and
// clears what the last round found gone, as a round does before it
// applies.
func (f *follower) answers(batch []*keyLookup) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.goneKeys)
	clear(f.goneForms)
	if f.snap.text == "" {
		return false
	}
	for _, l := range batch {
		if !l.tick && !f.answer(l) {
			return false
		}
	}
	return true
}

// leadRound is the leader's round: it reads the tickets taken, runs its
// own round, and publishes what it read, for every ticket up to those.
func (s *Store) leadRound(ctx context.Context, batch []*keyLookup) {
	sh := s.follow.shared
	sh.pending.Store(false) // a wake-up from now on queues another round
	tctx, cancel := context.WithTimeout(ctx, exchangeTimeout)
	t, err := sh.x.Tickets(tctx)
	cancel()
	if err != nil {
		t = 0 // serves no ticket, and still carries the round to the nodes
	}
	prev, rows := s.ownRound(ctx, batch)
	var snap string
	for _, r := range rows {
		if r.snap.Valid {
			snap = r.snap.String
		}
	}
	if snap == "" {
		return // the round failed
	}
	round := encodeRoundFrom(t, prev.text, snap, rows)
	pctx, cancel := context.WithTimeout(ctx, exchangeTimeout)
	defer cancel()
	if sh.x.Publish(pctx, round) == nil {
		sh.published.Add(1)
	}
}

// applyPublished applies a round another node published, when the copy's
// snapshot is between the round's two (see Shared rounds above), and
// serves the tickets up to its T; otherwise (the copy is older than the
// round's first snapshot, or newer than its second) it notes that a
// round for those tickets came and was not applied, and their rounds run
// their own. A round with no snapshot before it (a leader's first,
// which read no log) is applied to an empty copy only.
func (s *Store) applyPublished(data []byte) {
	f, sh := s.follow, s.follow.shared
	t, prev, snap, rows, err := decodeRound(data)
	if err != nil {
		return // not a round of ours: as if lost
	}
	f.roundMu.Lock()
	f.mu.Lock()
	cur := f.snap
	served := true
	switch {
	case cur.text == snap.text:
		// The copy is at that snapshot already (the leader's own round).
		// A copy newer than the round's snapshot may look so, but so
		// does one from before a restore that moved positions back: a
		// gap, which a round of the node's own tells apart.
	case cur.text == "" || prev.text != "" && sees(cur, prev) && sees(snap, cur):
		// An empty copy (before its first round) holds nothing the
		// round could leave behind. A leader's first round (a node
		// that took the lease with an empty copy, as a restarted one
		// does) read no log: it has no snapshot before it, and brings
		// no other copy from its snapshot to the round's.
		f.applyLocked(cur, snap, rows, nil)
		sh.applied.Add(1)
	default:
		served = false
		sh.gaps.Add(1)
	}
	f.mu.Unlock()
	f.roundMu.Unlock()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if served {
		sh.served = max(sh.served, t)
	} else {
		sh.seen = max(sh.seen, t)
	}
	sh.notify()
}

// sees reports whether every transaction visible in snapshot b is
// visible in snapshot a: a is at least as new as b.
func sees(a, b snapshot) bool {
	if b.xmax > a.xmax {
		return false
	}
	for _, x := range a.xip {
		id, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return false
		}
		if id < b.xmax && !slices.Contains(b.xip, x) {
			return false // visible in b, in progress in a
		}
	}
	return true
}

// stopSharing resigns the lease at Close.
func (s *Store) stopSharing() {
	sh := s.follow.shared
	ctx, cancel := context.WithTimeout(context.Background(), exchangeTimeout)
	defer cancel()
	if sh.leader.Swap(false) {
		_ = sh.x.Resign(ctx)
	}
}

// SharedStats counts a node's part in shared rounds (WithSharedRounds).
type SharedStats struct {
	Leader    bool  // the node held the lease at its last campaign
	Listening bool  // its subscription to the published rounds is up
	Tickets   int64 // rounds served by a published round: the node's own rounds not run
	Published int64 // rounds the node published as the leader
	Applied   int64 // published rounds the node applied
	Gaps      int64 // published rounds it could not apply (one missed, a leader changed, a copy ahead)
	Fallbacks int64 // rounds of its own run for lack of a published round (no leader, a gap, a timeout, the exchange failing)
}

// SharedStats returns the counts of a store made WithSharedRounds, and
// zeros for another.
func (s *Store) SharedStats() SharedStats {
	if s.follow == nil || s.follow.shared == nil {
		return SharedStats{}
	}
	sh := s.follow.shared
	return SharedStats{Leader: sh.leader.Load(), Listening: sh.listening.Load(), Tickets: sh.tickets.Load(), Published: sh.published.Load(), Applied: sh.applied.Load(), Gaps: sh.gaps.Load(), Fallbacks: sh.fallbacks.Load()}
}

// A published round's encoding: a version byte (1), T (uvarint), the
// snapshot it was read after and its own (each a length, uvarint, and
// the text), and the log's rows it read (a count, then each row: a bit
// set of the fields present, then the fields in roundRow's order).
const roundEncoding = 1

// Fields of a row's bit set.
const (
	fKind = 1 << iota
	fAccount
	fForms
	fExpires
	fSeq
	fVersion
	fIncarnation
	fList
	fBase
	fLast
	fFeed
	fAt
	fIseq
	fJSON
)

// encodeRoundFrom encodes a published round: T, the snapshot prev it was
// read after, its snapshot and its log rows.
func encodeRoundFrom(t int64, prev, snap string, rows []roundRow) []byte {
	b := []byte{roundEncoding}
	b = binary.AppendUvarint(b, uint64(t))
	b = appendBytes(b, []byte(prev))
	b = appendBytes(b, []byte(snap))
	n := 0
	for _, r := range rows {
		if r.n == 0 && r.kind.Valid {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for _, r := range rows {
		if r.n != 0 || !r.kind.Valid {
			continue
		}
		var set uint64 = fKind
		ints := []pgtype.Int8{r.seq, r.version, r.incarnation, r.list, r.base, r.last, r.feed, r.at, r.iseq}
		for i, v := range ints {
			if v.Valid {
				set |= fSeq << i
			}
		}
		if r.account.Valid {
			set |= fAccount
		}
		if r.forms != nil {
			set |= fForms
		}
		if r.expires != nil {
			set |= fExpires
		}
		if r.json != nil {
			set |= fJSON
		}
		b = binary.AppendUvarint(b, set)
		b = binary.AppendVarint(b, int64(r.kind.Int16))
		b = appendBytes(b, r.ref)
		if r.account.Valid {
			b = appendBytes(b, []byte(r.account.String))
		}
		if r.forms != nil {
			b = binary.AppendUvarint(b, uint64(len(r.forms)))
			for _, f := range r.forms {
				b = appendBytes(b, []byte(f))
			}
		}
		if r.expires != nil {
			b = binary.AppendVarint(b, *r.expires)
		}
		for _, v := range ints {
			if v.Valid {
				b = binary.AppendVarint(b, v.Int64)
			}
		}
		if r.json != nil {
			b = appendBytes(b, r.json)
		}
	}
	return b
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// decoder reads a published round; its first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("pgstore: a published round cut short")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errors.New("pgstore: a published round cut short")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errors.New("pgstore: a published round cut short")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// decodeRound decodes a published round.
func decodeRound(data []byte) (t int64, prev, snap snapshot, rows []roundRow, err error) {
	if len(data) == 0 || data[0] != roundEncoding {
		return 0, snapshot{}, snapshot{}, nil, errors.New("pgstore: not a published round")
	}
	d := &decoder{b: data[1:]}
	t = int64(d.uvarint())
	p, sn := string(d.bytes()), string(d.bytes())
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = errors.New("pgstore: a published round cut short")
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		var r roundRow
		set := d.uvarint()
		r.kind = pgtype.Int2{Int16: int16(d.varint()), Valid: true}
		r.ref = d.bytes()
		if set&fAccount != 0 {
			r.account = pgtype.Text{String: string(d.bytes()), Valid: true}
		}
		if set&fForms != 0 {
			k := d.uvarint()
			if d.err == nil && k > uint64(len(d.b)) {
				d.err = errors.New("pgstore: a published round cut short")
			}
			r.forms = make([]string, 0, min(k, 1024))
			for j := uint64(0); j < k && d.err == nil; j++ {
				r.forms = append(r.forms, string(d.bytes()))
			}
		}
		if set&fExpires != 0 {
			e := d.varint()
			r.expires = &e
		}
		for j, v := range []*pgtype.Int8{&r.seq, &r.version, &r.incarnation, &r.list, &r.base, &r.last, &r.feed, &r.at, &r.iseq} {
			if set&(fSeq<<j) != 0 {
				*v = pgtype.Int8{Int64: d.varint(), Valid: true}
			}
		}
		if set&fJSON != 0 {
			r.json = d.bytes()
		}
		rows = append(rows, r)
	}
	if d.err != nil {
		return 0, snapshot{}, snapshot{}, nil, d.err
	}
	if len(d.b) != 0 {
		return 0, snapshot{}, snapshot{}, nil, errors.New("pgstore: a published round with bytes past its end")
	}
	if p != "" {
		if prev, err = parseSnapshot(p); err != nil {
			return 0, snapshot{}, snapshot{}, nil, err
		}
	}
	if snap, err = parseSnapshot(sn); err != nil {
		return 0, snapshot{}, snapshot{}, nil, err
	}
	return t, prev, snap, rows, nil
}
