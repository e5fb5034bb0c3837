package formsapi

// Requests in flight per key and per account. One key with thousands of
// connections, within its rate limit or not, would otherwise have as many
// requests inside the handler at once: each waiting for the limiter (whose
// queue then grows for every account on the node) or holding a page. So
// past a bound, a key's or an account's next request is answered 429 at
// once, and costs neither the limiter nor the store anything. The counts
// live in this handler, per process: a bound of a fleet is each node's.

import "sync"

// inFlight counts the requests in flight of each K: a key (by the key
// gate's keyed hash of it, so that no key is kept) or an account. An
// entry lives while its count is above zero, so the map holds at most
// the requests in flight.
type inFlight[K comparable] struct {
	max int // the bound; 0: none

	mu sync.Mutex
	n  map[K]int
}

func newInFlight[K comparable](max int) *inFlight[K] {
	return &inFlight[K]{max: max, n: map[K]int{}}
}

// enter counts one more request of k and reports true, or reports false,
// counting nothing, when k has its bound in flight already.
func (f *inFlight[K]) enter(k K) bool {
	if f.max <= 0 {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[k] >= f.max {
		return false
	}
	f.n[k]++
	return true
}

// leave ends a request of k that enter counted.
func (f *inFlight[K]) leave(k K) {
	if f.max <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[k] <= 1 {
		delete(f.n, k)
		return
	}
	f.n[k]--
}
