package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
	"github.com/formsapi/formsapi/internal/wire"
)

// grant is a live key's row; expiry is checked against the store's clock
// (see WithClock) on every use.
type grant struct {
	account   string
	forms     []string // nil: every form
	expiresAt int64    // Unix ns; 0: never
}

// AddKeyWith registers key as an API key of accountID restricted to
// o.Forms and o.ExpiresAt. Only its SHA-256 is stored. It returns an
// error wrapping formsapi.ErrKeyExists if the key is already registered
// or was ever revoked, and one wrapping formsapi.ErrInvalidInput if the
// key, accountID or o is malformed or accountID is beyond the store's
// limits (see WithLimits and formsapi.Limits.PrepareKeyOptions); either
// way nothing changes.
func (s *Store) AddKeyWith(ctx context.Context, key, accountID string, o formsapi.KeyOptions) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: add key: %w", err)
	}
	if err := s.limits.PrepareKeyOptions(key, accountID, &o); err != nil {
		return fmt.Errorf("sqlitestore: add key: %w", err)
	}
	now := s.now()
	if !o.ExpiresAt.IsZero() && !o.ExpiresAt.After(now) {
		return fmt.Errorf("sqlitestore: add key: %w: expiresAt %s is not after the store's clock", formsapi.ErrInvalidInput, o.ExpiresAt.Format(time.RFC3339Nano))
	}
	var forms, expires any // NULL unless restricted
	if o.Forms != nil {
		b, err := json.Marshal(o.Forms)
		if err != nil {
			return fmt.Errorf("sqlitestore: add key: %w", err)
		}
		forms = string(b)
	}
	if !o.ExpiresAt.IsZero() {
		expires = o.ExpiresAt.UnixNano()
	}
	h := keyformat.Hash(key)
	done, err := s.writing(ctx)
	if err != nil {
		return fmt.Errorf("sqlitestore: add key: %w", err)
	}
	ch := s.keys.change()
	ch.everything() // before the commit: see keyCopy
	_, err = s.addKey.ExecContext(ctx, h[:], accountID, now.UnixNano(), forms, expires)
	ch.end()
	done()
	if isUniqueViolation(err) {
		return fmt.Errorf("sqlitestore: add key: %w", formsapi.ErrKeyExists)
	}
	if err != nil {
		return fmt.Errorf("sqlitestore: add key: %w", err)
	}
	return nil
}

// ResolveKey returns the account that owns key, or an error wrapping
// formsapi.ErrInvalidKey if the key is unknown, revoked or expired. A
// revocation holds for the very next request, with the key copy too
// (see WithKeyCopy).
func (s *Store) ResolveKey(ctx context.Context, key string) (string, error) {
	g, _, err := s.authorize(ctx, key, "")
	if err != nil {
		return "", fmt.Errorf("sqlitestore: resolve key: %w", err)
	}
	return g.AccountID, nil
}

// Authorize implements formsapi.KeyAuthorizer: it returns what key may
// read, or an error wrapping formsapi.ErrInvalidKey if the key is
// unknown, revoked or expired. It notes the key's use in memory; the
// store writes noted uses in one transaction per WithLastUsedInterval (a minute), and on
// Close.
func (s *Store) Authorize(ctx context.Context, key string) (formsapi.Grant, error) {
	g, _, err := s.authorize(ctx, key, "")
	if err != nil {
		return formsapi.Grant{}, fmt.Errorf("sqlitestore: authorize: %w", err)
	}
	return g, nil
}

// AuthorizeForm is Authorize for the handler's fast path on a list of
// formID: in the same statement it also looks up formID among the forms
// of the key's account, for the page the handler reads next through this
// store (see wire.Form). It is answered as Authorize is, from the key
// copy after a check of the file that started after the call (see
// WithKeyCopy) or from the file, so revocation and expiry hold for the
// very next request.
func (s *Store) AuthorizeForm(ctx context.Context, key, formID string) (formsapi.Grant, wire.Form, error) {
	g, f, err := s.authorize(ctx, key, formID)
	if err != nil {
		return formsapi.Grant{}, wire.Form{}, fmt.Errorf("sqlitestore: authorize: %w", err)
	}
	return g, f, nil
}

// authorize looks key up, and formID among the forms of its account
// unless formID is "".
func (s *Store) authorize(ctx context.Context, key, formID string) (formsapi.Grant, wire.Form, error) {
	if err := ctx.Err(); err != nil {
		return formsapi.Grant{}, wire.Form{}, err
	}
	h := keyformat.Hash(key)
	g, f, err := s.lookupCopied(ctx, h, formID)
	if err != nil {
		return formsapi.Grant{}, wire.Form{}, err
	}
	now := s.now()
	if g.expiresAt != 0 && now.UnixNano() >= g.expiresAt {
		return formsapi.Grant{}, wire.Form{}, formsapi.ErrInvalidKey
	}
	s.used.Note(h, now)
	out := formsapi.Grant{AccountID: g.account}
	if g.forms != nil {
		out.Forms = append([]string{}, g.forms...)
	}
	if g.expiresAt != 0 {
		out.ExpiresAt = time.Unix(0, g.expiresAt).UTC()
	}
	return out, f, nil
}

// lookupCopied is lookupKey, answered from the store's copy when it has
// one that may answer (see WithKeyCopy), and copied there otherwise.
func (s *Store) lookupCopied(ctx context.Context, h [32]byte, formID string) (grant, wire.Form, error) {
	if s.keys == nil {
		return s.lookupKey(ctx, h, formID)
	}
	g, f, ok, gen, err := s.keys.lookup(ctx, h, formID)
	if err != nil || ok {
		return g, f, err
	}
	g, f, err = s.lookupKey(ctx, h, formID)
	if err == nil {
		s.keys.fill(gen, h, g, formID, f)
	}
	return g, f, err
}

// lookupKey returns the row of a live key, and formID's seq and version
// if it is a form of the key's account (formID "" looks up only the key).
// It reads the row on every call (one primary-key lookup), never from a
// cache, so a revocation holds for the very next request, whoever made
// it.
func (s *Store) lookupKey(ctx context.Context, h [32]byte, formID string) (grant, wire.Form, error) {
	var (
		g            grant
		forms        sql.NullString
		expires      sql.NullInt64
		seq, version sql.NullInt64 // NULL: no such form of the account
		inc          sql.NullInt64
		err          error
	)
	if formID == "" {
		err = s.resolveKey.QueryRowContext(ctx, h[:]).Scan(&g.account, &forms, &expires)
	} else {
		err = s.authorizeForm.QueryRowContext(ctx, h[:], formID).Scan(&g.account, &forms, &expires, &seq, &version, &inc)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return grant{}, wire.Form{}, formsapi.ErrInvalidKey
	}
	if err != nil {
		return grant{}, wire.Form{}, err
	}
	if forms.Valid {
		if err := json.Unmarshal([]byte(forms.String), &g.forms); err != nil || g.forms == nil {
			return grant{}, wire.Form{}, fmt.Errorf("the forms of key %x… are damaged", h[:4])
		}
	}
	g.expiresAt = expires.Int64
	return g, wire.Form{Found: seq.Valid, Seq: seq.Int64, Version: version.Int64, Incarnation: uint64(inc.Int64)}, nil
}

// ListKeys implements formsapi.KeyManager: every key of accountID,
// revoked and expired ones included, oldest first. LastUsedAt includes
// uses noted but not yet written.
func (s *Store) ListKeys(ctx context.Context, accountID string) ([]formsapi.KeyInfo, error) {
	rows, err := s.listKeys.QueryContext(ctx, accountID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list keys: %w", err)
	}
	defer rows.Close()
	out := []formsapi.KeyInfo{}
	for rows.Next() {
		var (
			hash                       []byte
			forms                      sql.NullString
			created                    int64
			expires, revoked, lastUsed sql.NullInt64
		)
		if err := rows.Scan(&hash, &forms, &created, &expires, &revoked, &lastUsed); err != nil {
			return nil, fmt.Errorf("sqlitestore: list keys: %w", err)
		}
		info := formsapi.KeyInfo{ID: hex.EncodeToString(hash), AccountID: accountID, CreatedAt: time.Unix(0, created).UTC()}
		if forms.Valid {
			if err := json.Unmarshal([]byte(forms.String), &info.Forms); err != nil {
				return nil, fmt.Errorf("sqlitestore: list keys: the forms of key %.8s… are damaged", info.ID)
			}
		}
		info.ExpiresAt = unixTime(expires)
		info.RevokedAt = unixTime(revoked)
		info.LastUsedAt = unixTime(lastUsed)
		var h [32]byte
		copy(h[:], hash)
		if t, ok := s.used.Pending(h); ok && t.After(info.LastUsedAt) {
			info.LastUsedAt = t
		}
		out = append(out, info)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: list keys: %w", err)
	}
	return out, nil
}

func unixTime(ns sql.NullInt64) time.Time {
	if !ns.Valid {
		return time.Time{}
	}
	return time.Unix(0, ns.Int64).UTC()
}

// writeUses writes a batch of noted key uses in one transaction.
func (s *Store) writeUses(ctx context.Context, uses map[[32]byte]int64) error {
	done, err := s.writing(ctx)
	if err != nil {
		return fmt.Errorf("sqlitestore: write when keys were last used: %w", err)
	}
	defer done()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: write when keys were last used: %w", err)
	}
	defer tx.Rollback() // a no-op after Commit
	st := tx.StmtContext(ctx, s.touchKey)
	for h, ns := range uses {
		if _, err := st.ExecContext(ctx, ns, h[:]); err != nil {
			return fmt.Errorf("sqlitestore: write when keys were last used: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: write when keys were last used: %w", err)
	}
	return nil
}
