package formsclient_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/formsclient"
	"github.com/formsapi/formsapi/storetest"
)

// TestSyncWaitAgainstTheRealHandler: Sync with Wait, from the end of the
// feed, returns the submission written while it waits, with a token past
// it; SyncPage sends the wait; the other calls, and a wait past the
// server's bound, are refused before any request.
func TestSyncWaitAgainstTheRealHandler(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			store, keys := b.open(t)
			arrived := make(chan string, 4)
			h := formsapi.NewHandler(store, keys)
			srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Has("wait") {
					arrived <- r.URL.Query().Get("wait")
				}
				h.ServeHTTP(w, r)
			}), "/api")
			c := newClient(t, srv.base, storetest.KeyA)
			token, err := c.Sync(ctx, storetest.FormSmall, formsclient.SyncStart, func(formsclient.Change) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				token string
				seen  []string
				err   error
			}
			res := make(chan result, 1)
			go func() {
				var seen []string
				next, err := c.Sync(ctx, storetest.FormSmall, token, func(ch formsclient.Change) error {
					seen = append(seen, string(ch.Submission.Data))
					return nil
				}, formsclient.Wait(25*time.Second))
				res <- result{next, seen, err}
			}()
			if w := <-arrived; w != "25" {
				t.Errorf("the request's wait: %q, want 25", w)
			}
			// Written once the waiting request has reached the server:
			// its read, or its wake-up, hands the submission over.
			if err := store.(formsapi.Writer).AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormSmall, Data: []byte(`{"live":1}`)}, formsapi.Metadata{}); err != nil {
				t.Fatal(err)
			}
			got := <-res
			if got.err != nil || len(got.seen) != 1 || got.seen[0] != `{"live":1}` || got.token == token {
				t.Fatalf("Sync with Wait: %v, %v, token moved %t; want the live submission and a new token", got.seen, got.err, got.token != token)
			}
			// SyncPage sends it too, whole seconds rounded up.
			changes, resp, err := c.SyncPage(ctx, storetest.FormSmall, token, formsclient.Wait(1500*time.Millisecond))
			if err != nil || len(changes) != 1 || resp.SyncToken == "" {
				t.Fatalf("SyncPage with Wait: %d changes, %v", len(changes), err)
			}
			if w := <-arrived; w != "2" {
				t.Errorf("SyncPage's wait: %q, want 2", w)
			}
		})
	}
}

// TestWaitRefused: Wait past the server's bound, below 0, or on a call
// that is not the feed's is an error before any request.
func TestWaitRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a request was sent: %s", r.URL)
	}), "")
	c := newClient(t, srv.base, storetest.KeyA)
	nop := func(formsclient.Change) error { return nil }
	if _, err := c.Sync(ctx, storetest.FormSmall, formsclient.SyncStart, nop, formsclient.Wait(31*time.Second)); err == nil || !strings.Contains(err.Error(), "Wait(31s)") {
		t.Errorf("Wait(31s): %v", err)
	}
	if _, _, err := c.SyncPage(ctx, storetest.FormSmall, formsclient.SyncStart, formsclient.Wait(-time.Second)); err == nil {
		t.Error("Wait(-1s): no error")
	}
	if _, _, err := c.SubmissionsPage(ctx, storetest.FormSmall, formsclient.Wait(time.Second)); err == nil || !strings.Contains(err.Error(), "Wait applies to the sync feed only") {
		t.Errorf("SubmissionsPage with Wait: %v", err)
	}
	for _, err := range c.Submissions(ctx, storetest.FormSmall, formsclient.Wait(time.Second)) {
		if err == nil || !strings.Contains(err.Error(), "Wait applies to the sync feed only") {
			t.Errorf("Submissions with Wait: %v", err)
		}
		break
	}
}
