package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi/internal/hookrow"
	"github.com/formsapi/formsapi/webhook/hookstore"
)

var _ hookstore.Store = (*Store)(nil)

// The statements of hookstore.Store (migrations 0011, 0027 and 0029).
const (
	sqlEndpointsOf = `SELECT ` + hookrow.EndpointColumns + ` FROM formsapi_endpoints WHERE account_id = $1 ORDER BY created_at, id`
	// FOR UPDATE: UpdateEndpoint reads and writes in one transaction, and
	// a second one waits for the first's commit and reads its change.
	sqlEndpointForUpdate = `SELECT ` + hookrow.EndpointColumns + ` FROM formsapi_endpoints WHERE id = $1 FOR UPDATE`
	sqlEndpoint          = `SELECT ` + hookrow.EndpointColumns + ` FROM formsapi_endpoints WHERE id = $1`
	sqlStreams           = `SELECT ` + hookrow.StreamColumns + ` FROM formsapi_endpoint_streams WHERE endpoint_id = $1 ORDER BY form_id`
	sqlAddEndpoint       = `INSERT INTO formsapi_endpoints (id, account_id, url, forms, secrets, disabled, disabled_reason, disabled_at, filter_query, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
	sqlUpdateEndpoint = `UPDATE formsapi_endpoints SET url = $1, forms = $2, secrets = $3, disabled = $4, disabled_reason = $5, disabled_at = $6, filter_query = $7
WHERE id = $8 AND account_id = $9`
	sqlDeleteEndpoint = `DELETE FROM formsapi_endpoints WHERE id = $1 AND account_id = $2`
	sqlSaveStream     = `INSERT INTO formsapi_endpoint_streams (endpoint_id, ` + hookrow.StreamColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (endpoint_id, form_id) DO UPDATE SET ` + hookrow.StreamUpdate
	// The claim: free, enabled endpoints, locked in one statement with
	// SKIP LOCKED, so dispatchers on several nodes claiming at once each
	// take other rows instead of queueing; a row another claim committed
	// meanwhile is checked again against the WHERE clause and left.
	sqlClaim = `UPDATE formsapi_endpoints SET lease_gen = lease_gen + 1, lease_until = $1
FROM (SELECT id AS claimed FROM formsapi_endpoints WHERE NOT disabled AND lease_until <= $2 ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED) c
WHERE id = c.claimed
RETURNING ` + hookrow.EndpointColumns
	sqlRenew   = `UPDATE formsapi_endpoints SET lease_until = $1 WHERE id = $2 AND lease_gen = $3`
	sqlRelease = `UPDATE formsapi_endpoints SET lease_until = 0 WHERE id = $1 AND lease_gen = $2`
	sqlReset   = `UPDATE formsapi_endpoints SET lease_gen = lease_gen + 1, lease_until = 0 WHERE id = $1 AND account_id = $2`

	// hookstore.PassedStore (migration 0029): a span is found by the
	// greatest From at or below a position, the table's key. The spans
	// go with their endpoint (ON DELETE CASCADE).
	sqlPassedClear = `DELETE FROM formsapi_endpoint_passed WHERE endpoint_id = $1 AND form_id = $2`
	sqlPassedAt    = `SELECT pos_from, pos_to FROM formsapi_endpoint_passed
WHERE endpoint_id = $1 AND form_id = $2 AND pos_from <= $3 ORDER BY pos_from DESC LIMIT 1`
	sqlPassedSet = `UPDATE formsapi_endpoint_passed SET pos_to = $4 WHERE endpoint_id = $1 AND form_id = $2 AND pos_from = $3`
	sqlPassedAdd = `INSERT INTO formsapi_endpoint_passed AS p (endpoint_id, form_id, pos_from, pos_to) VALUES ($1, $2, $3, $4)
ON CONFLICT (endpoint_id, form_id, pos_from) DO UPDATE SET pos_to = greatest(p.pos_to, excluded.pos_to)`
	sqlPassedDel = `DELETE FROM formsapi_endpoint_passed WHERE endpoint_id = $1 AND form_id = $2 AND pos_from = $3`
)

// hookQueries are the statements above, tables qualified by the store's
// schema.
type hookQueries struct {
	endpointsOf, endpointForUpdate, endpoint, streams, add, update, del string
	saveStream, claim, renew, release, reset                            string
	passedClear, passedAt, passedSet, passedAdd, passedDel              string
}

func newHookQueries(schema string) hookQueries {
	q := func(s string) string { return qualifyTables(schema, s) }
	return hookQueries{
		endpointsOf: q(sqlEndpointsOf), endpointForUpdate: q(sqlEndpointForUpdate), endpoint: q(sqlEndpoint), streams: q(sqlStreams),
		add: q(sqlAddEndpoint), update: q(sqlUpdateEndpoint), del: q(sqlDeleteEndpoint),
		saveStream: q(sqlSaveStream), claim: q(sqlClaim), renew: q(sqlRenew), release: q(sqlRelease), reset: q(sqlReset),
		passedClear: q(sqlPassedClear), passedAt: q(sqlPassedAt), passedSet: q(sqlPassedSet), passedAdd: q(sqlPassedAdd), passedDel: q(sqlPassedDel),
	}
}

// hookTx runs fn in a read committed transaction (whatever the
// database's default isolation), again when a conflict aborted it.
func (s *Store) hookTx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	run := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, fn)
	}
	err := run()
	for n := 1; n < conflictAttempts && conflict(err); n++ {
		if backoff(ctx, n) != nil {
			break
		}
		err = run()
	}
	if err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, withCtx(ctx, err))
	}
	return nil
}

// streams reads the streams of endpoint id.
func (s *Store) streams(ctx context.Context, tx pgx.Tx, id string) ([]hookstore.Stream, error) {
	rows, err := tx.Query(ctx, s.hooks.streams, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return hookrow.ReadStreams(rows)
}

// leases runs sql, which returns rows of hookrow.EndpointColumns, and
// reads them with each one's streams.
func (s *Store) leases(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]hookstore.Lease, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	ls, err := hookrow.ReadEndpoints(rows)
	rows.Close()
	if err != nil {
		return nil, err
	}
	return ls, hookrow.AttachStreams(ls, func(id string) ([]hookstore.Stream, error) { return s.streams(ctx, tx, id) })
}

// endpointOf reads endpoint id of accountID (of any account when
// accountID is nil) with its streams, by sql.
func (s *Store) endpointOf(ctx context.Context, tx pgx.Tx, sql string, accountID *string, id string) (hookstore.Lease, error) {
	if !storableText(id) || accountID != nil && !storableText(*accountID) {
		return hookstore.Lease{}, fmt.Errorf("endpoint %q: %w", id, hookstore.ErrEndpointNotFound)
	}
	ls, err := s.leases(ctx, tx, sql, id)
	if err != nil {
		return hookstore.Lease{}, err
	}
	if len(ls) == 0 || accountID != nil && ls[0].Endpoint.AccountID != *accountID {
		return hookstore.Lease{}, fmt.Errorf("endpoint %q: %w", id, hookstore.ErrEndpointNotFound)
	}
	return ls[0], nil
}

// AddEndpoint implements hookstore.Store.
func (s *Store) AddEndpoint(ctx context.Context, e hookstore.Endpoint, sts []hookstore.Stream) error {
	return s.hookTx(ctx, "add endpoint", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.hooks.add, append([]any{e.ID, e.AccountID}, hookrow.EndpointArgs(e)...)...); err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("endpoint %q: %w", e.ID, hookstore.ErrEndpointExists)
			}
			return err
		}
		for _, st := range sts {
			if _, err := tx.Exec(ctx, s.hooks.saveStream, append([]any{e.ID}, hookrow.StreamArgs(st)...)...); err != nil {
				return err
			}
		}
		return nil
	})
}

// Endpoints implements hookstore.Store.
func (s *Store) Endpoints(ctx context.Context, accountID string) ([]hookstore.Endpoint, error) {
	out := []hookstore.Endpoint{}
	if !storableText(accountID) {
		return out, nil
	}
	err := s.hookTx(ctx, "list endpoints", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.hooks.endpointsOf, accountID)
		if err != nil {
			return err
		}
		defer rows.Close()
		ls, err := hookrow.ReadEndpoints(rows)
		out = append(out, hookrow.Endpoints(ls)...)
		return err
	})
	return out, err
}

// Endpoint implements hookstore.Store.
func (s *Store) Endpoint(ctx context.Context, accountID, id string) (hookstore.Endpoint, []hookstore.Stream, error) {
	var l hookstore.Lease
	err := s.hookTx(ctx, "get endpoint", func(tx pgx.Tx) (err error) {
		l, err = s.endpointOf(ctx, tx, s.hooks.endpoint, &accountID, id)
		return err
	})
	return l.Endpoint, l.Streams, err
}

// UpdateEndpoint implements hookstore.Store: the endpoint's row is locked
// from the read to the commit.
func (s *Store) UpdateEndpoint(ctx context.Context, accountID, id string, update func(*hookstore.Endpoint) error) (hookstore.Endpoint, error) {
	var e hookstore.Endpoint
	err := s.hookTx(ctx, "update endpoint", func(tx pgx.Tx) error {
		l, err := s.endpointOf(ctx, tx, s.hooks.endpointForUpdate, &accountID, id)
		if err != nil {
			return err
		}
		e = l.Endpoint
		if err := update(&e); err != nil {
			return err
		}
		e.ID, e.AccountID, e.CreatedAt = l.Endpoint.ID, l.Endpoint.AccountID, l.Endpoint.CreatedAt
		args := hookrow.EndpointArgs(e)
		_, err = tx.Exec(ctx, s.hooks.update, append(args[:len(args)-1], id, accountID)...)
		return err
	})
	if err != nil {
		return hookstore.Endpoint{}, err
	}
	return hookrow.Clone(e), nil
}

// notFound is ErrEndpointNotFound for id when tag changed no row.
func notFound(tag interface{ RowsAffected() int64 }, id string) error {
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("endpoint %q: %w", id, hookstore.ErrEndpointNotFound)
	}
	return nil
}

// DeleteEndpoint implements hookstore.Store; its streams go by the foreign
// key's ON DELETE CASCADE.
func (s *Store) DeleteEndpoint(ctx context.Context, accountID, id string) error {
	return s.hookTx(ctx, "delete endpoint", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.hooks.del, id, accountID)
		if err != nil {
			return err
		}
		return notFound(tag, id)
	})
}

// ClaimEndpoints implements hookstore.Store.
func (s *Store) ClaimEndpoints(ctx context.Context, now time.Time, d time.Duration, max int) ([]hookstore.Lease, error) {
	var out []hookstore.Lease
	err := s.hookTx(ctx, "claim endpoints", func(tx pgx.Tx) (err error) {
		out, err = s.leases(ctx, tx, s.hooks.claim, now.Add(d).UnixNano(), now.UnixNano(), max)
		return err
	})
	return out, err
}

// lease extends the lease of id held under gen to until, in tx, or
// returns ErrLeaseLost.
func (s *Store) lease(ctx context.Context, tx pgx.Tx, id string, gen int64, until time.Time) error {
	tag, err := tx.Exec(ctx, s.hooks.renew, until.UnixNano(), id, gen)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("endpoint %q, lease %d: %w", id, gen, hookstore.ErrLeaseLost)
	}
	return nil
}

// RenewLease implements hookstore.Store.
func (s *Store) RenewLease(ctx context.Context, id string, gen int64, now time.Time, d time.Duration) (hookstore.Lease, error) {
	var l hookstore.Lease
	err := s.hookTx(ctx, "renew lease", func(tx pgx.Tx) (err error) {
		if err := s.lease(ctx, tx, id, gen, now.Add(d)); err != nil {
			return err
		}
		l, err = s.endpointOf(ctx, tx, s.hooks.endpoint, nil, id)
		return err
	})
	return l, err
}

// SaveStream implements hookstore.Store: the fenced lease update and the
// stream's write commit together or not at all.
func (s *Store) SaveStream(ctx context.Context, id string, gen int64, st hookstore.Stream, now time.Time, d time.Duration) error {
	return s.hookTx(ctx, "save stream", func(tx pgx.Tx) error {
		if err := s.lease(ctx, tx, id, gen, now.Add(d)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.hooks.saveStream, append([]any{id}, hookrow.StreamArgs(st)...)...)
		return err
	})
}

// ReleaseLease implements hookstore.Store.
func (s *Store) ReleaseLease(ctx context.Context, id string, gen int64) error {
	return s.hookTx(ctx, "release lease", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, s.hooks.release, id, gen)
		return err
	})
}

// ResetStream implements hookstore.Store.
func (s *Store) ResetStream(ctx context.Context, accountID, id string, st hookstore.Stream) error {
	return s.hookTx(ctx, "reset stream", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.hooks.reset, id, accountID)
		if err != nil {
			return err
		}
		if err := notFound(tag, id); err != nil {
			return err
		}
		if _, err = tx.Exec(ctx, s.hooks.saveStream, append([]any{id}, hookrow.StreamArgs(st)...)...); err != nil {
			return err
		}
		if !st.Judging {
			_, err = tx.Exec(ctx, s.hooks.passedClear, id, st.FormID)
		}
		return err
	})
}

var _ hookstore.PassedStore = (*Store)(nil)

// SaveVerdicts implements hookstore.PassedStore: the fenced lease
// update, the stream's write and the change to its spans commit together
// or not at all.
func (s *Store) SaveVerdicts(ctx context.Context, id string, gen int64, st hookstore.Stream, v hookstore.Verdicts, now time.Time, d time.Duration) error {
	return s.hookTx(ctx, "save stream", func(tx pgx.Tx) error {
		if err := s.lease(ctx, tx, id, gen, now.Add(d)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.hooks.saveStream, append([]any{id}, hookrow.StreamArgs(st)...)...); err != nil {
			return err
		}
		return s.applyVerdicts(ctx, tx, id, st.FormID, v)
	})
}

// applyVerdicts applies v to the spans of the stream of form of endpoint
// id, in tx.
func (s *Store) applyVerdicts(ctx context.Context, tx pgx.Tx, id, form string, v hookstore.Verdicts) error {
	if v.Clear {
		if _, err := tx.Exec(ctx, s.hooks.passedClear, id, form); err != nil {
			return err
		}
	}
	at := func(pos int64) (from, to int64, ok bool, err error) {
		err = tx.QueryRow(ctx, s.hooks.passedAt, id, form, pos).Scan(&from, &to)
		if errors.Is(err, pgx.ErrNoRows) {
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
			_, err = tx.Exec(ctx, s.hooks.passedSet, id, form, from, sp.To)
		} else {
			_, err = tx.Exec(ctx, s.hooks.passedAdd, id, form, sp.From, sp.To)
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
		if _, err := tx.Exec(ctx, s.hooks.passedDel, id, form, from); err != nil {
			return err
		}
		for _, sp := range hookrow.Split(from, to, pos) {
			if _, err := tx.Exec(ctx, s.hooks.passedAdd, id, form, sp.From, sp.To); err != nil {
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
		err := s.pool.QueryRow(ctx, s.hooks.passedAt, id, formID, pos).Scan(&from, &to)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pgstore: passed: %w", err)
		}
		if to >= pos {
			out = append(out, pos)
		}
	}
	return out, nil
}
