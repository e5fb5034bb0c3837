package formsclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/storetest"
)

// TestSyncAgainstTheRealHandler reads a form's feed, adds submissions that
// go back in createdAt, and resumes from the stored token: it gets exactly
// the new ones, then nothing; a callback that fails leaves its page to be
// read again from the token returned.
func TestSyncAgainstTheRealHandler(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			store, keys := b.open(t)
			srv := serve(t, formsapi.NewHandler(store, keys), "/api")
			c := formsclient.New(srv.base, storetest.KeyA)
			var seen []string
			record := func(s formsapi.Submission) error {
				seen = append(seen, string(s.Data))
				return nil
			}
			token, err := c.Sync(ctx, storetest.FormSmall, formsclient.SyncStart, record, formsclient.PageSize(2))
			if err != nil || len(seen) != 3 {
				t.Fatalf("first sync: %d items, %v; want the seed's 3", len(seen), err)
			}
			w := store.(formsapi.Writer)
			for i := range 2 {
				old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(i) * time.Hour)
				if err := w.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(fmt.Sprintf(`{"late":%d}`, i)), CreatedAt: old}, formsapi.Metadata{}); err != nil {
					t.Fatal(err)
				}
			}
			seen = nil
			token, err = c.Sync(ctx, storetest.FormSmall, token, record, formsclient.PageSize(2))
			if err != nil || fmt.Sprint(seen) != `[{"late":0} {"late":1}]` {
				t.Fatalf("resumed sync: %v, %v; want the two late submissions in commit order", seen, err)
			}
			seen = nil
			again, err := c.Sync(ctx, storetest.FormSmall, token, record)
			if err != nil || len(seen) != 0 || again == "" {
				t.Fatalf("sync with nothing new: %v, %v, token %q", seen, err, again)
			}
			boom := errors.New("boom")
			from, err := c.Sync(ctx, storetest.FormSmall, formsclient.SyncStart, func(formsapi.Submission) error { return boom }, formsclient.PageSize(2))
			if !errors.Is(err, boom) || from != formsclient.SyncStart {
				t.Fatalf("a failing callback: token %q, %v; want the starting token and the error", from, err)
			}
			var other *formsclient.Error
			if _, err := c.Sync(ctx, storetest.FormB, formsclient.SyncStart, record); !errors.As(err, &other) || !errors.Is(err, formsapi.ErrFormNotFound) {
				t.Fatalf("another account's form: %v, want a 404 Error", err)
			}
		})
	}
}

// TestSyncStopsOnAServerThatPromisesMore never loops on a server whose
// pages keep saying hasMore without bringing anything.
func TestSyncStopsOnAServerThatPromisesMore(t *testing.T) {
	f := newFake(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, `{"success":true,"message":"submissions retrieved","submissions":[],"syncToken":"same","hasMore":true}`)
	})
	c := formsclient.New(f.URL, "key")
	_, err := c.Sync(context.Background(), "f", formsclient.SyncStart, func(formsapi.Submission) error { return nil })
	if !errors.Is(err, formsclient.ErrPaging) {
		t.Fatalf("got %v, want ErrPaging", err)
	}
	if n := f.requests.Load(); n > 3 {
		t.Errorf("%d requests to a server that never ends", n)
	}
}
