package pgstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/keyformat"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// wireCount counts what one pool sends: the statements it runs (through
// pgx's tracer) and its round trips (the writes on its connections: pgx
// sends each statement's messages in one write, then reads the answer).
type wireCount struct {
	mu         sync.Mutex
	statements []string
	writes     atomic.Int64
}

func (c *wireCount) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	c.statements = append(c.statements, data.SQL)
	c.mu.Unlock()
	return ctx
}

func (c *wireCount) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements and round trips since the last call.
func (c *wireCount) take() (statements []string, roundTrips int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	statements, c.statements = c.statements, nil
	return statements, c.writes.Swap(0)
}

type countedConn struct {
	net.Conn
	c *wireCount
}

func (cc countedConn) Write(b []byte) (int, error) {
	cc.c.writes.Add(1)
	return cc.Conn.Write(b)
}

// countedStore opens a store on a pool of one connection whose statements
// and round trips are counted, with nothing else on it: no pings, no
// health checks, no writes of key uses while the test runs.
func countedStore(t *testing.T, dsn, schema string, opts ...pgstore.Option) (*pgstore.Store, *wireCount) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c := &wireCount{}
	cfg.MaxConns, cfg.MinConns = 1, 0
	cfg.HealthCheckPeriod = time.Hour
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	cfg.ConnConfig.Tracer = c
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{conn, c}, nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(ctx, pool, append([]pgstore.Option{pgstore.WithSchema(schema), pgstore.WithLastUsedInterval(time.Hour)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) // before the pool's Close: cleanups run last first
	return s, c
}

// data returns the data of each submission of a 200 page, or the status.
func data(t *testing.T, res response) (int, []string) {
	t.Helper()
	if res.status != http.StatusOK {
		return res.status, nil
	}
	var p struct {
		Submissions []struct{ Data json.RawMessage }
	}
	if err := json.Unmarshal(res.body, &p); err != nil {
		t.Fatalf("body: %v\n%s", err, res.body)
	}
	out := []string{}
	for _, s := range p.Submissions {
		out = append(out, string(s.Data))
	}
	return 200, out
}

// TestCacheExactAcrossNodes runs two API nodes with their own pools and
// read caches over one schema. Node b holds a page in its cache (a
// request costs it one round trip); then a write comes through node a,
// through the store, or in plain SQL on a host's own connection, or a key
// is revoked or expires; and the very next request on node b must show
// it.
func TestCacheExactAcrossNodes(t *testing.T) {
	t.Parallel()
	dsn, schema := pooledSchema(t)
	secret := []byte(rand.Text())
	a := newNode(t, dsn, schema, secret)
	load(t, a.store, storetest.DefaultSeed())
	var ahead atomic.Int64 // how far node b's clock is ahead of the wall clock, in ns
	bStore, count := countedStore(t, dsn, schema, pgstore.WithClock(func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }))
	b := formsapi.NewHandler(bStore, bStore, formsapi.WithCursorSecret(secret))
	host, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(ctx) })
	q := quote(schema)
	sql := func(stmt string, args ...any) {
		t.Helper()
		if _, err := host.Exec(ctx, stmt, args...); err != nil {
			t.Fatalf("%s: %v", firstLine(stmt), err)
		}
	}
	var expiring, shortened string
	for _, k := range []*string{&expiring, &shortened} {
		if *k, err = formsapi.NewKey(); err != nil {
			t.Fatal(err)
		}
		if err := a.store.AddKeyWith(ctx, *k, storetest.AccountA, formsapi.KeyOptions{ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	small := "/v1/forms/" + storetest.FormSmall + "/submissions?limit=10"
	fresh := "/v1/forms/fresh-form/submissions"
	newest := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	// cached checks that node b answers target from its cache: the key's
	// statement alone, one round trip, and returns that answer.
	cached := func(target, key string) (int, []string) {
		t.Helper()
		get(b, target, key) // fill the cache, if it does not hold the page yet
		count.take()
		status, items := data(t, get(b, target, key))
		statements, trips := count.take()
		if len(statements) != 1 || trips != 1 {
			t.Fatalf("GET %s on node b: %d statements in %d round trips, want one (the key's): %q", target, len(statements), trips, statements)
		}
		return status, items
	}
	is := is.New(t)
	_, before := cached(small, storetest.KeyA)
	is.Equal(len(before), 3) // the form's three submissions

	steps := []struct {
		name  string
		write func()
		check func(status int, items []string) bool
	}{
		{"AddSubmission on node a", func() {
			is.NoErr(a.store.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(`{"via":"node a"}`), CreatedAt: newest}, formsapi.Metadata{ID: "via-a"}))
		}, func(_ int, items []string) bool { return items[0] == `{"via":"node a"}` }},
		{"INSERT on the host's connection", func() {
			sql("INSERT INTO "+q+`.formsapi_submissions (form_seq, feed_pos, created_at, data, json)
SELECT seq, feed_last + 1, $2, '{"via":"host"}', $3 FROM `+q+".formsapi_forms WHERE id = $1",
				storetest.FormSmall, newest.Add(time.Hour).UnixNano(),
				[]byte(`{"formId":"signup-a","data":{"via":"host"},"attachments":[],"createdAt":"2030-01-01T01:00:00Z"}`))
		}, func(_ int, items []string) bool { return items[0] == `{"via":"host"}` }},
		{"UPDATE of a submission's data", func() {
			sql("UPDATE "+q+`.formsapi_submissions SET data = '{"via":"edited"}', json = $1 WHERE data = '{"via":"host"}'`,
				[]byte(`{"formId":"signup-a","data":{"via":"edited"},"attachments":[],"createdAt":"2030-01-01T01:00:00Z"}`))
		}, func(_ int, items []string) bool { return items[0] == `{"via":"edited"}` }},
		{"DELETE of a submission", func() {
			sql("DELETE FROM " + q + `.formsapi_submissions WHERE data = '{"via":"edited"}'`)
		}, func(_ int, items []string) bool { return items[0] == `{"via":"node a"}` && len(items) == 4 }},
		{"DeleteSubmission on node a", func() {
			is.NoErr(a.store.DeleteSubmission(ctx, storetest.AccountA, storetest.FormSmall, "via-a"))
		}, func(_ int, items []string) bool { return len(items) == 3 && items[0] != `{"via":"node a"}` }},
		{"Erase on node a", func() {
			n, err := a.store.Erase(ctx, storetest.AccountA, "plan", "pro")
			is.NoErr(err)
			is.Equal(n, 3)
		}, func(_ int, items []string) bool { return len(items) == 0 }},
	}
	for _, step := range steps {
		_, held := cached(small, storetest.KeyA)
		step.write()
		status, items := data(t, get(b, small, storetest.KeyA))
		if status != 200 || !step.check(status, items) {
			t.Errorf("%s: node b answered %d %q, its page from before was %q", step.name, status, items, held)
		}
	}

	// A form that did not exist is not cached as missing.
	is.Equal(get(b, fresh, storetest.KeyA).status, 404)
	is.NoErr(a.store.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "fresh-form"}))
	status, items := data(t, get(b, fresh, storetest.KeyA))
	is.Equal(status, 200) // AddForm on node a, seen by node b at once
	is.Equal(len(items), 0)

	// Keys: the page stays cached, the key's row is read every time.
	status, _ = cached(small, storetest.KeyA2)
	is.Equal(status, 200)
	is.NoErr(a.store.RevokeKey(ctx, storetest.KeyA2))
	is.Equal(get(b, small, storetest.KeyA2).status, http.StatusUnauthorized) // revoked on node a, refused by node b at once
	status, _ = cached(small, shortened)
	is.Equal(status, 200)
	h := keyformat.Hash(shortened)
	sql("UPDATE "+q+".formsapi_keys SET expires_at = $1 WHERE key_hash = $2", time.Now().Add(-time.Second).UnixNano(), h[:])
	is.Equal(get(b, small, shortened).status, http.StatusUnauthorized) // its life cut short on the host's connection, refused at once
	status, _ = cached(small, expiring)
	is.Equal(status, 200)
	ahead.Store(int64(2 * time.Hour))                                 // the key's hour passes, on node b's clock
	is.Equal(get(b, small, expiring).status, http.StatusUnauthorized) // expired: refused on the very next request
	status, _ = cached(small, storetest.KeyA)
	is.Equal(status, 200) // the page is still cached for the keys that work

	// The form itself: renamed and deleted on node a, seen by node b at once.
	is.NoErr(a.store.UpdateForm(ctx, storetest.AccountA, formsapi.Form{ID: storetest.FormSmall, Title: "Renamed on node a"}))
	is.True(bytes.Contains(get(b, "/v1/forms", storetest.KeyA).body, []byte("Renamed on node a")))
	is.NoErr(a.store.DeleteForm(ctx, storetest.AccountA, storetest.FormSmall))
	is.Equal(get(b, small, storetest.KeyA).status, http.StatusNotFound) // its cached page is never served again
	is.True(!bytes.Contains(get(b, "/v1/forms", storetest.KeyA).body, []byte(storetest.FormSmall)))
}

// TestRoundTrips counts the statements and round trips of each kind of
// request on a node whose store is its own key resolver, once the
// connection has prepared its statements and the cache holds the page,
// and on nodes without the combined lookup or without the cache.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	dsn, schema := pooledSchema(t)
	writer, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writer.Close() })
	load(t, writer, storetest.DefaultSeed())
	s, count := countedStore(t, dsn, schema)
	off, offCount := countedStore(t, dsn, schema, pgstore.WithCacheSize(0))
	const (
		combined    = "f.id = $2"                             // the combined lookup of key and form
		key         = "l.account_id = k.account_id"           // the key, with its account's forms list version
		version     = "SELECT seq, version, incarnation FROM" // the form's version, for the cache
		page        = "s.json, s.total"                       // a page of submissions
		feed        = "feed_pos > $3"                         // a page of the feed
		listVersion = "SELECT version FROM"                   // the forms list's version, for the cache
	)
	forms := "FROM " + quote(schema) + ".\"formsapi_forms\"" // a page of forms
	list := "/v1/forms/" + storetest.FormSmall + "/submissions"
	for _, c := range []struct {
		name       string
		h          http.Handler
		count      *wireCount
		target     string
		status     int
		statements []string
	}{
		{"cached page", formsapi.NewHandler(s, s), count, list + "?limit=10", 200, []string{combined}},
		{"another limit of the cached page", formsapi.NewHandler(s, s), count, list + "?limit=2", 200, []string{combined}},
		{"feed page", formsapi.NewHandler(s, s), count, list + "?sync=start", 200, []string{combined, feed}},
		{"form not found", formsapi.NewHandler(s, s), count, "/v1/forms/" + storetest.FormB + "/submissions", 404, []string{combined}},
		{"cached page, without the combined lookup", formsapi.NewHandler(s, formsapi.KeyResolverFunc(s.ResolveKey)), count, list + "?limit=10", 200, []string{key, version}},
		{"cached forms list", formsapi.NewHandler(s, s), count, "/v1/forms", 200, []string{key}},
		{"another limit of the cached forms list", formsapi.NewHandler(s, s), count, "/v1/forms?limit=1", 200, []string{key}},
		{"cached forms list, without the combined lookup", formsapi.NewHandler(s, formsapi.KeyResolverFunc(s.ResolveKey)), count, "/v1/forms", 200, []string{key, listVersion}},
		{"without the cache", formsapi.NewHandler(off, off), offCount, list + "?limit=10", 200, []string{combined, page}},
		{"forms list without the cache", formsapi.NewHandler(off, off), offCount, "/v1/forms", 200, []string{key, forms}},
	} {
		get(c.h, c.target, storetest.KeyA) // prepares the statements on the connection, fills the cache
		c.count.take()
		res := get(c.h, c.target, storetest.KeyA)
		statements, trips := c.count.take()
		if res.status != c.status {
			t.Errorf("%s: status %d, want %d", c.name, res.status, c.status)
		}
		if len(statements) != len(c.statements) || trips != int64(len(c.statements)) {
			t.Errorf("%s: %d statements in %d round trips, want %d: %q", c.name, len(statements), trips, len(c.statements), statements)
			continue
		}
		for i, want := range c.statements {
			if !strings.Contains(statements[i], want) {
				t.Errorf("%s: statement %d is %q, want one with %q", c.name, i, statements[i], want)
			}
		}
	}
}

// TestCacheUnderConcurrentWriter has readers on one node request three
// forms with several limits (so that pages are served whole from the
// cache, extended from a shorter cached page, and read again) while
// another node and a host's connection add submissions to one of them:
// every read that starts after a commit must show it, and the other forms
// never change.
func TestCacheUnderConcurrentWriter(t *testing.T) {
	t.Parallel()
	dsn, schema := pooledSchema(t)
	secret := []byte(rand.Text())
	a := newNode(t, dsn, schema, secret)
	b := newNode(t, dsn, schema, secret)
	key, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.store.AddKey(ctx, key, "acct"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	sub := func(form string, n int) (formsapi.Submission, time.Time) {
		at := t0.Add(time.Duration(n) * time.Second)
		return formsapi.Submission{FormID: form, Data: []byte(`{"n":` + itoa(n) + `}`), CreatedAt: at}, at
	}
	for _, f := range []string{"f0", "f1", "f2"} {
		if err := a.store.AddForm(ctx, "acct", formsapi.Form{ID: f}); err != nil {
			t.Fatal(err)
		}
		for n := range 30 {
			s, _ := sub(f, n)
			if err := a.store.AddSubmission(ctx, s, formsapi.Metadata{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	host, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(ctx) })
	insert := "INSERT INTO " + quote(schema) + `.formsapi_submissions (form_seq, feed_pos, created_at, data, json)
SELECT seq, feed_last + 1000, $1, '{}', $2 FROM ` + quote(schema) + ".formsapi_forms WHERE id = 'f0'"

	var committed atomic.Int64 // the n of the newest submission committed to f0
	committed.Store(29)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for n := 30; n < 90; n++ {
			s, at := sub("f0", n)
			var err error
			if n%2 == 0 {
				err = a.store.AddSubmission(ctx, s, formsapi.Metadata{})
			} else {
				encoded, _ := formsapi.AppendSubmissionJSON(nil, s)
				_, err = host.Exec(ctx, insert, at.UnixNano(), encoded)
			}
			if err != nil {
				t.Error(err)
				return
			}
			committed.Store(int64(n))
		}
	})
	var reads atomic.Int64
	for r := range 3 {
		wg.Go(func() {
			for i := r; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				f := i % 3
				want := committed.Load()
				status, items := data(t, get(b.handler, "/v1/forms/f"+itoa(f)+"/submissions?limit="+itoa([]int{1, 10, 25, 3}[i%4]), key))
				if status != 200 || len(items) == 0 {
					t.Errorf("f%d: %d with %d items", f, status, len(items))
					return
				}
				var newest struct{ N int64 }
				if err := json.Unmarshal([]byte(items[0]), &newest); err != nil {
					t.Error(err)
					return
				}
				if f == 0 && newest.N < want {
					t.Errorf("f0: newest %d, but %d was committed before the request", newest.N, want)
					return
				}
				if f != 0 && newest.N != 29 {
					t.Errorf("f%d: newest %d, want 29", f, newest.N)
					return
				}
				reads.Add(1)
			}
		})
	}
	wg.Wait()
	_, items := data(t, get(b.handler, "/v1/forms/f0/submissions?limit=1", key))
	if len(items) != 1 || items[0] != `{"n":89}` {
		t.Errorf("after the writes: %q, want the last one", items)
	}
	t.Logf("%d reads during 60 writes", reads.Load())
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestPageStraddlingACommitIsReadAgain makes, deterministically, what a
// commit between a request's version read and its page read makes: the
// handler hands the store a form version that is no longer current, the
// cache holds the start of the page at that version, and the rest is read
// at the new one. The store must not serve that mix: it reads the whole
// page again, at the new version, and keeps that.
func TestPageStraddlingACommitIsReadAgain(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := mustOpen(t)
	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "f"}))
	t0 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	for n := range 10 {
		is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(`{"n":` + itoa(n) + `}`), CreatedAt: t0.Add(time.Duration(n) * time.Second)}, formsapi.Metadata{}))
	}
	page := func(limit int, form *wire.Form) []string {
		t.Helper()
		p := wire.Page{Body: []byte("["), Form: form}
		is.NoErr(s.AppendSubmissions(ctx, "acct", "f", formsapi.Query{Limit: limit}, &p))
		var items []struct{ Data json.RawMessage }
		is.NoErr(json.Unmarshal(append(p.Body, ']'), &items))
		out := []string{}
		for _, it := range items {
			out = append(out, string(it.Data))
		}
		return out
	}
	var old wire.Form
	is.NoErr(pgstore.Pool(s).QueryRow(ctx, "SELECT seq, version FROM "+quote(s.Schema())+".formsapi_forms WHERE id = 'f'").Scan(&old.Seq, &old.Version))
	old.Found = true
	is.Equal(page(5, &old), []string{`{"n":9}`, `{"n":8}`, `{"n":7}`, `{"n":6}`, `{"n":5}`}) // cached at the old version
	is.NoErr(s.AddSubmission(ctx, formsapi.Submission{FormID: "f", Data: []byte(`{"n":100}`), CreatedAt: t0.Add(time.Hour)}, formsapi.Metadata{}))
	want := []string{`{"n":100}`, `{"n":9}`, `{"n":8}`, `{"n":7}`, `{"n":6}`, `{"n":5}`, `{"n":4}`, `{"n":3}`}
	is.Equal(page(8, &old), want) // the whole page at the new version, not the 5 held and 3 more
	pages, _ := pgstore.CachedPages(s)
	is.Equal(pages, 1)
	is.Equal(page(8, nil), want) // what the store now holds, at the current version
}
