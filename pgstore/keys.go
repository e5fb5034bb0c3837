package pgstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
	"github.com/formsapi/formsapi/internal/stored"
	"github.com/formsapi/formsapi/internal/wire"
)

// AddKeyWith registers key as an API key of accountID restricted to
// o.Forms and o.ExpiresAt. Only its SHA-256 is stored. It returns an
// error wrapping formsapi.ErrKeyExists if the key is already registered
// or was ever revoked, and one wrapping formsapi.ErrInvalidInput if the
// key, accountID or o is malformed or accountID is beyond the store's
// limits (see WithLimits and formsapi.Limits.PrepareKeyOptions),
// including an accountID that is not storable text (a NUL byte or invalid
// UTF-8); either way nothing changes.
func (s *Store) AddKeyWith(ctx context.Context, key, accountID string, o formsapi.KeyOptions) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: add key: %w", err)
	}
	if err := s.limits.PrepareKeyOptions(key, accountID, &o); err != nil {
		return fmt.Errorf("pgstore: add key: %w", err)
	}
	if !storableText(accountID) {
		return fmt.Errorf("pgstore: add key: %w: account ID holds a NUL byte or invalid UTF-8", formsapi.ErrInvalidInput)
	}
	now := s.now()
	if !o.ExpiresAt.IsZero() && !o.ExpiresAt.After(now) {
		return fmt.Errorf("pgstore: add key: %w: expiresAt %s is not after the store's clock", formsapi.ErrInvalidInput, o.ExpiresAt.Format(time.RFC3339Nano))
	}
	var expires *int64 // NULL: never
	if !o.ExpiresAt.IsZero() {
		ns := o.ExpiresAt.UnixNano()
		expires = &ns
	}
	h := keyformat.Hash(key)
	_, err := s.exec(ctx, s.sql.addKey, h[:], accountID, now.UnixNano(), o.Forms, expires)
	if isUniqueViolation(err) {
		return fmt.Errorf("pgstore: add key: %w", formsapi.ErrKeyExists)
	}
	if err != nil {
		return fmt.Errorf("pgstore: add key: %w", withCtx(ctx, err))
	}
	return nil
}

// ResolveKey returns the account that owns key, or an error wrapping
// formsapi.ErrInvalidKey if the key is unknown, revoked or expired. It
// looks the key's hash up in the database on every call, so a revocation
// through any store over the same schema holds for the very next request.
func (s *Store) ResolveKey(ctx context.Context, key string) (string, error) {
	g, _, err := s.authorize(ctx, key, "", false)
	if err != nil {
		return "", fmt.Errorf("pgstore: resolve key: %w", err)
	}
	return g.AccountID, nil
}

// Authorize implements formsapi.KeyAuthorizer: it returns what key may
// read, or an error wrapping formsapi.ErrInvalidKey if the key is
// unknown, revoked or expired. It notes the key's use in memory; the
// store writes noted uses in one statement per WithLastUsedInterval (a minute), and on
// Close.
func (s *Store) Authorize(ctx context.Context, key string) (formsapi.Grant, error) {
	g, _, err := s.authorize(ctx, key, "", false)
	if err != nil {
		return formsapi.Grant{}, fmt.Errorf("pgstore: authorize: %w", err)
	}
	return g, nil
}

// AuthorizeForm is Authorize for the handler's fast path on a list of
// formID: in the same statement, one round trip, it also looks up formID
// among the forms of the key's account, for the page the handler reads
// next through this store (see wire.Form). The key's row is read on every
// call, as Authorize reads it, so revocation and expiry hold for the very
// next request, unless WithStaleness allows an answer from a following
// node's copy (then the wire.Form says so, and how old it is).
func (s *Store) AuthorizeForm(ctx context.Context, key, formID string) (formsapi.Grant, wire.Form, error) {
	g, l, err := s.authorize(ctx, key, formID, true)
	if err != nil {
		return formsapi.Grant{}, wire.Form{}, fmt.Errorf("pgstore: authorize: %w", err)
	}
	row := l.row
	return g, wire.Form{Found: row.seq.Valid, Seq: row.seq.Int64, Version: row.version.Int64, Incarnation: uint64(row.incarnation.Int64), Stale: l.stale, Age: l.age}, nil
}

// AuthorizeForms is Authorize for the handler's forms list: in the same
// statement, one round trip, it also reads the version of the forms list
// of the key's account (see wire.Forms), which the handler hands back to
// ListFormsAt with every page of forms the request reads, so that a page
// the read cache holds costs no other statement. The key's row is read
// on every call, as Authorize reads it, unless WithStaleness allows an
// answer from a following node's copy (then the wire.Forms says so).
func (s *Store) AuthorizeForms(ctx context.Context, key string) (formsapi.Grant, wire.Forms, error) {
	g, l, err := s.authorize(ctx, key, "", true)
	if err != nil {
		return formsapi.Grant{}, wire.Forms{}, fmt.Errorf("pgstore: authorize: %w", err)
	}
	return g, wire.Forms{Known: l.row.list.Valid, Version: l.row.list.Int64, Stale: l.stale, Age: l.age}, nil
}

// authorize looks key up, and formID among the forms of its account
// unless formID is "" (then the version of the account's forms list),
// and returns the key's grant and the lookup that read its row. bounded
// lets a following node answer from its copy (see lookupKey).
func (s *Store) authorize(ctx context.Context, key, formID string, bounded bool) (formsapi.Grant, *keyLookup, error) {
	if err := ctx.Err(); err != nil {
		return formsapi.Grant{}, nil, err
	}
	h := keyformat.Hash(key)
	if !storableText(formID) {
		formID = "" // no such form can be stored
	}
	l, err := s.lookupKey(ctx, h[:], formID, bounded)
	if err == nil {
		err = l.err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return formsapi.Grant{}, nil, formsapi.ErrInvalidKey
	}
	if err != nil {
		return formsapi.Grant{}, nil, withCtx(ctx, err)
	}
	row := l.row
	g := row.g
	now := s.now() // the store's clock, never the database's: see WithClock
	if row.expires != nil {
		if now.UnixNano() >= *row.expires {
			return formsapi.Grant{}, nil, formsapi.ErrInvalidKey
		}
		g.ExpiresAt = stored.Time(*row.expires)
	}
	s.used.Note(h, now)
	return g, l, nil
}

// ListKeys implements formsapi.KeyManager: every key of accountID,
// revoked and expired ones included, oldest first. LastUsedAt includes
// uses this store noted but has not written yet; another node's are seen
// once that node writes them (within WithLastUsedInterval).
func (s *Store) ListKeys(ctx context.Context, accountID string) ([]formsapi.KeyInfo, error) {
	var out []formsapi.KeyInfo
	err := retry(ctx, func() (err error) {
		out, err = s.listKeys(ctx, accountID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: list keys: %w", withCtx(ctx, err))
	}
	return out, nil
}

func (s *Store) listKeys(ctx context.Context, accountID string) ([]formsapi.KeyInfo, error) {
	rows, err := s.pool.Query(ctx, s.sql.listKeys, accountID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []formsapi.KeyInfo{}
	for rows.Next() {
		var (
			hash                       []byte
			info                       formsapi.KeyInfo
			created                    int64
			expires, revoked, lastUsed *int64
		)
		if err := rows.Scan(&hash, &info.Forms, &created, &expires, &revoked, &lastUsed); err != nil {
			return nil, err
		}
		info.ID, info.AccountID, info.CreatedAt = hex.EncodeToString(hash), accountID, stored.Time(created)
		info.ExpiresAt, info.RevokedAt, info.LastUsedAt = optNanos(expires), optNanos(revoked), optNanos(lastUsed)
		var h [32]byte
		copy(h[:], hash)
		if t, ok := s.used.Pending(h); ok && t.After(info.LastUsedAt) {
			info.LastUsedAt = t
		}
		out = append(out, info)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

func optNanos(ns *int64) time.Time {
	if ns == nil {
		return time.Time{}
	}
	return stored.Time(*ns)
}

// FlushKeyUses writes the key uses noted since the last batch now, in one
// statement, instead of waiting for the next batch or Close. A failed
// batch stays noted for the next attempt.
func (s *Store) FlushKeyUses(ctx context.Context) error {
	return s.used.Flush(ctx)
}

// writeUses writes a batch of noted key uses in one statement.
func (s *Store) writeUses(ctx context.Context, uses map[[32]byte]int64) error {
	hashes := make([][]byte, 0, len(uses))
	times := make([]int64, 0, len(uses))
	for h, ns := range uses {
		hashes = append(hashes, h[:])
		times = append(times, ns)
	}
	if _, err := s.exec(ctx, s.sql.touchKeys, hashes, times); err != nil {
		return fmt.Errorf("pgstore: write when keys were last used: %w", withCtx(ctx, err))
	}
	return nil
}
