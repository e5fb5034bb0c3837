package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/formsapi/formsapi/internal/coalesce"
	"github.com/formsapi/formsapi/internal/wire"
)

// WithKeyCopy turns the store's copy of its key lookups on or off. A
// store from Open keeps it unless this turns it off; a store from New
// never keeps one (see below), whatever this says.
//
// With the copy, the store keeps in memory what its key lookups read
// (each live key's account, forms and expiry; each looked-up form's
// seq, version and incarnation) and answers Authorize, ResolveKey and
// the handler's combined lookup from it, instead of one statement per
// request. It stays exact: a request is answered from the copy only
// after a check of the file that started after the request arrived,
// PRAGMA data_version on the store's one write connection, which
// changes exactly when another connection (another process, the host's
// SQL) has committed; a change empties the copy, and so does a new write
// connection (database/sql opens one when the driver finds the last
// unusable), whose count starts again. One check serves every
// request that waits while the one before it runs. The store's own
// writes change the copy themselves, before they commit: a submission
// added or deleted drops its form's entry, any other write of keys or
// forms the whole copy. So a revocation, an expiry or a write, by
// anyone, holds for the very next request, as without the copy; expiry
// is checked against the store's clock on every request.
//
// The check needs the write connection: a round waits for a write of
// the store in progress, unless the write may take long (a batch, which
// runs the host's iterator; a deletion, whose checkpoint waits for
// readers; a webhook transaction), and then the round's requests are
// looked up as without the copy, one statement each.
//
// A store from New keeps no copy: the host's handle has many
// connections, the store's writes go through any of them, and on any one
// connection the data_version would change at every write of the store,
// so the copy would be emptied by the store's own writes.
func WithKeyCopy(on bool) Option {
	return func(c *config) { c.noKeyCopy = !on }
}

// maxCopied bounds the entries of each of the copy's maps: past it, the
// map is emptied and filled again by the lookups that follow.
const maxCopied = 1 << 16

// keyCopy is the store's copy of its key lookups (see WithKeyCopy).
//
// Exactness rests on three rules. (1) A request is served from the copy
// only after a round, a check of data_version that started after the
// request arrived, has been applied: a foreign commit made before the
// request is seen by it and empties the copy. (2) The store's own writes
// mark what they change before they commit (change.form,
// change.everything): the entries go, and no lookup may put one back
// until the write is over (change.end), so a request arriving after
// the commit never finds the old entry. (3) A lookup's result goes into
// the copy only if nothing it covers was marked since the lookup began
// (gen): a lookup that read the file before a commit, own or foreign,
// never lands after that commit's mark.
//
// data_version is a count of the connection's own, and a connection
// opened anew starts it again: a round compares it with the last only on
// the same connection (conns, the write connections opened so far, the
// same before and after its check and as the last round's).
type keyCopy struct {
	check   *sql.Stmt      // PRAGMA data_version, on the write connection
	refresh *sql.Stmt      // sqlKeyCopyRefresh, on the write connection
	conns   *atomic.Uint64 // write connections opened (openCounted)
	conn    uint64         // conns as the last round read it
	gate    chan struct{}
	rounds  coalesce.Batcher[round]

	mu sync.Mutex
	// long is set while a write that may take long holds the gate (see
	// holdLong); kick is closed when one begins, to wake the rounds that
	// wait for the gate.
	long   bool
	kick   chan struct{}
	grants map[[32]byte]grant // live keys
	forms  map[string]copied  // by form ID (unique in the file)
	seen   int64              // data_version as the last round read it
	primed bool               // seen was read at least once
	// keysGen and lastSeq are keys_gen (migration 0025) and the highest
	// seq of a submission as the round that last emptied or refreshed
	// the copy read them (after its data_version): every key and form
	// copied since was read after that. keysGen is unknown when not
	// Valid. schema is PRAGMA schema_version as that round read it: a
	// restore through SQLite's backup API, which copies pages past every
	// trigger, moves it (the destination's cookie plus one), as does a
	// change of the schema; either way the copy goes.
	keysGen sql.NullInt64
	lastSeq int64
	schema  int64
	// gen counts the marks; allAt is the gen of the last mark of
	// everything, formAt that of each form marked since. A lookup that
	// began at gen g is copied only if none is above g.
	gen    uint64
	allAt  uint64
	formAt map[string]uint64
	// writing counts the store's writes in flight that change
	// everything, writingForm those that change a form: nothing they
	// cover is copied meanwhile.
	writing     int
	writingForm map[string]int

	// stats counts the rounds that read data_version, those that found
	// the write connection busy, and the lookups answered from the copy
	// and in the file (KeyCopyStats).
	stats KeyCopyStats
}

// copied is a form as a key lookup returns it, with its account.
type copied struct {
	account string
	form    wire.Form
}

// round is one request's call of a round: ok when the check ran and the
// copy may answer it.
type round struct{ ok bool }

func newKeyCopy(check, refresh *sql.Stmt, gate chan struct{}, conns *atomic.Uint64) *keyCopy {
	c := &keyCopy{check: check, refresh: refresh, conns: conns, gate: gate, kick: make(chan struct{}), grants: map[[32]byte]grant{}, forms: map[string]copied{},
		formAt: map[string]uint64{}, writingForm: map[string]int{}}
	c.rounds = coalesce.Batcher[round]{Run: c.runRound, Max: 1 << 20}
	return c
}

// runRound is a round: data_version read once, on the write connection,
// for every call of batch. The store's writes use that connection under
// its gate, so the round takes the gate too; while a long write holds it
// (holdLong), the round does not wait, and its calls are looked up in
// the file. When another connection has committed since the last round,
// the round reads what changed (readRefresh): the copy keeps its keys
// if none changed and no form went, and takes the forms changed as they
// are now, instead of going (refreshLocked).
func (c *keyCopy) runRound(ctx context.Context, batch []*round) {
	if !c.acquire(ctx) {
		return // every call's ok stays false
	}
	defer func() { <-c.gate }()
	var v int64
	before := c.conns.Load()
	err := c.check.QueryRowContext(ctx).Scan(&v)
	if err != nil {
		return
	}
	c.mu.Lock()
	changed := !c.primed || v != c.seen || before != c.conn
	foreign := c.primed && v != c.seen && before == c.conn && c.keysGen.Valid
	since := int64(math.MaxInt64) // no form: keys_gen and the highest seq alone
	if foreign {
		since = c.lastSeq
	}
	c.mu.Unlock()
	var fresh *refreshed
	if changed {
		// A failure leaves fresh nil: the copy goes, as it would without.
		fresh, _ = c.readRefresh(ctx, since)
	}
	after := c.conns.Load()
	c.mu.Lock()
	c.stats.Rounds++
	switch {
	case before != after:
		// A connection was opened for the check: which one v is of is
		// not known. The copy goes, and the next round starts afresh.
		c.clearLocked()
		c.primed = false
	case changed:
		// Another connection committed since the last round, or the
		// write connection is another (its count started again), or this
		// is the first: whatever the copy holds may be old.
		if foreign && fresh != nil && c.refreshLocked(fresh) {
			c.stats.Refreshed++
		} else {
			c.clearLocked()
			c.keysGen, c.lastSeq, c.schema = sql.NullInt64{}, 0, 0
			if fresh != nil {
				c.keysGen, c.lastSeq, c.schema = fresh.keysGen, fresh.lastSeq, fresh.schema
			}
		}
		c.seen, c.conn, c.primed = v, after, true
	}
	c.mu.Unlock()
	for _, r := range batch {
		r.ok = true
	}
}

// maxRefreshed is the most new submissions a round reads the forms of
// (readRefresh): past it, the copy goes.
const maxRefreshed = 1024

// refreshed is what readRefresh read: keys_gen, the highest seq of a
// submission, and the forms of the submissions added since the copy
// last read it, as they are now.
type refreshed struct {
	keysGen sql.NullInt64
	lastSeq int64
	schema  int64 // PRAGMA schema_version
	forms   []refreshedForm
	over    bool // more than maxRefreshed submissions added
}

// refreshedForm is a changed form's row.
type refreshedForm struct {
	id string
	copied
}

// readRefresh reads keys_gen, the highest seq and the forms of the
// submissions whose seq is above since in one statement, on the write
// connection: a round's, under the gate.
func (c *keyCopy) readRefresh(ctx context.Context, since int64) (*refreshed, error) {
	rows, err := c.refresh.QueryContext(ctx, since, maxRefreshed+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	r := &refreshed{}
	for rows.Next() {
		var keysGen, lastSeq, added, schema, seq, version, inc sql.NullInt64
		var id, account sql.NullString
		if err := rows.Scan(&keysGen, &lastSeq, &added, &schema, &id, &account, &seq, &version, &inc); err != nil {
			return nil, err
		}
		if !id.Valid { // the first row
			r.keysGen, r.lastSeq, r.over, r.schema = keysGen, lastSeq.Int64, added.Int64 > maxRefreshed, schema.Int64
			continue
		}
		f := wire.Form{Found: true, Seq: seq.Int64, Version: version.Int64, Incarnation: uint64(inc.Int64)}
		r.forms = append(r.forms, refreshedForm{id: id.String, copied: copied{account: account.String, form: f}})
	}
	return r, rows.Err()
}

// refreshLocked brings the copy to fresh, read by a round after another
// connection's commit: false, having changed nothing, when the copy
// must go instead (keys_gen is not where the copy saw it: something
// changed that new submissions do not tell; the schema cookie moved or
// the highest seq went back, as in a restore; too many submissions were
// added). Otherwise each
// copied form that got a submission becomes its row as read, and no
// lookup begun before is copied (it may have read the file before that
// commit). c.mu must be held.
func (c *keyCopy) refreshLocked(fresh *refreshed) bool {
	if !fresh.keysGen.Valid || !c.keysGen.Valid || fresh.keysGen != c.keysGen ||
		fresh.lastSeq < c.lastSeq || fresh.over || fresh.schema != c.schema {
		return false
	}
	for _, now := range fresh.forms {
		old, ok := c.forms[now.id]
		switch {
		case !ok:
		case now.account != old.account:
			delete(c.forms, now.id)
		default:
			c.forms[now.id] = now.copied
		}
	}
	c.lastSeq = fresh.lastSeq
	c.gen++
	c.allAt = c.gen
	clear(c.formAt) // every mark in it is at or below allAt
	return true
}

// acquire takes the store's gate for a round, waiting for a write in
// progress unless it is long (holdLong): false when it did not take it.
func (c *keyCopy) acquire(ctx context.Context) bool {
	select {
	case c.gate <- struct{}{}:
		return true
	default:
	}
	for waited := false; ; waited = true {
		c.mu.Lock()
		long, kick := c.long, c.kick
		if long {
			c.stats.Busy++
		} else if !waited {
			c.stats.Waited++
		}
		c.mu.Unlock()
		if long {
			return false
		}
		select {
		case c.gate <- struct{}{}:
			return true
		case <-kick: // a long write began: look again
		case <-ctx.Done():
			return false
		}
	}
}

// holdLong notes that a write that may take long holds the store's gate
// (it runs the host's code, or waits for readers): rounds do not wait
// for it, and look their requests up in the file meanwhile. Call it once
// the gate is taken, and the function it returns before the gate is
// released. A nil *keyCopy does nothing.
func (c *keyCopy) holdLong() func() {
	if c == nil {
		return func() {}
	}
	c.mu.Lock()
	c.long = true
	close(c.kick)
	c.kick = make(chan struct{})
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.long = false
		c.mu.Unlock()
	}
}

// clearLocked empties the copy and marks everything, so that no lookup
// begun before lands in it. c.mu must be held.
func (c *keyCopy) clearLocked() {
	c.gen++
	c.allAt = c.gen
	clear(c.grants)
	clear(c.forms)
	clear(c.formAt) // every mark in it is at or below allAt
}

// lookup answers a key lookup (formID "" for the key alone) from the
// copy, after a round that started after the call: ok false when the
// copy cannot (a key or form not copied, the round not run), and then
// gen is what fill needs. The error is ctx's.
func (c *keyCopy) lookup(ctx context.Context, h [32]byte, formID string) (g grant, f wire.Form, ok bool, gen uint64, err error) {
	var r round
	if err := c.rounds.Do(ctx, &r); err != nil {
		if ctx.Err() != nil {
			return grant{}, wire.Form{}, false, 0, ctx.Err()
		}
		r.ok = false // a panicked round: look up in the file
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.ok {
		g, ok = c.grants[h]
		if ok && formID != "" {
			var cf copied
			cf, ok = c.forms[formID]
			ok = ok && cf.account == g.account
			f = cf.form
		}
		if ok {
			c.stats.Hits++
			return g, f, true, 0, nil
		}
	}
	c.stats.Misses++
	return grant{}, wire.Form{}, false, c.gen, nil
}

// fill copies the result of a lookup in the file that began at gen
// (lookup's), unless something it covers was marked since or is being
// written. A form not found is not copied.
func (c *keyCopy) fill(gen uint64, h [32]byte, g grant, formID string, f wire.Form) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.allAt > gen || c.writing > 0 {
		return
	}
	if len(c.grants) >= maxCopied {
		clear(c.grants)
	}
	c.grants[h] = g
	if formID == "" || !f.Found || c.formAt[formID] > gen || c.writingForm[formID] > 0 {
		return
	}
	if len(c.forms) >= maxCopied {
		clear(c.forms)
	}
	c.forms[formID] = copied{account: g.account, form: f}
}

// change is one write of the store, as the copy sees it: begun with
// change, marked before its commit with form or everything, ended with
// end once it has committed or failed. A nil *keyCopy (no copy) makes
// changes that do nothing.
type change struct {
	c     *keyCopy
	all   bool
	forms []string
}

// change begins a write.
func (c *keyCopy) change() *change { return &change{c: c} }

// form marks formID's entry: it goes now, and none is copied until end.
// Call it before the write commits.
func (ch *change) form(formID string) {
	c := ch.c
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ch.forms = append(ch.forms, formID)
	c.writingForm[formID]++
	delete(c.forms, formID)
}

// everything marks the whole copy: it is emptied now, and nothing is
// copied until end. Call it before the write commits.
func (ch *change) everything() {
	c := ch.c
	if c == nil || ch.all {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ch.all = true
	c.writing++
	clear(c.grants)
	clear(c.forms)
}

// end ends the write, committed or not: what it marked goes again (a
// lookup may have copied it from the file before the commit) and no
// lookup that began before now is copied over it.
func (ch *change) end() {
	c := ch.c
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch.all {
		c.writing--
		c.clearLocked()
	}
	if len(ch.forms) > 0 {
		c.gen++
		for _, id := range ch.forms {
			if c.writingForm[id]--; c.writingForm[id] == 0 {
				delete(c.writingForm, id)
			}
			delete(c.forms, id)
			if !ch.all {
				c.formAt[id] = c.gen
			}
		}
		if len(c.formAt) >= maxCopied {
			c.clearLocked()
		}
	}
	ch.all, ch.forms = false, nil
}

// KeyCopyStats counts what a store's key copy (WithKeyCopy) did.
type KeyCopyStats struct {
	Rounds int64 // rounds that read data_version
	// Refreshed counts the rounds that found another connection's
	// commit and kept the copy, with the forms it changed read again
	// (no key changed, no form went).
	Refreshed int64
	Waited    int64 // rounds that waited for a write of the store to end
	Busy      int64 // rounds that found a long write of the store in progress, and left their requests to the file
	Hits      int64 // lookups answered from the copy
	Misses    int64 // lookups made in the file (then copied, when nothing changed meanwhile)
}

// KeyCopyStats returns what the store's key copy has done since Open,
// and false when the store keeps no copy (see WithKeyCopy).
func (s *Store) KeyCopyStats() (KeyCopyStats, bool) {
	if s.keys == nil {
		return KeyCopyStats{}, false
	}
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	return s.keys.stats, true
}

// countedConnector opens connections with drv and counts them: see
// openCounted.
type countedConnector struct {
	dsn    string
	drv    driver.Driver
	opened atomic.Uint64
}

// Connect opens a connection, and counts it.
func (c *countedConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	c.opened.Add(1)
	return conn, nil
}

// Driver returns the driver Connect uses.
func (c *countedConnector) Driver() driver.Driver { return c.drv }

// openCounted is sql.Open("sqlite", dsn) with a count of the connections
// the handle has opened so far, the key copy's way of knowing that the
// write connection is still the one whose data_version it saw.
func openCounted(dsn string) (*sql.DB, *atomic.Uint64, error) {
	probe, err := sql.Open("sqlite", dsn) // opens no connection: only finds the driver
	if err != nil {
		return nil, nil, fmt.Errorf("open the driver: %w", err)
	}
	drv := probe.Driver()
	if err := probe.Close(); err != nil {
		return nil, nil, fmt.Errorf("open the driver: %w", err)
	}
	c := &countedConnector{dsn: dsn, drv: drv}
	return sql.OpenDB(c), &c.opened, nil
}
