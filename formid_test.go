package formsapi_test

import (
	"context"
	"errors"
	"regexp"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
)

func TestNewFormID(t *testing.T) {
	t.Parallel()
	format := regexp.MustCompile(`^[0-9A-Za-z]{22}$`)
	seen := map[string]bool{}
	chars := map[rune]int{}
	const n = 4000
	for i := 0; i < n; i++ {
		id := formsapi.NewFormID()
		if !format.MatchString(id) || !formsapi.ValidFormID(id) {
			t.Fatalf("NewFormID() = %q, want 22 base62 characters that ValidFormID accepts", id)
		}
		if seen[id] {
			t.Fatalf("NewFormID returned %q twice", id)
		}
		seen[id] = true
		for _, c := range id {
			chars[c]++
		}
	}
	// Each of the 62 characters is expected n*22/62 ≈ 1419 times; a biased
	// generator (say, c%62 over all 256 bytes) leaves some near 1.2 times that.
	if len(chars) != 62 {
		t.Errorf("%d distinct characters used, want all 62", len(chars))
	}
	for c, k := range chars {
		if k < 1200 || k > 1650 {
			t.Errorf("character %q appears %d times, want about 1419", c, k)
		}
	}
}

// TestFormIDsFromNewFormIDNeverCollide shows the use the README
// recommends: a host that gives every form a NewFormID never gets
// ErrFormExists, so it never learns of another account's IDs.
func TestFormIDsFromNewFormIDNeverCollide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memstore.New()
	for i := 0; i < 500; i++ {
		account := []string{"acct-a", "acct-b"}[i%2]
		if err := s.AddForm(ctx, account, formsapi.Form{ID: formsapi.NewFormID(), Title: "Contact"}); err != nil {
			t.Fatalf("AddForm with a NewFormID: %v", err)
		}
	}
	id := formsapi.NewFormID()
	if err := s.AddForm(ctx, "acct-a", formsapi.Form{ID: id}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddForm(ctx, "acct-b", formsapi.Form{ID: id}); !errors.Is(err, formsapi.ErrFormExists) {
		t.Fatalf("the same ID in another account: got %v, want ErrFormExists (IDs are unique across accounts)", err)
	}
}
