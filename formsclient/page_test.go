package formsclient_test

// The page calls: against the real handler over every backend (walks,
// resumes, ETags and 304s, totals, the RateLimit fields), and against
// fakes for the exact requests and for what the handler never sends.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/storetest"
)

// limited is a rate limit of quota requests a year, per account: one
// unit comes back every year/quota, so that in a test's time none does.
func limited(quota int) formsapi.Option {
	return formsapi.WithRateLimit(ratelimit.Options{Limiter: ratelimit.NewMemory(), Policy: ratelimit.Policy{Name: "default", Quota: quota, Window: year}})
}

const year = 365 * 24 * time.Hour

// TestPageCalls walks the forms list, a form's submissions and its feed
// page by page with the page calls, on every backend, and finds what the
// iterators and Sync find, with each answer's metadata: the next cursor
// or sync token, a weak ETag that a repeat answers with a 304, the
// request ID, the RateLimit fields counting down, the total.
func TestPageCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store, keys := b.open(t)
			srv := serve(t, formsapi.NewHandler(store, keys, limited(1000)), "/api")
			c := newClient(t, srv.base, storetest.KeyA)
			remaining := -1
			checkResponse := func(what string, resp *formsclient.Response, pageSize int) {
				t.Helper()
				if resp == nil {
					t.Fatalf("%s: no Response", what)
				}
				rl := resp.RateLimit
				if resp.StatusCode != 200 || resp.NotModified || !strings.HasPrefix(resp.ETag, `W/"`) || resp.RequestID == "" ||
					resp.RequestID != resp.Header.Get("X-Request-Id") || resp.PageSize != pageSize || resp.RetryAfter != 0 {
					t.Errorf("%s: %+v", what, resp)
				}
				if rl == nil || rl.Policy != "default" || rl.Quota != 1000 || rl.Window != year || rl.Reset <= 0 || rl.Reset > year {
					t.Fatalf("%s: RateLimit %+v", what, rl)
				}
				// One unit a request, and nothing else uses the budget.
				if remaining >= 0 && rl.Remaining != remaining-1 {
					t.Errorf("%s: Remaining %d after %d", what, rl.Remaining, remaining)
				}
				remaining = rl.Remaining
			}

			// The forms list, a form a page, resumed from each cursor.
			var forms []formsapi.Form
			cursor := ""
			for page := 0; ; page++ {
				if page == 100 {
					t.Fatal("100 pages of forms: the cursor is not followed")
				}
				items, resp, err := c.FormsPage(ctx, formsclient.Cursor(cursor), formsclient.PageSize(1))
				if err != nil {
					t.Fatal(err)
				}
				checkResponse("forms page", resp, 1)
				if resp.SyncToken != "" || resp.HasMore || resp.Total != nil || len(items) != 1 {
					t.Errorf("forms page %d: %d items, %+v", page, len(items), resp)
				}
				forms = append(forms, items...)
				if cursor = resp.NextCursor; cursor == "" {
					break
				}
			}
			remaining = -1 // the iterator's requests count too
			if want := mustCollect(t, c.Forms(ctx)); !slices.EqualFunc(forms, want, func(a, b formsapi.Form) bool { return a.ID == b.ID }) || len(forms) < 2 {
				t.Errorf("FormsPage found %d forms, Forms %d", len(forms), len(want))
			}

			// A form's submissions, oldest first, three a page, each page
			// from a client of its own that kept only the cursor.
			all := mustCollect(t, c.Submissions(ctx, storetest.FormBusy, formsclient.Oldest()))
			var subs []formsapi.Submission
			cursor, remaining = "", -1
			first := ""
			for page := 0; ; page++ {
				if page == 100 {
					t.Fatal("100 pages of submissions: the cursor is not followed")
				}
				opts := []formsclient.ListOption{formsclient.Cursor(cursor), formsclient.PageSize(3)}
				if cursor == "" {
					opts = append(opts, formsclient.Oldest()) // the cursor carries the order
				}
				items, resp, err := newClient(t, srv.base, storetest.KeyA).SubmissionsPage(ctx, storetest.FormBusy, opts...)
				if err != nil {
					t.Fatal(err)
				}
				checkResponse("submissions page", resp, 3)
				if first == "" {
					first = resp.ETag
				}
				subs = append(subs, items...)
				if cursor = resp.NextCursor; cursor == "" {
					break
				}
			}
			if len(subs) != len(all) || len(all) < 6 {
				t.Fatalf("SubmissionsPage found %d submissions, Submissions %d", len(subs), len(all))
			}
			for i := range all {
				if fingerprint(t, subs[i]) != fingerprint(t, all[i]) {
					t.Fatalf("submission %d differs", i)
				}
			}

			// The first page again, with its tag: a 304, no items.
			items, resp, err := c.SubmissionsPage(ctx, storetest.FormBusy, formsclient.Oldest(), formsclient.PageSize(3), formsclient.IfNoneMatch(first))
			var e *formsclient.Error
			if items != nil || !errors.Is(err, formsclient.ErrNotModified) || !formsclient.IsNotModified(err) || !errors.As(err, &e) || e.StatusCode != 304 {
				t.Fatalf("IfNoneMatch of an unchanged page: %d items, %v", len(items), err)
			}
			if resp == nil || !resp.NotModified || resp.StatusCode != 304 || resp.ETag != first || resp.NextCursor != "" || resp.RequestID == "" ||
				e.RequestID != resp.RequestID || formsclient.RequestID(err) != resp.RequestID || resp.RateLimit == nil {
				t.Errorf("the 304's Response %+v, error %v", resp, err)
			}
			// Another page's tag, or another order, gets the page.
			if items, resp, err := c.SubmissionsPage(ctx, storetest.FormBusy, formsclient.PageSize(3), formsclient.IfNoneMatch(first)); err != nil || len(items) != 3 || resp.ETag == first {
				t.Errorf("IfNoneMatch with the tag of another page: %d items, %v", len(items), err)
			}

			// Totals, with the filters and the projection.
			_, resp, err = c.SubmissionsPage(ctx, storetest.FormBusy, formsclient.PageSize(1), formsclient.ExactTotal())
			if err != nil || resp.Total == nil || *resp.Total != (formsapi.Total{Value: int64(len(all)), Kind: find.Exact}) {
				t.Errorf("ExactTotal: %+v, %v", resp, err)
			}
			one, resp, err := c.SubmissionsPage(ctx, storetest.FormBusy, formsclient.Filter("email", "p7@example.com"), formsclient.Fields("n"), formsclient.EstimatedTotal())
			if err != nil || len(one) != 1 || string(one[0].Data) != `{"n":7}` || resp.Total == nil || *resp.Total != (formsapi.Total{Value: 1, Kind: find.Estimate}) {
				t.Errorf("Filter, Fields, EstimatedTotal: %d items, %+v, %v", len(one), resp, err)
			}
			if n, err := c.Count(ctx, storetest.FormBusy, true); err != nil || n.Value != int64(len(all)) {
				t.Errorf("Count: %+v, %v", n, err)
			}

			// The feed, two changes a page, to its end; then a poll from
			// the last token with the last page's tag costs one 304.
			var changes []formsclient.Change
			token := formsclient.SyncStart
			var last *formsclient.Response
			for page := 0; ; page++ {
				if page == 100 {
					t.Fatal("100 pages of the feed: the token is not followed")
				}
				page, resp, err := c.SyncPage(ctx, storetest.FormBusy, token, formsclient.PageSize(2))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(resp.ETag, `W/"`) || resp.SyncToken == "" || resp.NextCursor != "" || len(page) > 2 {
					t.Fatalf("feed page: %d changes, %+v", len(page), resp)
				}
				changes = append(changes, page...)
				token, last = resp.SyncToken, resp
				if !resp.HasMore {
					break
				}
			}
			var synced []formsclient.Change
			if _, err := c.Sync(ctx, storetest.FormBusy, formsclient.SyncStart, func(ch formsclient.Change) error { synced = append(synced, ch); return nil }); err != nil {
				t.Fatal(err)
			}
			if len(changes) != len(synced) || len(changes) != len(all) {
				t.Fatalf("SyncPage handed over %d changes, Sync %d, the list has %d", len(changes), len(synced), len(all))
			}
			for i := range changes {
				if changes[i].Ref != synced[i].Ref || changes[i].Ref == "" || fingerprint(t, changes[i].Submission) != fingerprint(t, synced[i].Submission) {
					t.Fatalf("change %d differs", i)
				}
			}
			// Read once from the last token: an empty page whose tag a
			// poll sends back, getting 304s until something is committed.
			empty, resp, err := c.SyncPage(ctx, storetest.FormBusy, token)
			if err != nil || len(empty) != 0 || resp.HasMore || resp.ETag == "" || resp.ETag == last.ETag {
				t.Fatalf("the feed's end: %d changes, %+v, %v", len(empty), resp, err)
			}
			if _, again, err := c.SyncPage(ctx, storetest.FormBusy, token, formsclient.IfNoneMatch(resp.ETag)); !formsclient.IsNotModified(err) || !again.NotModified {
				t.Fatalf("polling the feed's end with its tag: %v", err)
			}
			if err := store.(formsapi.Writer).AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormBusy, Data: []byte(`{"new":true}`)}, formsapi.Metadata{}); err != nil {
				t.Fatal(err)
			}
			added, resp, err := c.SyncPage(ctx, storetest.FormBusy, token, formsclient.IfNoneMatch(resp.ETag))
			if err != nil || len(added) != 1 || string(added[0].Submission.Data) != `{"new":true}` || resp.NotModified {
				t.Errorf("polling after a submission: %d changes, %v", len(added), err)
			}
		})
	}
}

// TestPageCallRequests: what a page call sends for each option, and how
// it reads what the handler sends and other servers may (RateLimit with
// several policies, a token rather than a string, malformed fields).
func TestPageCallRequests(t *testing.T) {
	t.Parallel()
	type seen struct{ query, inm string }
	var mu sync.Mutex
	var got []seen
	header := map[string][]string{}
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.URL.RawQuery, r.Header.Get("If-None-Match")})
		for k, v := range header {
			w.Header()[k] = v
		}
		mu.Unlock()
		w.Header().Set("ETag", `W/"t1"`)
		w.Header().Set("X-Request-Id", fmt.Sprint("r", n))
		if strings.Contains(r.URL.Path, "/submissions") {
			writeJSON(w, 200, `{"success":true,"message":"ok","submissions":[],"nextCursor":"n2","total":{"value":12,"kind":"at_least"}}`)
			return
		}
		writeJSON(w, 200, `{"success":true,"message":"ok","forms":[]}`)
	})
	c := newClient(t, f.URL, key)
	ctx := context.Background()
	since := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	items, resp, err := c.SubmissionsPage(ctx, "contact", formsclient.Cursor("c/1"), formsclient.Oldest(), formsclient.Since(since),
		formsclient.Filter("n", 7), formsclient.Search("zoe"), formsclient.Fields("a", "b"), formsclient.ExactTotal(), formsclient.PageSize(5), formsclient.IfNoneMatch(`W/"t0"`))
	if err != nil || items == nil || len(items) != 0 || resp.NextCursor != "n2" || resp.ETag != `W/"t1"` || resp.RequestID != "r1" ||
		resp.Total == nil || *resp.Total != (formsapi.Total{Value: 12, Kind: "at_least"}) || resp.RateLimit != nil {
		t.Errorf("an empty page with a cursor: %v items, %+v, %v", items, resp, err)
	}
	// A cursor without an order sends none: the cursor has one.
	c.SubmissionsPage(ctx, "contact", formsclient.Cursor("c2"), formsclient.EstimatedTotal())
	c.FormsPage(ctx)
	c.FormsPage(ctx, formsclient.Cursor("f2"), formsclient.Newest())
	c.SyncPage(ctx, "contact", "tok", formsclient.IfNoneMatch(`W/"s"`), formsclient.PageSize(9))
	want := []seen{
		{"cursor=c%2F1&fields=a%2Cb&filter%5Bn%5D=7&limit=5&order=asc&q=zoe&since=2024-01-01T00%3A00%3A00Z&total=exact", `W/"t0"`},
		{"cursor=c2&total=estimate", ""},
		{"order=desc", ""},
		{"cursor=f2&order=desc", ""},
		{"limit=9&sync=tok", `W/"s"`},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests\n got %v\nwant %v", got, want)
	}

	for _, tc := range []struct {
		rateLimit, policy []string
		want              *formsclient.RateLimit
	}{
		{[]string{`"default";r=599;t=1`}, []string{`"default";q=600;w=60`}, &formsclient.RateLimit{Policy: "default", Remaining: 599, Reset: time.Second, Quota: 600, Window: time.Minute}},
		// The fewest left of several, from two field lines; a token name.
		{[]string{`"a";r=5;t=10, b;r=2;t=3`, `"c";t=9;r=2`}, []string{`"c";q=10;w=30, b;q=4;w=5`}, &formsclient.RateLimit{Policy: "c", Remaining: 2, Reset: 9 * time.Second, Quota: 10, Window: 30 * time.Second}},
		// Without a policy item, Quota and Window are unknown; a comma in a name.
		{[]string{`"x,y";r=0;t=20;pk=:YWJj:`}, nil, &formsclient.RateLimit{Policy: "x,y", Remaining: 0, Reset: 20 * time.Second}},
		// Malformed: passed over.
		{[]string{`"a";r=x;t=1`, `"b";r=1`, `;r=1;t=1`, `"unterminated;r=1;t=1`}, nil, nil},
	} {
		mu.Lock()
		header = map[string][]string{"Ratelimit": tc.rateLimit, "Ratelimit-Policy": tc.policy}
		mu.Unlock()
		_, resp, err := c.FormsPage(ctx)
		if err != nil || fmt.Sprint(resp.RateLimit) != fmt.Sprint(tc.want) {
			t.Errorf("RateLimit %q, RateLimit-Policy %q: %+v, %v; want %+v", tc.rateLimit, tc.policy, resp.RateLimit, err, tc.want)
		}
	}
}

// TestPageCallsRefuseBeforeAnyRequest: the options a call cannot honour
// are its only error, and nothing is sent.
func TestPageCallsRefuseBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		t.Errorf("request sent: %s", r.URL)
	})
	c := newClient(t, f.URL, key)
	ctx := context.Background()
	var zero formsclient.Client
	for _, tc := range []struct {
		name string
		call func() error
		msg  string
	}{
		{"Cursor on Submissions", func() error {
			_, err := collect(t, c.Submissions(ctx, "f", formsclient.Cursor("x")))
			return err
		}, "Cursor applies to one page: read pages with SubmissionsPage"},
		{"IfNoneMatch on Forms", func() error {
			_, err := collect(t, c.Forms(ctx, formsclient.IfNoneMatch(`W/"x"`)))
			return err
		}, "IfNoneMatch applies to one page: read pages with FormsPage"},
		{"ExactTotal on Submissions", func() error {
			_, err := collect(t, c.Submissions(ctx, "f", formsclient.ExactTotal()))
			return err
		}, "ExactTotal applies to one page"},
		{"Cursor on Count", func() error { _, err := c.Count(ctx, "f", true, formsclient.Cursor("x")); return err }, "Cursor applies to one page"},
		{"IfNoneMatch on Sync", func() error {
			_, err := c.Sync(ctx, "f", "t", func(formsclient.Change) error { return nil }, formsclient.IfNoneMatch(`W/"x"`))
			return err
		}, "IfNoneMatch cannot be used with Sync"},
		{"Filter on FormsPage", func() error { _, _, err := c.FormsPage(ctx, formsclient.Filter("a", 1)); return err }, "apply to submissions only"},
		{"ExactTotal on FormsPage", func() error { _, _, err := c.FormsPage(ctx, formsclient.ExactTotal()); return err }, "apply to submissions only"},
		{"an empty tag", func() error { _, _, err := c.SubmissionsPage(ctx, "f", formsclient.IfNoneMatch("")); return err }, "IfNoneMatch: the tag is empty"},
		{"a form ID no server has", func() error { _, _, err := c.SubmissionsPage(ctx, ".."); return err }, "form not found"},
		{"PageSize(0)", func() error { _, _, err := c.FormsPage(ctx, formsclient.PageSize(0)); return err }, "PageSize(0)"},
		{"Since on SyncPage", func() error { _, _, err := c.SyncPage(ctx, "f", "t", formsclient.Since(time.Now())); return err }, "Since cannot be used with SyncPage"},
		{"Cursor on SyncPage", func() error { _, _, err := c.SyncPage(ctx, "f", "t", formsclient.Cursor("c")); return err }, "Cursor cannot be used with SyncPage"},
		{"an empty token", func() error { _, _, err := c.SyncPage(ctx, "f", ""); return err }, "an empty token"},
		{"zero Client", func() error { _, _, err := zero.SubmissionsPage(ctx, "f"); return err }, "not made by formsclient.New"},
	} {
		err := tc.call()
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.msg)
		}
	}
	if _, resp, err := c.FormsPage(ctx, nil); err == nil || resp != nil {
		t.Errorf("a nil option: %+v, %v; want no Response and an error", resp, err)
	}
}

// TestPageCallHalvesAnOversizedPage: a page over WithMaxResponseSize is
// asked for again with half as many items, and the Response says the
// size that answered, for the next page.
func TestPageCallHalvesAnOversizedPage(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var queries []string
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		var limit int
		fmt.Sscan(r.URL.Query().Get("limit"), &limit)
		minutes := make([]int, min(limit, 20))
		for i := range minutes {
			minutes[i] = 50 - i
		}
		writeJSON(w, 200, page("next", minutes...))
	})
	c := newClient(t, f.URL, key, formsclient.WithMaxResponseSize(600))
	items, resp, err := c.SubmissionsPage(context.Background(), "contact", formsclient.PageSize(20))
	if err != nil || len(items) != 5 || resp.PageSize != 5 || resp.NextCursor != "next" {
		t.Errorf("%d items, %+v, %v", len(items), resp, err)
	}
	if want := []string{"limit=20&order=desc", "limit=10&order=desc", "limit=5&order=desc"}; !slices.Equal(queries, want) {
		t.Errorf("queries %v, want %v", queries, want)
	}
}
