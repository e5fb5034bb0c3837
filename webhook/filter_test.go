package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/webhook"
	"github.com/formsapi/formsapi/webhook/hookstore"
)

// addData adds a submission of form with data, and metadata ID id, by
// which delData deletes it.
func (r *storeRig) addData(form, id, data string) {
	r.t.Helper()
	if err := r.store.AddSubmission(r.ctx, formsapi.Submission{FormID: form, Data: []byte(data)}, formsapi.Metadata{ID: id}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *storeRig) delData(form, id string) {
	r.t.Helper()
	if err := r.store.DeleteSubmission(r.ctx, account, form, id); err != nil {
		r.t.Fatal(err)
	}
}

// events returns what ds are, in order: "+id" for a submission.created
// of the submission whose data has that id, "-ref" for a deletion, with
// the ref as refsByID names it ("-?" for a ref it does not know).
func events(ds []delivery, idByRef map[string]string) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		if d.typ == webhook.EventCreated {
			out[i] = "+" + idOf(d)
			idByRef[d.ref] = idOf(d)
			continue
		}
		id, ok := idByRef[d.ref]
		if !ok {
			id = "?"
		}
		out[i] = "-" + id
	}
	return out
}

// TestFilteredEndpoint, on memstore, SQLite and PostgreSQL: an endpoint
// with a filter receives the additions it matches and no other, while an
// endpoint without one, on the same feed, receives them all; the
// filtered endpoint receives the deletions of what it received and of
// nothing else (the verdict on each addition is kept, the tombstone
// having no data to match). A filter change applies from the cursor on:
// what was delivered is not sent again, the additions after it are
// judged by the new filter, the deletion of a submission delivered
// under the old one is delivered, and that of one the old filter passed
// over is not, whatever the new filter would say of it. Each filtered event's ref is the
// feed's for that submission. Without the filter, the filtered endpoint
// would get the "drop" additions and the test fails.
func TestFilteredEndpoint(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c storeCase) {
		r := newStoreRig(t, c, []byte("the filtered endpoint test's cursor secret"), "f")
		filtered, every := newReceiver(t), newReceiver(t)
		e, err := r.eps.AddFiltered(r.ctx, account, filtered.srv.URL, nil, "filter[kind]=keep&filter[n][gte]=3")
		if err != nil {
			t.Fatal(err)
		}
		if want := "filter%5Bkind%5D=%22keep%22&filter%5Bn%5D%5Bgte%5D=3"; e.Filter != want {
			t.Errorf("AddFiltered's endpoint has filter %q, want the canonical %q", e.Filter, want)
		}
		if got, _, err := r.eps.Get(r.ctx, account, e.ID); err != nil || got.Filter != e.Filter {
			t.Errorf("Get: filter %q, %v; want %q", got.Filter, err, e.Filter)
		}
		if _, err := r.eps.Add(r.ctx, account, every.srv.URL, []string{"f"}); err != nil {
			t.Fatal(err)
		}
		r.addData("f", "a", `{"id":"a","kind":"keep","n":5}`)
		r.addData("f", "b", `{"id":"b","kind":"drop","n":5}`)
		r.addData("f", "c", `{"id":"c","kind":"keep","n":2}`)   // n below 3
		r.addData("f", "d", `{"id":"d","kind":"keep","n":"9"}`) // a string does not order with a number
		r.addData("f", "e", `{"id":"e","kind":"keep","n":3.0}`)
		r.addData("f", "g", `{"id":"g","n":7}`)
		r.disp.Step(r.ctx)
		refs := r.feedRefs("f") // a b c d e g
		idByRef := map[string]string{}
		want := []string{"+a", "+e"}
		if got := events(filtered.deliveries(), idByRef); !slices.Equal(got, want) {
			t.Fatalf("the filtered endpoint got %v, want %v", got, want)
		}
		if got := events(every.deliveries(), map[string]string{}); len(got) != 6 {
			t.Fatalf("the endpoint without a filter got %v, want all 6", got)
		}
		for i, d := range filtered.deliveries() {
			if wantRef := refs[[]int{0, 4}[i]]; d.ref != wantRef || d.id() != webhook.MessageID(webhook.EventCreated, wantRef) {
				t.Errorf("filtered delivery %d: ref %s, id %s; want the feed's ref %s", i, d.ref, d.id(), wantRef)
			}
		}
		for i, id := range []string{"a", "b", "c", "d", "e", "g"} {
			idByRef[refs[i]] = id
		}

		r.delData("f", "a") // delivered
		r.delData("f", "b") // not delivered: nor is its deletion
		r.disp.Step(r.ctx)
		want = append(want, "-a")
		if got := events(filtered.deliveries(), idByRef); !slices.Equal(got, want) {
			t.Fatalf("after two deletions the filtered endpoint got %v, want %v", got, want)
		}

		// The filter changes: from the cursor on, "drop" is what it keeps.
		changed, err := r.eps.SetFilter(r.ctx, account, e.ID, "filter[kind]=drop")
		if err != nil {
			t.Fatal(err)
		}
		if want := `filter%5Bkind%5D=%22drop%22`; changed.Filter != want {
			t.Errorf("SetFilter's endpoint has filter %q, want %q", changed.Filter, want)
		}
		r.addData("f", "h", `{"id":"h","kind":"keep","n":9}`)
		r.addData("f", "i", `{"id":"i","kind":"drop","n":1}`)
		r.delData("f", "e") // delivered under the old filter
		r.disp.Step(r.ctx)
		refs = r.feedRefs("f") // c d g h i
		idByRef[refs[3]], idByRef[refs[4]] = "h", "i"
		want = append(want, "+i", "-e")
		if got := events(filtered.deliveries(), idByRef); !slices.Equal(got, want) {
			t.Fatalf("after the filter changed the filtered endpoint got %v, want %v", got, want)
		}
		r.delData("f", "h") // added after the change, passed over by the new filter
		r.delData("f", "i") // delivered under the new filter
		r.delData("f", "c") // passed over by the old filter
		r.addData("f", "j", `{"id":"j","kind":"drop"}`)
		r.delData("f", "j") // deleted before the dispatcher reached it
		r.disp.Step(r.ctx)
		want = append(want, "-i")
		if got := events(filtered.deliveries(), idByRef); !slices.Equal(got, want) {
			t.Fatalf("after the filter changed the filtered endpoint got %v, want %v", got, want)
		}
		if got := events(every.deliveries(), map[string]string{}); len(got) != 15 {
			t.Errorf("the endpoint without a filter got %d events, want 15", len(got))
		}
		_, streams, err := r.eps.Get(r.ctx, account, e.ID)
		if err != nil || len(streams) != 1 {
			t.Fatalf("Get: %d streams, %v", len(streams), err)
		}
		if _, head := r.feedHead("f"); streams[0].Cursor != head {
			t.Errorf("the filtered stream's cursor is %d, want the feed's end %d", streams[0].Cursor, head)
		}
	})
}

// feedHead returns the form's feed from its start through the store:
// its entries' count and the position after which nothing follows.
func (r *storeRig) feedHead(form string) (entries int, head int64) {
	r.t.Helper()
	var after int64
	for {
		p, err := r.store.SyncSubmissions(r.ctx, account, form, after, 1000)
		if err != nil {
			r.t.Fatal(err)
		}
		entries += len(p.Items) + len(p.Deleted)
		after = p.Next
		if !p.More {
			return entries, after
		}
	}
}

// TestFilterKeepsNothing, on every store: a filter that keeps none of
// 250 additions (more than two of the dispatcher's batches) sends
// nothing and moves the cursor to the feed's end in one step; the one
// addition it keeps, after them, is delivered.
func TestFilterKeepsNothing(t *testing.T) {
	onEveryStore(t, func(t *testing.T, c storeCase) {
		r := newStoreRig(t, c, []byte("the keep-nothing test's cursor secret"), "f")
		rc := newReceiver(t)
		e, err := r.eps.AddFiltered(r.ctx, account, rc.srv.URL, []string{"f"}, "q=needle")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 250 {
			r.addData("f", fmt.Sprint(i), fmt.Sprintf(`{"id":"%d","text":"hay"}`, i))
		}
		r.disp.Step(r.ctx)
		if n := rc.count(); n != 0 {
			t.Fatalf("%d deliveries of additions the filter does not keep", n)
		}
		_, streams, err := r.eps.Get(r.ctx, account, e.ID)
		if _, head := r.feedHead("f"); err != nil || len(streams) != 1 || streams[0].Cursor != head {
			t.Fatalf("after a step over 250 entries it keeps none of: streams %+v, %v; want the cursor at %d", streams, err, head)
		}
		r.addData("f", "x", `{"id":"x","text":"a NEEDLE in it"}`)
		r.disp.Step(r.ctx)
		if ds := rc.deliveries(); len(ds) != 1 || idOf(ds[0]) != "x" {
			t.Fatalf("got %v, want the one addition the search finds", summary(ds))
		}
	})
}

// TestBadFilterChangesNothing: a filter the submissions list refuses is
// refused by AddFiltered and SetFilter with an error that wraps
// ErrInvalidEndpoint and formsapi.ErrInvalidInput and names the clause,
// and adds or changes nothing.
func TestBadFilterChangesNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f")
	rc := newReceiver(t)
	e, err := r.eps.AddFiltered(r.ctx, account, rc.srv.URL, nil, "filter[kind]=keep")
	if err != nil {
		t.Fatal(err)
	}
	for filter, names := range map[string]string{
		"filter[n][gte]=true":                 "filter[n][gte]",
		"filter[n][about]=3":                  "filter[n][about]",
		"filter[tags][in]=" + tooManyValues(): "filter[tags][in]",
		"q=ab":                                "invalid q",
		"limit=3":                             `invalid "limit"`,
		"filter[a]=1&filter[b]=1&filter[c]=1&filter[d]=1&filter[e]=1&filter[f]=1&filter[g]=1&filter[h]=1&filter[i]=1": "the filter clauses limit",
	} {
		if _, err := r.eps.AddFiltered(r.ctx, account, rc.srv.URL, nil, filter); !errors.Is(err, webhook.ErrInvalidEndpoint) || !errors.Is(err, formsapi.ErrInvalidInput) || !strings.Contains(err.Error(), names) {
			t.Errorf("AddFiltered(%.40q): %v, want ErrInvalidEndpoint and ErrInvalidInput naming %s", filter, err, names)
		}
		if _, err := r.eps.SetFilter(r.ctx, account, e.ID, filter); !errors.Is(err, webhook.ErrInvalidEndpoint) || !strings.Contains(err.Error(), names) {
			t.Errorf("SetFilter(%.40q): %v, want ErrInvalidEndpoint naming %s", filter, err, names)
		}
	}
	list, err := r.eps.List(r.ctx, account)
	if err != nil || len(list) != 1 || list[0].Filter != `filter%5Bkind%5D=%22keep%22` {
		t.Fatalf("after the refused calls: %+v, %v; want the one endpoint, its filter as it was", list, err)
	}
	if _, err := r.eps.SetFilter(r.ctx, account, "ep_none", "filter[kind]=x"); !errors.Is(err, webhook.ErrEndpointNotFound) {
		t.Errorf("SetFilter of an unknown endpoint: %v, want ErrEndpointNotFound", err)
	}
	cleared, err := r.eps.SetFilter(r.ctx, account, e.ID, "")
	if err != nil || cleared.Filter != "" {
		t.Errorf("SetFilter to none: %q, %v", cleared.Filter, err)
	}
}

func tooManyValues() string {
	vs := make([]string, 33)
	for i := range vs {
		vs[i] = fmt.Sprint(i)
	}
	return strings.Join(vs, ",")
}

// TestFilterChangePassesAFailingEntry: an addition that keeps failing
// under one filter, which the new filter does not keep, is passed over
// at its next try (its retries end), and the next addition the new
// filter keeps is sent at once.
func TestFilterChangePassesAFailingEntry(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f")
	rc := newReceiver(t)
	e, err := r.eps.AddFiltered(r.ctx, account, rc.srv.URL, nil, "filter[id][prefix]=old")
	if err != nil {
		t.Fatal(err)
	}
	rc.setAnswer(func(n int, d delivery, w http.ResponseWriter) {
		if idOf(d) == "old-1" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	r.add("f", "old-1")
	r.add("f", "new-1")
	r.disp.Step(r.ctx)
	r.clock.Advance(5 * time.Second)
	r.disp.Step(r.ctx)
	if got := summaryIDs(rc.deliveries()); !slices.Equal(got, []string{"old-1", "old-1"}) {
		t.Fatalf("before the change: %v, want old-1 twice (failing)", got)
	}
	if _, err := r.eps.SetFilter(r.ctx, account, e.ID, "filter[id][prefix]=new"); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(5 * time.Minute) // the third attempt's time
	r.disp.Step(r.ctx)
	if got := summaryIDs(rc.deliveries()); !slices.Equal(got, []string{"old-1", "old-1", "new-1"}) {
		t.Fatalf("after the change: %v, want new-1 after old-1's two failures", got)
	}
	_, streams, err := r.eps.Get(r.ctx, account, e.ID)
	if err != nil || len(streams) != 1 || streams[0].Attempts != 0 || !streams[0].FailingSince.IsZero() {
		t.Errorf("the stream after the failing entry was passed over: %+v, %v; want no retries", streams, err)
	}
}

func summaryIDs(ds []delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = idOf(d)
	}
	return out
}

// TestStoredFilterNotReadDisables: a filter that this version's parser
// refuses, written to the store behind Endpoints' back, disables the
// endpoint with a reason that says so, and nothing is sent: sending on
// could deliver what the filter was meant to keep out.
func TestStoredFilterNotReadDisables(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f")
	rc := newReceiver(t)
	e := r.endpoint(rc.srv.URL)
	if _, err := r.store.UpdateEndpoint(r.ctx, account, e.ID, func(x *webhook.Endpoint) error {
		x.Filter = "filter[a][bogus]=1"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r.add("f", "1")
	r.disp.Step(r.ctx)
	if n := rc.count(); n != 0 {
		t.Fatalf("%d deliveries under a filter that does not parse", n)
	}
	got, _, err := r.eps.Get(r.ctx, account, e.ID)
	if err != nil || !got.Disabled || !strings.Contains(got.DisabledReason, "filter[a][bogus]") {
		t.Fatalf("the endpoint: disabled %v (%q), %v; want disabled, naming the clause", got.Disabled, got.DisabledReason, err)
	}
}

// countingStore counts the cursor writes of a memstore.
type countingStore struct {
	*memstore.Store
	saves atomic.Int64
}

func (s *countingStore) SaveStream(ctx context.Context, id string, gen int64, st webhook.Stream, now time.Time, d time.Duration) error {
	s.saves.Add(1)
	return s.Store.SaveStream(ctx, id, gen, st, now, d)
}

func (s *countingStore) SaveVerdicts(ctx context.Context, id string, gen int64, st webhook.Stream, v hookstore.Verdicts, now time.Time, d time.Duration) error {
	s.saves.Add(1)
	return s.Store.SaveVerdicts(ctx, id, gen, st, v, now, d)
}

// TestFilterPassesInBatches: the additions a filter does not keep cost
// no write each: the cursor moves past a batch of them (100 entries, the
// dispatcher's batch) in one write, so 250 take 3.
func TestFilterPassesInBatches(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f")
	cs := &countingStore{Store: r.store}
	disp := webhook.NewDispatcher(cs, r.store, r.secret, r.options()...)
	t.Cleanup(disp.Close)
	rc := newReceiver(t)
	if _, err := r.eps.AddFiltered(r.ctx, account, rc.srv.URL, nil, "filter[id]=none"); err != nil {
		t.Fatal(err)
	}
	for i := range 250 {
		r.add("f", fmt.Sprint(i))
	}
	disp.Step(r.ctx)
	if n := rc.count(); n != 0 {
		t.Fatalf("%d deliveries of additions the filter does not keep", n)
	}
	if n := cs.saves.Load(); n != 3 {
		t.Errorf("%d cursor writes to pass over 250 entries, want 3 (one a batch of 100)", n)
	}
}

// listIDs walks the form's list with the filter's parameters through
// the API (the store's own filtered query, its index included) and
// returns the ids of the submissions it lists.
func (r *storeRig) listIDs(form, filter string) map[string]bool {
	r.t.Helper()
	out := map[string]bool{}
	path := "/v1/forms/" + form + "/submissions?limit=1000"
	if filter != "" {
		path += "&" + filter
	}
	for {
		w := r.get(path)
		var p struct {
			Submissions []struct {
				Data struct {
					ID string `json:"id"`
				} `json:"data"`
			} `json:"submissions"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 200 {
			r.t.Fatalf("GET %s: %d %.300s", path, w.Code, w.Body)
		}
		for _, s := range p.Submissions {
			out[s.Data.ID] = true
		}
		if p.NextCursor == "" {
			return out
		}
		path = "/v1/forms/" + form + "/submissions?limit=1000&cursor=" + url.QueryEscape(p.NextCursor)
	}
}

// randomData is the data of a submission of the random corpus: numbers
// (integers, fractions, numeric strings), instants in several offsets
// and text that is not one, Unicode names that normalize alike, nulls
// and members left out.
func randomData(rnd *rand.Rand, id string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"id":%q`, id)
	pick := func(vs ...string) string { return vs[rnd.IntN(len(vs))] }
	if rnd.IntN(5) > 0 {
		b.WriteString(`,"n":` + pick("0", "1", "2.5", "3", "3.0", "4e0", "-1", "10", `"3"`, "null", "true"))
	}
	if rnd.IntN(4) > 0 {
		b.WriteString(`,"when":` + pick(`"2025-12-31T23:59:59Z"`, `"2026-01-01T00:00:00Z"`, `"2026-01-01T01:00:00+02:00"`,
			`"2026-06-01T12:00:00.5-07:00"`, `"tomorrow"`, `"2026-01-01"`, "null", "20260101"))
	}
	if rnd.IntN(4) > 0 {
		b.WriteString(`,"name":` + pick(`"Zoë"`, `"ZOE"`, `"zoe"`, `"Zoey Straße"`, `"strasse"`, `"ß"`, `"Ｚｏｅ"`, `"Åsa"`, `""`, "null", "7"))
	}
	if rnd.IntN(3) > 0 {
		b.WriteString(`,"tag":` + pick(`"t0"`, `"t1"`, `"t2"`, `"t3"`, `["t0"]`, `{"t":"t0"}`))
	}
	b.WriteString("}")
	return b.String()
}

// TestFilterAgreesWithTheList, on memstore, SQLite and PostgreSQL: over
// a random corpus (numbers, instants, Unicode, nulls, missing members)
// added and deleted in twelve steps, the endpoint's filter changed
// before most of them, what a filtered endpoint receives at each step is
// exactly, in feed order: the addition of each submission of the step
// that the submissions list with the same parameters lists (the store's
// own query, a path the dispatcher does not share), and the deletion of
// each submission whose addition it received, in this step or an
// earlier one, under whichever filter was in force then; of no other.
func TestFilterAgreesWithTheList(t *testing.T) {
	filters := []string{
		"", "filter[n][gte]=3", "filter[n][lt]=2.5&filter[tag][ne]=t1", "filter[when][gte]=2026-01-01T00:00:00Z",
		"filter[when][lt]=2026-01-01T00:30:00%2B01:00", "filter[name][prefix]=zo", "filter[tag][in]=t0,t2",
		"filter[n][exists]=false", "q=strasse", "filter[name]=Zo%C3%AB", "filter[n]=3&filter[name][exists]=true",
		"filter[name][gt]=r", "q=zoe&filter[tag][ne]=t3",
	}
	onEveryStore(t, func(t *testing.T, c storeCase) {
		secret := []byte("the agreement test's cursor secret")
		r := newStoreRig(t, c, secret, "f")
		rc := newReceiver(t)
		e, err := r.eps.AddFiltered(r.ctx, account, rc.srv.URL, nil, filters[1])
		if err != nil {
			t.Fatal(err)
		}
		rnd := rand.New(rand.NewPCG(39, uint64(len(c.name))))
		inc := webhook.IncarnationOf(r.store, account, "f")
		filter, alive, n, after, seen := filters[1], []string{}, 0, int64(0), 0
		kept, deleted := 0, 0
		got := map[string]bool{} // the refs whose additions the endpoint received
		for step := range 12 {
			if step > 0 && rnd.IntN(4) > 0 {
				filter = filters[rnd.IntN(len(filters))]
				if _, err := r.eps.SetFilter(r.ctx, account, e.ID, filter); err != nil {
					t.Fatal(err)
				}
			}
			for range 15 {
				if len(alive) > 0 && rnd.IntN(5) == 0 {
					i := rnd.IntN(len(alive))
					r.delData("f", alive[i])
					alive = slices.Delete(alive, i, i+1)
					continue
				}
				n++
				id := fmt.Sprint("s", n)
				r.addData("f", id, randomData(rnd, id))
				alive = append(alive, id)
			}
			listed := r.listIDs("f", filter)
			var want []string
			for {
				p, err := r.store.SyncSubmissions(r.ctx, account, "f", after, 1000)
				if err != nil {
					t.Fatal(err)
				}
				type entry struct {
					pos int64
					ev  string
				}
				var es []entry
				for i, s := range p.Items {
					var d struct{ ID string }
					if err := json.Unmarshal(s.Data, &d); err != nil {
						t.Fatal(err)
					}
					if listed[d.ID] {
						es = append(es, entry{p.Positions[i], "+" + webhook.RefOf(secret, account, "f", inc, p.Positions[i])})
					}
				}
				for i, of := range p.Deleted {
					if ref := webhook.RefOf(secret, account, "f", inc, of); got[ref] {
						es = append(es, entry{p.DeletedAt[i], "-" + ref})
					}
				}
				slices.SortFunc(es, func(a, b entry) int { return int(a.pos - b.pos) })
				for _, x := range es {
					want = append(want, x.ev)
				}
				after = p.Next
				if !p.More {
					break
				}
			}
			r.disp.Step(r.ctx)
			ds := rc.deliveries()[seen:]
			seen += len(ds)
			evs := make([]string, len(ds))
			for i, d := range ds {
				evs[i] = map[string]string{webhook.EventCreated: "+", webhook.EventDeleted: "-"}[d.typ] + d.ref
				if d.typ == webhook.EventCreated {
					kept++
					got[d.ref] = true
				} else {
					deleted++
				}
			}
			if !slices.Equal(evs, want) {
				t.Fatalf("step %d, filter %q: the endpoint got %d events %v, the list and the feed say %d %v", step, filter, len(evs), evs, len(want), want)
			}
		}
		if kept == 0 || kept == n || deleted == 0 {
			t.Errorf("the filters kept %d of %d additions, and %d deletions were sent: a corpus that tells nothing", kept, n, deleted)
		}
	})
}

// failingSaves is a memstore whose next cursor write fails once armed:
// a node that dies between an event's 2xx and its cursor's write.
type failingSaves struct {
	*memstore.Store
	armed atomic.Bool
}

func (s *failingSaves) SaveStream(ctx context.Context, id string, gen int64, st webhook.Stream, now time.Time, d time.Duration) error {
	if s.armed.CompareAndSwap(true, false) {
		return errors.New("the node died before the write")
	}
	return s.Store.SaveStream(ctx, id, gen, st, now, d)
}

func (s *failingSaves) SaveVerdicts(ctx context.Context, id string, gen int64, st webhook.Stream, v hookstore.Verdicts, now time.Time, d time.Duration) error {
	if s.armed.CompareAndSwap(true, false) {
		return errors.New("the node died before the write")
	}
	return s.Store.SaveVerdicts(ctx, id, gen, st, v, now, d)
}

// TestFilteredDeletionsOfWhatItGot: a filtered endpoint gets the deletion
// of a submission if and only if it got its addition, across a crash
// between an addition's 2xx and the cursor's write (the addition comes
// again, at least once; its deletion comes, never missed), and not for a
// submission added before the endpoint, one its filter passed over
// (with a run of them saved in two writes, one span), or one deleted
// before the dispatcher reached it.
func TestFilteredDeletionsOfWhatItGot(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f")
	fs := &failingSaves{Store: r.store}
	disp := webhook.NewDispatcher(fs, r.store, r.secret, r.options()...)
	t.Cleanup(disp.Close)
	rc := newReceiver(t)
	r.add("f", "old") // before the endpoint
	if _, err := r.eps.AddFiltered(r.ctx, account, rc.srv.URL, nil, `filter[id][prefix]=keep`); err != nil {
		t.Fatal(err)
	}
	r.add("f", "keep1")
	r.add("f", "drop1")
	r.add("f", "drop2")
	r.add("f", "gone") // deleted before the dispatcher reads it
	r.del("f", "gone")
	fs.armed.Store(true) // the write after keep1's 2xx fails
	disp.Step(r.ctx)
	r.clock.Advance(webhook.DefaultLease) // the lease of the node that died runs out
	disp.Step(r.ctx)
	r.add("f", "drop3")
	r.add("f", "keep2")
	disp.Step(r.ctx)
	for _, id := range []string{"old", "drop1", "keep1", "drop3", "keep2", "drop2"} {
		r.del("f", id)
	}
	disp.Step(r.ctx)
	want := []string{"+keep1", "+keep1", "+keep2", "-keep1", "-keep2"}
	if got := events(rc.deliveries(), map[string]string{}); !slices.Equal(got, want) {
		t.Fatalf("the filtered endpoint got %v, want %v", got, want)
	}
	// The verdicts of the deleted submissions went with their deletions:
	// drop1, drop2 and drop3 are at positions 3, 4 and 7. (A span may
	// keep the position of one deleted before it was reached, 5, which
	// no filter judged.)
	_, streams, err := r.eps.Get(r.ctx, account, rc.endpointID(t, r))
	if err != nil || len(streams) != 1 || !streams[0].Judging {
		t.Fatalf("the stream: %+v, %v; want one, judging", streams, err)
	}
	in, err := r.store.Passed(r.ctx, rc.endpointID(t, r), "f", []int64{3, 4, 7})
	if err != nil || len(in) != 0 {
		t.Errorf("positions %v of deleted submissions still in spans (%v), want none", in, err)
	}
}

// endpointID returns the ID of the one endpoint of the account that
// sends to rc.
func (rc *receiver) endpointID(t *testing.T, r *rig) string {
	t.Helper()
	es, err := r.eps.List(r.ctx, account)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.URL == rc.srv.URL {
			return e.ID
		}
	}
	t.Fatal("no endpoint sends to the receiver")
	return ""
}

// TestFilteredReplay: a replay of a filtered endpoint from a sync token
// sends again the deletions after it of what the endpoint got, those of
// submissions added before the token included: never missed. (The
// deletions of those its filter passed over come too: their verdicts
// went when the cursor first passed their deletions.)
func TestFilteredReplay(t *testing.T) {
	t.Parallel()
	r := newRig(t, "f")
	rc := newReceiver(t)
	e, err := r.eps.AddFiltered(r.ctx, account, rc.srv.URL, nil, `filter[id][prefix]=keep`)
	if err != nil {
		t.Fatal(err)
	}
	r.add("f", "keep1")
	r.add("f", "drop1")
	r.disp.Step(r.ctx)
	_, token := r.feed("f", "start")
	r.add("f", "keep2")
	r.add("f", "drop2")
	r.disp.Step(r.ctx)
	for _, id := range []string{"keep1", "drop1", "keep2", "drop2"} {
		r.del("f", id)
	}
	r.disp.Step(r.ctx)
	want := []string{"+keep1", "+keep2", "-keep1", "-keep2"}
	idByRef := map[string]string{}
	if got := events(rc.deliveries(), idByRef); !slices.Equal(got, want) {
		t.Fatalf("before the replay the endpoint got %v, want %v", got, want)
	}
	n := rc.count()
	if err := r.eps.Replay(r.ctx, account, e.ID, "f", token); err != nil {
		t.Fatal(err)
	}
	r.disp.Step(r.ctx)
	got := events(rc.deliveries()[n:], idByRef)
	t.Logf("the replay sent %v", got)
	for _, w := range []string{"-keep1", "-keep2"} {
		if !slices.Contains(got, w) {
			t.Errorf("the replay sent %v, without %s", got, w)
		}
	}
	for _, g := range got {
		if strings.HasPrefix(g, "+") {
			t.Errorf("the replay sent %v: %s, an addition deleted since", got, g)
		}
	}
	if len(got) != 4 {
		t.Errorf("the replay sent %v, want the four deletions after the token (two of them of refs the endpoint never had)", got)
	}
}
