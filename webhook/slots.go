package webhook

import (
	"context"
	"slices"
	"sync"
)

// slots hands out a dispatcher's attempt slots (RELIABILITY case 106):
// at most total attempts in flight in all, and perAccount to the
// endpoints of one account, its share, so that an account whose endpoints
// never answer cannot keep the others waiting. An account may go past its
// share only into slots beyond one share's reserve: a slot is given to an
// account at or over its share only while a share's worth stays free
// after it, so a host with one account (or one busy account among idle
// ones) still uses all but one share of the slots, and an account that
// comes later finds a share free at once. A slot that frees goes to the
// waiter whose account has the fewest attempts in flight, then whose
// endpoint has, then to the one that waited longest: an account or
// endpoint with nothing in flight is served before one that holds slots
// already. (The attempts to one endpoint are bounded by its pass's
// workers, perEndpoint.)
type slots struct {
	total, perAccount int

	mu        sync.Mutex
	inFlight  int
	accounts  map[string]int // attempts in flight by account; an entry lives while above 0
	endpoints map[string]int // by endpoint
	waiting   []*slotWait    // in the order they came
}

// slotWait is an attempt waiting for a slot.
type slotWait struct {
	account, endpoint string
	granted           chan struct{} // closed when the slot is the waiter's
}

func newSlots(total, perAccount int) *slots {
	return &slots{total: total, perAccount: min(perAccount, total), accounts: map[string]int{}, endpoints: map[string]int{}}
}

// acquire waits for a slot for an attempt to endpoint, of account, and
// reports nil once it has one, which release gives back; or ctx's error,
// holding none.
func (s *slots) acquire(ctx context.Context, account, endpoint string) error {
	w := &slotWait{account: account, endpoint: endpoint, granted: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, w)
	s.grant()
	s.mu.Unlock()
	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-w.granted: // granted meanwhile: give it to the next
		s.put(account, endpoint)
	default:
		s.waiting = slices.DeleteFunc(s.waiting, func(x *slotWait) bool { return x == w })
	}
	return ctx.Err()
}

// release gives back a slot that acquire gave.
func (s *slots) release(account, endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(account, endpoint)
}

// put gives back a slot and grants the free ones, under s.mu.
func (s *slots) put(account, endpoint string) {
	s.inFlight--
	decrement(s.accounts, account)
	decrement(s.endpoints, endpoint)
	s.grant()
}

// grant gives free slots to the waiters that may take them, best first,
// under s.mu.
func (s *slots) grant() {
	for s.inFlight < s.total {
		best := -1
		for i, w := range s.waiting {
			if s.accounts[w.account] >= s.perAccount && s.total-s.inFlight-1 < s.perAccount {
				continue // past its share only while a share stays free
			}
			if best < 0 || s.before(w, s.waiting[best]) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		w := s.waiting[best]
		s.waiting = slices.Delete(s.waiting, best, best+1)
		s.inFlight++
		s.accounts[w.account]++
		s.endpoints[w.endpoint]++
		close(w.granted)
	}
}

// before reports whether a is served before b, which came earlier.
func (s *slots) before(a, b *slotWait) bool {
	if x, y := s.accounts[a.account], s.accounts[b.account]; x != y {
		return x < y
	}
	return s.endpoints[a.endpoint] < s.endpoints[b.endpoint]
}

// decrement counts one less of k, deleting its entry at 0.
func decrement(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}
