package pgstore_test

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

// TestFormListVersionsChangeWithEveryWrite writes in every way a host can,
// through the store and in plain SQL on a connection whose search_path
// names another schema holding formsapi tables too, and checks after each
// write which accounts' forms lists got a new version (migration 0009):
// exactly those whose list could have changed, each with a value no list
// or form ever had, none for the writes of submissions (the hot path),
// and none in the other schema. An account whose row is gone gets one
// back, with a fresh value, at the next change of its list.
func TestFormListVersionsChangeWithEveryWrite(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s, d, host := withDecoy(t)
	for _, st := range []*pgstore.Store{s, d} {
		for _, f := range []struct{ account, id string }{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"c", "c1"}} {
			is.NoErr(st.AddForm(ctx, f.account, formsapi.Form{ID: f.id, Title: f.id})) // add form
		}
		is.NoErr(st.AddSubmission(ctx, formsapi.Submission{FormID: "a1", Data: []byte(`{"n":1}`)}, formsapi.Metadata{ID: "s1"}))
		is.NoErr(st.AddSubmission(ctx, formsapi.Submission{FormID: "a1", Data: []byte(`{"n":2}`)}, formsapi.Metadata{ID: "s2"}))
	}
	q := quote(s.Schema())

	// versions returns every account's list version, and every version a
	// form or a list of st has.
	versions := func(st *pgstore.Store) (map[string]int64, []int64) {
		t.Helper()
		lists := map[string]int64{}
		var all []int64
		rows, err := pgstore.Pool(st).Query(ctx, "SELECT account_id, version FROM "+quote(st.Schema())+".formsapi_form_lists")
		is.NoErr(err)
		for rows.Next() {
			var a string
			var v int64
			is.NoErr(rows.Scan(&a, &v))
			lists[a] = v
			all = append(all, v)
		}
		is.NoErr(rows.Err())
		rows, err = pgstore.Pool(st).Query(ctx, "SELECT version FROM "+quote(st.Schema())+".formsapi_forms")
		is.NoErr(err)
		for rows.Next() {
			var v int64
			is.NoErr(rows.Scan(&v))
			all = append(all, v)
		}
		is.NoErr(rows.Err())
		return lists, all
	}
	seen := map[int64]bool{}
	before, all := versions(s)
	for _, v := range all {
		seen[v] = true
	}
	is.Equal(len(before), 3) // a row for each account with forms
	decoyBefore, _ := versions(d)

	forms := q + ".formsapi_forms"
	insert := "INSERT INTO " + q + `.formsapi_submissions (form_seq, feed_pos, created_at, data, json)
SELECT seq, 1000 + feed_last, 0, '{}', '\x7b7d' FROM ` + forms + " WHERE id = $1"
	for _, step := range []struct {
		name    string
		write   func() error
		changed []string
	}{
		// Submissions change no list.
		{"AddSubmission", func() error {
			return s.AddSubmission(ctx, formsapi.Submission{FormID: "a2", Data: []byte(`{"email":"gone@example.com"}`)}, formsapi.Metadata{})
		}, nil},
		{"Erase", func() error {
			n, err := s.Erase(ctx, "a", "email", "gone@example.com")
			if err == nil && n != 1 {
				t.Errorf("Erase erased %d submissions, want 1", n)
			}
			return err
		}, nil},
		{"INSERT of a submission", exec(host, insert, "b1"), nil},
		{"UPDATE of submissions", exec(host, "UPDATE "+q+`.formsapi_submissions SET data = '{"x":1}'`), nil},
		{"DeleteSubmission", func() error { return s.DeleteSubmission(ctx, "a", "a1", "s1") }, nil},
		{"DELETE of a submission", exec(host, "DELETE FROM "+q+".formsapi_submissions WHERE host_id = 's2'"), nil},
		{"TRUNCATE of the submissions", exec(host, "TRUNCATE "+q+".formsapi_submissions"), nil},
		{"UPDATE of what the list does not show", exec(host, "UPDATE "+forms+" SET feed_last = feed_last + 1, feed_purged = feed_purged + 1, version = version + 1"), nil},
		{"UPDATE of a title to what it was", exec(host, "UPDATE "+forms+" SET title = title WHERE id = 'a1'"), nil},
		{"UPDATE that touches no row", exec(host, "UPDATE "+forms+" SET title = 'x' WHERE false"), nil},
		{"rolled back", func() error {
			tx, err := host.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "UPDATE "+forms+" SET title = 'never' WHERE id = 'a1'"); err != nil {
				return err
			}
			return tx.Rollback(ctx)
		}, nil},
		{"AddKey of an account with forms", func() error { return s.AddKey(ctx, mustKey(t), "a") }, nil},

		// Everything the list shows, orders by or selects by.
		{"AddForm", func() error { return s.AddForm(ctx, "a", formsapi.Form{ID: "a3"}) }, []string{"a"}},
		{"UpdateForm", func() error { return s.UpdateForm(ctx, "a", formsapi.Form{ID: "a3", Title: "renamed"}) }, []string{"a"}},
		{"UPDATE of a title", exec(host, "UPDATE "+forms+" SET title = 'plain' WHERE id = 'a1'"), []string{"a"}},
		{"UPDATE of an icon", exec(host, "UPDATE "+forms+" SET icon = 'i' WHERE id = 'b1'"), []string{"b"}},
		{"UPDATE of a notification email", exec(host, "UPDATE "+forms+" SET notification_email = 'e' WHERE id = 'c1'"), []string{"c"}},
		{"UPDATE of a creation time", exec(host, "UPDATE "+forms+" SET created_at = created_at + 1 WHERE id = 'a2'"), []string{"a"}},
		{"UPDATE of a form's ID", exec(host, "UPDATE "+forms+" SET id = 'a2b' WHERE id = 'a2'"), []string{"a"}},
		{"UPDATE of a seq", exec(host, "UPDATE "+forms+" SET seq = DEFAULT WHERE id = 'c1'"), []string{"c"}},
		{"UPDATE moving a form to another account", exec(host, "UPDATE "+forms+" SET account_id = 'b' WHERE id = 'a1'"), []string{"a", "b"}},
		{"UPDATE moving a form to a new account", exec(host, "UPDATE "+forms+" SET account_id = 'd' WHERE id = 'a1'"), []string{"b", "d"}},
		{"UPDATE of two accounts' forms in one statement", exec(host, "UPDATE "+forms+" SET title = title || '!' WHERE id IN ('b1', 'c1')"), []string{"b", "c"}},
		{"INSERT of forms of two accounts in one statement", exec(host, "INSERT INTO "+forms+" (id, account_id, title, icon, notification_email, created_at) VALUES ('x1', 'c', '', '', '', 0), ('x2', 'e', '', '', '', 0), ('x3', 'e', '', '', '', 0)"), []string{"c", "e"}},
		{"DeleteForm", func() error { return s.DeleteForm(ctx, "a", "a3") }, []string{"a"}},
		{"DELETE of forms of two accounts", exec(host, "DELETE FROM "+forms+" WHERE id IN ('x1', 'x2')"), []string{"c", "e"}},
		{"AddKey of an account without forms", func() error { return s.AddKey(ctx, mustKey(t), "f") }, []string{"f"}},
		{"a row deleted by hand", exec(host, "DELETE FROM "+q+".formsapi_form_lists WHERE account_id = 'c'"), []string{"c"}},
		{"AddForm after that", func() error { return s.AddForm(ctx, "c", formsapi.Form{ID: "c2"}) }, []string{"c"}},
		{"TRUNCATE of the forms", exec(host, "TRUNCATE "+forms+" CASCADE"), []string{"a", "b", "c", "d", "e", "f"}},
	} {
		if err := step.write(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after, _ := versions(s)
		var changed []string
		for a, v := range after {
			if old, ok := before[a]; ok && old == v {
				continue
			}
			changed = append(changed, a)
			if seen[v] {
				t.Errorf("%s: account %s got version %d, which a list or form had before", step.name, a, v)
			}
			seen[v] = true
		}
		for a := range before {
			if _, ok := after[a]; !ok {
				changed = append(changed, a) // its row is gone
			}
		}
		slices.Sort(changed)
		if !slices.Equal(changed, step.changed) {
			t.Errorf("%s: the lists of %v changed, want those of %v", step.name, changed, step.changed)
		}
		_, all := versions(s)
		for _, v := range all {
			seen[v] = true
		}
		before = after
	}
	after, _ := versions(d)
	is.Equal(after, decoyBefore) // the schema on the host's search_path was never touched
}

func mustKey(t *testing.T) string {
	t.Helper()
	k, err := formsapi.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestFormsListExactAcrossNodes runs two API nodes with their own pools
// and read caches over one schema, and a third without a cache as the
// truth. Node b holds the forms list in its cache (a request costs it one
// statement, the key's); then a form is added through node a, renamed,
// deleted and moved in plain SQL on a host's own connection, deleted
// through node a, and every form truncated away; and the very next
// request on node b must answer what the truth answers: each list the
// write changed with a new ETag, the others as before.
func TestFormsListExactAcrossNodes(t *testing.T) {
	t.Parallel()
	dsn, schema := pooledSchema(t)
	secret := []byte(rand.Text())
	a := newNode(t, dsn, schema, secret)
	load(t, a.store, storetest.DefaultSeed())
	bStore, count := countedStore(t, dsn, schema)
	b := formsapi.NewHandler(bStore, bStore, formsapi.WithCursorSecret(secret))
	truthStore := mustOpenIn(t, dsn, schema, pgstore.WithCacheSize(0))
	truth := formsapi.NewHandler(truthStore, truthStore, formsapi.WithCursorSecret(secret))
	host, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(ctx) })
	forms := quote(schema) + ".formsapi_forms"
	sql := func(stmt string) func() {
		return func() {
			t.Helper()
			if _, err := host.Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", firstLine(stmt), err)
			}
		}
	}
	// cached checks that node b answers target from its cache: the key's
	// statement alone, one round trip; it returns that answer.
	cached := func(target, key string) response {
		t.Helper()
		get(b, target, key) // fill the cache, if it does not hold the list yet
		count.take()
		res := get(b, target, key)
		statements, trips := count.take()
		if res.status != 200 || len(statements) != 1 || trips != 1 {
			t.Fatalf("GET %s on node b: %d, %d statements in %d round trips, want 200 and one (the key's): %q", target, res.status, len(statements), trips, statements)
		}
		return res
	}
	lists := []struct{ target, key string }{
		{"/v1/forms", storetest.KeyA},
		{"/v1/forms?limit=2&order=asc", storetest.KeyA},
		{"/v1/forms", storetest.KeyB},
	}
	for _, step := range []struct {
		name    string
		write   func()
		changed []int // the lists whose first page it changes
	}{
		{"AddForm on node a", func() {
			if err := a.store.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: "added-on-a", Title: "Added on node a", CreatedAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
				t.Fatal(err)
			}
		}, []int{0}},
		{"UPDATE of a title on the host's connection", sql("UPDATE " + forms + " SET title = 'Renamed by the host' WHERE id = '" + storetest.FormBusy + "'"), []int{0, 1}},
		{"UPDATE of a creation time", sql("UPDATE " + forms + " SET created_at = 0 WHERE id = '" + storetest.FormSmall + "'"), []int{0, 1}},
		{"DeleteForm on node a", func() {
			if err := a.store.DeleteForm(ctx, storetest.AccountA, "added-on-a"); err != nil {
				t.Fatal(err)
			}
		}, []int{0}},
		{"DELETE of a form on the host's connection", sql("DELETE FROM " + forms + " WHERE id = '" + storetest.FormEmpty + "'"), []int{0}},
		{"UPDATE moving a form to another account", sql("UPDATE " + forms + " SET account_id = '" + storetest.AccountB + "' WHERE id = 'feedback-a'"), []int{0, 1, 2}},
		{"TRUNCATE ... CASCADE", sql("TRUNCATE " + forms + " CASCADE"), []int{0, 1, 2}},
	} {
		held := make([]page, len(lists))
		tags := make([]string, len(lists))
		for i, l := range lists {
			res := cached(l.target, l.key)
			held[i], tags[i] = decodePage(t, res), res.header.Get("ETag")
		}
		step.write()
		var changed []int
		for i, l := range lists {
			// The very next request, and then the rest of its list.
			res := get(b, l.target, l.key)
			now := decodePage(t, res)
			if items(now) != items(held[i]) || (now.NextCursor == "") != (held[i].NextCursor == "") {
				changed = append(changed, i)
				if res.header.Get("ETag") == tags[i] {
					t.Errorf("%s: GET %s (key of %d) changed under the same ETag", step.name, l.target, i)
				}
			} else if res.header.Get("ETag") != tags[i] {
				t.Errorf("%s: GET %s (key of %d) did not change, its ETag did", step.name, l.target, i)
			}
			got, want := walkForms(t, b, l.target, l.key), walkForms(t, truth, l.target, l.key)
			if first := listed(t, res); first != want[0] {
				t.Errorf("%s: node b answered GET %s with %s, the database with %s", step.name, l.target, first, want[0])
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: node b answered GET %s with\n%q\nthe database with\n%q", step.name, l.target, got, want)
			}
		}
		if !slices.Equal(changed, step.changed) {
			t.Errorf("%s: lists %v changed, want %v", step.name, changed, step.changed)
		}
	}
	// After the TRUNCATE, the empty list is cached too, at its new version.
	is := is.New(t)
	is.Equal(len(decodePage(t, cached("/v1/forms", storetest.KeyA)).Forms), 0)
}

// listed returns a page of forms as its items, whether a page follows,
// and its ETag: what two answers of one list must agree on (a cursor is
// sealed afresh each time).
func listed(t *testing.T, res response) string {
	t.Helper()
	p := decodePage(t, res)
	return items(p) + " more=" + strconv.FormatBool(p.NextCursor != "") + " ETag " + res.header.Get("ETag")
}

// walkForms returns every page of a forms list from target on, each as
// listed puts it, following the cursors.
func walkForms(t *testing.T, h http.Handler, target, key string) []string {
	t.Helper()
	var pages []string
	for {
		res := get(h, target, key)
		pages = append(pages, listed(t, res))
		next := decodePage(t, res).NextCursor
		if next == "" {
			return pages
		}
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		v := u.Query()
		v.Set("cursor", next)
		target = u.Path + "?" + v.Encode()
	}
}

// TestFormsListCache: a forms list the cache holds costs the key's
// statement alone, whatever the limit up to the one read, on a handler
// whose store is its own key resolver, and one statement more on another
// (the list's version, read by ListForms itself); a scoped key's pages,
// which take several reads of the store each, are served from the cache
// too and show only its forms; an account whose version row is gone
// (deleted by hand) is read from the database on every request and
// nothing is cached for it, until a write gives it a row again.
func TestFormsListCache(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pooledSchema(t)
	secret := []byte(rand.Text())
	a := newNode(t, dsn, schema, secret)
	load(t, a.store, storetest.DefaultSeed())
	scoped := mustKey(t)
	is.NoErr(a.store.AddKeyWith(ctx, scoped, storetest.AccountA, formsapi.KeyOptions{Forms: []string{storetest.FormBusy, storetest.FormSmall}}))
	s, count := countedStore(t, dsn, schema)
	h := formsapi.NewHandler(s, s, formsapi.WithCursorSecret(secret))
	truthStore := mustOpenIn(t, dsn, schema, pgstore.WithCacheSize(0))
	truth := formsapi.NewHandler(truthStore, truthStore, formsapi.WithCursorSecret(secret))

	// statements returns what node s answers target with, checked against
	// the truth, and the statements it took.
	statements := func(h http.Handler, target, key string) (page, []string) {
		t.Helper()
		count.take()
		res := get(h, target, key)
		st, _ := count.take()
		if got, want := listed(t, res), listed(t, get(truth, target, key)); got != want {
			t.Fatalf("GET %s: %s, the database says %s", target, got, want)
		}
		return decodePage(t, res), st
	}
	const versioned = "v.version, f.seq" // a page of forms with the list's version
	_, st := statements(h, "/v1/forms", storetest.KeyA)
	is.Equal(len(st), 2) // the key, then the list with its version
	is.True(strings.Contains(st[1], versioned))
	for _, target := range []string{"/v1/forms", "/v1/forms?limit=1", "/v1/forms?limit=3"} {
		_, st = statements(h, target, storetest.KeyA)
		is.Equal(len(st), 1) // the key's statement alone: no list statement
	}

	// Another handler over the same store, without the combined lookup:
	// ListForms reads the version itself, and serves the held list.
	other := formsapi.NewHandler(s, formsapi.KeyResolverFunc(s.ResolveKey), formsapi.WithCursorSecret(secret))
	_, st = statements(other, "/v1/forms", storetest.KeyA)
	is.Equal(len(st), 2) // the key, the version
	is.True(!strings.Contains(st[1], versioned))

	// A scoped key, one form a page: every page takes several reads of
	// the store (the whole list, a read cut to the page, a look past it),
	// all from the cache the second time.
	walk := func() (ids []string, statementsRun int) {
		target := "/v1/forms?limit=1"
		for {
			p, st := statements(h, target, scoped)
			statementsRun += len(st)
			for _, f := range p.Forms {
				var form struct {
					ID string `json:"formId"`
				}
				is.NoErr(json.Unmarshal(f, &form))
				ids = append(ids, form.ID)
			}
			if p.NextCursor == "" {
				return ids, statementsRun
			}
			target = "/v1/forms?limit=1&cursor=" + url.QueryEscape(p.NextCursor)
		}
	}
	ids, _ := walk()
	is.Equal(ids, []string{storetest.FormSmall, storetest.FormBusy}) // its forms only, newest first
	ids, n := walk()
	is.Equal(ids, []string{storetest.FormSmall, storetest.FormBusy})
	is.Equal(n, 2) // one statement per page: the key's

	// No version row: read from the database every time, nothing kept.
	_, err := pgstore.Pool(a.store).Exec(ctx, "DELETE FROM "+quote(schema)+".formsapi_form_lists WHERE account_id = $1", storetest.AccountA)
	is.NoErr(err)
	held, _ := pgstore.CachedPages(s)
	for range 2 {
		_, st = statements(h, "/v1/forms?limit=1", storetest.KeyA)
		is.Equal(len(st), 2) // the key, and the list read again
		is.True(strings.Contains(st[1], versioned))
	}
	now, _ := pgstore.CachedPages(s)
	is.Equal(now, held) // nothing cached under no version
	_, err = pgstore.Pool(a.store).Exec(ctx, "UPDATE "+quote(schema)+".formsapi_forms SET title = 'back' WHERE id = $1", storetest.FormBusy)
	is.NoErr(err) // a change gives the account a row again
	statements(h, "/v1/forms?limit=1", storetest.KeyA)
	_, st = statements(h, "/v1/forms?limit=1", storetest.KeyA)
	is.Equal(len(st), 1) // cached again, at the new version
}

// TestFormsListPagesOfOneRequestNeverGoBack makes, deterministically,
// what a commit between a request's key lookup and its reads of the
// forms list makes: the handler hands the store a version that is no
// longer current. A page the cache holds at it is served (the list as it
// was when the key was looked up); a page it does not hold is read at the
// current version, and the request's version moves there, so that its
// later pages are served at the new version too, never at the old one.
func TestFormsListPagesOfOneRequestNeverGoBack(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dsn, schema := pooledSchema(t)
	s, count := countedStore(t, dsn, schema)
	t0 := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := range 4 {
		is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "f" + itoa(i), CreatedAt: t0.Add(time.Duration(i) * time.Hour)}))
	}
	version := func() int64 {
		var v int64
		is.NoErr(pgstore.Pool(s).QueryRow(ctx, "SELECT version FROM "+quote(schema)+".formsapi_form_lists WHERE account_id = 'acct'").Scan(&v))
		return v
	}
	ids := func(p formsapi.Page[formsapi.Form]) []string {
		out := []string{}
		for _, f := range p.Items {
			out = append(out, f.ID)
		}
		return out
	}
	old := version()
	at := &wire.Forms{Known: true, Version: old}
	p, err := s.ListFormsAt(ctx, "acct", formsapi.Query{Limit: 2}, at)
	is.NoErr(err)
	is.Equal(ids(p), []string{"f3", "f2"}) // read, and cached at the old version
	is.Equal(at.Cache, observe.CacheMiss)
	is.Equal(at.Version, old)

	is.NoErr(s.AddForm(ctx, "acct", formsapi.Form{ID: "f9", CreatedAt: t0.Add(9 * time.Hour)}))
	is.True(version() != old)
	at = &wire.Forms{Known: true, Version: old} // looked up before the AddForm
	count.take()
	p, err = s.ListFormsAt(ctx, "acct", formsapi.Query{Limit: 1}, at)
	is.NoErr(err)
	is.Equal(ids(p), []string{"f3"}) // the list at the request's version, from the cache
	is.Equal(at.Cache, observe.CacheHit)
	p, err = s.ListFormsAt(ctx, "acct", formsapi.Query{Limit: 3}, at)
	is.NoErr(err)
	is.Equal(ids(p), []string{"f9", "f3", "f2"}) // more than held: read at the current version
	is.Equal(at.Cache, observe.CacheMiss)
	st, _ := count.take()
	is.Equal(len(st), 1)            // the one read
	is.Equal(at.Version, version()) // the request moved to it
	count.take()
	p, err = s.ListFormsAt(ctx, "acct", formsapi.Query{Limit: 1}, at)
	is.NoErr(err)
	is.Equal(ids(p), []string{"f9"}) // from the cache, at the new version: not the old page
	is.Equal(at.Cache, observe.CacheHit)
	st, _ = count.take()
	is.Equal(len(st), 0)

	// A version that cannot be told reads the database and caches nothing.
	pages, _ := pgstore.CachedPages(s)
	at = &wire.Forms{}
	p, err = s.ListFormsAt(ctx, "acct", formsapi.Query{Limit: 5, Order: formsapi.Oldest}, at)
	is.NoErr(err)
	is.Equal(ids(p), []string{"f0", "f1", "f2", "f3", "f9"})
	is.True(at.Known) // the page's own statement read the version
	now, _ := pgstore.CachedPages(s)
	is.Equal(now, pages+1) // and the page is kept under it
}
