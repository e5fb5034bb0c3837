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
	"github.com/formsapi/formsapi/observe"
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
// sends that event again, with the same webhook-id and body.
type Dispatcher struct {
	cfg   config
	store Store
	feed  Feed
	tok   tokens
	sem   chan struct{} // attempts in flight, in all

	mu   sync.Mutex
	held map[string]*held
}

// held is an endpoint whose lease the dispatcher holds.
type held struct {
	id     string
	gen    int64
	client *http.Client // one per endpoint: its connections are reused
	busy   bool         // a pass is running (Run)
}

// NewDispatcher returns a dispatcher of the endpoints of store, whose
// events come from feed. cursorSecret must be the handler's
// (formsapi.WithCursorSecret): events carry the refs the sync feed gives,
// which are keyed by it.
func NewDispatcher(store Store, feed Feed, cursorSecret []byte, opts ...Option) *Dispatcher {
	cfg := newConfig(opts)
	return &Dispatcher{cfg: cfg, store: store, feed: feed, tok: newTokens(cursorSecret), sem: make(chan struct{}, cfg.total), held: map[string]*held{}}
}

// Run delivers until ctx ends: every poll interval it claims endpoints
// (up to its maximum) and starts a pass over each one it holds that has
// none running, so that an endpoint that is slow to answer holds back no
// other. A pass that ends (caught up, or waiting on a retry) starts again
// at the next poll, not at once: between polls an idle dispatcher reads
// nothing. When ctx ends it waits for the passes running, releases its
// leases and returns nil.
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
					keep := d.pass(ctx, h)
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
// failure or the feed's end. Tests call it, moving their clock between
// steps; a host runs Run instead (not both at once).
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
			if !d.pass(ctx, h) {
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
)

// pass renews h's lease and delivers what each form of the endpoint has
// after its cursor, forms in parallel up to the per-endpoint limit. It
// returns false when the dispatcher no longer holds the endpoint.
func (d *Dispatcher) pass(ctx context.Context, h *held) bool {
	now := d.cfg.now()
	l, err := d.store.RenewLease(ctx, h.id, h.gen, now, d.cfg.lease)
	switch {
	case errors.Is(err, ErrLeaseLost):
		return false
	case err != nil:
		if ctx.Err() == nil {
			d.cfg.log.Error("webhook: renew lease", "endpoint", h.id, "error", err)
		}
		return true // try again next time; the lease decides
	}
	e := l.Endpoint
	if e.Disabled {
		if err := d.store.ReleaseLease(ctx, h.id, h.gen); err != nil {
			d.cfg.log.Warn("webhook: release lease", "endpoint", h.id, "error", err)
		}
		return false
	}
	if failingTooLong(l.Streams, now) {
		d.disable(ctx, e, "failing", fmt.Sprintf("no successful delivery for %s", FailingLimit))
		return false
	}
	forms, err := d.forms(ctx, e)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.log.Error("webhook: list the endpoint's forms", "endpoint", h.id, "error", err)
		}
		return true
	}
	known := make(map[string]Stream, len(l.Streams))
	for _, st := range l.Streams {
		known[st.FormID] = st
	}
	slots := make(chan struct{}, d.cfg.perEndpoint)
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcome := caughtUp
	for _, form := range forms {
		st, ok := known[form]
		if !ok {
			st = Stream{FormID: form}
		}
		if st.Resync || st.NextAt.After(now) {
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		mu.Lock()
		stop := outcome != caughtUp
		mu.Unlock()
		if stop {
			<-slots
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if r := d.stream(ctx, h, e, st, ok); r != caughtUp {
				mu.Lock()
				outcome = r
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return outcome == caughtUp
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

// stream delivers the entries of st's form after its cursor, in order,
// until the feed's end or a failed attempt. stored says whether the
// store has the stream yet.
func (d *Dispatcher) stream(ctx context.Context, h *held, e Endpoint, st Stream, stored bool) result {
	for ctx.Err() == nil {
		p, err := d.feed.SyncSubmissions(ctx, e.AccountID, st.FormID, st.Cursor, d.cfg.batch)
		if errors.Is(err, formsapi.ErrFormNotFound) {
			return caughtUp // the form was deleted (or is not the account's): nothing to send
		}
		if err != nil {
			if ctx.Err() == nil {
				d.cfg.log.Error("webhook: read the feed", "endpoint", e.ID, "error", err)
			}
			return caughtUp
		}
		if !stored {
			st.Floor, stored = max(st.Cursor, p.Purged), true
		}
		if st.Cursor > 0 && p.Purged > st.Cursor && p.Purged > st.Floor {
			// Deletions after the cursor are forgotten: sending on would
			// leave the receiver holding submissions the server deleted.
			st.Resync = true
			if r := d.save(ctx, h, st); r != caughtUp {
				return r
			}
			d.changed(ctx, observe.EndpointChange{State: "resync", Reason: "retention", AccountID: e.AccountID, EndpointID: e.ID, FormID: st.FormID})
			return caughtUp
		}
		xs, placed := entries(p)
		if !placed {
			// A store that does not place deletions: read one entry at a
			// time, whose position is the page's Next.
			if p, err = d.feed.SyncSubmissions(ctx, e.AccountID, st.FormID, st.Cursor, 1); err != nil {
				return caughtUp
			}
			xs = one(p)
		}
		if len(xs) == 0 {
			return caughtUp
		}
		last := xs[len(xs)-1].pos
		for _, x := range xs {
			var r result
			var ok bool
			if st, ok, r = d.deliver(ctx, h, e, st, x, last); !ok {
				return r
			}
		}
		if !p.More {
			return caughtUp
		}
	}
	return caughtUp
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

// deliver makes one attempt of entry x of st's form and saves what it
// did to the stream: the cursor at x after a 2xx, the retry otherwise.
// ok reports that the stream may go on to the next entry; otherwise r
// says whether the endpoint is still the dispatcher's.
func (d *Dispatcher) deliver(ctx context.Context, h *held, e Endpoint, st Stream, x entry, last int64) (Stream, bool, result) {
	refPos := x.pos
	if x.deleted {
		refPos = x.of
	}
	ref := d.tok.ref(e.AccountID, st.FormID, refPos)
	thin := thinURL(d.cfg.apiBase, st.FormID, d.tok.syncToken(e.AccountID, st.FormID, x.pos-1))
	ev, err := eventOf(st.FormID, x, ref, thin)
	if err != nil {
		// A damaged stored submission (the handler leaves it out of its
		// pages too): it can never be sent, so it does not hold back
		// the entries after it.
		d.cfg.log.Error("webhook: a feed entry cannot be sent", "endpoint", e.ID, "position", x.pos, "error", err)
		st.Cursor = x.pos
		r := d.save(ctx, h, st)
		return st, r == caughtUp, r
	}
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		return st, false, caughtUp
	}
	start := d.cfg.now()
	status, header, err := d.send(ctx, h.client, e, ev, start)
	<-d.sem
	if ctx.Err() != nil {
		return st, false, caughtUp // shutting down: the attempt does not count
	}
	now := d.cfg.now()
	o := classify(status, err)
	a := observe.Attempt{Outcome: string(o), Retry: st.Attempts > 0, Duration: now.Sub(start), EventType: ev.typ, MessageID: ev.id,
		AccountID: e.AccountID, FormID: st.FormID, EndpointID: e.ID}
	if o == OutcomeSuccess {
		st.Cursor, st.Attempts, st.NextAt, st.FailingSince, st.LastSuccess = x.pos, 0, time.Time{}, time.Time{}, now
		a.LagPositions = last - x.pos
		if !x.deleted {
			a.Lag = now.Sub(x.sub.CreatedAt)
		}
		d.attempted(ctx, a)
		r := d.save(ctx, h, st)
		return st, r == caughtUp, r
	}
	d.attempted(ctx, a)
	st.Attempts++
	if st.FailingSince.IsZero() {
		st.FailingSince = now
	}
	ra, hasRA := retryAfter(header, now)
	st.NextAt = now.Add(time.Duration(float64(retryDelay(st.Attempts, o, ra, hasRA, d.cfg.rnd())) * d.cfg.retryScale))
	if r := d.save(ctx, h, st); r != caughtUp {
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

// save writes st under h's lease.
func (d *Dispatcher) save(ctx context.Context, h *held, st Stream) result {
	err := d.store.SaveStream(ctx, h.id, h.gen, st, d.cfg.now(), d.cfg.lease)
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
