// Package feedwait is how a store tells the sync feed's waiting requests
// (GET …/submissions?sync=…&wait=…) that a form's feed may have moved on,
// or that a key may have been revoked, without a statement per waiter.
//
// A store keeps one Hub. A waiting request registers a Watch before it
// reads the page it may wait after: the Watch holds the form's channel
// and the key's channel as they are at registration, and every wake-up
// after that closes them. So a write that commits between the read and
// the moment the request blocks is never lost: it closes a channel the
// request already holds. Waiters of one form share one channel (and one
// map entry), waiters of one key another: waking a form is one close,
// whatever the number of its waiters, and an idle waiter costs its two
// references, a few dozen bytes, beside the request's own goroutine.
//
// Writes a store knows of (its own, in this process) wake directly
// (WakeForm, WakeKey, WakeAll). Writes it cannot see (another process
// on the same SQLite file, another node on the same PostgreSQL) are
// found by a periodic Check, shared by every waiter of the hub: one call
// of the store's CheckFunc per interval, naming every form and key
// waited on, and only while some request waits.
package feedwait

import (
	"context"
	"sync"
	"time"
)

// Form is a form waited on, for a check: its ID and the least feed
// position its waiters have read to. A form whose feed's last position
// is past After, or that is gone, has something for a waiter.
type Form struct {
	ID    string
	After int64
}

// CheckFunc is a store's check of what waiters wait on, for writes it
// did not make itself: it returns the forms among forms whose feed has
// moved past their After or that no longer exist, and the keys among
// keys (hashes, internal/keyformat) that are no longer live. It is one
// statement for all of them.
type CheckFunc func(ctx context.Context, forms []Form, keys [][32]byte) (changedForms []string, goneKeys [][32]byte, err error)

// Hub is a store's registry of waiters. The zero value is not usable;
// call New.
type Hub struct {
	check   CheckFunc     // nil: no periodic check
	every   time.Duration // between checks
	timeout time.Duration // of each check

	// after is the clock seam of the periodic check: a channel that
	// receives once d has passed. Tests that drive Check themselves set
	// a long interval instead.
	after func(d time.Duration) <-chan time.Time

	mu      sync.Mutex
	forms   map[string]*entry
	keys    map[[32]byte]*entry
	ticking bool          // the periodic check's goroutine runs
	poke    chan struct{} // Poke: a check now (buffered, one)
	done    chan struct{} // closed by Close
	closed  bool
	blocked func() // tests: called by Watch.Blocked
	first   func() // SetFirstHook: called by Watch when the hub held no waiter

	checks, woken uint64 // counts, for Stats
}

// entry is the shared wake-up of the waiters of one form or one key.
type entry struct {
	ch    chan struct{}
	n     int   // waiters holding ch
	after int64 // forms: the least After of its waiters since ch was made
}

// New returns a hub. With check not nil and interval above 0, while any
// request waits the hub calls it every interval (each call under a
// deadline of timeout, or of interval when timeout is 0), and wakes what
// it names; with interval 0 only calls of Check do.
func New(check CheckFunc, interval, timeout time.Duration) *Hub {
	if timeout <= 0 {
		timeout = interval
	}
	return &Hub{check: check, every: interval, timeout: timeout, after: time.After,
		forms: map[string]*entry{}, keys: map[[32]byte]*entry{}, done: make(chan struct{}), poke: make(chan struct{}, 1)}
}

// Watch is one waiting request's registration: the form's and the key's
// channels as they were when it was made, and the hub's end.
type Watch struct {
	h    *Hub
	form string
	key  [32]byte
	// Form is closed when the form's feed may have entries past the
	// After given, Key when the key may have been revoked, Done when the
	// hub is closed (the store, or the node, is shutting down).
	Form, Key, Done <-chan struct{}
	released        bool
}

// Watch registers a waiter of formID, whose feed it has read to after,
// holding the key whose hash is key. The caller must Release it.
func (h *Hub) Watch(formID string, key [32]byte, after int64) *Watch {
	h.mu.Lock()
	first := h.first
	if len(h.forms) > 0 || len(h.keys) > 0 {
		first = nil
	}
	w := h.watch(formID, key, after)
	h.mu.Unlock()
	if first != nil {
		first()
	}
	return w
}

// watch is Watch with h.mu held, but for the first hook.
func (h *Hub) watch(formID string, key [32]byte, after int64) *Watch {
	w := &Watch{h: h, form: formID, key: key, Done: h.done}
	f := h.forms[formID]
	if f == nil {
		f = &entry{ch: make(chan struct{}), after: after}
		h.forms[formID] = f
	}
	f.n++
	f.after = min(f.after, after)
	k := h.keys[key]
	if k == nil {
		k = &entry{ch: make(chan struct{})}
		h.keys[key] = k
	}
	k.n++
	w.Form, w.Key = f.ch, k.ch
	if h.check != nil && h.every > 0 && !h.ticking && !h.closed {
		h.ticking = true
		go h.tick()
	}
	return w
}

// Blocked tells the hub that the waiter read nothing and now blocks on
// its channels. It does nothing but call the test hook (SetBlockedHook):
// a test writes there, between the read and the block, to prove that
// such a write is not lost.
func (w *Watch) Blocked() {
	w.h.mu.Lock()
	hook := w.h.blocked
	w.h.mu.Unlock()
	if hook != nil {
		hook()
	}
}

// Release ends the registration; more calls do nothing.
func (w *Watch) Release() {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.released {
		return
	}
	w.released = true
	if f := h.forms[w.form]; f != nil && f.ch == w.Form {
		if f.n--; f.n == 0 {
			delete(h.forms, w.form)
		}
	}
	if k := h.keys[w.key]; k != nil && k.ch == w.Key {
		if k.n--; k.n == 0 {
			delete(h.keys, w.key)
		}
	}
}

// WakeForm wakes every waiter of formID: the store committed a change to
// it (an addition, a deletion, the form deleted or changed).
func (h *Hub) WakeForm(formID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wakeForm(formID)
}

// wakeForm is WakeForm with h.mu held. The entry leaves the map: its
// waiters hold its channel, and the next Watch makes a new one.
func (h *Hub) wakeForm(formID string) {
	if f := h.forms[formID]; f != nil {
		close(f.ch)
		delete(h.forms, formID)
		h.woken++
	}
}

// WakeKey wakes every waiter holding the key whose hash is key: the store
// revoked it, or changed what it may read.
func (h *Hub) WakeKey(key [32]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wakeKey(key)
}

func (h *Hub) wakeKey(key [32]byte) {
	if k := h.keys[key]; k != nil {
		close(k.ch)
		delete(h.keys, key)
		h.woken++
	}
}

// WakeAll wakes every waiter: a change the store cannot pin to forms
// (an erasure across an account, a table emptied, positions that went
// back).
func (h *Hub) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.forms {
		h.wakeForm(id)
	}
	for k := range h.keys {
		h.wakeKey(k)
	}
}

// Waiting reports how many waiters hold the hub's channels, by form and
// by key (each waiter holds one of each).
func (h *Hub) Waiting() (forms, keys int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.forms {
		forms += f.n
	}
	for _, k := range h.keys {
		keys += k.n
	}
	return forms, keys
}

// Stats are a hub's counts since New.
type Stats struct {
	Checks uint64 // periodic checks run (statements, for the stores)
	Woken  uint64 // wake-ups: forms' and keys' channels closed
}

// Stats returns the hub's counts.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{Checks: h.checks, Woken: h.woken}
}

// SetFirstHook sets f, which Watch calls when it registers a waiter
// with a hub that held none (none waited, or those that did were all
// woken), after the registration and before it returns: so before the
// waiter reads its page. pgstore's WithNotify brings its lease ahead
// there, so that writers notify only while some request waits. f must
// not call the hub's methods that wait for a check.
func (h *Hub) SetFirstHook(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.first = f
}

// SetBlockedHook sets a function Watch.Blocked calls (tests).
func (h *Hub) SetBlockedHook(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.blocked = f
}

// Check runs the store's check once for every form and key waited on now,
// and wakes what it names. It does nothing when nothing waits or the hub
// has no CheckFunc. The periodic check calls it; tests call it to stand
// for an interval passing.
func (h *Hub) Check(ctx context.Context) error {
	h.mu.Lock()
	if h.check == nil || len(h.forms) == 0 && len(h.keys) == 0 {
		h.mu.Unlock()
		return nil
	}
	forms := make([]Form, 0, len(h.forms))
	for id, f := range h.forms {
		forms = append(forms, Form{ID: id, After: f.after})
	}
	keys := make([][32]byte, 0, len(h.keys))
	for k := range h.keys {
		keys = append(keys, k)
	}
	// What a check finds is woken only in the channels of the waiters
	// registered before it began: a waiter that registers meanwhile read
	// its page after the check's statement may have, and its own read
	// covers what the statement saw.
	fch := make(map[string]chan struct{}, len(forms))
	for id, f := range h.forms {
		fch[id] = f.ch
	}
	kch := make(map[[32]byte]chan struct{}, len(keys))
	for k, e := range h.keys {
		kch[k] = e.ch
	}
	h.checks++
	h.mu.Unlock()
	changed, gone, err := h.check(ctx, forms, keys)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range changed {
		if f := h.forms[id]; f != nil && f.ch == fch[id] {
			h.wakeForm(id)
		}
	}
	for _, k := range gone {
		if e := h.keys[k]; e != nil && e.ch == kch[k] {
			h.wakeKey(k)
		}
	}
	return nil
}

// Poke asks for the periodic check to run now rather than at the end of
// its interval, if anything waits: a store calls it when it learns that
// something may have changed (pgstore's WithNotify: a notice from
// PostgreSQL). Pokes while a check runs make one more check after it;
// a poke never replaces the interval's check, so a lost one delays a
// wake-up, never loses it.
func (h *Hub) Poke() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ticking {
		return
	}
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// tick runs Check every interval while anything waits, and when poked.
func (h *Hub) tick() {
	for {
		select {
		case <-h.after(h.every):
		case <-h.poke:
		case <-h.done:
			return
		}
		h.mu.Lock()
		if len(h.forms) == 0 && len(h.keys) == 0 {
			h.ticking = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
		h.Check(ctx) // a failed check wakes nothing; the next one tries again
		cancel()
	}
}

// Close wakes every waiter's Done: they answer what they have. Watches
// made after it see Done closed at once.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}
