package formsapi_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
)

// The stores of this module are io.Closers alike, so that a host can swap
// one for another behind that interface too.
var (
	_ io.Closer = (*memstore.Store)(nil)
	_ io.Closer = (*sqlitestore.Store)(nil)
	_ io.Closer = (*pgstore.Store)(nil)
)

// A host wraps a store of this module to change what it does: it embeds
// the store and overrides a method. The handler must call the override,
// never the embedded store's fast path or optional methods around it.
// One wrapper type per store, since Go cannot embed a type parameter.

// hide drops the submissions whose data mentions "hidden": a host's soft
// delete, say.
func hide(p formsapi.Page[formsapi.Submission], err error) (formsapi.Page[formsapi.Submission], error) {
	kept := p.Items[:0]
	for _, s := range p.Items {
		if !bytes.Contains(s.Data, []byte("hidden")) {
			kept = append(kept, s)
		}
	}
	p.Items = kept
	return p, err
}

// suspend refuses every key of the account "suspended".
func suspend(account string, err error) (string, error) {
	if err == nil && account == "suspended" {
		return "", fmt.Errorf("host: account suspended: %w", formsapi.ErrInvalidKey)
	}
	return account, err
}

type (
	memHiding     struct{ *memstore.Store }
	memSuspending struct{ *memstore.Store }
	sqlHiding     struct{ *sqlitestore.Store }
	sqlSuspending struct{ *sqlitestore.Store }
	pgHiding      struct{ *pgstore.Store }
	pgSuspending  struct{ *pgstore.Store }
)

func (h memHiding) ListSubmissions(ctx context.Context, a, f string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	return hide(h.Store.ListSubmissions(ctx, a, f, q))
}
func (h sqlHiding) ListSubmissions(ctx context.Context, a, f string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	return hide(h.Store.ListSubmissions(ctx, a, f, q))
}
func (h pgHiding) ListSubmissions(ctx context.Context, a, f string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	return hide(h.Store.ListSubmissions(ctx, a, f, q))
}
func (h memSuspending) ResolveKey(ctx context.Context, key string) (string, error) {
	return suspend(h.Store.ResolveKey(ctx, key))
}
func (h sqlSuspending) ResolveKey(ctx context.Context, key string) (string, error) {
	return suspend(h.Store.ResolveKey(ctx, key))
}
func (h pgSuspending) ResolveKey(ctx context.Context, key string) (string, error) {
	return suspend(h.Store.ResolveKey(ctx, key))
}

// TestHostOverridesAreCalled serves each store through a host type that
// embeds it: one that hides submissions in ListSubmissions, and one that
// suspends an account in ResolveKey. Hidden submissions never show, in
// the list or in a feed the handler would read behind the override (it
// answers 501 unless WithFeed names a feed); the suspended account's keys
// get 401; a scoped key keeps its scope through the wrapper.
func TestHostOverridesAreCalled(t *testing.T) {
	t.Parallel()
	type wrapped struct {
		store  budgetStore
		hiding formsapi.Store
		susp   formsapi.KeyResolver
	}
	stores := map[string]func(t *testing.T) wrapped{
		"memstore": func(t *testing.T) wrapped {
			s := memstore.New()
			return wrapped{s, memHiding{s}, memSuspending{s}}
		},
		"sqlitestore": func(t *testing.T) wrapped {
			s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "e.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return wrapped{s, sqlHiding{s}, sqlSuspending{s}}
		},
		"pgstore": func(t *testing.T) wrapped {
			s := openPostgres(t, false)
			return wrapped{s, pgHiding{s}, pgSuspending{s}}
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			ctx := context.Background()
			w := open(t)
			s := w.store
			for _, f := range []struct{ account, id string }{{"acct", "shown"}, {"acct", "other"}, {"suspended", "theirs"}} {
				is.NoErr(s.AddForm(ctx, f.account, formsapi.Form{ID: f.id}))
			}
			for _, data := range []string{`{"n":1}`, `{"n":2,"note":"hidden"}`, `{"n":3}`} {
				is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "shown", Data: []byte(data)}, formsapi.Metadata{}))
			}
			full, scoped, susp := mustKey(t), mustKey(t), mustKey(t)
			is.NoErr(s.AddKey(ctx, full, "acct"))
			is.NoErr(s.AddKeyWith(ctx, scoped, "acct", formsapi.KeyOptions{Forms: []string{"other"}}))
			is.NoErr(s.AddKey(ctx, susp, "suspended"))

			// The store itself: everything shows, the feed works.
			h := formsapi.NewHandler(s, s)
			res := do(t, h, "GET", "/v1/forms/shown/submissions", bearer(full)...)
			is.True(bytes.Contains(res.body, []byte("hidden"))) // the store itself shows it
			is.Equal(do(t, h, "GET", "/v1/forms/shown/submissions?sync=start", bearer(full)...).status, 200)

			// The hiding wrapper: its ListSubmissions is what lists.
			h = formsapi.NewHandler(w.hiding, s)
			res = do(t, h, "GET", "/v1/forms/shown/submissions?limit=1000", bearer(full)...)
			is.Equal(res.status, 200)
			is.True(!bytes.Contains(res.body, []byte("hidden"))) // the override hid it
			is.True(bytes.Contains(res.body, []byte(`"n":3`)))   // and kept the rest
			res = do(t, h, "GET", "/v1/forms/shown/submissions?sync=start", bearer(full)...)
			is.Equal(res.status, 501) // no feed behind the override's back
			h = formsapi.NewHandler(w.hiding, s, formsapi.WithFeed(s))
			is.Equal(do(t, h, "GET", "/v1/forms/shown/submissions?sync=start", bearer(full)...).status, 200) // a feed the host named

			// The suspending wrapper: its ResolveKey is asked, and the
			// scope of a key still holds.
			h = formsapi.NewHandler(s, w.susp)
			is.Equal(do(t, h, "GET", "/v1/forms", bearer(susp)...).status, 401)                     // suspended
			is.Equal(do(t, h, "GET", "/v1/forms/theirs/submissions", bearer(susp)...).status, 401)  // suspended
			is.Equal(do(t, h, "GET", "/v1/forms/shown/submissions", bearer(full)...).status, 200)   // not suspended
			is.Equal(do(t, h, "GET", "/v1/forms/shown/submissions", bearer(scoped)...).status, 404) // outside its scope
			is.Equal(do(t, h, "GET", "/v1/forms/other/submissions", bearer(scoped)...).status, 200) // inside it
		})
	}
}
