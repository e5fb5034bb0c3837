package stored

import (
	"crypto/rand"
	"fmt"
)

// The cursor secret a database store keeps in its formsapi_secrets table
// (migration 0008 in sqlitestore, 0010 in pgstore), under the name
// CursorSecret, and hands to the handler through its FastPath (see
// storecontract.Self): the handler keys cursors, sync tokens, feed refs and page
// ETags with it unless the host gives WithCursorSecret.
//
// The store makes it once, at the first Open or New of a database that
// has none: it inserts NewSecret's bytes only if no row is there yet (an
// insert that does nothing on a conflict) and then reads the row back, so
// processes opening one database at once all read the one that was
// inserted first. Deleting the row makes the next open draw a new one;
// every process must then restart, and every cursor, token and ref
// issued before is refused.
const (
	CursorSecret = "cursor"
	SecretBytes  = 32
)

// NewSecret returns SecretBytes from crypto/rand.
func NewSecret() []byte {
	b := make([]byte, SecretBytes)
	rand.Read(b) // never fails (crypto/rand docs)
	return b
}

// Secret returns the cursor secret a store keeps, making it first if
// there is none. get reads the row (found false when there is none);
// put inserts secret unless a row is there already (an insert that does
// nothing on a conflict), so that of processes opening one database at
// once, whichever inserts first wins, and every one reads that row back.
// A row too short to be a secret this package made (a host wrote it by
// hand) is an error: it must not key the handler.
func Secret(get func() (secret []byte, found bool, err error), put func(secret []byte) error) ([]byte, error) {
	b, found, err := get()
	if err == nil && !found {
		if err := put(NewSecret()); err != nil {
			return nil, fmt.Errorf("make the cursor secret: %w", err)
		}
		b, found, err = get()
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("read the cursor secret: %w", err)
	case !found:
		return nil, fmt.Errorf("read the cursor secret: no row after inserting one")
	case len(b) < SecretBytes:
		return nil, fmt.Errorf("the cursor secret in formsapi_secrets has %d bytes, want at least %d: delete the row to have a new one made", len(b), SecretBytes)
	}
	return b, nil
}
