package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/webhook/hookstore"
)

// Dispatcher delivers the events of the endpoints it holds. Any number of
// nodes may run one over the same Store and Feed: each claims endpoints
// with a lease (ClaimEndpoints), and only the holder of an endpoint's
// lease sends its events and moves its cursors, under the lease's
// generation, so that a node paused past its lease moves nothing once
// another took the endpoint over.
//
// For each form an endpoint follows, it reads the feed after the
// stream's cursor and sends each entry as one event, in commit order, one
// at a time: the entry after an event is never sent before that event got
// a 2xx. The cursor moves after each 2xx. A failed attempt is tried again
// on the Schedule, the form's later entries waiting behind it; the other
// forms of the endpoint, and other endpoints, go on. Delivery is at least
// once: a node that dies between an event's 2xx and the cursor's write
// sends that event again, with the same webhook-id and body (but for
// attachments' URLs, signed afresh for each attempt under
// WithAttachmentURLs).
//
// A pass over an endpoint reads its settings (disabled or not, its URL
// and secrets) once, and starts attempts with them for one poll interval
// at most (RELIABILITY case 105): then a new pass reads them again, at
// once if entries are left to send. So Endpoints.Disable and
// RotateSecret apply to every attempt that starts more than a poll
// interval after they return, whatever the backlog; an attempt already
// in flight ends as it would. Within a pass the forms of an endpoint take
// turns at its attempt slots, one attempt a turn, so that a form is never
// starved by busy ones. The attempt slots are shared out per account
// (WithAccountConcurrency) as well as per endpoint (RELIABILITY case
// 106): endpoints of one account that never answer hold that account's
// share, and the other accounts' deliveries do not wait for them.
//
// An endpoint with a filter (Endpoint.Filter) is sent the additions
// its filter keeps, checked as the pass that attempts each one reads the
// filter, and the deletions of the submissions it was sent, over a store
// that keeps which those were (hookstore.PassedStore; every deletion
// otherwise): the cursor moves past the others, without an attempt
// (docs/webhooks.md, "Filtered endpoints").
//
// A stream's cursor is a position in one incarnation of its form (see
// Stream.Incarnation): a form deleted and created again with the same ID
// is another form, whose feed starts over at position 1, so its stream
// starts over at the new form's first entry, and its events have refs and
// webhook-ids of their own (RELIABILITY case 101).
type Dispatcher struct {
	cfg   config
	store Store
	feed  Feed
	heads storecontract.Head // feed, if one of this module's stores itself: its forms' feed heads; nil otherwise
	// passed is store, if it keeps the spans of additions not sent
	// (hookstore.PassedStore): nil otherwise, when a filtered endpoint is
	// sent every deletion.
	passed hookstore.PassedStore
	tok    tokens
	slots  *slots // attempts in flight: in all, per account

	mu   sync.Mutex
	held map[string]*held
}

// held is an endpoint whose lease the dispatcher holds.
type held struct {
	id     string
	gen    int64
	client *http.Client // one per endpoint: its connections are reused
	busy   bool         // a pass is running (Run)
	// carry holds the turns a pass left when its time ran out, by form:
	// the next pass, which runs after it, sends their entries without
	// reading them again, so passes make progress however slow the reads.
	carry map[string]*turn
}

// NewDispatcher returns a dispatcher of the endpoints of store, whose
// events come from feed. Events carry the refs the sync feed gives, and
// thin events the feed's sync tokens, all keyed by the handler's cursor
// secret: pass nil to take the secret that feed (or else store) keeps
// when it is one of this module's stores, or embeds one, as the handler
// without formsapi.WithCursorSecret does (RELIABILITY case 102); pass the
// secret given to the handler's WithCursorSecret otherwise. It panics
// when cursorSecret is empty and neither keeps one: refs keyed by any
// other secret would be no ref the API gives.
func NewDispatcher(store Store, feed Feed, cursorSecret []byte, opts ...Option) *Dispatcher {
	cfg := newConfig(opts)
	passed, _ := store.(hookstore.PassedStore)
	return &Dispatcher{cfg: cfg, store: store, feed: feed, heads: headOf(feed), passed: passed, tok: newTokens(secretOf(cursorSecret, feed, store)),
		slots: newSlots(cfg.total, cfg.perAccount), held: map[string]*held{}}
}

// Run delivers until ctx ends: every poll interval it claims endpoints
// (up to its maximum) and starts a pass over each one it holds that has
// none running, so that an endpoint that is slow to answer holds back no
// other. A pass whose time ran out with entries left is followed by the
// next at once, with the settings read again; one that ends caught up,
// or waiting on a retry, starts again at the next poll: between polls an
// idle dispatcher reads nothing. When ctx ends it waits for the passes
// running, releases its leases and returns nil.
func (d *Dispatcher) Run(ctx context.Context) error {
	ticks, stop := d.cfg.ticker(d.cfg.poll)
	defer stop()
	done := make(chan *held, d.cfg.maxEndpoints)
	running := 0
	finish := func(h *held, keep bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		h.busy = false
		if !keep {
			d.drop(h)
		}
	}
	for {
		d.claim(ctx)
		d.mu.Lock()
		for _, h := range d.held {
			if !h.busy {
				h.busy = true
				running++
				go func() {
					keep, more := d.pass(ctx, h)
					for keep && more && ctx.Err() == nil {
						keep, more = d.pass(ctx, h)
					}
					finish(h, keep)
					done <- h
				}()
			}
		}
		d.mu.Unlock()
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				for ; running > 0; running-- {
					<-done
				}
				d.releaseAll()
				return nil
			case <-done:
				running-- // its endpoint's next pass waits for the next poll
				if d.cfg.passDone != nil {
					d.cfg.passDone()
				}
			case <-ticks:
				waiting = false
			}
		}
	}
}

// Step claims endpoints, then runs one pass over every endpoint the
// dispatcher holds, all at once, and returns when they end: a pass reads
// each form's feed after its cursor and sends what it finds, until a
// failure, the feed's end or the end of its poll interval on the clock.
// Tests call it, moving their clock between steps; a host runs Run
// instead (not both at once).
func (d *Dispatcher) Step(ctx context.Context) {
	d.claim(ctx)
	d.mu.Lock()
	hs := make([]*held, 0, len(d.held))
	for _, h := range d.held {
		hs = append(hs, h)
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if keep, _ := d.pass(ctx, h); !keep {
				d.mu.Lock()
				d.drop(h)
				d.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// Close releases every lease the dispatcher holds, so that other nodes
// take its endpoints at once rather than when the leases run out. Call it
// after Step, and never while Run or Step runs.
func (d *Dispatcher) Close() { d.releaseAll() }

func (d *Dispatcher) releaseAll() {
	d.mu.Lock()
	hs := d.held
	d.held = map[string]*held{}
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, h := range hs {
		if err := d.store.ReleaseLease(ctx, h.id, h.gen); err != nil {
			d.cfg.log.Warn("webhook: release lease", "endpoint", h.id, "error", err)
		}
		h.client.CloseIdleConnections()
	}
}

// drop forgets h, under d.mu.
func (d *Dispatcher) drop(h *held) {
	if d.held[h.id] == h {
		delete(d.held, h.id)
	}
	h.client.CloseIdleConnections()
}

// claim leases free endpoints, up to the dispatcher's maximum.
func (d *Dispatcher) claim(ctx context.Context) {
	d.mu.Lock()
	room := d.cfg.maxEndpoints - len(d.held)
	d.mu.Unlock()
	if room <= 0 || ctx.Err() != nil {
		return
	}
	ls, err := d.store.ClaimEndpoints(ctx, d.cfg.now(), d.cfg.lease, min(room, 16))
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.log.Error("webhook: claim endpoints", "error", err)
		}
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range ls {
		if old, ok := d.held[l.Endpoint.ID]; ok {
			old.gen = l.Gen // it ran out and this node claimed it again
			continue
		}
		d.held[l.Endpoint.ID] = &held{id: l.Endpoint.ID, gen: l.Gen, client: d.cfg.egress.Client()}
	}
}

// result is how delivering to a stream ended.
type result int

const (
	caughtUp  result = iota // the feed's end, a failed attempt, or nothing to do
	leaseLost               // another node holds the endpoint now: stop
	disabled                // the endpoint was disabled: stop
	timeUp                  // the pass's poll interval ended before the attempt: pass again
)

// pass renews h's lease, which reads the endpoint's settings, and
// delivers with them what each form of the endpoint has after its
// cursor, starting attempts for one poll interval at most (RELIABILITY
// case 105). The forms take turns, one attempt a turn, on up to the
// per-endpoint number of workers. keep reports whether the dispatcher
// still holds the endpoint; more, whether the pass's time ran out with
// entries left to send.
func (d *Dispatcher) pass(ctx context.Context, h *held) (keep, more bool) {
	now := d.cfg.now()
	deadline := now.Add(d.cfg.poll)
	l, err := d.store.RenewLease(ctx, h.id, h.gen, now, d.cfg.lease)
	switch {
	case errors.Is(err, ErrLeaseLost):
		return false, false
	case err != nil:
		if ctx.Err() == nil {
			d.cfg.log.Error("webhook: renew lease", "endpoint", h.id, "error", err)
		}
		return true, false // try again next time; the lease decides
	}
	e := l.Endpoint
	if e.Disabled {
		if err := d.store.ReleaseLease(ctx, h.id, h.gen); err != nil {
			d.cfg.log.Warn("webhook: release lease", "endpoint", h.id, "error", err)
		}
		return false, false
	}
	if failingTooLong(l.Streams, now) {
		d.disable(ctx, e, "failing", fmt.Sprintf("no successful delivery for %s", FailingLimit))
		return false, false
	}
	f, err := newMatcher(e.Filter)
	if err != nil {
		// Only a filter this version's parser refuses (written by
		// another version, or behind Endpoints' back): sending on
		// would deliver additions it may not match.
		d.disable(ctx, e, "filter", fmt.Sprintf("its filter is not valid: %v", err))
		return false, false
	}
	forms, err := d.forms(ctx, e)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.log.Error("webhook: list the endpoint's forms", "endpoint", h.id, "error", err)
		}
		return true, false
	}
	known := make(map[string]Stream, len(l.Streams))
	for _, st := range l.Streams {
		known[st.FormID] = st
	}
	rr := &rotation{}
	rr.wake.L = &rr.mu
	carried := h.carry
	h.carry = nil
	for _, form := range forms {
		st, ok := known[form]
		if !ok {
			st = Stream{FormID: form}
		}
		// A stream stopped for a resync is read all the same: it starts
		// over if its form was created again (fill).
		if st.NextAt.After(now) {
			continue
		}
		t := &turn{st: st, stored: ok}
		if c := carried[form]; c != nil && ok && c.st.Cursor == st.Cursor && c.st.Floor == st.Floor && c.st.Incarnation == st.Incarnation {
			t.pending, t.last, t.more, t.ready = c.pending, c.last, c.more, c.ready
			t.rec.inSpan, t.rec.recent = c.rec.inSpan, c.rec.recent
		}
		rr.line = append(rr.line, t)
	}
	var wg sync.WaitGroup
	for range min(d.cfg.perEndpoint, len(rr.line)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := rr.next(); t != nil; t = rr.next() {
				again, r := d.take(ctx, h, e, f, t, deadline)
				rr.back(t, again, r)
			}
		}()
	}
	wg.Wait()
	if rr.outcome != caughtUp || !rr.more {
		return rr.outcome == caughtUp, false
	}
	h.carry = make(map[string]*turn, len(rr.line))
	for _, t := range rr.line {
		if len(t.pending) > 0 {
			h.carry[t.st.FormID] = t
		}
	}
	return true, true
}

// turn is a form's place in a pass's rotation: its stream, and the
// entries read from its feed and not sent yet.
type turn struct {
	st      Stream
	stored  bool    // the store has the stream
	pending []entry // read, not sent yet
	last    int64   // the position of the last entry read
	more    bool    // the feed has entries after those read
	// rec is what the turn knows of its stream's spans (verdicts.go).
	rec record
	// ready is the event of pending[0] when a pass made it and its time
	// ran out before the attempt: the next pass sends it as it is, for
	// an event that takes longer to make than a poll interval (a large
	// submission on a slow machine) would otherwise never be sent.
	ready *event
}

// rotation is the line of a pass's forms: a worker takes the form at its
// head, makes one attempt, and puts the form back at its tail if it has
// more to send, so that every form of the endpoint gets its turn at the
// endpoint's slots however long the others' backlogs.
type rotation struct {
	mu      sync.Mutex
	wake    sync.Cond // a turn came back
	line    []*turn
	taken   int    // turns the workers hold
	stop    bool   // the pass ends: no more turns
	outcome result // caughtUp, or why the pass stopped
	more    bool   // the pass's time ran out with entries left
}

// next returns the turn at the head of the line, waiting while the line
// is empty and a worker may yet put one back; nil when the pass ends.
func (r *rotation) next() *turn {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.line) == 0 && r.taken > 0 && !r.stop {
		r.wake.Wait()
	}
	if r.stop || len(r.line) == 0 {
		return nil
	}
	t := r.line[0]
	r.line = r.line[1:]
	r.taken++
	return t
}

// back ends a worker's turn t: again puts it at the tail of the line,
// and a result other than caughtUp ends the pass. When the pass's time
// ran out, the line holds the turns with entries left.
func (r *rotation) back(t *turn, again bool, res result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.taken--
	switch {
	case res == timeUp:
		r.stop, r.more = true, true
		r.line = append(r.line, t)
	case res != caughtUp:
		r.stop, r.outcome = true, res
	case again:
		r.line = append(r.line, t)
	}
	r.wake.Broadcast()
}

// failingTooLong reports whether an endpoint with streams has failed for
// FailingLimit without a success since.
func failingTooLong(sts []Stream, now time.Time) bool {
	var since, last time.Time
	for _, s := range sts {
		if !s.FailingSince.IsZero() && (since.IsZero() || s.FailingSince.Before(since)) {
			since = s.FailingSince
		}
		if s.LastSuccess.After(last) {
			last = s.LastSuccess
		}
	}
	return !since.IsZero() && now.Sub(since) >= FailingLimit && now.Sub(last) >= FailingLimit
}

// forms returns the forms e follows: its list, or every form of its
// account.
func (d *Dispatcher) forms(ctx context.Context, e Endpoint) ([]string, error) {
	if len(e.Forms) > 0 {
		return e.Forms, nil
	}
	return accountForms(ctx, d.feed, e.AccountID)
}

// accountForms returns the IDs of every form of accountID.
func accountForms(ctx context.Context, feed Feed, accountID string) ([]string, error) {
	var out []string
	q := formsapi.Query{Limit: 1000, Order: formsapi.Oldest}
	for {
		p, err := feed.ListForms(ctx, accountID, q)
		if err != nil {
			return nil, err
		}
		for _, f := range p.Items {
			out = append(out, f.ID)
		}
		if p.NextCursor == "" {
			return out, nil
		}
		q.Cursor = p.NextCursor
	}
}

// take makes one attempt of the next entry of t's form that the
// endpoint's filter f keeps, reading its feed after the cursor first when
// t holds none, unless the pass's time is up at deadline. It reports
// whether the form has more to send, and how the turn ended.
func (d *Dispatcher) take(ctx context.Context, h *held, e Endpoint, f *matcher, t *turn, deadline time.Time) (bool, result) {
	if !d.cfg.now().Before(deadline) {
		return false, timeUp
	}
	if len(t.pending) == 0 {
		if ok, r := d.fill(ctx, h, e, t); !ok {
			return false, r
		}
		d.judge(t, f)
		if !d.spans(ctx, e, t) {
			t.pending = nil
			return false, caughtUp // read again on the next pass
		}
	}
	if (f != nil || t.st.Judging) && passOver(f, t) && len(t.pending) == 0 {
		// Nothing of what was read is for the endpoint: its cursor moves
		// past it, one write for the whole batch.
		if r := d.save(ctx, h, t.st, &t.rec); r != caughtUp {
			return false, r
		}
		return t.more, caughtUp
	}
	st, ok, r := d.deliver(ctx, h, e, t.st, &t.rec, t.pending[0], &t.ready, t.last, deadline)
	t.st = st
	if !ok {
		return false, r
	}
	t.pending = t.pending[1:]
	return len(t.pending) > 0 || t.more, caughtUp
}

// passOver moves t's cursor, in memory, past the entries at the head of
// t.pending that are not for the endpoint, and reports whether it passed
// any: the additions f does not keep, and on a judging stream the
// deletions of submissions the endpoint was not sent (received), each
// recorded (advance). The cursor is saved with the next entry's
// outcome, or by take when the batch ends, with the record. An entry
// that was failing is passed like any other, its retries ended with it.
func passOver(f *matcher, t *turn) bool {
	passed := false
	for len(t.pending) > 0 {
		x := t.pending[0]
		if x.deleted && received(t.st, &t.rec, x.of) || !x.deleted && f.keeps(x.sub) {
			break
		}
		advance(&t.st, &t.rec, x, false)
		t.st.Cursor = x.pos
		t.st.Attempts, t.st.NextAt, t.st.FailingSince = 0, time.Time{}, time.Time{}
		t.pending, t.ready, passed = t.pending[1:], nil, true
	}
	return passed
}

// fill reads the entries of t's form after its cursor into t.pending.
// It reports false when there is nothing to send: the feed's end, a
// deleted form, a failed read or a resync (r says whether the endpoint
// is still the dispatcher's). A page of another incarnation of the form
// than the stream's starts the stream over (incarnation).
func (d *Dispatcher) fill(ctx context.Context, h *held, e Endpoint, t *turn) (bool, result) {
	st := &t.st
	var p formsapi.FeedPage
	for restarted := false; ; {
		limit := d.cfg.batch
		if st.Resync {
			limit = 1 // only to learn whether the form was created again
		}
		var err error
		p, err = d.feed.SyncSubmissions(ctx, e.AccountID, st.FormID, st.Cursor, limit)
		if errors.Is(err, formsapi.ErrFormNotFound) {
			return false, caughtUp // the form was deleted (or is not the account's): nothing to send
		}
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.log.Error("webhook: read the feed", "endpoint", e.ID, "error", err)
			}
			return false, caughtUp
		}
		if p.Incarnation != st.Incarnation {
			again, ok := d.incarnation(ctx, e, st, p.Incarnation)
			if !ok || again && restarted {
				return false, caughtUp // the next pass reads it again
			}
			if again {
				restarted, t.stored = true, false
				continue // the page was of another form than the cursor's: read the form from its start
			}
		}
		if st.Resync {
			return false, caughtUp // stopped until the host replays the form
		}
		if !t.stored {
			st.Floor, t.stored = max(st.Cursor, p.Purged), true
		}
		if restarted {
			t.rec.clear() // the spans were of the form deleted since
			if r := d.save(ctx, h, *st, &t.rec); r != caughtUp {
				return false, r
			}
			d.changed(ctx, observe.EndpointChange{State: "restart", Reason: "recreated", AccountID: e.AccountID, EndpointID: e.ID, FormID: st.FormID})
		}
		break
	}
	if st.Cursor > 0 && p.Purged > st.Cursor && p.Purged > st.Floor {
		// Deletions after the cursor are forgotten: sending on would
		// leave the receiver holding submissions the server deleted.
		st.Resync = true
		if st.Judging {
			// The stream is replayed from the start, or not at all: the
			// verdicts go (those of deleted submissions among them).
			st.Judging, st.Unsent, st.Judged = false, 0, 0
			t.rec.clear()
		}
		if r := d.save(ctx, h, *st, &t.rec); r != caughtUp {
			return false, r
		}
		d.changed(ctx, observe.EndpointChange{State: "resync", Reason: "retention", AccountID: e.AccountID, EndpointID: e.ID, FormID: st.FormID})
		return false, caughtUp
	}
	xs, placed := entries(p)
	if !placed {
		// A store that does not place deletions: read one entry at a
		// time, whose position is the page's Next.
		var err error
		if p, err = d.feed.SyncSubmissions(ctx, e.AccountID, st.FormID, st.Cursor, 1); err != nil {
			return false, caughtUp
		}
		xs = one(p)
	}
	if len(xs) == 0 {
		return false, caughtUp
	}
	t.pending, t.last, t.more = xs, xs[len(xs)-1].pos, p.More
	return true, caughtUp
}

// incarnation gives *st the incarnation inc of its form, as a page of
// the form's feed read after st's cursor gave it (the store reads it with
// the page's entries), when st has another. again reports that *st now
// starts over at the form's first entry, for its cursor is a position of
// another form, one deleted since whose ID the form took: the cursor,
// floor, retries and resync of that other form go. ok is false when that
// cannot be decided now (logged if a failure).
//
//   - A feed that tells no incarnation (inc 0): none, st goes on.
//   - A stream of none yet (a new one, or one written before streams
//     kept theirs): the form's, unless its cursor is past the form's feed
//     head, which only another form's cursor can be (read when the feed
//     is one of this module's stores: storecontract.Head).
//   - A stream of another incarnation: started over.
func (d *Dispatcher) incarnation(ctx context.Context, e Endpoint, st *Stream, inc uint64) (again, ok bool) {
	if inc != 0 && st.Incarnation != 0 {
		*st = Stream{FormID: st.FormID, Incarnation: inc, LastSuccess: st.LastSuccess}
		return true, true
	}
	if inc != 0 && st.Cursor > 0 && d.heads != nil {
		head, now, err := d.heads.FeedHead(ctx, e.AccountID, st.FormID, nil)
		if err != nil || now != inc {
			if err != nil && !errors.Is(err, formsapi.ErrFormNotFound) && ctx.Err() == nil {
				d.cfg.log.Error("webhook: read the form's feed head", "endpoint", e.ID, "error", err)
			}
			return false, false // failed, or the form was created again since the page
		}
		if st.Cursor > head {
			*st = Stream{FormID: st.FormID, Incarnation: inc, LastSuccess: st.LastSuccess}
			return true, true
		}
	}
	st.Incarnation = inc // saved with the cursor's next move
	return false, true
}

// one returns the single entry of a page read with limit 1.
func one(p formsapi.FeedPage) []entry {
	switch {
	case len(p.Items) == 1:
		return []entry{{pos: p.Next, sub: p.Items[0]}}
	case len(p.Deleted) == 1:
		return []entry{{pos: p.Next, deleted: true, of: p.Deleted[0]}}
	}
	return nil
}

// deliver makes one attempt of entry x of st's form, unless the pass's
// time is up at deadline when it has a slot (r is then timeUp), and
// saves what it did to the stream: the cursor at x after a 2xx, the
// retry otherwise. ok reports that the stream may go on to the next
// entry; otherwise r says why not. *ready is x's event if an earlier
// pass made it; deliver leaves there the one it made when the time was
// up, and nil otherwise.
func (d *Dispatcher) deliver(ctx context.Context, h *held, e Endpoint, st Stream, rec *record, x entry, ready **event, last int64, deadline time.Time) (Stream, bool, result) {
	ev := *ready
	*ready = nil
	if ev == nil {
		made, st, ok, r := d.prepare(ctx, h, e, st, rec, x)
		if made == nil {
			return st, ok, r
		}
		ev = made
	}
	if err := d.slots.acquire(ctx, e.AccountID, e.ID); err != nil {
		return st, false, caughtUp
	}
	start := d.cfg.now()
	if !start.Before(deadline) {
		// The event's making or the wait for a slot outlasted the pass:
		// the settings it read may be stale. The next pass sends the
		// event it made.
		d.slots.release(e.AccountID, e.ID)
		*ready = ev
		return st, false, timeUp
	}
	return d.attempt(ctx, h, e, st, rec, x, *ev, last, start)
}

// prepare makes the event of entry x of st's form. When it cannot, ev is
// nil and st, ok and r are deliver's answer: a damaged entry is passed
// (its cursor saved), a failed signing is tried again on the next pass.
func (d *Dispatcher) prepare(ctx context.Context, h *held, e Endpoint, st Stream, rec *record, x entry) (ev *event, _ Stream, ok bool, r result) {
	refPos := x.pos
	if x.deleted {
		refPos = x.of
	}
	ref := d.tok.ref(e.AccountID, st.FormID, st.Incarnation, refPos)
	thin := thinURL(d.cfg.apiBase, st.FormID, d.tok.syncToken(e.AccountID, st.FormID, st.Incarnation, x.pos-1))
	if d.cfg.signer != nil && !x.deleted && len(x.sub.Attachments) > 0 {
		signed, err := signAttachments(ctx, d.cfg.signer, e.AccountID, st.FormID, x.sub.Attachments, d.cfg.now())
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.log.Error("webhook: sign the attachments of a feed entry", "endpoint", e.ID, "position", x.pos, "error", err)
			}
			return nil, st, false, caughtUp // tried again on the next pass
		}
		x.sub.Attachments = signed
	}
	made, err := eventOf(st.FormID, x, ref, thin)
	if err != nil {
		// A damaged stored submission (the handler leaves it out of its
		// pages too): it can never be sent, so it does not hold back
		// the entries after it.
		d.cfg.log.Error("webhook: a feed entry cannot be sent", "endpoint", e.ID, "position", x.pos, "error", err)
		advance(&st, rec, x, false)
		st.Cursor = x.pos
		r := d.save(ctx, h, st, rec)
		return nil, st, r == caughtUp, r
	}
	return &made, st, false, caughtUp
}

// attempt sends ev, the event of entry x of st's form, to e once, from
// start, holding a slot that it releases, and saves the outcome to the
// stream as deliver says.
func (d *Dispatcher) attempt(ctx context.Context, h *held, e Endpoint, st Stream, rec *record, x entry, ev event, last int64, start time.Time) (Stream, bool, result) {
	status, header, err := d.send(ctx, h.client, e, ev, start)
	d.slots.release(e.AccountID, e.ID)
	if ctx.Err() != nil {
		return st, false, caughtUp // shutting down: the attempt does not count
	}
	now := d.cfg.now()
	o := classify(status, err)
	a := observe.Attempt{Outcome: string(o), Retry: st.Attempts > 0, Duration: now.Sub(start), EventType: ev.typ, MessageID: ev.id,
		AccountID: e.AccountID, FormID: st.FormID, EndpointID: e.ID}
	if o == OutcomeSuccess {
		advance(&st, rec, x, true)
		st.Cursor, st.Attempts, st.NextAt, st.FailingSince, st.LastSuccess = x.pos, 0, time.Time{}, time.Time{}, now
		a.LagPositions = last - x.pos
		if !x.deleted {
			a.Lag = now.Sub(x.sub.CreatedAt)
		}
		d.attempted(ctx, a)
		r := d.save(ctx, h, st, rec)
		return st, r == caughtUp, r
	}
	d.attempted(ctx, a)
	st.Attempts++
	if st.FailingSince.IsZero() {
		st.FailingSince = now
	}
	ra, hasRA := retryAfter(header, now)
	st.NextAt = now.Add(time.Duration(float64(retryDelay(st.Attempts, o, ra, hasRA, d.cfg.rnd())) * d.cfg.retryScale))
	if r := d.save(ctx, h, st, rec); r != caughtUp {
		return st, false, r
	}
	if o == OutcomeGone {
		d.disable(ctx, e, "gone", "the endpoint answered 410 Gone")
		return st, false, disabled
	}
	return st, false, caughtUp
}

// send makes one attempt of ev to e, signed with e's live secrets at
// time at, and returns the answer's status and header. The answer's body
// is read (up to 64 KiB, so that the connection can be reused) and
// dropped: it is never logged or stored.
func (d *Dispatcher) send(ctx context.Context, client *http.Client, e Endpoint, ev event, at time.Time) (int, http.Header, error) {
	timeout := d.cfg.egress.Timeout
	if timeout <= 0 {
		timeout = DefaultAttemptTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL, bytes.NewReader(ev.body))
	if err != nil {
		return 0, nil, errors.New("webhook: the endpoint's URL does not make a request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "formsapi-webhook/1")
	if err := Sign(req.Header, ev.id, at, ev.body, live(e.Secrets, at)...); err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, resp.Header, nil
}

// live returns the secrets that sign at time at: the current one and
// those whose overlap has not ended.
func live(secrets []EndpointSecret, at time.Time) []Secret {
	out := make([]Secret, 0, len(secrets))
	for _, s := range secrets {
		if s.Until.IsZero() || s.Until.After(at) {
			out = append(out, s.Secret)
		}
	}
	return out
}

// save writes st under h's lease, with rec's change to its spans if it
// has one (nil: none), in one write.
func (d *Dispatcher) save(ctx context.Context, h *held, st Stream, rec *record) result {
	var err error
	if rec.pending() && d.passed != nil {
		err = d.passed.SaveVerdicts(ctx, h.id, h.gen, st, rec.v, d.cfg.now(), d.cfg.lease)
	} else {
		err = d.store.SaveStream(ctx, h.id, h.gen, st, d.cfg.now(), d.cfg.lease)
	}
	if err == nil && rec != nil {
		rec.v = hookstore.Verdicts{}
	}
	switch {
	case errors.Is(err, ErrLeaseLost):
		return leaseLost
	case err != nil:
		if ctx.Err() == nil {
			d.cfg.log.Error("webhook: save a stream", "endpoint", h.id, "error", err)
		}
		// The cursor did not move: the entry is sent again later, which
		// at-least-once allows. Stop this stream's pass here.
		return leaseLost
	}
	return caughtUp
}

// disable disables e for reason (a metric's class) with text for the
// host.
func (d *Dispatcher) disable(ctx context.Context, e Endpoint, reason, text string) {
	_, err := d.store.UpdateEndpoint(ctx, e.AccountID, e.ID, func(x *Endpoint) error {
		x.Disabled, x.DisabledReason, x.DisabledAt = true, text, d.cfg.now()
		return nil
	})
	if err != nil {
		d.cfg.log.Error("webhook: disable an endpoint", "endpoint", e.ID, "error", err)
		return
	}
	d.changed(ctx, observe.EndpointChange{State: "disabled", Reason: reason, AccountID: e.AccountID, EndpointID: e.ID})
}

func (d *Dispatcher) attempted(ctx context.Context, a observe.Attempt) {
	if d.cfg.obs != nil {
		d.cfg.obs.Attempt(ctx, a)
	}
}

func (d *Dispatcher) changed(ctx context.Context, c observe.EndpointChange) {
	if d.cfg.obs != nil {
		d.cfg.obs.EndpointChanged(ctx, c)
	}
}
