package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/formsapi/formsapi/internal/hookrow"
	"github.com/formsapi/formsapi/webhook/hookstore"
)

var _ hookstore.Store = (*Store)(nil)

// The statements of hookstore.Store (migrations 0009, 0018 and 0020). SQLite has one
// writer at a time, so a claim, one UPDATE that picks and leases, never
// races another: whichever commits second no longer finds the endpoint
// free.
const (
	sqlEndpointsOf = `SELECT ` + hookrow.EndpointColumns + ` FROM formsapi_endpoints WHERE account_id = ? ORDER BY created_at, id`
	sqlEndpoint    = `SELECT ` + hookrow.EndpointColumns + ` FROM formsapi_endpoints WHERE id = ?`
	sqlStreams     = `SELECT ` + hookrow.StreamColumns + ` FROM formsapi_endpoint_streams WHERE endpoint_id = ? ORDER BY form_id`
	sqlAddEndpoint = `INSERT INTO formsapi_endpoints (id, account_id, url, forms, secrets, disabled, disabled_reason, disabled_at, filter_query, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlUpdateEndpoint = `UPDATE formsapi_endpoints SET url = ?, forms = ?, secrets = ?, disabled = ?, disabled_reason = ?, disabled_at = ?, filter_query = ?
WHERE id = ? AND account_id = ?`
	sqlSaveStream = `INSERT INTO formsapi_endpoint_streams (endpoint_id, ` + hookrow.StreamColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (endpoint_id, form_id) DO UPDATE SET ` + hookrow.StreamUpdate
	sqlClaim = `UPDATE formsapi_endpoints SET lease_gen = lease_gen + 1, lease_until = ?1
WHERE id IN (SELECT id FROM formsapi_endpoints WHERE disabled = 0 AND lease_until <= ?2 ORDER BY id LIMIT ?3)
RETURNING ` + hookrow.EndpointColumns
	sqlRenew   = `UPDATE formsapi_endpoints SET lease_until = ? WHERE id = ? AND lease_gen = ?`
	sqlRelease = `UPDATE formsapi_endpoints SET lease_until = 0 WHERE id = ? AND lease_gen = ?`
	sqlReset   = `UPDATE formsapi_endpoints SET lease_gen = lease_gen + 1, lease_until = 0 WHERE id = ? AND account_id = ?`
)

// hookTx runs fn in a write transaction (BEGIN IMMEDIATE whatever the
// handle's DSN says, since fn reads before it writes).
func (s *Store) hookTx(ctx context.Context, op string, fn func(conn *sql.Conn) error) error {
	if err := s.immediate(ctx, fn); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	return nil
}

// immediate runs fn in a BEGIN IMMEDIATE transaction on one connection of
// the write handle, whatever the handle's DSN says (fn reads before it
// writes: see deleting), and commits it when fn returns nil. Otherwise,
// and when fn panics, it rolls back, so that the connection goes back to
// the pool without a transaction.
func (s *Store) immediate(ctx context.Context, fn func(conn *sql.Conn) error) (err error) {
	done, err := s.writing(ctx)
	if err != nil {
		return err
	}
	defer done()
	defer s.keys.holdLong()() // fn may run the host's code: see keyCopy.acquire
	conn, err := s.write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			err = errors.Join(err, rollback(ctx, conn, err))
		}
	}()
	if err := fn(conn); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return err
	}
	committed = true
	return nil
}

// querier runs queries: a *sql.DB, *sql.Conn or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// streams reads the streams of endpoint id.
func streams(ctx context.Context, q querier, id string) ([]hookstore.Stream, error) {
	rows, err := q.QueryContext(ctx, sqlStreams, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return hookrow.ReadStreams(rows)
}

// leases reads rows of hookrow.EndpointColumns, with each one's streams.
func leases(ctx context.Context, q querier, rows *sql.Rows) ([]hookstore.Lease, error) {
	ls, err := hookrow.ReadEndpoints(rows)
	rows.Close()
	if err != nil {
		return nil, err
	}
	return ls, hookrow.AttachStreams(ls, func(id string) ([]hookstore.Stream, error) { return streams(ctx, q, id) })
}

// endpointOf reads endpoint id of accountID with its streams and lease.
func endpointOf(ctx context.Context, q querier, accountID, id string) (hookstore.Lease, error) {
	rows, err := q.QueryContext(ctx, sqlEndpoint, id)
	if err != nil {
		return hookstore.Lease{}, err
	}
	ls, err := leases(ctx, q, rows)
	if err != nil {
		return hookstore.Lease{}, err
	}
	if len(ls) == 0 || ls[0].Endpoint.AccountID != accountID && accountID != anyAccount {
		return hookstore.Lease{}, fmt.Errorf("endpoint %q: %w", id, hookstore.ErrEndpointNotFound)
	}
	return ls[0], nil
}

// anyAccount asks endpointOf for the endpoint whatever its account: the
// dispatcher's calls name an endpoint by ID alone.
const anyAccount = "\x00any"

// AddEndpoint implements hookstore.Store.
func (s *Store) AddEndpoint(ctx context.Context, e hookstore.Endpoint, sts []hookstore.Stream) error {
	return s.hookTx(ctx, "add endpoint", func(conn *sql.Conn) error {
		args := append([]any{e.ID, e.AccountID}, hookrow.EndpointArgs(e)...)
		if _, err := conn.ExecContext(ctx, sqlAddEndpoint, args...); err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("endpoint %q: %w", e.ID, hookstore.ErrEndpointExists)
			}
			return err
		}
		for _, st := range sts {
			if _, err := conn.ExecContext(ctx, sqlSaveStream, append([]any{e.ID}, hookrow.StreamArgs(st)...)...); err != nil {
				return err
			}
		}
		return nil
	})
}

// Endpoints implements hookstore.Store.
func (s *Store) Endpoints(ctx context.Context, accountID string) ([]hookstore.Endpoint, error) {
	rows, err := s.read.QueryContext(ctx, sqlEndpointsOf, accountID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list endpoints: %w", err)
	}
	defer rows.Close()
	ls, err := hookrow.ReadEndpoints(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list endpoints: %w", err)
	}
	return hookrow.Endpoints(ls), nil
}

// Endpoint implements hookstore.Store.
func (s *Store) Endpoint(ctx context.Context, accountID, id string) (hookstore.Endpoint, []hookstore.Stream, error) {
	l, err := endpointOf(ctx, s.read, accountID, id)
	if err != nil {
		return hookstore.Endpoint{}, nil, fmt.Errorf("sqlitestore: get endpoint: %w", err)
	}
	return l.Endpoint, l.Streams, nil
}

// UpdateEndpoint implements hookstore.Store: the read, update's change and
// the write in one write transaction.
func (s *Store) UpdateEndpoint(ctx context.Context, accountID, id string, update func(*hookstore.Endpoint) error) (hookstore.Endpoint, error) {
	var e hookstore.Endpoint
	err := s.hookTx(ctx, "update endpoint", func(conn *sql.Conn) error {
		l, err := endpointOf(ctx, conn, accountID, id)
		if err != nil {
			return err
		}
		e = l.Endpoint
		if err := update(&e); err != nil {
			return err
		}
		e.ID, e.AccountID, e.CreatedAt = l.Endpoint.ID, l.Endpoint.AccountID, l.Endpoint.CreatedAt
		args := hookrow.EndpointArgs(e)
		_, err = conn.ExecContext(ctx, sqlUpdateEndpoint, append(args[:len(args)-1], id, accountID)...)
		return err
	})
	if err != nil {
		return hookstore.Endpoint{}, err
	}
	return hookrow.Clone(e), nil
}

// DeleteEndpoint implements hookstore.Store.
func (s *Store) DeleteEndpoint(ctx context.Context, accountID, id string) error {
	return s.hookTx(ctx, "delete endpoint", func(conn *sql.Conn) error {
		res, err := conn.ExecContext(ctx, `DELETE FROM formsapi_endpoints WHERE id = ? AND account_id = ?`, id, accountID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fmt.Errorf("endpoint %q: %w", id, hookstore.ErrEndpointNotFound))
		}
		if _, err = conn.ExecContext(ctx, `DELETE FROM formsapi_endpoint_streams WHERE endpoint_id = ?`, id); err != nil {
			return err
		}
		_, err = conn.ExecContext(ctx, `DELETE FROM formsapi_endpoint_passed WHERE endpoint_id = ?`, id)
		return err
	})
}

// ClaimEndpoints implements hookstore.Store.
func (s *Store) ClaimEndpoints(ctx context.Context, now time.Time, d time.Duration, max int) ([]hookstore.Lease, error) {
	var out []hookstore.Lease
	err := s.hookTx(ctx, "claim endpoints", func(conn *sql.Conn) error {
		rows, err := conn.QueryContext(ctx, sqlClaim, now.Add(d).UnixNano(), now.UnixNano(), max)
		if err != nil {
			return err
		}
		out, err = leases(ctx, conn, rows)
		return err
	})
	return out, err
}

// lease extends the lease of id held under gen to until, in conn's
// transaction, or returns ErrLeaseLost.
func lease(ctx context.Context, conn *sql.Conn, id string, gen int64, until time.Time) error {
	res, err := conn.ExecContext(ctx, sqlRenew, until.UnixNano(), id, gen)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return errors.Join(err, fmt.Errorf("endpoint %q, lease %d: %w", id, gen, hookstore.ErrLeaseLost))
	}
	return nil
}

// RenewLease implements hookstore.Store.
func (s *Store) RenewLease(ctx context.Context, id string, gen int64, now time.Time, d time.Duration) (hookstore.Lease, error) {
	var l hookstore.Lease
	err := s.hookTx(ctx, "renew lease", func(conn *sql.Conn) (err error) {
		if err := lease(ctx, conn, id, gen, now.Add(d)); err != nil {
			return err
		}
		l, err = endpointOf(ctx, conn, anyAccount, id)
		return err
	})
	return l, err
}

// SaveStream implements hookstore.Store.
func (s *Store) SaveStream(ctx context.Context, id string, gen int64, st hookstore.Stream, now time.Time, d time.Duration) error {
	return s.hookTx(ctx, "save stream", func(conn *sql.Conn) error {
		if err := lease(ctx, conn, id, gen, now.Add(d)); err != nil {
			return err
		}
		_, err := conn.ExecContext(ctx, sqlSaveStream, append([]any{id}, hookrow.StreamArgs(st)...)...)
		return err
	})
}

// ReleaseLease implements hookstore.Store.
func (s *Store) ReleaseLease(ctx context.Context, id string, gen int64) error {
	done, err := s.writing(ctx)
	if err != nil {
		return fmt.Errorf("sqlitestore: release lease: %w", err)
	}
	defer done()
	if _, err := s.write.ExecContext(ctx, sqlRelease, id, gen); err != nil {
		return fmt.Errorf("sqlitestore: release lease: %w", err)
	}
	return nil
}

// ResetStream implements hookstore.Store.
func (s *Store) ResetStream(ctx context.Context, accountID, id string, st hookstore.Stream) error {
	return s.hookTx(ctx, "reset stream", func(conn *sql.Conn) error {
		res, err := conn.ExecContext(ctx, sqlReset, id, accountID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(err, fmt.Errorf("endpoint %q: %w", id, hookstore.ErrEndpointNotFound))
		}
		if _, err = conn.ExecContext(ctx, sqlSaveStream, append([]any{id}, hookrow.StreamArgs(st)...)...); err != nil {
			return err
		}
		if !st.Judging {
			_, err = conn.ExecContext(ctx, sqlPassedClear, id, st.FormID)
		}
		return err
	})
}

var _ hookstore.PassedStore = (*Store)(nil)

// The statements of hookstore.PassedStore (migration 0020). A span is
// found by the greatest From at or below a position: the table's key.
const (
	sqlPassedClear = `DELETE FROM formsapi_endpoint_passed WHERE endpoint_id = ? AND form_id = ?`
	sqlPassedAt    = `SELECT pos_from, pos_to FROM formsapi_endpoint_passed
WHERE endpoint_id = ?1 AND form_id = ?2 AND pos_from <= ?3 ORDER BY pos_from DESC LIMIT 1`
	sqlPassedSet = `UPDATE formsapi_endpoint_passed SET pos_to = ?4 WHERE endpoint_id = ?1 AND form_id = ?2 AND pos_from = ?3`
	sqlPassedAdd = `INSERT INTO formsapi_endpoint_passed (endpoint_id, form_id, pos_from, pos_to) VALUES (?, ?, ?, ?)
ON CONFLICT (endpoint_id, form_id, pos_from) DO UPDATE SET pos_to = max(pos_to, excluded.pos_to)`
	sqlPassedDel = `DELETE FROM formsapi_endpoint_passed WHERE endpoint_id = ? AND form_id = ? AND pos_from = ?`
)

// SaveVerdicts implements hookstore.PassedStore.
func (s *Store) SaveVerdicts(ctx context.Context, id string, gen int64, st hookstore.Stream, v hookstore.Verdicts, now time.Time, d time.Duration) error {
	return s.hookTx(ctx, "save stream", func(conn *sql.Conn) error {
		if err := lease(ctx, conn, id, gen, now.Add(d)); err != nil {
			return err
		}
		if _, err := conn.ExecContext(ctx, sqlSaveStream, append([]any{id}, hookrow.StreamArgs(st)...)...); err != nil {
			return err
		}
		return applyVerdicts(ctx, conn, id, st.FormID, v)
	})
}

// applyVerdicts applies v to the spans of the stream of form of endpoint
// id, in conn's transaction.
func applyVerdicts(ctx context.Context, conn *sql.Conn, id, form string, v hookstore.Verdicts) error {
	if v.Clear {
		if _, err := conn.ExecContext(ctx, sqlPassedClear, id, form); err != nil {
			return err
		}
	}
	at := func(pos int64) (from, to int64, ok bool, err error) {
		err = conn.QueryRowContext(ctx, sqlPassedAt, id, form, pos).Scan(&from, &to)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, 0, false, nil
		}
		return from, to, err == nil, err
	}
	for _, sp := range v.Pass {
		from, to, ok, err := at(sp.From - 1)
		if err != nil {
			return err
		}
		if ok && to == sp.From-1 {
			_, err = conn.ExecContext(ctx, sqlPassedSet, id, form, from, sp.To)
		} else {
			_, err = conn.ExecContext(ctx, sqlPassedAdd, id, form, sp.From, sp.To)
		}
		if err != nil {
			return err
		}
	}
	for _, pos := range v.Unpass {
		from, to, ok, err := at(pos)
		if err != nil {
			return err
		}
		if !ok || to < pos {
			continue
		}
		if _, err := conn.ExecContext(ctx, sqlPassedDel, id, form, from); err != nil {
			return err
		}
		for _, sp := range hookrow.Split(from, to, pos) {
			if _, err := conn.ExecContext(ctx, sqlPassedAdd, id, form, sp.From, sp.To); err != nil {
				return err
			}
		}
	}
	return nil
}

// Passed implements hookstore.PassedStore.
func (s *Store) Passed(ctx context.Context, id, formID string, positions []int64) ([]int64, error) {
	out := []int64{}
	for _, pos := range hookrow.Ascending(positions) {
		var from, to int64
		err := s.read.QueryRowContext(ctx, sqlPassedAt, id, formID, pos).Scan(&from, &to)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: passed: %w", err)
		}
		if to >= pos {
			out = append(out, pos)
		}
	}
	return out, nil
}
