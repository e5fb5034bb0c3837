package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/formsapi/formsapi/internal/hookrow"
	"github.com/formsapi/formsapi/webhook/hookstore"
)

var _ hookstore.Store = (*Store)(nil)

// hooks holds the webhook endpoints of a store, under a mutex of their
// own: a dispatcher's claims and cursor writes never wait for the
// submissions' lock, nor it for them.
type hooks struct {
	mu        sync.Mutex
	endpoints map[string]*hookRec // by ID, across accounts
}

type hookRec struct {
	e       hookstore.Endpoint
	streams map[string]hookstore.Stream
	passed  map[string][]hookstore.Span // by form: ascending, disjoint (hookstore.PassedStore)
	gen     int64
	until   time.Time // the lease's end; zero when free
}

func (r *hookRec) streamList() []hookstore.Stream {
	out := make([]hookstore.Stream, 0, len(r.streams))
	for _, s := range r.streams {
		out = append(out, s)
	}
	return hookrow.SortStreams(out)
}

// endpoint returns the record of id if it is an endpoint of accountID,
// under h.mu.
func (h *hooks) endpoint(accountID, id string) (*hookRec, error) {
	r, ok := h.endpoints[id]
	if !ok || r.e.AccountID != accountID {
		return nil, fmt.Errorf("memstore: endpoint %q: %w", id, hookstore.ErrEndpointNotFound)
	}
	return r, nil
}

// leased returns the record of id if gen is its lease's generation,
// under h.mu.
func (h *hooks) leased(id string, gen int64) (*hookRec, error) {
	r, ok := h.endpoints[id]
	if !ok {
		return nil, fmt.Errorf("memstore: endpoint %q: %w (%w)", id, hookstore.ErrLeaseLost, hookstore.ErrEndpointNotFound)
	}
	if r.gen != gen {
		return nil, fmt.Errorf("memstore: endpoint %q, lease %d: %w", id, gen, hookstore.ErrLeaseLost)
	}
	return r, nil
}

func (h *hooks) lock(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	h.mu.Lock()
	if h.endpoints == nil {
		h.endpoints = make(map[string]*hookRec)
	}
	return nil
}

// AddEndpoint implements hookstore.Store.
func (s *Store) AddEndpoint(ctx context.Context, e hookstore.Endpoint, streams []hookstore.Stream) error {
	if err := s.hooks.lock(ctx, "add endpoint"); err != nil {
		return err
	}
	defer s.hooks.mu.Unlock()
	if _, ok := s.hooks.endpoints[e.ID]; ok {
		return fmt.Errorf("memstore: add endpoint %q: %w", e.ID, hookstore.ErrEndpointExists)
	}
	r := &hookRec{e: hookrow.Clone(e), streams: make(map[string]hookstore.Stream, len(streams))}
	for _, st := range streams {
		r.streams[st.FormID] = st
	}
	s.hooks.endpoints[e.ID] = r
	return nil
}

// Endpoints implements hookstore.Store.
func (s *Store) Endpoints(ctx context.Context, accountID string) ([]hookstore.Endpoint, error) {
	if err := s.hooks.lock(ctx, "list endpoints"); err != nil {
		return nil, err
	}
	defer s.hooks.mu.Unlock()
	out := []hookstore.Endpoint{}
	for _, r := range s.hooks.endpoints {
		if r.e.AccountID == accountID {
			out = append(out, hookrow.Clone(r.e))
		}
	}
	slices.SortFunc(out, func(a, b hookstore.Endpoint) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// Endpoint implements hookstore.Store.
func (s *Store) Endpoint(ctx context.Context, accountID, id string) (hookstore.Endpoint, []hookstore.Stream, error) {
	if err := s.hooks.lock(ctx, "get endpoint"); err != nil {
		return hookstore.Endpoint{}, nil, err
	}
	defer s.hooks.mu.Unlock()
	r, err := s.hooks.endpoint(accountID, id)
	if err != nil {
		return hookstore.Endpoint{}, nil, err
	}
	return hookrow.Clone(r.e), r.streamList(), nil
}

// UpdateEndpoint implements hookstore.Store.
func (s *Store) UpdateEndpoint(ctx context.Context, accountID, id string, update func(*hookstore.Endpoint) error) (hookstore.Endpoint, error) {
	if err := s.hooks.lock(ctx, "update endpoint"); err != nil {
		return hookstore.Endpoint{}, err
	}
	defer s.hooks.mu.Unlock()
	r, err := s.hooks.endpoint(accountID, id)
	if err != nil {
		return hookstore.Endpoint{}, err
	}
	e := hookrow.Clone(r.e)
	if err := update(&e); err != nil {
		return hookstore.Endpoint{}, err
	}
	e.ID, e.AccountID, e.CreatedAt = r.e.ID, r.e.AccountID, r.e.CreatedAt
	r.e = hookrow.Clone(e)
	return e, nil
}

// DeleteEndpoint implements hookstore.Store.
func (s *Store) DeleteEndpoint(ctx context.Context, accountID, id string) error {
	if err := s.hooks.lock(ctx, "delete endpoint"); err != nil {
		return err
	}
	defer s.hooks.mu.Unlock()
	if _, err := s.hooks.endpoint(accountID, id); err != nil {
		return err
	}
	delete(s.hooks.endpoints, id)
	return nil
}

// ClaimEndpoints implements hookstore.Store: one mutex orders every claim
// of the process.
func (s *Store) ClaimEndpoints(ctx context.Context, now time.Time, d time.Duration, max int) ([]hookstore.Lease, error) {
	if err := s.hooks.lock(ctx, "claim endpoints"); err != nil {
		return nil, err
	}
	defer s.hooks.mu.Unlock()
	free := make([]*hookRec, 0)
	for _, r := range s.hooks.endpoints {
		if !r.e.Disabled && !r.until.After(now) {
			free = append(free, r)
		}
	}
	slices.SortFunc(free, func(a, b *hookRec) int { return cmp.Compare(a.e.ID, b.e.ID) })
	out := make([]hookstore.Lease, 0, min(max, len(free)))
	for _, r := range free {
		if len(out) == max {
			break
		}
		r.gen++
		r.until = now.Add(d)
		out = append(out, r.lease())
	}
	return out, nil
}

func (r *hookRec) lease() hookstore.Lease {
	return hookstore.Lease{Endpoint: hookrow.Clone(r.e), Gen: r.gen, Until: r.until, Streams: r.streamList()}
}

// RenewLease implements hookstore.Store.
func (s *Store) RenewLease(ctx context.Context, id string, gen int64, now time.Time, d time.Duration) (hookstore.Lease, error) {
	if err := s.hooks.lock(ctx, "renew lease"); err != nil {
		return hookstore.Lease{}, err
	}
	defer s.hooks.mu.Unlock()
	r, err := s.hooks.leased(id, gen)
	if err != nil {
		return hookstore.Lease{}, err
	}
	r.until = now.Add(d)
	return r.lease(), nil
}

// SaveStream implements hookstore.Store.
func (s *Store) SaveStream(ctx context.Context, id string, gen int64, st hookstore.Stream, now time.Time, d time.Duration) error {
	if err := s.hooks.lock(ctx, "save stream"); err != nil {
		return err
	}
	defer s.hooks.mu.Unlock()
	r, err := s.hooks.leased(id, gen)
	if err != nil {
		return err
	}
	r.streams[st.FormID] = st
	r.until = now.Add(d)
	return nil
}

// ReleaseLease implements hookstore.Store.
func (s *Store) ReleaseLease(ctx context.Context, id string, gen int64) error {
	if err := s.hooks.lock(ctx, "release lease"); err != nil {
		return err
	}
	defer s.hooks.mu.Unlock()
	if r, ok := s.hooks.endpoints[id]; ok && r.gen == gen {
		r.until = time.Time{}
	}
	return nil
}

// ResetStream implements hookstore.Store.
func (s *Store) ResetStream(ctx context.Context, accountID, id string, st hookstore.Stream) error {
	if err := s.hooks.lock(ctx, "reset stream"); err != nil {
		return err
	}
	defer s.hooks.mu.Unlock()
	r, err := s.hooks.endpoint(accountID, id)
	if err != nil {
		return err
	}
	r.streams[st.FormID] = st
	if !st.Judging {
		delete(r.passed, st.FormID)
	}
	r.gen++
	r.until = time.Time{}
	return nil
}

var _ hookstore.PassedStore = (*Store)(nil)

// SaveVerdicts implements hookstore.PassedStore.
func (s *Store) SaveVerdicts(ctx context.Context, id string, gen int64, st hookstore.Stream, v hookstore.Verdicts, now time.Time, d time.Duration) error {
	if err := s.hooks.lock(ctx, "save stream"); err != nil {
		return err
	}
	defer s.hooks.mu.Unlock()
	r, err := s.hooks.leased(id, gen)
	if err != nil {
		return err
	}
	r.streams[st.FormID] = st
	r.until = now.Add(d)
	if r.passed == nil {
		r.passed = map[string][]hookstore.Span{}
	}
	sps := r.passed[st.FormID] // changed in place: nothing below fails
	if v.Clear {
		sps = nil
	}
	for _, sp := range v.Pass {
		i, _ := slices.BinarySearchFunc(sps, sp.From, func(x hookstore.Span, pos int64) int { return cmp.Compare(x.From, pos) })
		if i > 0 && sps[i-1].To == sp.From-1 {
			sps[i-1].To = max(sps[i-1].To, sp.To)
			continue
		}
		if i < len(sps) && sps[i].From == sp.From {
			sps[i].To = max(sps[i].To, sp.To)
			continue
		}
		sps = slices.Insert(sps, i, sp)
	}
	for _, pos := range v.Unpass {
		if i, ok := spanAt(sps, pos); ok {
			sps = slices.Replace(sps, i, i+1, hookrow.Split(sps[i].From, sps[i].To, pos)...)
		}
	}
	r.passed[st.FormID] = sps
	return nil
}

// spanAt returns the index of the span of sps that holds pos.
func spanAt(sps []hookstore.Span, pos int64) (int, bool) {
	i, found := slices.BinarySearchFunc(sps, pos, func(x hookstore.Span, pos int64) int { return cmp.Compare(x.From, pos) })
	if found {
		return i, true
	}
	if i > 0 && sps[i-1].To >= pos {
		return i - 1, true
	}
	return 0, false
}

// Passed implements hookstore.PassedStore.
func (s *Store) Passed(ctx context.Context, id, formID string, positions []int64) ([]int64, error) {
	if err := s.hooks.lock(ctx, "passed"); err != nil {
		return nil, err
	}
	defer s.hooks.mu.Unlock()
	out := []int64{}
	r, ok := s.hooks.endpoints[id]
	if !ok {
		return out, nil
	}
	for _, pos := range hookrow.Ascending(positions) {
		if _, ok := spanAt(r.passed[formID], pos); ok {
			out = append(out, pos)
		}
	}
	return out, nil
}
