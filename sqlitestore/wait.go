package sqlitestore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/formsapi/formsapi/internal/feedwait"
	"github.com/formsapi/formsapi/internal/storecontract"
)

// DefaultWaitCheck is how often a store checks, while some sync request
// waits (the handler's wait=), for writes it did not make itself.
const DefaultWaitCheck = time.Second

// WithWaitCheck sets how often the store checks, while some sync request
// of the feed waits for new entries (GET …/submissions?sync=…&wait=…),
// for writes made by another process on the same file or by SQL outside
// this store: one statement per interval, for every form and key waited
// on, and none while nothing waits. A waiter learns of such a write
// within d (DefaultWaitCheck, 1 s, without this option); the store's own
// writes wake their waiters at once. It panics if d is not positive.
func WithWaitCheck(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("sqlitestore: WithWaitCheck(%s): need a positive interval", d))
	}
	return func(c *config) { c.waitCheck = d }
}

// startWait makes the store's hub of waiters.
func (s *Store) startWait(cfg config) {
	d := cfg.waitCheck
	if d <= 0 {
		d = DefaultWaitCheck
	}
	s.wait = feedwait.New(s.checkWaits, d, 0)
}

var _ storecontract.Waiter = (*Store)(nil)

// WatchFeed registers a waiting request of the sync feed with the
// store's hub (the handler's wait=; internal/storecontract.Waiter).
func (s *Store) WatchFeed(formID string, key [32]byte, after int64) *feedwait.Watch {
	return s.wait.Watch(formID, key, after)
}

// sqlCheckWaits reads, for every form waited on (?1, a JSON array of
// their IDs), its last feed position, and of the keys waited on (?2, a
// JSON array of their hashes in hex) the live ones: one statement, two
// index lookups per name.
const sqlCheckWaits = `SELECT 0, f.id, f.feed_last FROM formsapi_forms f WHERE f.id IN (SELECT value FROM json_each(?1))
UNION ALL
SELECT 1, lower(hex(k.key_hash)), 0 FROM formsapi_keys k
WHERE k.key_hash IN (SELECT unhex(value) FROM json_each(?2)) AND k.revoked_at IS NULL`

// checkWaits is the hub's check (feedwait.CheckFunc): the forms whose
// feed has moved past what their waiters read, or that are gone, and the
// keys that are no longer live.
func (s *Store) checkWaits(ctx context.Context, forms []feedwait.Form, keys [][32]byte) (changed []string, gone [][32]byte, err error) {
	ids := make([]string, len(forms))
	for i, f := range forms {
		ids[i] = f.ID
	}
	hexes := make([]string, len(keys))
	for i, k := range keys {
		hexes[i] = hex.EncodeToString(k[:])
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return nil, nil, err
	}
	keysJSON, err := json.Marshal(hexes)
	if err != nil {
		return nil, nil, err
	}
	rows, err := s.read.QueryContext(ctx, sqlCheckWaits, string(idsJSON), string(keysJSON))
	if err != nil {
		return nil, nil, fmt.Errorf("sqlitestore: check waiting requests: %w", err)
	}
	defer rows.Close()
	last := make(map[string]int64, len(forms))
	live := make(map[string]bool, len(keys))
	for rows.Next() {
		var kind int
		var name string
		var pos int64
		if err := rows.Scan(&kind, &name, &pos); err != nil {
			return nil, nil, fmt.Errorf("sqlitestore: check waiting requests: %w", err)
		}
		if kind == 0 {
			last[name] = pos
		} else {
			live[name] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("sqlitestore: check waiting requests: %w", err)
	}
	for _, f := range forms {
		if pos, ok := last[f.ID]; !ok || pos > f.After {
			changed = append(changed, f.ID) // moved on, or gone
		}
	}
	for i, k := range keys {
		if !live[hexes[i]] {
			gone = append(gone, k)
		}
	}
	return changed, gone, nil
}
