package pgstore_test

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestLastUsedWithoutAWritePerRequest: many uses of a key leave its row
// untouched (same xmin) until the batch is written, and then another node
// sees the time.
func TestLastUsedWithoutAWritePerRequest(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pooledSchema(t)
	s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	is.NoErr(err) // open store
	defer s.Close()
	load(t, s, storetest.DefaultSeed())
	other, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	is.NoErr(err) // open a second node
	defer other.Close()

	h := sha256.Sum256([]byte(storetest.KeyB))
	xmin := func() string {
		var x string
		err := pgstore.Pool(s).QueryRow(ctx, `SELECT xmin::text FROM `+schema+`.formsapi_keys WHERE key_hash = $1`, h[:]).Scan(&x)
		is.NoErr(err) // read the row's xmin
		return x
	}
	before := xmin()
	for i := 0; i < 100; i++ {
		_, err := s.Authorize(ctx, storetest.KeyB)
		is.NoErr(err) // authorize
	}
	is.Equal(xmin(), before) // 100 requests wrote nothing
	keys, err := other.ListKeys(ctx, storetest.AccountB)
	is.NoErr(err)                        // list keys on the other node
	is.True(keys[0].LastUsedAt.IsZero()) // not written yet

	start := time.Now().Add(-time.Minute)
	is.NoErr(s.FlushKeyUses(ctx)) // write the batch
	is.True(xmin() != before)     // now the row was written, once
	keys, err = other.ListKeys(ctx, storetest.AccountB)
	is.NoErr(err)                            // list keys on the other node
	is.True(keys[0].LastUsedAt.After(start)) // and the other node sees the use
}
