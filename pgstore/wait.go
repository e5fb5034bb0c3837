package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/formsapi/formsapi/internal/feedwait"
	"github.com/formsapi/formsapi/internal/storecontract"
)

// DefaultWaitCheck is how often a store looks, while some sync request
// waits (the handler's wait=), for writes other nodes made.
const DefaultWaitCheck = time.Second

// WithWaitCheck sets how often the store looks, while some sync request
// of the feed waits for new entries (GET …/submissions?sync=…&wait=…),
// for writes made by other nodes or by SQL outside this store: one
// statement per interval for every form and key the node's waiters wait
// on, and none while nothing waits. A store made WithFollow runs one of
// its rounds instead (the statement that reads the change log, for the
// node's requests too), and the round that applies a form's change wakes
// its waiters. Either way a waiter learns of such a write within d
// (DefaultWaitCheck, 1 s, without this option); the store's own writes
// wake its waiters at once. It panics if d is not positive.
func WithWaitCheck(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("pgstore: WithWaitCheck(%s): need a positive interval", d))
	}
	return func(c *config) { c.waitCheck = d }
}

// startWait makes the store's hub of waiters, with its check: a round
// when the store follows the log, the statement sqlCheckWaits otherwise.
func (s *Store) startWait(cfg config) {
	d := cfg.waitCheck
	if d <= 0 {
		d = DefaultWaitCheck
	}
	check := s.checkWaits
	if s.follow != nil {
		check = s.waitRound
	}
	s.wait = feedwait.New(check, d, 0)
	if s.follow != nil {
		s.follow.wake = s.wait
	}
}

var _ storecontract.Waiter = (*Store)(nil)

// WatchFeed registers a waiting request of the sync feed with the
// store's hub (the handler's wait=; internal/storecontract.Waiter).
func (s *Store) WatchFeed(formID string, key [32]byte, after int64) *feedwait.Watch {
	return s.wait.Watch(formID, key, after)
}

// sqlCheckWaits reads, for every form waited on ($1), its last feed
// position, and of the keys waited on ($2) the live ones: one statement,
// an index probe per name. Forms are by ID, which is unique in a schema.
const sqlCheckWaits = `SELECT 0::int2, f.id, NULL::bytea, f.feed_last FROM formsapi_forms f WHERE f.id = ANY($1::text[])
UNION ALL
SELECT 1::int2, NULL, k.key_hash, 0 FROM formsapi_keys k WHERE k.key_hash = ANY($2::bytea[]) AND k.revoked_at IS NULL`

// checkWaits is the hub's check without WithFollow (feedwait.CheckFunc):
// the forms whose feed has moved past what their waiters read, or that
// are gone, and the keys that are no longer live.
func (s *Store) checkWaits(ctx context.Context, forms []feedwait.Form, keys [][32]byte) (changed []string, gone [][32]byte, err error) {
	ids := make([]string, len(forms))
	for i, f := range forms {
		ids[i] = f.ID
	}
	hashes := make([][]byte, len(keys))
	for i := range keys {
		hashes[i] = keys[i][:]
	}
	last := make(map[string]int64, len(forms))
	live := make(map[[32]byte]bool, len(keys))
	err = retry(ctx, func() error {
		clear(last)
		clear(live)
		rows, err := s.pool.Query(ctx, s.sql.checkWaits, ids, hashes)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var kind int16
			var id *string
			var hash []byte
			var pos int64
			if err := rows.Scan(&kind, &id, &hash, &pos); err != nil {
				return err
			}
			switch {
			case kind == 0 && id != nil:
				last[*id] = pos
			case kind == 1 && len(hash) == 32:
				live[[32]byte(hash)] = true
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: check waiting requests: %w", withCtx(ctx, err))
	}
	for _, f := range forms {
		if pos, ok := last[f.ID]; !ok || pos > f.After {
			changed = append(changed, f.ID) // moved on, or gone
		}
	}
	for _, k := range keys {
		if !live[k] {
			gone = append(gone, k)
		}
	}
	return changed, gone, nil
}

// waitRound is the hub's check of a following store: a round of its own,
// with no lookup, queued with the node's requests (one statement for all
// of them when they come together). The round that applies a change
// wakes its waiters itself (follower.apply), so it names nothing here.
func (s *Store) waitRound(ctx context.Context, _ []feedwait.Form, _ [][32]byte) ([]string, [][32]byte, error) {
	l := keyLookup{tick: true}
	if err := s.lookups.Do(ctx, &l); err != nil {
		return nil, nil, fmt.Errorf("pgstore: a round for waiting requests: %w", err)
	}
	return nil, nil, l.err
}
