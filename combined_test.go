package formsapi_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/storetest"
)

// combined is memstore dressed as a store of this module with the
// combined lookup of key and form (AuthorizeForm): it records which
// lookups the handler made and the form each page was handed, and obeys
// a form it is handed as pgstore and sqlitestore do.
type combined struct {
	*memstore.Store
	mu                        sync.Mutex
	authorize, authorizeForms int
	pages, feeds              []*wire.Form // the Form of each read, nil when none
}

func newCombined(t *testing.T) *combined { return &combined{Store: seeded(t)} }

func (c *combined) FastPath() storecontract.Self { return storecontract.Self{Store: c} }

func (c *combined) Authorize(ctx context.Context, key string) (formsapi.Grant, error) {
	c.mu.Lock()
	c.authorize++
	c.mu.Unlock()
	return c.Store.Authorize(ctx, key)
}

// formVersion is the version the fake reports for every form it finds.
const formVersion = 42

func (c *combined) AuthorizeForm(ctx context.Context, key, formID string) (formsapi.Grant, wire.Form, error) {
	c.mu.Lock()
	c.authorizeForms++
	c.mu.Unlock()
	g, err := c.Store.Authorize(ctx, key)
	if err != nil {
		return formsapi.Grant{}, wire.Form{}, err
	}
	_, err = c.Store.ListSubmissions(ctx, g.AccountID, formID, formsapi.Query{Limit: 1})
	switch {
	case errors.Is(err, formsapi.ErrFormNotFound):
		return g, wire.Form{}, nil
	case err != nil:
		return formsapi.Grant{}, wire.Form{}, err
	}
	return g, wire.Form{Found: true, Seq: 7, Version: formVersion}, nil
}

func (c *combined) AppendSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, p *wire.Page) error {
	c.mu.Lock()
	c.pages = append(c.pages, p.Form)
	c.mu.Unlock()
	if p.Form != nil && !p.Form.Found {
		return formsapi.ErrFormNotFound
	}
	return c.Store.AppendSubmissions(ctx, accountID, formID, q, p)
}

func (c *combined) AppendFeed(ctx context.Context, accountID, formID string, q wire.FeedQuery, p *wire.Page) (int64, bool, error) {
	c.mu.Lock()
	c.feeds = append(c.feeds, p.Form)
	c.mu.Unlock()
	if p.Form != nil && !p.Form.Found {
		return 0, false, formsapi.ErrFormNotFound
	}
	return c.Store.AppendFeed(ctx, accountID, formID, q, p)
}

// counts returns the lookups made and the forms handed to reads since the
// last call, and forgets them.
func (c *combined) counts() (authorize, authorizeForms int, pages, feeds []*wire.Form) {
	c.mu.Lock()
	defer c.mu.Unlock()
	authorize, authorizeForms, pages, feeds = c.authorize, c.authorizeForms, c.pages, c.feeds
	c.authorize, c.authorizeForms, c.pages, c.feeds = 0, 0, nil, nil
	return
}

// wrapped is a host's type that embeds the store: its overrides must be
// obeyed, so the handler must not take the store's combined lookup.
type wrapped struct{ *combined }

var found = &wire.Form{Found: true, Seq: 7, Version: formVersion}

// TestCombinedLookup: over a store that is also its key resolver, a list
// of one form costs one lookup that finds the key and the form, and the
// page (and the feed) is handed the form; anything else (the forms list,
// a malformed form ID, a wrapper on either side, another store as the
// resolver or the feed) takes Authorize and reads without it.
func TestCombinedLookup(t *testing.T) {
	sub := "/v1/forms/" + storetest.FormSmall + "/submissions"
	t.Run("StoreItself", func(t *testing.T) {
		is := is.New(t)
		c := newCombined(t)
		h := formsapi.NewHandler(c, c)
		is.Equal(do(t, h, "GET", sub, bearer(storetest.KeyA)...).status, 200)
		authorize, authorizeForms, pages, _ := c.counts()
		is.Equal(authorize, 0)               // not Authorize
		is.Equal(authorizeForms, 1)          // one combined lookup
		is.Equal(pages, []*wire.Form{found}) // whose form the page was handed
		is.Equal(do(t, h, "GET", sub+"?sync=start", bearer(storetest.KeyA)...).status, 200)
		_, authorizeForms, _, feeds := c.counts()
		is.Equal(authorizeForms, 1)
		is.Equal(feeds, []*wire.Form{found}) // and the feed too
		is.Equal(do(t, h, "GET", "/v1/forms", bearer(storetest.KeyA)...).status, 200)
		authorize, authorizeForms, _, _ = c.counts()
		is.Equal(authorize, 1) // the forms list names no form
		is.Equal(authorizeForms, 0)
		is.Equal(do(t, h, "GET", "/v1/forms/"+storetest.FormNone+"/submissions", bearer(storetest.KeyA)...).status, 404)
		_, authorizeForms, pages, _ = c.counts()
		is.Equal(authorizeForms, 1)
		is.Equal(pages, []*wire.Form{{}}) // not found, answered by the store with the page
		is.Equal(do(t, h, "GET", "/v1/forms/"+storetest.FormB+"/submissions", bearer(storetest.KeyA)...).status, 404)
		_, _, pages, _ = c.counts()
		is.Equal(pages, []*wire.Form{{}}) // another account's form is not found either
		is.Equal(do(t, h, "GET", "/v1/forms/a..b%20c/submissions", bearer(storetest.KeyA)...).status, 404)
		authorize, authorizeForms, pages, _ = c.counts()
		is.Equal(authorize, 1) // a malformed form ID is never looked up
		is.Equal(authorizeForms, 0)
		is.Equal(len(pages), 0)
	})
	t.Run("NotTheStoreItself", func(t *testing.T) {
		c, other := newCombined(t), newCombined(t)
		for name, h := range map[string]http.Handler{
			"store wrapped": formsapi.NewHandler(wrapped{c}, c),
			"keys wrapped":  formsapi.NewHandler(c, wrapped{c}),
			"other keys":    formsapi.NewHandler(c, other),
		} {
			if res := do(t, h, "GET", sub, bearer(storetest.KeyA)...); res.status != 200 {
				t.Errorf("%s: status %d", name, res.status)
			}
			_, authorizeForms, pages, _ := c.counts()
			_, otherForms, _, _ := other.counts()
			if authorizeForms+otherForms != 0 {
				t.Errorf("%s: the combined lookup was made", name)
			}
			if len(pages) > 0 && pages[0] != nil {
				t.Errorf("%s: the page was handed a form", name)
			}
		}
	})
	t.Run("FeedOfAnotherStore", func(t *testing.T) {
		is := is.New(t)
		c, other := newCombined(t), newCombined(t)
		h := formsapi.NewHandler(c, c, formsapi.WithFeed(other))
		is.Equal(do(t, h, "GET", sub+"?sync=start", bearer(storetest.KeyA)...).status, 200)
		_, _, _, feeds := other.counts()
		is.Equal(feeds, []*wire.Form{nil}) // the form found in c means nothing to other
		is.Equal(do(t, h, "GET", sub, bearer(storetest.KeyA)...).status, 200)
		_, _, pages, _ := c.counts()
		is.Equal(pages, []*wire.Form{found}) // c's own pages still get it
	})
}

// TestCombinedLookupStatusOrder: the combined lookup changes no answer's
// precedence: 401 before 429 before the 404 of a form out of the key's
// scope before 400 before the 404 of a form that does not exist.
func TestCombinedLookupStatusOrder(t *testing.T) {
	is := is.New(t)
	c := newCombined(t)
	scoped, err := formsapi.NewKey()
	is.NoErr(err)
	is.NoErr(c.AddKeyWith(context.Background(), scoped, storetest.AccountA, formsapi.KeyOptions{Forms: []string{storetest.FormSmall}}))
	expiring, err := formsapi.NewKey()
	is.NoErr(err)
	is.NoErr(c.AddKeyWith(context.Background(), expiring, storetest.AccountA, formsapi.KeyOptions{ExpiresAt: time.Now().Add(time.Hour)}))
	h := formsapi.NewHandler(c, c, formsapi.WithClock(func() time.Time { return time.Now().Add(2 * time.Hour) }))
	limited := formsapi.NewHandler(c, c, formsapi.WithRateLimit(ratelimit.Options{Limiter: ratelimit.NewMemory(), Policy: ratelimit.Policy{Name: "one", Quota: 1, Window: time.Hour}}))
	missing := "/v1/forms/" + storetest.FormNone + "/submissions"
	is.Equal(do(t, h, "GET", missing+"?limit=0", bearer(storetest.KeyNotAdded)...).status, 401)                      // unknown key
	is.Equal(do(t, h, "GET", missing+"?limit=0", bearer(expiring)...).status, 401)                                   // expired by the handler's clock
	is.Equal(do(t, limited, "GET", missing, bearer(storetest.KeyA)...).status, 404)                                  // takes the one request
	is.Equal(do(t, limited, "GET", missing+"?limit=0", bearer(storetest.KeyA)...).status, 429)                       // then refused, form and query aside
	is.Equal(do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions?limit=0", bearer(scoped)...).status, 404) // out of scope
	is.Equal(do(t, h, "GET", missing+"?limit=0", bearer(storetest.KeyA)...).status, 400)                             // the query first
	is.Equal(do(t, h, "GET", missing+"?sync=nonsense", bearer(storetest.KeyA)...).status, 400)
	is.Equal(do(t, h, "GET", missing, bearer(storetest.KeyA)...).status, 404) // then the form
	is.Equal(do(t, h, "GET", missing+"?sync=start", bearer(storetest.KeyA)...).status, 404)
}

// TestCombinedLookupObserved: with an observer, the combined lookup is
// still made, reported as the key's lookup, and its form still reaches
// the page.
func TestCombinedLookupObserved(t *testing.T) {
	is := is.New(t)
	c := newCombined(t)
	o := &recordingObserver{}
	h := formsapi.NewHandler(c, c, formsapi.WithObserver(o))
	is.Equal(do(t, h, "GET", "/v1/forms/"+storetest.FormSmall+"/submissions", bearer(storetest.KeyA)...).status, 200)
	calls, reqs := o.take()
	is.Equal(calls, []string{"authorize", "authorize:ok", "list_submissions", "list_submissions:ok"})
	is.Equal(reqs[0].AccountID, storetest.AccountA) // the account the lookup found
	authorize, authorizeForms, pages, _ := c.counts()
	is.Equal(authorize, 0)
	is.Equal(authorizeForms, 1)
	is.Equal(pages, []*wire.Form{found})
}
