package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
)

// feedClauses checks the formsapi.FeedStore contract, one subtest per clause,
// each on a fresh store from open loaded with DefaultSeed (which Load adds
// one submission at a time, in the seed's order). Besides reading the
// seed, it adds submissions while a poller resumes from the positions it
// stored: several writers at once, each going back in createdAt as it goes,
// so that commit order and createdAt order disagree. At the end the
// poller must have seen every submission of the form exactly once.
func feedClauses(t *testing.T, open func(t *testing.T, seed Seed) syncStore, cfg *config) {
	seed := DefaultSeed()
	x := expectations(seed)
	ctx := context.Background()

	t.Run("FromTheStart", func(t *testing.T) {
		cfg.parallel(t)
		// Load added the seed one by one: the feed gives them in that order.
		s := open(t, seed)
		for _, form := range []string{FormBusy, FormSmall} {
			var want []string
			for _, sub := range x.subs[form] {
				want = append(want, Canonical(sub.Submission.Data))
			}
			got := submissionKeys(walkFeed(t, s, AccountA, form, 0, MaxLimit))
			if !slices.Equal(got, want) {
				t.Errorf("feed of %s: got %v, want the order they were added, %v", form, got, want)
			}
		}
	})
	t.Run("Fields", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		for _, sub := range walkFeed(t, s, AccountA, FormBusy, 0, 5) {
			want, ok := x.byData[Canonical(sub.Data)]
			if !ok {
				t.Errorf("unexpected submission %s", sub.Data)
				continue
			}
			if msg := diffSubmission(want.Submission, sub); msg != "" {
				t.Errorf("submission %s: %s", sub.Data, msg)
			}
			if b, _ := json.Marshal(sub); bytes.Contains(b, []byte(Canary)) {
				t.Errorf("metadata in a feed item: %s", b)
			}
		}
	})
	t.Run("Pages", func(t *testing.T) {
		cfg.parallel(t)
		// Any page size gives the same feed, each page resuming at the
		// previous one's Next.
		s := open(t, seed)
		all := submissionKeys(walkFeed(t, s, AccountA, FormBusy, 0, MaxLimit))
		for limit := 1; limit <= len(all)+1; limit++ {
			if got := submissionKeys(walkFeed(t, s, AccountA, FormBusy, 0, limit)); !slices.Equal(got, all) {
				t.Errorf("limit %d: pages give %v, one page gives %v", limit, got, all)
			}
		}
	})
	t.Run("Incarnation", func(t *testing.T) {
		cfg.parallel(t)
		// One incarnation (0 for a store that cannot tell) on every page
		// of a form, the empty one after its end included.
		s := open(t, seed)
		var after int64
		var inc uint64
		for pages := 0; ; pages++ {
			p, err := s.SyncSubmissions(ctx, AccountA, FormBusy, after, 2)
			if err != nil {
				t.Fatalf("SyncSubmissions after %d: %v", after, err)
			}
			if pages == 0 {
				inc = p.Incarnation
			} else if p.Incarnation != inc {
				t.Fatalf("page %d has incarnation %#x, the first %#x", pages, p.Incarnation, inc)
			}
			if p.Next == after && !p.More {
				return
			}
			after = p.Next
		}
	})
	t.Run("Next", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		var after int64
		for pages := 0; ; pages++ {
			if pages > busyCount+1 {
				t.Fatal("Next does not advance")
			}
			p, err := s.SyncSubmissions(ctx, AccountA, FormBusy, after, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) == 0 {
				if p.Next != after {
					t.Errorf("empty page after %d: Next %d, want %d", after, p.Next, after)
				}
				break
			}
			if p.Next <= after {
				t.Fatalf("page after %d with %d items: Next %d is not greater", after, len(p.Items), p.Next)
			}
			after = p.Next
		}
		// The end of the feed, and beyond it, give empty pages that keep
		// the position.
		for _, at := range []int64{after, after + 1000, math.MaxInt64 - 1} {
			p, err := s.SyncSubmissions(ctx, AccountA, FormBusy, at, 10)
			if err != nil {
				t.Fatalf("after %d: %v", at, err)
			}
			if len(p.Items) != 0 || p.Next != at || p.More {
				t.Errorf("after %d, past the end: got %d items, Next %d, More %v; want none, %d, false", at, len(p.Items), p.Next, p.More, at)
			}
		}
	})
	t.Run("More", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		var after int64
		for limit := 4; ; {
			p, err := s.SyncSubmissions(ctx, AccountA, FormBusy, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			rest := walkFeed(t, s, AccountA, FormBusy, p.Next, MaxLimit)
			if p.More != (len(rest) > 0) {
				t.Errorf("page after %d: More %v, but %d items follow", after, p.More, len(rest))
			}
			if len(p.Items) < limit && p.More {
				t.Errorf("page after %d holds %d items, fewer than the limit %d, and yet More", after, len(p.Items), limit)
			}
			if !p.More {
				break
			}
			after = p.Next
		}
	})
	t.Run("EmptyForm", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		p, err := s.SyncSubmissions(ctx, AccountA, FormEmpty, 0, 10)
		if err != nil {
			t.Fatalf("feed of a form without submissions: %v (want an empty page, not an error)", err)
		}
		if len(p.Items) != 0 || p.Next != 0 || p.More {
			t.Errorf("got %d items, Next %d, More %v; want none, 0, false", len(p.Items), p.Next, p.More)
		}
	})
	t.Run("AddedLater", func(t *testing.T) {
		cfg.parallel(t)
		// Submissions added after the poller reached the end come next,
		// in the order they were added, even with createdAt far earlier
		// than anything seen: createdAt plays no part.
		s := open(t, seed)
		end := feedEnd(t, s, AccountA, FormBusy)
		var want []string
		for i, at := range []time.Time{base.Add(-48 * time.Hour), base.Add(time.Hour), base.Add(-72 * time.Hour), base} {
			data := fmt.Sprintf(`{"n":%d,"added":"later"}`, 3000+i)
			if err := s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(data), CreatedAt: at}, canaryMetadata(i)); err != nil {
				t.Fatalf("AddSubmission: %v", err)
			}
			want = append(want, Canonical([]byte(data)))
		}
		if got := submissionKeys(walkFeed(t, s, AccountA, FormBusy, end, 3)); !slices.Equal(got, want) {
			t.Errorf("after the end of the feed: got %v, want what was added since, in order: %v", got, want)
		}
	})
	t.Run("UnknownForm", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		checkFeedNotFound(t, s, AccountA, FormNone)
	})
	t.Run("AnotherAccountsForm", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		checkFeedNotFound(t, s, AccountA, FormB)
		checkFeedNotFound(t, s, AccountB, FormBusy)
		checkFeedNotFound(t, s, AccountEmpty, FormBusy)
	})
	t.Run("NegativeAfter", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		for _, after := range []int64{-1, math.MinInt64} {
			if _, err := s.SyncSubmissions(ctx, AccountA, FormBusy, after, 10); !errors.Is(err, formsapi.ErrInvalidCursor) {
				t.Errorf("after %d: got error %v, want ErrInvalidCursor", after, err)
			}
		}
	})
	t.Run("Limit", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		for _, limit := range badLimits {
			checkBadLimit(t, "SyncSubmissions", limit, func() (int, error) {
				p, err := s.SyncSubmissions(ctx, AccountA, FormBusy, 0, limit)
				return len(p.Items), err
			})
		}
	})
	t.Run("CanceledContext", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.SyncSubmissions(cctx, AccountA, FormBusy, 0, 10); !errors.Is(err, context.Canceled) {
			t.Errorf("got error %v, want context.Canceled", err)
		}
	})
	t.Run("NotAliased", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		before := walkFeed(t, s, AccountA, FormBusy, 0, MaxLimit)
		want, _ := json.Marshal(before)
		for i := range before {
			for j := range before[i].Data {
				before[i].Data[j] = 'X'
			}
			for j := range before[i].Attachments {
				before[i].Attachments[j].FileURL = "mutated"
			}
		}
		if after, _ := json.Marshal(walkFeed(t, s, AccountA, FormBusy, 0, MaxLimit)); !bytes.Equal(after, want) {
			t.Errorf("changing returned submissions changed the store:\nbefore %s\nafter  %s", want, after)
		}
	})
	t.Run("ConcurrentWriters", func(t *testing.T) {
		cfg.parallel(t)
		s := open(t, seed)
		checkFeedUnderWriters(t, s, x)
	})
}

// checkFeedUnderWriters runs writers that add submissions to FormBusy at
// once, each with createdAt going back as it goes (so commit order and
// createdAt order disagree across and within writers), while a poller
// reads small pages and resumes from the Next it stored, until the
// writers are done and a page says nothing more follows. The poller must
// have seen every submission of the form exactly once, each writer's in
// the order it added them, and a fresh read from the start must give the
// same sequence: positions never change.
func checkFeedUnderWriters(t *testing.T, s syncStore, x *expect) {
	t.Helper()
	ctx := context.Background()
	const writers, perWriter = 4, 40
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				// The later a submission commits, the earlier its createdAt.
				at := base.Add(-time.Duration(i*writers+w) * time.Minute)
				data := fmt.Sprintf(`{"writer":%d,"i":%d}`, w, i)
				if err := s.AddSubmission(ctx, formsapi.Submission{FormID: FormBusy, Data: []byte(data), CreatedAt: at}, canaryMetadata(w)); err != nil {
					errs <- fmt.Errorf("writer %d, submission %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); done.Store(true); close(errs) }()

	var seen []formsapi.Submission
	var after int64
	// Polls while the writers write are not counted: a poller of an
	// in-memory store can poll a hundred thousand times before writers
	// that the scheduler holds back are done (memstore did, in CI).
	for polls, afterDone := 0, 0; ; polls++ {
		finished := done.Load() // read before the page: a page read after every write
		if finished {
			if afterDone++; afterDone > 100_000 {
				t.Fatal("the poller never reached the end")
			}
		}
		p, err := s.SyncSubmissions(ctx, AccountA, FormBusy, after, 3)
		if err != nil {
			t.Fatalf("poll %d after %d: %v", polls, after, err)
		}
		if p.Next < after || len(p.Items) > 0 && p.Next == after {
			t.Fatalf("poll %d after %d: %d items and Next %d", polls, after, len(p.Items), p.Next)
		}
		seen = append(seen, p.Items...)
		after = p.Next // what a poller stores between polls
		if finished && !p.More {
			break
		}
	}
	for err := range errs {
		t.Fatal(err)
	}

	keys := submissionKeys(seen)
	count := map[string]int{}
	for _, k := range keys {
		if count[k]++; count[k] == 2 {
			t.Errorf("the poller saw %s twice", k)
		}
	}
	want := map[string]bool{}
	for _, sub := range x.subs[FormBusy] {
		want[Canonical(sub.Submission.Data)] = true
	}
	for w := 0; w < writers; w++ {
		for i := 0; i < perWriter; i++ {
			want[Canonical([]byte(fmt.Sprintf(`{"writer":%d,"i":%d}`, w, i)))] = true
		}
	}
	var missed []string
	for k := range want {
		if count[k] == 0 {
			missed = append(missed, k)
		}
	}
	slices.Sort(missed)
	if len(missed) > 0 {
		t.Errorf("the poller missed %d of %d submissions: %s", len(missed), len(want), strings.Join(missed, " "))
	}
	for k := range count {
		if !want[k] {
			t.Errorf("the poller saw %s, which was never added", k)
		}
	}
	// One writer's submissions commit one after another: the feed keeps
	// their order.
	next := make([]int, writers)
	for _, sub := range seen {
		var v struct{ Writer, I *int }
		if json.Unmarshal(sub.Data, &v) != nil || v.Writer == nil || v.I == nil {
			continue
		}
		if *v.I != next[*v.Writer] {
			t.Errorf("writer %d: submission %d came where %d was due", *v.Writer, *v.I, next[*v.Writer])
		}
		next[*v.Writer] = *v.I + 1
	}
	again := submissionKeys(walkFeed(t, s, AccountA, FormBusy, 0, 7))
	for i := range max(len(again), len(keys)) {
		if i >= len(again) || i >= len(keys) || again[i] != keys[i] {
			t.Errorf("a fresh read from the start (%d items) differs from what the poller saw (%d items) from item %d on",
				len(again), len(keys), i)
			break
		}
	}
}

func checkFeedNotFound(t *testing.T, s formsapi.FeedStore, account, form string) {
	t.Helper()
	ctx := context.Background()
	// The ownership check comes first: bad arguments on a form that is
	// not the account's say nothing about the form.
	for _, c := range []struct {
		after int64
		limit int
	}{{0, 10}, {5, 1}, {-1, 10}, {0, 0}} {
		p, err := s.SyncSubmissions(ctx, account, form, c.after, c.limit)
		if !errors.Is(err, formsapi.ErrFormNotFound) {
			t.Errorf("%s of %s, after %d, limit %d: got error %v, want ErrFormNotFound", form, account, c.after, c.limit, err)
		}
		if len(p.Items) != 0 {
			t.Errorf("%s of %s: got %d submissions with the error, want none", form, account, len(p.Items))
		}
	}
}

// walkFeed reads a form's feed from after to its end, checking that each
// page but the last is full and carries More.
func walkFeed(t *testing.T, s formsapi.FeedStore, account, form string, after int64, limit int) []formsapi.Submission {
	t.Helper()
	var all []formsapi.Submission
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("more than 10,000 pages: Next does not advance")
		}
		p, err := s.SyncSubmissions(context.Background(), account, form, after, limit)
		if err != nil {
			t.Fatalf("feed page %d after %d: %v", pages, after, err)
		}
		checkFeedPage(t, p, after, limit)
		all = append(all, p.Items...)
		if !p.More {
			return all
		}
		after = p.Next
	}
}

// checkFeedPage checks what every feed page read after position after
// with limit must be: at most limit entries (items and deletions), no
// fewer when More says more follow, a Next past after when it holds any
// and equal to it when it holds none, and a position for each item,
// ascending, after after and at most Next.
func checkFeedPage(t *testing.T, p formsapi.FeedPage, after int64, limit int) {
	t.Helper()
	entries := len(p.Items) + len(p.Deleted)
	if entries > limit {
		t.Fatalf("feed page after %d has %d entries, more than the limit %d", after, entries, limit)
	}
	if entries > 0 && p.Next <= after || entries == 0 && p.Next != after {
		t.Fatalf("feed page after %d: %d entries and Next %d", after, entries, p.Next)
	}
	if p.More && entries < limit {
		t.Fatalf("feed page after %d has %d entries, fewer than the limit %d, and yet More", after, entries, limit)
	}
	if len(p.Positions) != len(p.Items) {
		t.Fatalf("feed page after %d: %d positions for %d items", after, len(p.Positions), len(p.Items))
	}
	prev := after
	for _, pos := range p.Positions {
		if pos <= prev || pos > p.Next {
			t.Fatalf("feed page after %d, Next %d: positions %v are not ascending within (after, Next]", after, p.Next, p.Positions)
		}
		prev = pos
	}
	checkDeletedAt(t, p, after)
}

// checkDeletedAt checks a page's deletions' own positions, when the store
// gives them: one per deletion, ascending within (after, Next], after
// the position each deleted, none an item's, and the page's last entry
// at Next.
func checkDeletedAt(t *testing.T, p formsapi.FeedPage, after int64) {
	t.Helper()
	if len(p.DeletedAt) == 0 {
		return
	}
	if len(p.DeletedAt) != len(p.Deleted) {
		t.Fatalf("feed page after %d: %d deletion positions for %d deletions", after, len(p.DeletedAt), len(p.Deleted))
	}
	last := slices.Max(append(slices.Clone(p.Positions), p.DeletedAt...))
	prev := after
	for i, pos := range p.DeletedAt {
		if pos <= prev || pos > p.Next || pos <= p.Deleted[i] || slices.Contains(p.Positions, pos) {
			t.Fatalf("feed page after %d, Next %d: deletion positions %v (of %v) are not ascending within (after, Next], each after what it deleted and no item's (items at %v)", after, p.Next, p.DeletedAt, p.Deleted, p.Positions)
		}
		prev = pos
	}
	if last != p.Next {
		t.Fatalf("feed page after %d: its last entry is at %d, but Next is %d", after, last, p.Next)
	}
}

// feedEnd returns the Next of a form's last page.
func feedEnd(t *testing.T, s formsapi.FeedStore, account, form string) int64 {
	t.Helper()
	var after int64
	for {
		p, err := s.SyncSubmissions(context.Background(), account, form, after, MaxLimit)
		if err != nil {
			t.Fatal(err)
		}
		after = p.Next
		if !p.More {
			return after
		}
	}
}
