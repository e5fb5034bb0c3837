package webhook_test

import (
	"encoding/json"
	"slices"
	"testing"
)

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

// TestFilteredAfterEarlierNode, on every store: during a rolling deploy a
// node of an earlier version moves a judging stream's cursor without
// judging (its writes leave judged as it was), sending what the filter
// keeps; the deletion of such an addition still reaches the endpoint
// once a node of this version has the stream again: the positions past
// judged and up to the cursor count as sent, never as passed over.
func TestFilteredAfterEarlierNode(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c storeCase) {
		r := newStoreRig(t, c, []byte("the earlier node test's cursor secret"), "f")
		rc := newReceiver(t)
		e, err := r.eps.AddFiltered(r.ctx, account, rc.srv.URL, nil, `filter[id][prefix]=keep`)
		if err != nil {
			t.Fatal(err)
		}
		r.addData("f", "keep1", `{"id":"keep1"}`)
		r.disp.Step(r.ctx)
		r.addData("f", "keep2", `{"id":"keep2"}`) // sent by the earlier node
		_, streams, err := r.eps.Get(r.ctx, account, e.ID)
		if err != nil || len(streams) != 1 || !streams[0].Judging {
			t.Fatalf("the stream: %+v, %v; want one, judging", streams, err)
		}
		st := streams[0]
		_, head := r.feedHead("f")
		st.Cursor = head // the earlier node's write: the cursor only
		if err := r.store.ResetStream(r.ctx, account, e.ID, st); err != nil {
			t.Fatal(err)
		}
		refs := r.feedRefs("f") // keep1 keep2
		idByRef := map[string]string{refs[1]: "keep2"}
		r.delData("f", "keep2")
		r.delData("f", "keep1")
		r.disp.Step(r.ctx)
		want := []string{"+keep1", "-keep2", "-keep1"}
		if got := events(rc.deliveries(), idByRef); !slices.Equal(got, want) {
			t.Fatalf("the endpoint got %v, want %v", got, want)
		}
	})
}
