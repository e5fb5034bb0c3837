// Package memstore keeps forms, submissions and API keys in memory. It
// implements formsapi.Store, formsapi.FeedStore (the sync feed) with
// formsapi.FieldStore (the CSV export's columns),
// formsapi.KeyManager (scoped and expiring keys, last used; a
// formsapi.KeyAuthorizer and KeyResolver) and formsapi.Writer with formsapi.BatchWriter, exactly as
// sqlitestore and pgstore do, and is safe for concurrent use, so tests and
// small hosts can use it in place of a database.
package memstore

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/feedwait"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/internal/keyformat"
	"github.com/formsapi/formsapi/internal/keyset"
	"github.com/formsapi/formsapi/internal/keyuse"
	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/internal/token"
	"github.com/formsapi/formsapi/internal/wire"
)

// Store is an in-memory store of forms, submissions, API keys and webhook
// endpoints, safe for concurrent use. Like sqlitestore.Store and
// pgstore.Store, it implements every contract this module has for a store:
// a formsapi.Store, a formsapi.FeedStore (the sync feed) and
// formsapi.FieldStore (the CSV export's columns), a formsapi.KeyResolver
// and formsapi.KeyAuthorizer (scoped and expiring keys) and
// formsapi.KeyManager, a formsapi.Writer and formsapi.BatchWriter, a hookstore.Store (webhook
// endpoints and their streams) and a formsapi.Counter (it
// counts lists for total=). Give it to formsapi.NewHandler as both store and keys.
// The zero value is not usable; call New.
type Store struct {
	mu       sync.RWMutex
	seq      int64
	forms    map[string]*form   // by form ID, across accounts
	accounts map[string][]*form // each sorted by keyset position
	keys     map[[32]byte]*keyRec
	limits   formsapi.Limits
	now      func() time.Time // see WithClock
	keep     time.Duration    // see WithTombstoneRetention
	secret   []byte           // the cursor secret, for handlers over this store (FastPath)
	hooks    hooks            // webhook endpoints (webhooks.go)
	// wait wakes the sync feed's waiting requests: every write of the
	// store is made here, so each wakes its form's (or key's) waiters
	// directly, and no check is needed.
	wait *feedwait.Hub
}

// keyRec is one API key. Only lastUsed changes after it is added (and
// revoked, under the write lock), so readers under the read lock may
// note a use without taking the write lock.
type keyRec struct {
	seq       int64
	account   string
	forms     []string // nil: every form
	createdAt time.Time
	expiresAt time.Time // zero: never
	revokedAt time.Time // zero: live; kept so that a revoked key can never be added again
	lastUsed  atomic.Int64
}

var (
	_ formsapi.Store       = (*Store)(nil)
	_ formsapi.KeyResolver = (*Store)(nil)
	_ formsapi.KeyManager  = (*Store)(nil)
	_ formsapi.Writer      = (*Store)(nil)
	_ formsapi.FeedStore   = (*Store)(nil)
	_ formsapi.FieldStore  = (*Store)(nil)
)

type form struct {
	account string
	// pos.Seq is also the form's incarnation (see incarnation): the store
	// never gives a seq twice.
	pos  keyset.Pos
	form formsapi.Form
	subs []*submission // sorted by keyset position
	// feed is the form's feed entries in commit order: the one at index
	// i has feed position i+1. Appended under the write lock, so a
	// reader under the read lock sees a prefix of it, never a gap.
	feed   []feedEntry
	purged int64                  // the last position of a forgotten deletion
	ids    map[string]*submission // by Metadata.ID, for those that have one
	// fields is the form's field table (formsapi.FieldStore), in first
	// position order, appended to under the write lock; named indexes
	// it by name.
	fields []field
	named  map[string]bool
}

// field is a name of the form's field table and the feed position of
// the first submission whose data had it.
type field struct {
	name  string
	first int64
}

// incarnation is the form's incarnation (wire.Page.Incarnation): its
// seq, which no other form of the store ever has, so a form created again
// with a deleted one's ID has another, marked as one whose refs carry it
// (token.RefIncarnation: the store keeps nothing across a restart, so no
// consumer holds refs of an earlier kind). The caller holds the lock.
func (fm *form) incarnation() uint64 { return uint64(fm.pos.Seq) | token.RefIncarnation }

// feedEntry is a submission, a deletion, or neither: a submission since
// deleted, or a deletion past retention.
type feedEntry struct {
	sub *submission
	of  int64     // a deletion: the position of the submission it deleted
	at  time.Time // a deletion: when, by the store's clock
}

type submission struct {
	pos     keyset.Pos
	feedPos int64 // its index in the form's feed, plus one
	sub     formsapi.Submission
	json    []byte            // the submission as the API sends it
	meta    formsapi.Metadata // kept, as the collection side would; never returned
}

// Option configures a store made by New.
type Option func(*Store)

// WithLimits sets the limits AddForm, AddSubmission, AddKey and
// AddKeyWith apply (formsapi.DefaultLimits without it); a zero field keeps
// its default.
func WithLimits(l formsapi.Limits) Option {
	return func(s *Store) { s.limits = l }
}

// WithClock sets the store's notion of now: the time by which keys
// expire (Authorize, ResolveKey and AddKeyWith, which refuses an
// ExpiresAt that is not after it), the CreatedAt and RevokedAt of keys,
// when a key's use is noted for LastUsedAt, and the CreatedAt given to a
// form or submission added without one. It is time.Now unless set. It
// exists for tests, which move a clock of their own instead of waiting
// for time to pass, and for hosts that must judge expiry on a clock of
// their own. The handler still refuses a grant past its ExpiresAt by the
// wall clock, so a clock behind the wall clock cannot keep a key alive
// longer. It panics if now is nil.
func WithClock(now func() time.Time) Option {
	if now == nil {
		panic("memstore: WithClock with a nil clock")
	}
	return func(s *Store) { s.now = now }
}

// WithTombstoneRetention sets how long the store keeps a deletion in its
// form's sync feed (30 days without it): a feed consumer whose token is
// older than a deletion it has not read, once that deletion is
// forgotten, gets 410 and must read the feed again from the start (see
// formsapi.FeedStore). A deletion is forgotten at the store's first
// deletion in the form at least d after it (by WithClock's clock), never
// earlier. It panics if d is not positive.
func WithTombstoneRetention(d time.Duration) Option {
	if d <= 0 {
		panic("memstore: WithTombstoneRetention with a retention that is not positive")
	}
	return func(s *Store) { s.keep = d }
}

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{
		forms:    make(map[string]*form),
		accounts: make(map[string][]*form),
		keys:     make(map[[32]byte]*keyRec),
		limits:   formsapi.DefaultLimits,
		now:      time.Now,
		keep:     stored.TombstoneRetention,
		secret:   stored.NewSecret(),
		wait:     feedwait.New(nil, 0, 0),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// AddForm stores f as a form of accountID. A zero f.CreatedAt becomes the
// current time (see WithClock). It returns an error wrapping
// formsapi.ErrFormExists if any account already has a form with f.ID, and
// one wrapping formsapi.ErrInvalidInput if f or accountID is malformed or
// beyond the store's limits (see WithLimits and
// formsapi.Limits.PrepareForm); either way nothing changes.
func (s *Store) AddForm(ctx context.Context, accountID string, f formsapi.Form) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: add form: %w", err)
	}
	if f.CreatedAt.IsZero() {
		f.CreatedAt = s.now()
	}
	if err := s.limits.PrepareForm(accountID, &f); err != nil {
		return fmt.Errorf("memstore: add form: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.forms[f.ID]; ok {
		return fmt.Errorf("memstore: add form %q: %w", f.ID, formsapi.ErrFormExists)
	}
	s.seq++
	fm := &form{account: accountID, pos: keyset.Pos{At: f.CreatedAt.UnixNano(), Seq: s.seq}, form: f}
	s.forms[f.ID] = fm
	s.accounts[accountID] = insert(s.accounts[accountID], fm, func(f *form) keyset.Pos { return f.pos })
	return nil
}

// AddSubmission stores sub with its internal metadata m, which the read
// side never returns. A zero sub.CreatedAt becomes the current time (see
// WithClock). It returns an error wrapping formsapi.ErrFormNotFound if
// sub.FormID is not a stored form, and one wrapping
// formsapi.ErrInvalidInput if sub or m is malformed or beyond the store's
// limits (see WithLimits); either way nothing changes.
func (s *Store) AddSubmission(ctx context.Context, sub formsapi.Submission, m formsapi.Metadata) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: add submission: %w", err)
	}
	r, err := s.prepareSubmission(sub, m)
	if err != nil {
		return fmt.Errorf("memstore: add submission: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fm, err := s.addable(r, nil)
	if err != nil {
		return fmt.Errorf("memstore: add submission to form %q: %w", r.sub.FormID, err)
	}
	s.add(fm, r)
	return nil
}

// newSubmission is a submission made ready to add, once checked against
// the store's limits: a copy of the caller's, its JSON as the API sends
// it, and the names of its fields.
type newSubmission struct {
	sub     formsapi.Submission
	m       formsapi.Metadata
	encoded []byte
	names   []string
}

// prepareSubmission does for AddSubmission and AddSubmissions what needs
// no lock: a zero CreatedAt becomes the current time, the store's limits
// are checked, and the submission copied and encoded.
func (s *Store) prepareSubmission(sub formsapi.Submission, m formsapi.Metadata) (newSubmission, error) {
	if sub.CreatedAt.IsZero() {
		sub.CreatedAt = s.now()
	}
	if err := s.limits.PrepareSubmission(&sub, &m); err != nil {
		return newSubmission{}, err
	}
	sub = cloneSubmission(sub)
	m.Geo = bytes.Clone(m.Geo)
	encoded, err := formsapi.AppendSubmissionJSON(nil, sub)
	if err != nil {
		return newSubmission{}, err
	}
	return newSubmission{sub: sub, m: m, encoded: encoded, names: wire.FieldNames(sub.Data)}, nil
}

// addable returns the form r is added to, or why it cannot be: its form
// is not stored, or its metadata ID is one the form has or, when batch is
// not nil, one an earlier submission of the batch gave the form (batch
// holds them, by form ID and metadata ID). It needs s.mu.
func (s *Store) addable(r newSubmission, batch map[[2]string]bool) (*form, error) {
	fm, ok := s.forms[r.sub.FormID]
	if !ok {
		return nil, formsapi.ErrFormNotFound
	}
	if r.m.ID == "" {
		return fm, nil
	}
	if _, dup := fm.ids[r.m.ID]; dup || batch[[2]string{r.sub.FormID, r.m.ID}] {
		return nil, fmt.Errorf("%w: metadata ID %q is already a submission of the form", formsapi.ErrInvalidInput, r.m.ID)
	}
	if batch != nil {
		batch[[2]string{r.sub.FormID, r.m.ID}] = true
	}
	return fm, nil
}

// add adds r to fm, its form, at the end of its feed. It needs s.mu
// held for writing, and addable's consent.
func (s *Store) add(fm *form, r newSubmission) {
	s.seq++
	rec := &submission{pos: keyset.Pos{At: r.sub.CreatedAt.UnixNano(), Seq: s.seq}, sub: r.sub, json: r.encoded, meta: r.m}
	fm.subs = insert(fm.subs, rec, func(r *submission) keyset.Pos { return r.pos })
	fm.feed = append(fm.feed, feedEntry{sub: rec})
	rec.feedPos = int64(len(fm.feed))
	s.wait.WakeForm(fm.form.ID) // its waiters read once the lock is let go
	for _, n := range r.names {
		if !fm.named[n] {
			if fm.named == nil {
				fm.named = map[string]bool{}
			}
			fm.named[n] = true
			fm.fields = append(fm.fields, field{name: n, first: rec.feedPos})
		}
	}
	if r.m.ID != "" {
		if fm.ids == nil {
			fm.ids = map[string]*submission{}
		}
		fm.ids[r.m.ID] = rec
	}
}

// AddKey registers key as an API key of accountID. Only its hash is kept.
// It returns an error wrapping formsapi.ErrKeyExists if the key is already
// registered or was ever revoked, and one wrapping
// formsapi.ErrInvalidInput if the key could never authenticate (see
// formsapi.Limits.PrepareKeyOptions) or accountID is malformed or beyond the store's
// limits (see WithLimits and formsapi.Limits.PrepareKeyOptions).
func (s *Store) AddKey(ctx context.Context, key, accountID string) error {
	return s.AddKeyWith(ctx, key, accountID, formsapi.KeyOptions{})
}

// AddKeyWith registers key as an API key of accountID restricted to
// o.Forms and o.ExpiresAt. It returns an error wrapping
// formsapi.ErrKeyExists if the key is already registered or was ever
// revoked, and one wrapping formsapi.ErrInvalidInput if the key,
// accountID or o is malformed or accountID is beyond the store's limits
// (see WithLimits and formsapi.Limits.PrepareKeyOptions); either way
// nothing changes.
func (s *Store) AddKeyWith(ctx context.Context, key, accountID string, o formsapi.KeyOptions) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: add key: %w", err)
	}
	if err := s.limits.PrepareKeyOptions(key, accountID, &o); err != nil {
		return fmt.Errorf("memstore: add key: %w", err)
	}
	now := s.now()
	if !o.ExpiresAt.IsZero() && !o.ExpiresAt.After(now) {
		return fmt.Errorf("memstore: add key: %w: expiresAt %s is not after the store's clock", formsapi.ErrInvalidInput, o.ExpiresAt.Format(time.RFC3339Nano))
	}
	h := keyformat.Hash(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[h]; ok {
		return fmt.Errorf("memstore: add key: %w", formsapi.ErrKeyExists)
	}
	s.seq++
	s.keys[h] = &keyRec{seq: s.seq, account: accountID, forms: slices.Clone(o.Forms), createdAt: now.UTC().Round(0), expiresAt: o.ExpiresAt}
	return nil
}

// RevokeKey revokes key; the next request that presents it gets 401. It
// returns an error wrapping formsapi.ErrInvalidKey if the key is not
// registered or already revoked.
func (s *Store) RevokeKey(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: revoke key: %w", err)
	}
	h := keyformat.Hash(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[h]
	if !ok || !k.revokedAt.IsZero() {
		return fmt.Errorf("memstore: revoke key: %w", formsapi.ErrInvalidKey)
	}
	k.revokedAt = s.now().UTC().Round(0)
	s.wait.WakeKey(h)
	return nil
}

// ResolveKey returns the account that owns key, or an error wrapping
// formsapi.ErrInvalidKey if the key is unknown, revoked or expired.
func (s *Store) ResolveKey(ctx context.Context, key string) (string, error) {
	g, err := s.authorize(ctx, key)
	if err != nil {
		return "", fmt.Errorf("memstore: resolve key: %w", err)
	}
	return g.AccountID, nil
}

// Authorize implements formsapi.KeyAuthorizer: it returns what key may
// read, or an error wrapping formsapi.ErrInvalidKey if the key is
// unknown, revoked or expired. It notes the key's use for ListKeys.
func (s *Store) Authorize(ctx context.Context, key string) (formsapi.Grant, error) {
	g, err := s.authorize(ctx, key)
	if err != nil {
		return formsapi.Grant{}, fmt.Errorf("memstore: authorize: %w", err)
	}
	return g, nil
}

func (s *Store) authorize(ctx context.Context, key string) (formsapi.Grant, error) {
	if err := ctx.Err(); err != nil {
		return formsapi.Grant{}, err
	}
	h := keyformat.Hash(key)
	now := s.now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[h]
	if !ok || !k.revokedAt.IsZero() || !k.expiresAt.IsZero() && !now.Before(k.expiresAt) {
		return formsapi.Grant{}, formsapi.ErrInvalidKey
	}
	// Noted at most once per interval, so that a busy key does not make
	// every request write the same cache line.
	if last := k.lastUsed.Load(); now.UnixNano()-last >= int64(keyuse.DefaultInterval) {
		k.lastUsed.CompareAndSwap(last, now.UnixNano())
	}
	return formsapi.Grant{AccountID: k.account, Forms: slices.Clone(k.forms), ExpiresAt: k.expiresAt}, nil
}

// ListKeys implements formsapi.KeyManager: every key of accountID,
// revoked and expired ones included, oldest first.
func (s *Store) ListKeys(ctx context.Context, accountID string) ([]formsapi.KeyInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: list keys: %w", err)
	}
	type rec struct {
		seq  int64
		info formsapi.KeyInfo
	}
	var recs []rec
	s.mu.RLock()
	for h, k := range s.keys {
		if k.account != accountID {
			continue
		}
		info := formsapi.KeyInfo{ID: fmt.Sprintf("%x", h), AccountID: k.account, Forms: slices.Clone(k.forms),
			CreatedAt: k.createdAt, ExpiresAt: k.expiresAt, RevokedAt: k.revokedAt}
		if ns := k.lastUsed.Load(); ns != 0 {
			info.LastUsedAt = time.Unix(0, ns).UTC()
		}
		recs = append(recs, rec{k.seq, info})
	}
	s.mu.RUnlock()
	slices.SortFunc(recs, func(a, b rec) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]formsapi.KeyInfo, len(recs))
	for i, r := range recs {
		out[i] = r.info
	}
	return out, nil
}

// ListForms implements formsapi.Store.
func (s *Store) ListForms(ctx context.Context, accountID string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	var p formsapi.Page[formsapi.Form]
	if err := ctx.Err(); err != nil {
		return p, fmt.Errorf("memstore: list forms: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	// walk refuses a limit below 1, for which nothing is reserved.
	p.Items = make([]formsapi.Form, 0, min(max(q.Limit, 0), prealloc))
	next, err := walk(s.accounts[accountID], q, func(f *form) keyset.Pos { return f.pos }, nil, func(f *form) {
		p.Items = append(p.Items, f.form)
	})
	p.NextCursor = next
	return p, err
}

// ListSubmissions implements formsapi.Store.
func (s *Store) ListSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	var p formsapi.Page[formsapi.Submission]
	// walk refuses a limit below 1, for which nothing is reserved.
	p.Items = make([]formsapi.Submission, 0, min(max(q.Limit, 0), prealloc))
	next, err := s.submissions(ctx, accountID, formID, q, nil, func(r *submission) {
		p.Items = append(p.Items, cloneSubmission(r.sub))
	})
	p.NextCursor = next
	return p, err
}

// AppendSubmissions is ListSubmissions for the handler's fast path: it
// appends each submission's JSON, made by formsapi.AppendSubmissionJSON
// when it was added, to p.Body.
func (s *Store) AppendSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, p *wire.Page) error {
	next, err := s.submissions(ctx, accountID, formID, q, &p.Incarnation, func(r *submission) {
		p.AddTrusted(r.json) // made in this process, never out of its hands
	})
	p.NextCursor = next
	return err
}

// The parts of the module-private store contract (internal/storecontract)
// and of the optional public interfaces the store implements. The
// private contract's methods (FastPath, AppendSubmissions, AppendFeed,
// FeedHead and, where the store has them, AuthorizeForm, AuthorizeForms
// and ListFormsAt) are exported only so that the handler, in another
// package, can call them: their types are internal, so a host cannot, and
// they are not part of the store's API.
var (
	_ storecontract.Store[formsapi.Query] = (*Store)(nil)
	_ storecontract.Waiter                = (*Store)(nil)
	_ formsapi.Counter                    = (*Store)(nil)
)

// FastPath is for this module's handler, which reads pages straight from
// the store's encoded JSON when it is given the store itself. A host's
// type that embeds the store has this method too, but it returns the
// embedded store, so the handler sees the host's type and calls its
// methods (its overrides), never the embedded store's behind its back.
//
// It also hands the handler the store's cursor secret, drawn from
// crypto/rand by New: handlers over one store share cursors, sync tokens
// and feed refs, which end with the process, as its data does.
func (s *Store) FastPath() storecontract.Self { return storecontract.Self{Store: s, Secret: s.secret} }

// submissions visits one page of a form of accountID under the read lock,
// and sets *inc, unless nil, to the form's incarnation.
func (s *Store) submissions(ctx context.Context, accountID, formID string, q formsapi.Query, inc *uint64, visit func(*submission)) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("memstore: list submissions: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	fm, ok := s.forms[formID]
	if !ok || fm.account != accountID {
		return "", fmt.Errorf("memstore: list submissions: %w", formsapi.ErrFormNotFound)
	}
	if inc != nil {
		*inc = fm.incarnation()
	}
	if q.Sort != "" {
		next, work, err := walkSorted(fm.subs, q, visit)
		wire.AddExamined(ctx, work)
		return next, err
	}
	if stored.Filtered(q) {
		next, work, err := walkFiltered(fm.subs, q, visit)
		wire.AddExamined(ctx, work)
		return next, err
	}
	return walk(fm.subs, q, func(r *submission) keyset.Pos { return r.pos }, func(r *submission) int { return len(r.json) }, visit)
}

// walkFiltered is walk for a query with filters or a search: it visits
// the submissions of the range that match them (see finds), examining as
// many as it takes, since they are in memory, up to the bound on a
// page's work that the database stores keep too (find.MaxExaminedBytes):
// the page ends right after the submission whose check reaches it,
// short or empty, with a cursor. It returns the cursor and the page's
// work (find.Examined).
func walkFiltered(list []*submission, q formsapi.Query, visit func(*submission)) (next string, work int64, err error) {
	cs := stored.Clauses(q)
	var matched []*submission
	pos := func(r *submission) keyset.Pos { return r.pos }
	// end visits the matches and ends the page with cursor.
	end := func(cursor string) (string, int64, error) {
		for _, m := range matched {
			visit(m)
		}
		return cursor, work, nil
	}
	// Walk with a limit in submissions, not matches: a scan of the range
	// in pages of the list itself, each filtered, until q.Limit match.
	scan := q
	scan.MaxBytes = 0
	budget := keyset.NewBudget(q)
	var last keyset.Pos
	for {
		scan.Limit = max(q.Limit, 256)
		var page []*submission
		next, err := walk(list, scan, pos, nil, func(r *submission) { page = append(page, r) })
		if err != nil {
			return "", work, fmt.Errorf("memstore: %w", err)
		}
		for _, r := range page {
			found, w := finds(r, cs, q.Search)
			work += w
			spent := work >= find.MaxExaminedBytes
			if !found {
				last = r.pos
				if spent {
					return end(last.String())
				}
				continue
			}
			if len(matched) == q.Limit || !budget.Fits(len(r.json)) {
				return end(last.String())
			}
			budget.Count(len(r.json))
			matched = append(matched, r)
			last = r.pos
			if spent {
				return end(last.String())
			}
		}
		if next == "" {
			return end("")
		}
		scan.Cursor = next
	}
}

// walkSorted is walk for a sorted query (formsapi.Query.Sort): it visits
// the submissions of the range that match the query's filters and
// search in the sort's order (see keyset.SortPos), from the cursor's
// place. memstore keeps no ordered index: each page reads the sort key
// of every submission of the form and sorts those after the cursor, a
// cost in the form's size that the database stores' index avoids. The
// page's work (find.Examined of the submissions it checked against
// filters and search) is bounded as walkFiltered's.
func walkSorted(list []*submission, q formsapi.Query, visit func(*submission)) (next string, work int64, err error) {
	if _, err := keyset.Fetch(q); err != nil {
		return "", 0, fmt.Errorf("memstore: %w", err)
	}
	s, err := keyset.ParseSorted(q)
	if err != nil {
		return "", 0, fmt.Errorf("memstore: %w", err)
	}
	type placed struct {
		at keyset.SortPos
		r  *submission
	}
	var keyed, plain []placed
	for _, r := range list {
		k, ok := find.SortValue(r.sub.Data, s.Field)
		p := placed{at: keyset.SortPos{Keyed: ok, Key: k, Pos: r.pos}, r: r}
		if !s.Follows(p.at) || !keyset.Contains(q, r.sub.CreatedAt) {
			continue
		}
		if ok {
			keyed = append(keyed, p)
		} else {
			plain = append(plain, p)
		}
	}
	slices.SortFunc(keyed, func(a, b placed) int {
		if s.Desc {
			return b.at.Compare(a.at)
		}
		return a.at.Compare(b.at)
	})
	if s.Desc {
		slices.Reverse(plain) // list is in ascending position order
	}
	cs := stored.Clauses(q)
	budget := keyset.NewBudget(q)
	n := 0
	var last keyset.SortPos // the last submission examined
	for _, p := range append(keyed, plain...) {
		found := true
		if len(cs) > 0 || q.Search != "" {
			var w int64
			found, w = finds(p.r, cs, q.Search)
			work += w
		}
		if found {
			if n == q.Limit || !budget.Fits(len(p.r.json)) {
				return last.String(), work, nil
			}
			budget.Count(len(p.r.json))
			n++
			visit(p.r)
		}
		last = p.at
		if work >= find.MaxExaminedBytes {
			return p.at.String(), work, nil
		}
	}
	return "", work, nil
}

// finds is stored.Finds for a submission in memory: whether it matches
// the clauses cs and contains the search term ("" is none), and the work
// of the check, which counts its data (the database stores count the
// JSON they keep its attachments as too; memstore keeps them decoded).
func finds(r *submission, cs []find.Clause, term string) (bool, int64) {
	ok, matched := find.MatchWork(r.sub.Data, cs)
	if !ok {
		return false, find.Examined(len(r.sub.Data), matched)
	}
	if term == "" {
		return true, find.Examined(len(r.sub.Data), matched)
	}
	found, normalized := find.Search(r.sub.Data, stored.URLs(r.sub.Attachments), term)
	return found, find.Examined(len(r.sub.Data), matched+normalized)
}

// prealloc caps the capacity reserved for a page up front.
const prealloc = 256

// insert places item in the ascending list at its position. Sequences grow,
// so an item never lands before one with the same time added earlier.
func insert[T any](list []T, item T, pos func(T) keyset.Pos) []T {
	p := pos(item)
	i := sort.Search(len(list), func(i int) bool { return p.Less(pos(list[i])) })
	return slices.Insert(list, i, item)
}

// walk visits one page of an ascending list and returns the cursor after
// it. Binary searches find keyset.Bounds in the list, so a deep page costs
// what the first does. With size non-nil and q.MaxBytes positive, the page
// also ends before an item that would take it past q.MaxBytes, unless it
// would be the page's first.
func walk[T any](list []T, q formsapi.Query, pos func(T) keyset.Pos, size func(T) int, visit func(T)) (string, error) {
	if _, err := keyset.Fetch(q); err != nil {
		return "", fmt.Errorf("memstore: %w", err)
	}
	lo, hi, err := keyset.Bounds(q)
	if err != nil {
		return "", fmt.Errorf("memstore: %w", err)
	}
	// list[start:end] is the part of the list strictly between lo and hi.
	start := sort.Search(len(list), func(i int) bool { return lo.Less(pos(list[i])) })
	end := max(start, sort.Search(len(list), func(i int) bool { return !pos(list[i]).Less(hi) }))
	n, budget := 0, keyset.NewBudget(q)
	// take visits item unless the page is full; false ends the page.
	take := func(item T) bool {
		if n == q.Limit || size != nil && !budget.Take(size(item)) {
			return false
		}
		n++
		visit(item)
		return true
	}
	if q.Order == formsapi.Oldest {
		for i := start; i < end; i++ {
			if !take(list[i]) {
				return pos(list[i-1]).String(), nil
			}
		}
		return "", nil
	}
	for i := end - 1; i >= start; i-- {
		if !take(list[i]) {
			return pos(list[i+1]).String(), nil
		}
	}
	return "", nil
}

func cloneSubmission(s formsapi.Submission) formsapi.Submission {
	s.Data = bytes.Clone(s.Data)
	s.Attachments = append([]formsapi.Attachment{}, s.Attachments...)
	return s
}

// Close ends the waits of the sync feed's waiting requests (they answer
// at once) and returns nil: the store holds nothing else outside its
// memory, and stays usable. It is here so that every store of this module
// is an io.Closer, and a host can swap one for another behind that
// interface too.
func (s *Store) Close() error {
	s.wait.Close()
	return nil
}

// WatchFeed registers a waiting request of the sync feed with the
// store's hub (the handler's wait=; internal/storecontract.Waiter).
func (s *Store) WatchFeed(formID string, key [32]byte, after int64) *feedwait.Watch {
	return s.wait.Watch(formID, key, after)
}

// CountSubmissions is the count the handler asks for total= (see formsapi.Counter), as the database stores
// do, over the submissions in memory: the candidates of a filtered list
// are those that match its first clause (the database stores count the
// entries of their rarest clause's index key instead: the same exact
// count within the bounds, another estimate), checked against every
// clause when exact, all within the bounds formsapi.Total documents.
func (s *Store) CountSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, exact bool) (formsapi.Total, error) {
	return s.countSubmissions(ctx, accountID, formID, q, exact, find.MaxExactCountBytes)
}

// countSubmissions is CountSubmissions with the bound on the work of a
// filtered list's count (find.MaxExactCountBytes) as a parameter, for its
// test.
func (s *Store) countSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, exact bool, maxBytes int64) (formsapi.Total, error) {
	if err := ctx.Err(); err != nil {
		return formsapi.Total{}, fmt.Errorf("memstore: count submissions: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	fm, ok := s.forms[formID]
	if !ok || fm.account != accountID {
		return formsapi.Total{}, fmt.Errorf("memstore: count submissions: %w", formsapi.ErrFormNotFound)
	}
	q = stored.CountQuery(q)
	cs := stored.Clauses(q)
	filtered := stored.Filtered(q)
	bound := int64(find.MaxCount)
	if filtered && exact {
		bound = find.MaxExactCount
	}
	// The candidates of a filtered list: the matches of its first clause
	// and of its search (memstore has no index whose entries it could
	// count instead), whose checks are work (find.Examined) within
	// maxBytes, as an exact count's are in the database stores.
	var candidates, matches, work int64
	defer func() { wire.AddExamined(ctx, work) }()
	cut := false // the work reached maxBytes
	for _, r := range fm.subs {
		if !keyset.Contains(q, r.sub.CreatedAt) {
			continue
		}
		if filtered {
			found, w := finds(r, cs[:min(len(cs), 1)], q.Search)
			work += w
			cut = work >= maxBytes
			if !found && cut {
				break
			}
			if !found {
				continue
			}
		}
		if candidates == bound {
			candidates, cut = bound+1, false // past the bound
			break
		}
		candidates++
		if filtered && exact && find.Match(r.sub.Data, cs) {
			matches++
		}
		if cut {
			break
		}
	}
	switch {
	case filtered && exact && (cut || candidates > bound):
		return formsapi.Total{Value: matches, Kind: find.AtLeast}, nil
	case filtered && exact:
		return formsapi.Total{Value: matches, Kind: find.Exact}, nil
	case cut:
		return formsapi.Total{Value: candidates, Kind: find.Estimate}, nil
	}
	return stored.Counted(candidates, bound, filtered), nil
}
