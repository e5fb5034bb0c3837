package webhook_test

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestFilteredReplayForward, on every store: a replay to a sync token
// past the stream's cursor skips the entries between them, so the
// endpoint never gets those additions: nor must it get their deletions,
// as for an addition its filter passed over. (Before the fix the skipped
// positions were in no span and counted as sent once the cursor moved
// on: the endpoint got three deletions of refs it never had.)
func TestFilteredReplayForward(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c storeCase) {
		r := newStoreRig(t, c, []byte("the forward replay test's cursor secret"), "f")
		rc := newReceiver(t)
		e, err := r.eps.AddFiltered(r.ctx, account, rc.srv.URL, nil, `filter[id][prefix]=keep`)
		if err != nil {
			t.Fatal(err)
		}
		r.addData("f", "keep1", `{"id":"keep1"}`)
		r.disp.Step(r.ctx)
		r.addData("f", "keep2", `{"id":"keep2"}`) // skipped by the replay below: never sent
		r.addData("f", "drop1", `{"id":"drop1"}`)
		r.addData("f", "keep3", `{"id":"keep3"}`) // skipped too
		w := r.get("/v1/forms/f/submissions?limit=1000&sync=start")
		var p struct {
			SyncToken string `json:"syncToken"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 200 || p.SyncToken == "" {
			t.Fatalf("the feed: %d %.300s", w.Code, w.Body)
		}
		if err := r.eps.Replay(r.ctx, account, e.ID, "f", p.SyncToken); err != nil {
			t.Fatal(err)
		}
		r.addData("f", "keep4", `{"id":"keep4"}`)
		r.disp.Step(r.ctx)
		for _, id := range []string{"keep1", "keep2", "drop1", "keep3", "keep4"} {
			r.delData("f", id)
		}
		r.disp.Step(r.ctx)
		idByRef := map[string]string{}
		want := []string{"+keep1", "+keep4", "-keep1", "-keep4"}
		if got := events(rc.deliveries(), idByRef); !slices.Equal(got, want) {
			t.Fatalf("the endpoint got %v, want %v", got, want)
		}
	})
}

// TestFilteredReplayBeforeCreation, on every store: a replay from a sync
// token older than the endpoint, whose filter passes over an addition
// made before the endpoint was: the endpoint never gets that addition,
// so it must not get its deletion; it gets that of an addition made
// before it that the replay sent.
func TestFilteredReplayBeforeCreation(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c storeCase) {
		r := newStoreRig(t, c, []byte("the early replay test's cursor secret"), "f")
		rc := newReceiver(t)
		r.addData("f", "drop1", `{"id":"drop1"}`)
		w := r.get("/v1/forms/f/submissions?limit=1000&sync=start")
		var p struct {
			SyncToken string `json:"syncToken"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 200 || p.SyncToken == "" {
			t.Fatalf("the feed: %d %.300s", w.Code, w.Body)
		}
		r.addData("f", "keep2", `{"id":"keep2"}`) // before the endpoint: sent by the replay only
		r.addData("f", "drop2", `{"id":"drop2"}`) // before the endpoint: never sent
		e, err := r.eps.AddFiltered(r.ctx, account, rc.srv.URL, nil, `filter[id][prefix]=keep`)
		if err != nil {
			t.Fatal(err)
		}
		r.addData("f", "keep3", `{"id":"keep3"}`)
		r.disp.Step(r.ctx)
		if err := r.eps.Replay(r.ctx, account, e.ID, "f", p.SyncToken); err != nil {
			t.Fatal(err)
		}
		r.disp.Step(r.ctx)
		r.delData("f", "drop2")
		r.delData("f", "keep2")
		r.disp.Step(r.ctx)
		want := []string{"+keep3", "+keep2", "+keep3", "-keep2"}
		if got := events(rc.deliveries(), map[string]string{}); !slices.Equal(got, want) {
			t.Fatalf("the endpoint got %v, want %v", got, want)
		}
	})
}
