package storecontract_test

import (
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/memstore"
)

type fastStore = storecontract.Store[formsapi.Query]

// notComparable is a host's type that embeds one of this module's stores
// in a struct that == cannot compare (a slice field), passed by value.
type notComparable struct {
	*memstore.Store
	tags []string
}

// TestHandshake holds Of, IsStore, Embeds, Same and KeptSecret to their
// contract on a store itself, a host's type that embeds it (comparable
// or not: comparing it with the store its FastPath returns must not
// panic), a value without the handshake that cannot be compared either
// (a func), and nil.
func TestHandshake(t *testing.T) {
	t.Parallel()
	s, other := memstore.New(), memstore.New()
	secret := s.FastPath().Secret
	resolve := formsapi.KeyResolverFunc(s.ResolveKey)
	for _, c := range []struct {
		name           string
		v              any
		store, embeds  bool
		secretOfIt     []byte
		sameAsTheStore bool
	}{
		{"the store", s, true, false, secret, true},
		{"another store", other, true, false, other.FastPath().Secret, false},
		{"embeds, comparable", struct{ *memstore.Store }{s}, false, true, secret, false},
		{"embeds, not comparable", notComparable{s, []string{"a"}}, false, true, secret, false},
		{"a func", resolve, false, false, nil, false},
		{"nil", nil, false, false, nil, false},
	} {
		if _, ok := storecontract.Of[fastStore](c.v); ok != c.store {
			t.Errorf("%s: Of: %t, want %t", c.name, ok, c.store)
		}
		if got := storecontract.IsStore(c.v); got != c.store {
			t.Errorf("%s: IsStore: %t, want %t", c.name, got, c.store)
		}
		if got := storecontract.Embeds(c.v); got != c.embeds {
			t.Errorf("%s: Embeds: %t, want %t", c.name, got, c.embeds)
		}
		if got := storecontract.Same(s, c.v); got != c.sameAsTheStore {
			t.Errorf("%s: Same(store, it): %t, want %t", c.name, got, c.sameAsTheStore)
		}
		if got := storecontract.Same(c.v, c.v); got != c.store {
			t.Errorf("%s: Same(it, it): %t, want %t", c.name, got, c.store)
		}
		if got := storecontract.KeptSecret(c.v); string(got) != string(c.secretOfIt) {
			t.Errorf("%s: KeptSecret: %x, want %x", c.name, got, c.secretOfIt)
		}
	}
	// The first of several that keeps one.
	if got := storecontract.KeptSecret(nil, resolve, notComparable{other, nil}, s); string(got) != string(other.FastPath().Secret) {
		t.Errorf("KeptSecret(nil, func, embeds other, store): %x, want other's", got)
	}
}
