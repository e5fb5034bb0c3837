package memstore_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
)

// open is a store loaded with seed, keeping time by the seed's clock.
func open(t *testing.T, seed storetest.Seed) *memstore.Store {
	s := memstore.New(memstore.WithClock(seed.Clock.Now))
	if err := storetest.Load(context.Background(), s, seed); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestContract holds memstore to every contract it implements, its fast
// paths included. Its submissions live in memory as values it validated,
// with no storage a test could damage: the damaged-data clauses skip.
// Another node over its memory is the store itself, so Nodes runs with
// it as both.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store { return open(t, seed) },
		storetest.WithNode(func(_ *testing.T, s formsapi.Store) formsapi.Store { return s }))
}

// TestByteBudgetHonoured checks both read paths end a page at the byte
// budget (storetest only skips a store that ignores it).
func TestByteBudgetHonoured(t *testing.T) {
	t.Parallel()
	s := open(t, storetest.DefaultSeed())
	q := formsapi.Query{Limit: 100, MaxBytes: 1}
	p, err := s.ListSubmissions(context.Background(), storetest.AccountA, storetest.FormBusy, q)
	if err != nil || len(p.Items) != 1 || p.NextCursor == "" {
		t.Fatalf("ListSubmissions with a one-byte budget: %d items, cursor %q, error %v; want one item and a cursor", len(p.Items), p.NextCursor, err)
	}
	var w wire.Page
	if err := s.AppendSubmissions(context.Background(), storetest.AccountA, storetest.FormBusy, q, &w); err != nil || w.NextCursor == "" {
		t.Fatalf("AppendSubmissions with a one-byte budget: cursor %q, error %v", w.NextCursor, err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(append(append([]byte("["), w.Body...), ']'), &items); err != nil || len(items) != 1 {
		t.Fatalf("AppendSubmissions with a one-byte budget: %d items (%v), want one", len(items), err)
	}
}
