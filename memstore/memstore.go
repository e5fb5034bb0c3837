// Package memstore keeps forms, submissions and API keys in memory. It
// implements formsapi.Store and formsapi.KeyResolver, is safe for
// concurrent use, and has the same write side as sqlitestore, so tests and
// small hosts can use it in place of a database.
package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyset"
)

// Store is an in-memory store. The zero value is not usable; call New.
type Store struct {
	mu       sync.RWMutex
	seq      int64
	forms    map[string]*form   // by form ID, across accounts
	accounts map[string][]*form // each sorted by keyset position
	keys     map[[32]byte]keyRec
}

type keyRec struct {
	account string
	revoked bool // kept so that a revoked key can never be added again
}

var (
	_ formsapi.Store       = (*Store)(nil)
	_ formsapi.KeyResolver = (*Store)(nil)
)

type form struct {
	account string
	pos     keyset.Pos
	form    formsapi.Form
	subs    []*submission // sorted by keyset position
}

type submission struct {
	pos  keyset.Pos
	sub  formsapi.Submission
	meta formsapi.Metadata // kept, as the collection side would; never returned
}

// New returns an empty store.
func New() *Store {
	return &Store{
		forms:    make(map[string]*form),
		accounts: make(map[string][]*form),
		keys:     make(map[[32]byte]keyRec),
	}
}

// AddForm stores f as a form of accountID. A zero f.CreatedAt becomes the
// current time. It returns an error wrapping formsapi.ErrFormExists if any
// account already has a form with f.ID, and one wrapping
// formsapi.ErrInvalidInput if f or accountID is malformed; either way
// nothing changes.
func (s *Store) AddForm(ctx context.Context, accountID string, f formsapi.Form) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: add form: %w", err)
	}
	if f.CreatedAt.IsZero() {
		f.CreatedAt = time.Now()
	}
	f.CreatedAt = f.CreatedAt.UTC().Round(0)
	if err := formsapi.CheckForm(accountID, f); err != nil {
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
// side never returns. A zero sub.CreatedAt becomes the current time. It
// returns an error wrapping formsapi.ErrFormNotFound if sub.FormID is not a
// stored form, and one wrapping formsapi.ErrInvalidInput if sub or m is
// malformed; either way nothing changes.
func (s *Store) AddSubmission(ctx context.Context, sub formsapi.Submission, m formsapi.Metadata) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: add submission: %w", err)
	}
	if sub.CreatedAt.IsZero() {
		sub.CreatedAt = time.Now()
	}
	sub.CreatedAt = sub.CreatedAt.UTC().Round(0)
	if err := formsapi.CheckSubmission(sub, m); err != nil {
		return fmt.Errorf("memstore: add submission: %w", err)
	}
	sub = cloneSubmission(sub)
	m.Geo = bytes.Clone(m.Geo)
	s.mu.Lock()
	defer s.mu.Unlock()
	fm, ok := s.forms[sub.FormID]
	if !ok {
		return fmt.Errorf("memstore: add submission to form %q: %w", sub.FormID, formsapi.ErrFormNotFound)
	}
	s.seq++
	rec := &submission{pos: keyset.Pos{At: sub.CreatedAt.UnixNano(), Seq: s.seq}, sub: sub, meta: m}
	fm.subs = insert(fm.subs, rec, func(r *submission) keyset.Pos { return r.pos })
	return nil
}

// AddKey registers key as an API key of accountID. Only its hash is kept.
// It returns an error wrapping formsapi.ErrKeyExists if the key is already
// registered or was ever revoked, and one wrapping formsapi.ErrInvalidInput if the key could
// never authenticate (see formsapi.CheckKey) or accountID is empty.
func (s *Store) AddKey(ctx context.Context, key, accountID string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: add key: %w", err)
	}
	if err := formsapi.CheckKey(key); err != nil {
		return fmt.Errorf("memstore: add key: %w", err)
	}
	if accountID == "" {
		return fmt.Errorf("memstore: add key: %w: empty account ID", formsapi.ErrInvalidInput)
	}
	h := formsapi.HashKey(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[h]; ok {
		return fmt.Errorf("memstore: add key: %w", formsapi.ErrKeyExists)
	}
	s.keys[h] = keyRec{account: accountID}
	return nil
}

// RevokeKey revokes key; the next request that presents it gets 401. It
// returns an error wrapping formsapi.ErrInvalidKey if the key is not
// registered or already revoked.
func (s *Store) RevokeKey(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: revoke key: %w", err)
	}
	h := formsapi.HashKey(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[h]
	if !ok || k.revoked {
		return fmt.Errorf("memstore: revoke key: %w", formsapi.ErrInvalidKey)
	}
	s.keys[h] = keyRec{account: k.account, revoked: true}
	return nil
}

// ResolveKey returns the account that owns key, or an error wrapping
// formsapi.ErrInvalidKey if the key is unknown or revoked.
func (s *Store) ResolveKey(ctx context.Context, key string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("memstore: resolve key: %w", err)
	}
	h := formsapi.HashKey(key)
	s.mu.RLock()
	k, ok := s.keys[h]
	s.mu.RUnlock()
	if !ok || k.revoked {
		return "", fmt.Errorf("memstore: resolve key: %w", formsapi.ErrInvalidKey)
	}
	return k.account, nil
}

// ListForms implements formsapi.Store.
func (s *Store) ListForms(ctx context.Context, accountID string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	if err := ctx.Err(); err != nil {
		return formsapi.Page[formsapi.Form]{}, fmt.Errorf("memstore: list forms: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return page(s.accounts[accountID], q, func(f *form) keyset.Pos { return f.pos },
		func(f *form) formsapi.Form { return f.form })
}

// ListSubmissions implements formsapi.Store.
func (s *Store) ListSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	if err := ctx.Err(); err != nil {
		return formsapi.Page[formsapi.Submission]{}, fmt.Errorf("memstore: list submissions: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	fm, ok := s.forms[formID]
	if !ok || fm.account != accountID {
		return formsapi.Page[formsapi.Submission]{}, fmt.Errorf("memstore: list submissions: %w", formsapi.ErrFormNotFound)
	}
	return page(fm.subs, q, func(r *submission) keyset.Pos { return r.pos },
		func(r *submission) formsapi.Submission { return cloneSubmission(r.sub) })
}

// insert places item in the ascending list at its position. Sequences grow,
// so an item never lands before one with the same time added earlier.
func insert[T any](list []T, item T, pos func(T) keyset.Pos) []T {
	p := pos(item)
	i := sort.Search(len(list), func(i int) bool { return p.Less(pos(list[i])) })
	return slices.Insert(list, i, item)
}

// page cuts one page out of an ascending list with binary searches, so a
// deep page costs what the first does.
func page[T, R any](list []T, q formsapi.Query, pos func(T) keyset.Pos, out func(T) R) (formsapi.Page[R], error) {
	if q.Limit < 1 {
		return formsapi.Page[R]{}, fmt.Errorf("memstore: limit %d is not positive", q.Limit)
	}
	// [lo, hi) is the part of the list within Since and Until.
	lo, hi := 0, len(list)
	if !q.Since.IsZero() {
		since := q.Since.UnixNano()
		lo = sort.Search(len(list), func(i int) bool { return pos(list[i]).At >= since })
	}
	if !q.Until.IsZero() {
		until := q.Until.UnixNano()
		hi = sort.Search(len(list), func(i int) bool { return pos(list[i]).At >= until })
	}
	if hi < lo {
		hi = lo
	}
	var after keyset.Pos
	if q.Cursor != "" {
		c, err := keyset.Parse(q.Cursor)
		if err != nil {
			return formsapi.Page[R]{}, fmt.Errorf("memstore: %w", err)
		}
		after = c
	}
	var res formsapi.Page[R]
	if q.Order == formsapi.Oldest {
		start := lo
		if q.Cursor != "" {
			start = max(lo, sort.Search(len(list), func(i int) bool { return after.Less(pos(list[i])) }))
		}
		end := min(hi, start+q.Limit)
		res.Items = make([]R, 0, max(0, end-start))
		for i := start; i < end; i++ {
			res.Items = append(res.Items, out(list[i]))
		}
		if end < hi {
			res.NextCursor = pos(list[end-1]).String()
		}
		return res, nil
	}
	end := hi
	if q.Cursor != "" {
		end = min(hi, sort.Search(len(list), func(i int) bool { return !pos(list[i]).Less(after) }))
	}
	start := max(lo, end-q.Limit)
	res.Items = make([]R, 0, max(0, end-start))
	for i := end - 1; i >= start; i-- {
		res.Items = append(res.Items, out(list[i]))
	}
	if start > lo {
		res.NextCursor = pos(list[start]).String()
	}
	return res, nil
}

func cloneSubmission(s formsapi.Submission) formsapi.Submission {
	s.Data = bytes.Clone(s.Data)
	s.Attachments = append([]formsapi.Attachment{}, s.Attachments...)
	return s
}
