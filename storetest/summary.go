package storetest

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/memstore"
)

// summaryClauses checks what the summary of a form needs of a store:
// its answer through a handler over the store, the same as over memstore
// for the same data, kept between reads (304 to its ETag) and never past
// a write (an addition, a deletion); and, for one of this module's
// stores, its FormVersion (the version the handler keeps summaries
// under): the same between writes, another after each, the page's
// incarnation, and ErrFormNotFound for another account's form.
func summaryClauses(t *testing.T, open func(t *testing.T, seed Seed) writeStore, cfg *config) {
	seed := DefaultSeed()
	ctx := context.Background()
	path := "/v1/forms/" + FormBusy + "/summary"

	t.Run("SummarySameAsMemstore", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		ref := memstore.New()
		if err := Load(ctx, ref, seed); err != nil {
			t.Fatal(err)
		}
		h, want := newProbe(t, s), newProbe(t, ref)
		for _, q := range []string{"", "?interval=hour&top=2", "?interval=week", "?since=2024-03-01T09:00:00Z&until=2024-03-03T00:00:00Z&interval=hour", "?filter[n][gte]=3", "?q=canary"} {
			got, exp := h.body(t, path+q, "", http.StatusOK), want.body(t, path+q, "", http.StatusOK)
			if got != exp {
				t.Errorf("GET %s: got %.600s, memstore %.600s", path+q, got, exp)
			}
		}
	})

	t.Run("SummaryFreshAfterWrite", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		summaryFreshAfterWrite(t, s, s)
	})

	t.Run("FormVersion", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		f, ok := storecontract.Of[fastStore](s)
		if !ok {
			t.Skip("not one of this module's stores: the handler keeps no summary of it")
		}
		version := func() wire.Form {
			t.Helper()
			v, err := f.FormVersion(ctx, AccountA, FormBusy, nil)
			if err != nil {
				t.Fatalf("FormVersion: %v", err)
			}
			if !v.Found || v.Version == 0 {
				t.Fatalf("FormVersion: %+v, want the form found with a version", v)
			}
			return v
		}
		v1 := version()
		if v := version(); v.Version != v1.Version {
			t.Errorf("FormVersion without a write between: %d, then %d", v1.Version, v.Version)
		}
		p := wire.Page{Body: []byte("[")}
		if err := f.AppendSubmissions(ctx, AccountA, FormBusy, formsapi.Query{Limit: 1}, &p); err != nil {
			t.Fatal(err)
		}
		if p.Incarnation != 0 && p.Incarnation != v1.Incarnation {
			t.Errorf("FormVersion's incarnation %d, the page's %d", v1.Incarnation, p.Incarnation)
		}
		id := addWithIDs(t, s, FormBusy, 1)[0]
		v2 := version()
		if err := s.DeleteSubmission(ctx, AccountA, FormBusy, id); err != nil {
			t.Fatal(err)
		}
		v3 := version()
		if v2.Version == v1.Version || v3.Version == v1.Version || v3.Version == v2.Version {
			t.Errorf("FormVersion before, after an addition and after its deletion: %d, %d, %d; want three versions", v1.Version, v2.Version, v3.Version)
		}
		for _, c := range []struct{ account, form string }{{AccountB, FormBusy}, {AccountA, "no-such-form"}} {
			if _, err := f.FormVersion(ctx, c.account, c.form, nil); !errors.Is(err, formsapi.ErrFormNotFound) {
				t.Errorf("FormVersion(%s, %s): %v, want ErrFormNotFound", c.account, c.form, err)
			}
		}
	})
}

// summaryFreshAfterWrite is the clause SummaryFreshAfterWrite, and
// Nodes' SummaryAfterAnotherNodeWrites: the summary of FormBusy read
// through a handler over s is kept between reads (304 to its ETag) and
// is another after an addition through w (s, or another node over its
// data), and the first again after w deletes it.
func summaryFreshAfterWrite(t *testing.T, s interface {
	formsapi.Store
	formsapi.KeyResolver
}, w formsapi.Writer) {
	ctx := context.Background()
	path := "/v1/forms/" + FormBusy + "/summary"
	h := newProbe(t, s)
	tag := h.get(t, path, "", http.StatusOK)
	h.get(t, path, tag, http.StatusNotModified)
	before := h.body(t, path, "", http.StatusOK)
	id := addWithIDs(t, w, FormBusy, 1)[0]
	if after := h.body(t, path, tag, http.StatusOK); after == before {
		t.Fatalf("the summary after an addition is the one before it: %.300s", after)
	}
	tag = h.get(t, path, "", http.StatusOK)
	if err := w.DeleteSubmission(ctx, AccountA, FormBusy, id); err != nil {
		t.Fatal(err)
	}
	if got := h.body(t, path, tag, http.StatusOK); got != before {
		t.Errorf("the summary after the addition was deleted: got %.300s, want the first %.300s", got, before)
	}
}
