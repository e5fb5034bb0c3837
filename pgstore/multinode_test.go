package pgstore_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/storetest"
)

type response struct {
	status int
	header http.Header
	body   []byte
}

func get(h http.Handler, target, key string) response {
	r := httptest.NewRequest("GET", target, nil)
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return response{w.Code, w.Result().Header, w.Body.Bytes()}
}

// page is a list response of the API.
type page struct {
	Forms       []json.RawMessage `json:"forms"`
	Submissions []json.RawMessage `json:"submissions"`
	NextCursor  string            `json:"nextCursor"`
}

// items returns a page's items as one string, for comparing pages.
func items(p page) string {
	b, _ := json.Marshal(append(p.Forms, p.Submissions...))
	return string(b)
}

func decodePage(t *testing.T, res response) page {
	t.Helper()
	if res.status != http.StatusOK {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	var p page
	if err := json.Unmarshal(res.body, &p); err != nil {
		t.Fatalf("body: %v\n%s", err, res.body)
	}
	return p
}

// node is one API node: a store with a pool of its own and a handler,
// standing in for one machine behind a load balancer.
type node struct {
	store   *pgstore.Store
	handler http.Handler
}

func newNode(t *testing.T, dsn, schema string, secret []byte, opts ...formsapi.Option) node {
	t.Helper()
	s, err := pgstore.Open(ctx, dsn, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return node{s, formsapi.NewHandler(s, s, append([]formsapi.Option{formsapi.WithCursorSecret(secret)}, opts...)...)}
}

// TestSeveralNodes runs two API nodes, each with its own pool, over one
// schema and one shared cursor secret, and a third store as the
// collection side writing submissions meanwhile.
func TestSeveralNodes(t *testing.T) {
	t.Parallel()
	dsn, schema := pooledSchema(t)
	secret := []byte(rand.Text())
	a := newNode(t, dsn, schema, secret)
	b := newNode(t, dsn, schema, secret)
	writer := newNode(t, dsn, schema, secret).store
	if err := storetest.Load(ctx, writer, storetest.DefaultSeed()); err != nil {
		t.Fatal(err)
	}

	t.Run("CursorFromOneNodeWorksOnTheOther", func(t *testing.T) {
		is := is.New(t)
		for _, list := range []string{"/v1/forms?limit=1", "/v1/forms/" + storetest.FormBusy + "/submissions?limit=4&order=asc"} {
			first := decodePage(t, get(a.handler, list, storetest.KeyA))
			is.True(first.NextCursor != "") // the list has a second page
			next := list + "&cursor=" + url.QueryEscape(first.NextCursor)
			onA, onB := decodePage(t, get(a.handler, next, storetest.KeyA)), decodePage(t, get(b.handler, next, storetest.KeyA))
			is.Equal(items(onB), items(onA))    // node b accepts node a's cursor and serves the same page
			is.True(items(onB) != items(first)) // not the first page again
			is.True(onB.NextCursor != "")       // the list goes on
			third := list + "&cursor=" + url.QueryEscape(onB.NextCursor)
			is.Equal(items(decodePage(t, get(a.handler, third, storetest.KeyA))), items(decodePage(t, get(b.handler, third, storetest.KeyA)))) // and back: a accepts b's cursor
		}
	})

	t.Run("RevocationHoldsOnEveryNode", func(t *testing.T) {
		is := is.New(t)
		key, err := formsapi.NewKey()
		is.NoErr(err)
		is.NoErr(writer.AddKey(ctx, key, storetest.AccountA))
		is.Equal(get(a.handler, "/v1/forms", key).status, http.StatusOK) // a new key works on node a at once
		is.Equal(get(b.handler, "/v1/forms", key).status, http.StatusOK) // and on node b
		is.NoErr(a.store.RevokeKey(ctx, key))
		is.Equal(get(b.handler, "/v1/forms", key).status, http.StatusUnauthorized) // revoked through a, refused by b on the next request
		is.Equal(get(a.handler, "/v1/forms", key).status, http.StatusUnauthorized) // and by a
	})

	t.Run("AlternatingWalkWhileWriting", func(t *testing.T) {
		// The walk is oldest first and the writer adds submissions later
		// than any stored one, so each added submission sorts after every
		// cursor issued before it was committed: one committed before a
		// page request started must be in that page or a later one.
		is := is.New(t)
		const form = "walked"
		is.NoErr(writer.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: form}))
		start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		const initial, added = 120, 150
		for i := range initial {
			sub := formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"n":%d}`, i)), CreatedAt: start.Add(time.Duration(i/3) * time.Second)}
			is.NoErr(writer.AddSubmission(ctx, sub, formsapi.Metadata{}))
		}
		var requests atomic.Int64               // page requests started
		committedBefore := make([]int64, added) // requests started before each write returned
		var commits atomic.Int64                // writes returned
		wrote := make(chan struct{}, 1)         // a write returned since the reader last looked
		writerDone := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(writerDone)
			for i := range added {
				sub := formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"n":%d}`, initial+i)),
					CreatedAt: start.Add(time.Hour + time.Duration(i/2)*time.Second)}
				if err := writer.AddSubmission(ctx, sub, formsapi.Metadata{}); err != nil {
					t.Error(err)
					return
				}
				committedBefore[i] = requests.Load()
				commits.Add(1)
				select {
				case wrote <- struct{}{}:
				default:
				}
			}
		}()
		seen := map[int]int{}
		target := "/v1/forms/" + form + "/submissions?order=asc&limit=3"
		var last int64
		for pageNo := 0; ; pageNo++ {
			h := a.handler
			if pageNo%2 == 1 {
				h = b.handler
			}
			last = requests.Add(1)
			before := commits.Load()
			p := decodePage(t, get(h, target, storetest.KeyA))
			for _, raw := range p.Submissions {
				var s struct{ Data struct{ N int } }
				is.NoErr(json.Unmarshal(raw, &s))
				seen[s.Data.N]++
			}
			if p.NextCursor == "" {
				break
			}
			target = "/v1/forms/" + form + "/submissions?order=asc&limit=3&cursor=" + url.QueryEscape(p.NextCursor)
			// A client reading slowly: the next page waits for a write
			// committed since this one was asked for, so the writer keeps
			// adding ahead of the walk until it is done.
			for commits.Load() == before {
				select {
				case <-wrote: // perhaps an older write's signal: look again
				case <-writerDone:
					before = -1 // nothing more will come
				}
			}
		}
		wg.Wait()
		for n, times := range seen {
			if times != 1 {
				t.Errorf("submission %d returned %d times", n, times)
			}
		}
		for i := range initial {
			if seen[i] != 1 {
				t.Errorf("submission %d, stored before the walk, returned %d times", i, seen[i])
			}
		}
		caught := 0
		for i, before := range committedBefore {
			if before < last && seen[initial+i] != 1 { // committed before the last page was asked for
				t.Errorf("submission %d, committed before request %d, returned %d times (the walk made %d)", initial+i, before+1, seen[initial+i], last)
			}
			if seen[initial+i] == 1 {
				caught++
			}
		}
		t.Logf("%d page requests; %d of %d submissions added during the walk were returned", last, caught, added)
	})
}

// TestFormCreatedAgainAcrossNodes: a cursor and a sync token that node a
// handed out for a form, deleted and created again with the same ID on
// node a, get 410 on node b on its very next request, with node b's read
// cache holding the old form's page; the new form's own work on both.
func TestFormCreatedAgainAcrossNodes(t *testing.T) {
	t.Parallel()
	dsn, schema := pooledSchema(t)
	secret := []byte(rand.Text())
	a := newNode(t, dsn, schema, secret)
	b := newNode(t, dsn, schema, secret)
	load(t, a.store, storetest.DefaultSeed())
	const form = "created-twice"
	make := func(n int) {
		t.Helper()
		if err := a.store.AddForm(ctx, storetest.AccountA, formsapi.Form{ID: form}); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := a.store.AddSubmission(ctx, formsapi.Submission{FormID: form, Data: []byte(fmt.Sprintf(`{"n":%d}`, i))}, formsapi.Metadata{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	make(3)
	list := "/v1/forms/" + form + "/submissions?limit=1"
	cursor := decodePage(t, get(a.handler, list, storetest.KeyA)).NextCursor
	var feed struct{ SyncToken string }
	if err := json.Unmarshal(get(a.handler, "/v1/forms/"+form+"/submissions?sync=start&limit=1", storetest.KeyA).body, &feed); err != nil || feed.SyncToken == "" || cursor == "" {
		t.Fatalf("no cursor %q or sync token %q: %v", cursor, feed.SyncToken, err)
	}
	withCursor := list + "&cursor=" + url.QueryEscape(cursor)
	withToken := "/v1/forms/" + form + "/submissions?sync=" + url.QueryEscape(feed.SyncToken)
	for range 2 { // node b's cache holds the old form's pages
		if res := get(b.handler, withCursor, storetest.KeyA); res.status != http.StatusOK {
			t.Fatalf("node b, old form's cursor: %d %s", res.status, res.body)
		}
	}
	if err := a.store.DeleteForm(ctx, storetest.AccountA, form); err != nil {
		t.Fatal(err)
	}
	make(5)
	for name, n := range map[string]node{"a": a, "b": b} {
		if res := get(n.handler, withCursor, storetest.KeyA); res.status != http.StatusGone || !strings.Contains(string(res.body), "cursor expired") {
			t.Errorf("node %s, the old form's cursor: %d %s, want 410", name, res.status, res.body)
		}
		if res := get(n.handler, withToken, storetest.KeyA); res.status != http.StatusGone || !strings.Contains(string(res.body), "sync token expired") {
			t.Errorf("node %s, the old form's sync token: %d %s, want 410", name, res.status, res.body)
		}
	}
	fresh := decodePage(t, get(b.handler, list, storetest.KeyA)).NextCursor
	if res := get(a.handler, list+"&cursor="+url.QueryEscape(fresh), storetest.KeyA); res.status != http.StatusOK {
		t.Errorf("node a, the new form's cursor from node b: %d %s", res.status, res.body)
	}
}
