package memstore_test

import (
	"context"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/fastpath"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
)

func open(t *testing.T, seed storetest.Seed) *memstore.Store {
	s := memstore.New()
	if err := storetest.Load(context.Background(), s, seed); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store { return open(t, seed) })
}

// TestFastPathContract holds AppendSubmissions, which production reads
// take, to the same clauses.
func TestFastPathContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store {
		return fastpath.Store{WriteLister: open(t, seed)}
	})
}

func TestKeyContract(t *testing.T) {
	storetest.RunKeys(t, func(t *testing.T, seed storetest.Seed) formsapi.KeyResolver { return open(t, seed) })
}

func TestWriteContract(t *testing.T) {
	storetest.RunWrites(t, func(t *testing.T, seed storetest.Seed) storetest.WriteStore { return open(t, seed) })
}

func TestGrantContract(t *testing.T) {
	storetest.RunGrants(t, func(t *testing.T, seed storetest.Seed) storetest.GrantStore { return open(t, seed) })
}

func TestFeedContract(t *testing.T) {
	storetest.RunFeed(t, func(t *testing.T, seed storetest.Seed) storetest.SyncStore { return open(t, seed) })
}
