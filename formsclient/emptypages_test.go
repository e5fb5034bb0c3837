package formsclient_test

// An empty page that carries a cursor is a page like any other, for every
// call and iterator; and no call follows a cursor or token it followed
// before.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/internal/find"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/storetest"
)

// TestEmptyPagesLeadOn searches 2,500 submissions, the 2,401st of which
// holds the term, through the real handler over sqlitestore without its
// search index (pgstore's own tests walk its pages the same way, and
// seeding it one write at a time takes 20 s): each page examines 1,000 submissions
// (find.MaxExamined), so the first two are empty and carry a cursor, and
// the third holds the match. SubmissionsPage returns the empty pages as
// pages, with no error; the iterator follows them to the match in three
// requests; a total counts the match on an empty page.
func TestEmptyPagesLeadOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, b := range []struct {
		name string
		open func(t *testing.T) formsapi.Store
	}{
		{"sqlitestore", func(t *testing.T) formsapi.Store {
			s, err := sqlitestore.Open(filepath.Join(t.TempDir(), "f.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			store := b.open(t)
			w := store.(formsapi.Writer)
			if err := storetest.Load(ctx, w, storetest.DefaultSeed()); err != nil {
				t.Fatal(err)
			}
			start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
			// One batch (one transaction), as the seeds are written: the
			// clause reads the pages, not how they were written.
			err := store.(formsapi.BatchWriter).AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
				for i := range 2500 {
					data := `{"a":"foo b","n":` + strconv.Itoa(i) + `}`
					if i == 2400 {
						data = `{"a":"Foo Bär","c":"zyxw","n":2400}`
					}
					sub := formsapi.Submission{FormID: storetest.FormEmpty, Data: []byte(data), CreatedAt: start.Add(time.Duration(i) * time.Second)}
					if !yield(sub, formsapi.Metadata{}) {
						return
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			srv := serve(t, formsapi.NewHandler(store, store.(formsapi.KeyResolver)), "")
			c := newClient(t, srv.base, storetest.KeyA)
			search := formsclient.Search("zyxw")

			// Page by page: two empty pages, then the match.
			cursor := ""
			var pages []int
			for len(pages) < 10 {
				opts := []formsclient.ListOption{search, formsclient.Oldest(), formsclient.PageSize(10), formsclient.Cursor(cursor)}
				if cursor != "" {
					opts = append(opts, formsclient.ExactTotal())
				}
				items, resp, err := c.SubmissionsPage(ctx, storetest.FormEmpty, opts...)
				if err != nil {
					t.Fatalf("page %d: %v", len(pages)+1, err)
				}
				if items == nil || resp.StatusCode != 200 || resp.ETag == "" {
					t.Errorf("page %d: items %v, %+v", len(pages)+1, items, resp)
				}
				if cursor != "" && (resp.Total == nil || *resp.Total != (formsapi.Total{Value: 1, Kind: find.Exact})) {
					t.Errorf("page %d: total %v, want 1 exact", len(pages)+1, resp.Total)
				}
				pages = append(pages, len(items))
				if cursor = resp.NextCursor; cursor == "" {
					break
				}
			}
			if fmt.Sprint(pages) != "[0 0 1]" {
				t.Errorf("pages of %v submissions, want [0 0 1]", pages)
			}

			// The iterator: the match, in three requests.
			before := srv.requests.Load()
			found := mustCollect(t, c.Submissions(ctx, storetest.FormEmpty, search, formsclient.PageSize(10)))
			if len(found) != 1 || !strings.Contains(string(found[0].Data), "zyxw") || srv.requests.Load()-before != 3 {
				t.Errorf("Submissions(Search): %d found in %d requests, want 1 in 3", len(found), srv.requests.Load()-before)
			}
			if n, err := c.Count(ctx, storetest.FormEmpty, true, search); err != nil || n != (formsapi.Total{Value: 1, Kind: find.Exact}) {
				t.Errorf("Count: %+v, %v", n, err)
			}
		})
	}
}

// TestEmptyPagesOfEveryCall: the forms list, a form's list, filtered or
// not, and the feed each follow empty pages that lead on, page calls and
// iterators alike, from a server that gives them.
func TestEmptyPagesOfEveryCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const emptyPages = 4 // fewer than 5 in a row: a server that does not loop
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		at := 0
		if c := q.Get("cursor"); c != "" {
			at, _ = strconv.Atoi(c)
		}
		if s := q.Get("sync"); s != "" && s != formsclient.SyncStart {
			at, _ = strconv.Atoi(s)
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/v1/forms") && at < emptyPages:
			writeJSON(w, 200, fmt.Sprintf(`{"success":true,"message":"ok","forms":[],"nextCursor":"%d"}`, at+1))
		case strings.HasSuffix(r.URL.Path, "/v1/forms"):
			writeJSON(w, 200, `{"success":true,"message":"ok","forms":[{"formId":"f","title":"F","createdAt":"2024-01-01T00:00:00Z"}]}`)
		case q.Has("sync") && at < emptyPages:
			writeJSON(w, 200, fmt.Sprintf(`{"success":true,"message":"ok","submissions":[],"refs":[],"deleted":[],"syncToken":"%d","hasMore":true}`, at+1))
		case q.Has("sync"):
			writeJSON(w, 200, `{"success":true,"message":"ok","submissions":[{"formId":"f","data":{},"attachments":[],"createdAt":"2024-01-01T00:00:00Z"}],"refs":["r1"],"deleted":["r0"],"syncToken":"end","hasMore":false}`)
		case at < emptyPages:
			writeJSON(w, 200, page(strconv.Itoa(at+1)))
		default:
			writeJSON(w, 200, page("", 1))
		}
	})
	c := newClient(t, f.URL, key)

	forms, err := collect(t, c.Forms(ctx))
	if err != nil || len(forms) != 1 {
		t.Errorf("Forms: %d forms, %v", len(forms), err)
	}
	for _, opts := range [][]formsclient.ListOption{nil, {formsclient.Filter("a", 1)}, {formsclient.Fields("a")}} {
		subs, err := collect(t, c.Submissions(ctx, "f", opts...))
		if err != nil || len(subs) != 1 {
			t.Errorf("Submissions with %d options: %d submissions, %v", len(opts), len(subs), err)
		}
	}
	n := 0
	token, err := c.Sync(ctx, "f", formsclient.SyncStart, func(formsclient.Change) error { n++; return nil })
	if err != nil || token != "end" || n != 2 {
		t.Errorf("Sync: token %q, %d changes, %v", token, n, err)
	}
	// One page at a time, each empty page is a page, with no error.
	if items, resp, err := c.FormsPage(ctx); err != nil || items == nil || len(items) != 0 || resp.NextCursor != "1" {
		t.Errorf("FormsPage: %v, %+v, %v", items, resp, err)
	}
	if items, resp, err := c.SubmissionsPage(ctx, "f", formsclient.Cursor("2")); err != nil || items == nil || len(items) != 0 || resp.NextCursor != "3" {
		t.Errorf("SubmissionsPage: %v, %+v, %v", items, resp, err)
	}
	if changes, resp, err := c.SyncPage(ctx, "f", "3"); err != nil || changes == nil || len(changes) != 0 || resp.SyncToken != "4" || !resp.HasMore {
		t.Errorf("SyncPage: %v, %+v, %v", changes, resp, err)
	}
}

// TestNeverFollowsACursorTwice: a server that leads back to a cursor or
// token already followed, or gives empty pages that lead on without end,
// ends the call with ErrPaging after a bounded number of requests, a
// filtered list included; a filtered list follows many more empty pages
// than others, since bounded work makes them normal there.
func TestNeverFollowsACursorTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		serve    func(n int64, r *http.Request) string
		call     func(c *formsclient.Client) error
		requests int64
		msg      string // "" for no error
	}{
		{"a filtered list back to an earlier cursor", func(n int64, r *http.Request) string { return page(fmt.Sprint("c", n%3)) },
			func(c *formsclient.Client) error {
				_, err := collect(t, c.Submissions(ctx, "f", formsclient.Search("zoe")))
				return err
			}, 4, "returned a nextCursor it had returned before"},
		{"a filtered list of 50 empty pages, then the match", func(n int64, r *http.Request) string {
			if n > 50 {
				return page("", 1)
			}
			return page(fmt.Sprint("c", n))
		}, func(c *formsclient.Client) error {
			_, err := collect(t, c.Submissions(ctx, "f", formsclient.Filter("a", 1)))
			return err
		}, 51, ""},
		{"the feed back to an earlier token", func(n int64, r *http.Request) string {
			return fmt.Sprintf(`{"success":true,"message":"ok","submissions":[{"formId":"f","data":{},"attachments":[],"createdAt":"2024-01-01T00:00:00Z"}],"syncToken":"t%d","hasMore":true}`, n%3)
		}, func(c *formsclient.Client) error {
			_, err := c.Sync(ctx, "f", formsclient.SyncStart, func(formsclient.Change) error { return nil })
			return err
		}, 4, "hasMore from a syncToken it had returned before"},
		{"the feed's empty pages without end, fresh tokens", func(n int64, r *http.Request) string {
			return fmt.Sprintf(`{"success":true,"message":"ok","submissions":[],"syncToken":"t%d","hasMore":true}`, n)
		}, func(c *formsclient.Client) error {
			_, err := c.Sync(ctx, "f", formsclient.SyncStart, func(formsclient.Change) error { return nil })
			return err
		}, 5, "hasMore with 5 empty pages in a row"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				if n > 200 {
					w.WriteHeader(500) // the client should have stopped long before
					return
				}
				writeJSON(w, 200, tc.serve(n, r))
			})
			err := tc.call(newClient(t, f.URL, key))
			switch {
			case tc.msg == "" && err != nil:
				t.Errorf("%v", err)
			case tc.msg != "" && (!errors.Is(err, formsclient.ErrPaging) || !strings.Contains(err.Error(), tc.msg)):
				t.Errorf("%v, want ErrPaging with %q", err, tc.msg)
			}
			if got := f.requests.Load(); got != tc.requests {
				t.Errorf("%d requests, want %d", got, tc.requests)
			}
		})
	}
}
