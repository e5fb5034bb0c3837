package stored

import (
	"crypto/rand"
	"fmt"
)

// The cursor secret a database store keeps in its formsapi_secrets table
// (migration 0008 in sqlitestore, 0010 in pgstore), under the name
// CursorSecret, and hands to the handler through its FastPath (see
// wire.Self): the handler keys cursors, sync tokens, feed refs and page
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

// CheckSecret returns an error unless b, read from a database, is long
// enough to be a secret this package made: a row a host wrote by hand with
// a short value must not key the handler.
func CheckSecret(b []byte) error {
	if len(b) < SecretBytes {
		return fmt.Errorf("the cursor secret in formsapi_secrets has %d bytes, want at least %d: delete the row to have a new one made", len(b), SecretBytes)
	}
	return nil
}
