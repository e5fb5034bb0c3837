package formsapi_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// What a client keeps between requests and brings back, as one handler
// hands it out: the second page's cursor, a sync token, the feed's refs
// and a page's ETag.
type handedOut struct {
	cursor, token, etag string
	refs                []string
}

const secretTarget = "/v1/forms/" + storetest.FormBusy + "/submissions?limit=2"

func handOut(t *testing.T, h http.Handler) handedOut {
	t.Helper()
	is := is.New(t)
	var page struct{ NextCursor string }
	res := do(t, h, "GET", secretTarget, bearer(storetest.KeyA)...)
	is.Equal(res.status, 200)
	decodeInto(t, res.body, &page)
	var feed struct {
		SyncToken string
		Refs      []string
	}
	decodeInto(t, do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions?sync=start&limit=3", bearer(storetest.KeyA)...).body, &feed)
	is.True(page.NextCursor != "" && feed.SyncToken != "" && len(feed.Refs) == 3)
	return handedOut{cursor: page.NextCursor, token: feed.SyncToken, etag: res.header.Get("ETag"), refs: feed.Refs}
}

// accepts reports whether h takes back everything in o as its own: the
// cursor and the token (200, not 400), the same refs and the same ETag
// (a 304).
func accepts(t *testing.T, h http.Handler, o handedOut) bool {
	t.Helper()
	cursor := do(t, h, "GET", secretTarget+"&cursor="+o.cursor, bearer(storetest.KeyA)...).status
	token := do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions?sync="+o.token, bearer(storetest.KeyA)...).status
	etag := do(t, h, "GET", secretTarget, append(bearer(storetest.KeyA), "If-None-Match", o.etag)...).status
	var feed struct{ Refs []string }
	decodeInto(t, do(t, h, "GET", "/v1/forms/"+storetest.FormBusy+"/submissions?sync=start&limit=3", bearer(storetest.KeyA)...).body, &feed)
	same := len(feed.Refs) == len(o.refs)
	for i := range feed.Refs {
		same = same && feed.Refs[i] == o.refs[i]
	}
	all := cursor == 200 && token == 200 && etag == 304 && same
	none := cursor == 400 && token == 400 && etag == 200 && !same
	if !all && !none {
		t.Fatalf("cursor %d, token %d, If-None-Match %d, same refs %v: want all accepted or none", cursor, token, etag, same)
	}
	return all
}

// TestSecretKeptBySQLite: a handler over sqlitestore, with no
// WithCursorSecret, hands out cursors, tokens, refs and ETags that a
// handler over the same file after a restart (the store closed and opened
// again) takes back, and so does a second process's store over the file;
// another file keeps another secret.
func TestSecretKeptBySQLite(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	open := func(name string) *sqlitestore.Store {
		s, err := sqlitestore.Open(filepath.Join(dir, name))
		is.NoErr(err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	first := open("forms.db")
	is.NoErr(storetest.Load(context.Background(), first, storetest.DefaultSeed()))
	before := handOut(t, formsapi.NewHandler(first, first))
	is.NoErr(first.Close())

	again := open("forms.db") // the restart
	is.True(accepts(t, formsapi.NewHandler(again, again), before))
	other := open("forms.db") // another process over the same file
	is.True(accepts(t, formsapi.NewHandler(other, other), before))

	elsewhere := open("other.db")
	is.NoErr(storetest.Load(context.Background(), elsewhere, storetest.DefaultSeed()))
	is.True(!accepts(t, formsapi.NewHandler(elsewhere, elsewhere), before)) // the same data in another file: another secret
}

// embedded is a host's type over a memstore that overrides nothing here;
// the handler takes no fast path through it, but the secret is the
// store's, since it belongs to the data.
type embedded struct{ *memstore.Store }

// hosted is a host's own store and key resolver, with a feed, that reads
// a memstore through its interfaces only: nothing of this module's
// stores shows through it.
type hosted struct{ s *memstore.Store }

func (h hosted) ListForms(ctx context.Context, a string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	return h.s.ListForms(ctx, a, q)
}
func (h hosted) ListSubmissions(ctx context.Context, a, f string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	return h.s.ListSubmissions(ctx, a, f, q)
}
func (h hosted) SyncSubmissions(ctx context.Context, a, f string, after int64, limit int) (formsapi.FeedPage, error) {
	return h.s.SyncSubmissions(ctx, a, f, after, limit)
}
func (h hosted) ResolveKey(ctx context.Context, key string) (string, error) {
	return h.s.ResolveKey(ctx, key)
}

// TestSecretOfTheStore: handlers over one memstore share its secret,
// through a host's type that embeds it too, and as the feed or the key
// resolver of a host's own store; WithCursorSecret overrides it. A
// handler over a host's own store and key resolver has none to take: it
// warns, once, and two such handlers refuse each other's tokens.
func TestSecretOfTheStore(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := seeded(t)
	host := hosted{s}
	o := handOut(t, formsapi.NewHandler(s, s))
	is.True(accepts(t, formsapi.NewHandler(s, s), o))
	is.True(accepts(t, formsapi.NewHandler(embedded{s}, embedded{s}, formsapi.WithFeed(embedded{s})), o))
	is.True(accepts(t, formsapi.NewHandler(host, s), o))                          // the key resolver's
	is.True(accepts(t, formsapi.NewHandler(host, host, formsapi.WithFeed(s)), o)) // WithFeed's
	is.True(!accepts(t, formsapi.NewHandler(s, s, formsapi.WithCursorSecret([]byte("0123456789abcdef0123456789abcdef"))), o))
	is.True(!accepts(t, formsapi.NewHandler(seeded(t), seeded(t)), o)) // another store, another secret

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	first := formsapi.NewHandler(host, host, formsapi.WithLogger(logger))
	is.Equal(strings.Count(logs.String(), `level=WARN msg="formsapi: no cursor secret`), 1) // said at construction
	is.True(!accepts(t, formsapi.NewHandler(host, host), handOut(t, first)))
	is.Equal(strings.Count(logs.String(), "\n"), 1) // and never again

	logs.Reset()
	withSecret := formsapi.NewHandler(host, host, formsapi.WithLogger(logger), formsapi.WithCursorSecret([]byte("0123456789abcdef0123456789abcdef")))
	is.Equal(logs.String(), "") // no warning with the option
	is.True(accepts(t, formsapi.NewHandler(host, host, formsapi.WithCursorSecret([]byte("0123456789abcdef0123456789abcdef"))), handOut(t, withSecret)))
}
