package storetest_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/storecontract"
	"github.com/formsapi/formsapi/internal/wire"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/storetest"
	"github.com/formsapi/formsapi/webhook"
	"github.com/formsapi/formsapi/webhook/hookstore"
	"github.com/matryer/is"
)

// brokenStores each break one clause of the contract. The suite must fail
// on each, in the subtest named beside it, and pass on memstore.
var brokenStores = map[string]struct {
	wrap     func(*memstore.Store) formsapi.Store
	failsIn  string
	passesIn string
	group    string // the group of failsIn: Store unless set
}{
	"ignores the account": {
		wrap:     func(m *memstore.Store) formsapi.Store { return ignoresAccount{m} },
		failsIn:  "Store/ListSubmissions/AnotherAccountsForm",
		passesIn: "Store/ListSubmissions/Pagination",
	},
	"repeats an item across pages": {
		wrap:     func(m *memstore.Store) formsapi.Store { return &offsetPages{Store: m} },
		failsIn:  "Store/ListSubmissions/Pagination",
		passesIn: "Store/ListSubmissions/AnotherAccountsForm",
	},
	"ignores filters": {
		wrap:     func(m *memstore.Store) formsapi.Store { return ignoresFilters{m} },
		failsIn:  "Store/ListSubmissions/Filters",
		passesIn: "Store/ListSubmissions/Order",
	},
	"ignores field filters": {
		wrap:     func(m *memstore.Store) formsapi.Store { return ignoresFieldFilters{m} },
		failsIn:  "Store/Find/Equality",
		passesIn: "Store/Find/Pagination",
	},
	"compares filter values as text": {
		wrap:     func(m *memstore.Store) formsapi.Store { return textFilters{m} },
		failsIn:  "Store/Find/Equality",
		passesIn: "Store/Find/Isolation",
	},
	"treats operators as equality": {
		wrap:     func(m *memstore.Store) formsapi.Store { return opsAsEquality{m} },
		failsIn:  "Store/Find/Operators",
		passesIn: "Store/Find/Equality",
	},
	"orders values by their JSON text": {
		wrap:     func(m *memstore.Store) formsapi.Store { return textRanges{m} },
		failsIn:  "Store/Find/Operators",
		passesIn: "Store/Find/Equality",
	},
	"leaves absent members out of ne": {
		wrap:     func(m *memstore.Store) formsapi.Store { return neOfPresent{m} },
		failsIn:  "Store/Find/Operators",
		passesIn: "Store/Find/Pagination",
	},
	"pages filtered lists by offset": {
		wrap:     func(m *memstore.Store) formsapi.Store { return offsetFiltered{m, false} },
		failsIn:  "Store/Find/AddedBetweenPages",
		passesIn: "Store/Find/Pagination",
	},
	"keeps filtered pages across writes": {
		wrap:     func(m *memstore.Store) formsapi.Store { return &staleFiltered{Store: m} },
		failsIn:  "Store/Find/FreshAfterWrites",
		passesIn: "Store/Find/Equality",
	},
	"ignores the search term": {
		wrap:     func(m *memstore.Store) formsapi.Store { return ignoresSearch{m} },
		failsIn:  "Store/Find/Search",
		passesIn: "Store/Find/Equality",
	},
	"pages searched lists by offset": {
		wrap:     func(m *memstore.Store) formsapi.Store { return offsetFiltered{m, true} },
		failsIn:  "Store/Find/SearchPages",
		passesIn: "Store/Find/Search",
	},
	"keeps searched pages across deletions": {
		wrap:     func(m *memstore.Store) formsapi.Store { return &staleFiltered{Store: m, search: true} },
		failsIn:  "Store/Find/SearchAfterDelete",
		passesIn: "Store/Find/Search",
	},
	"misses another node's writes": {
		wrap:     func(m *memstore.Store) formsapi.Store { return &ownWritesOnly{Store: m} },
		failsIn:  "Nodes/IndexOff/SearchWhileAnotherNodeWrites",
		passesIn: "Store/Find/SearchWhileWriting", // its own writes are seen
		group:    "Nodes",
	},
	"misses another node's writes to sorted lists": {
		wrap:     func(m *memstore.Store) formsapi.Store { return &ownWritesOnly{Store: m, sorted: true} },
		failsIn:  "Nodes/SortedPagesWhileAnotherNodeWrites",
		passesIn: "Store/Sort/AddedBetweenPages", // its own writes are seen
		group:    "Nodes",
	},
	"counts without its filters": {
		wrap:     func(m *memstore.Store) formsapi.Store { return countsAll{m} },
		failsIn:  "Store/Find/Total",
		passesIn: "Store/Find/Equality",
	},
	"sorts by the member's JSON text": {
		wrap:     func(m *memstore.Store) formsapi.Store { return offsetSorted{m, true} },
		failsIn:  "Store/Sort/Order",
		passesIn: "Store/Sort/Isolation",
	},
	"pages sorted lists by offset": {
		wrap:     func(m *memstore.Store) formsapi.Store { return offsetSorted{m, false} },
		failsIn:  "Store/Sort/AddedBetweenPages",
		passesIn: "Store/Sort/Order",
	},
	"saves a stream under any lease": {
		wrap:     func(m *memstore.Store) formsapi.Store { return unfenced{m} },
		failsIn:  "Webhooks/Fencing",
		passesIn: "Webhooks/Claim",
		group:    "Webhooks",
	},
	"forgets an endpoint's filter": {
		wrap:     func(m *memstore.Store) formsapi.Store { return filterless{m} },
		failsIn:  "Webhooks/Fields",
		passesIn: "Webhooks/Isolation",
		group:    "Webhooks",
	},
	"forgets the additions a filter passed over": {
		wrap:     func(m *memstore.Store) formsapi.Store { return spanless{m} },
		failsIn:  "Webhooks/Passed",
		passesIn: "Webhooks/Isolation",
		group:    "Webhooks",
	},
	"claims a leased endpoint again": {
		wrap:     func(m *memstore.Store) formsapi.Store { return &doubleClaim{Store: m} },
		failsIn:  "Webhooks/Claim",
		passesIn: "Webhooks/Isolation",
		group:    "Webhooks",
	},
	"returns shared memory": {
		wrap:     func(m *memstore.Store) formsapi.Store { return &aliases{Store: m} },
		failsIn:  "Store/NotAliased",
		passesIn: "Store/ListSubmissions/Fields",
	},
	"ends budgeted pages early": {
		wrap:     func(m *memstore.Store) formsapi.Store { return budgetTimes{m, 0} },
		failsIn:  "Store/ListSubmissions/ByteBudget",
		passesIn: "Store/ListSubmissions/Pagination",
	},
	"overfills budgeted pages": {
		wrap:     func(m *memstore.Store) formsapi.Store { return budgetTimes{m, 2} },
		failsIn:  "Store/ListSubmissions/ByteBudget",
		passesIn: "Store/ListSubmissions/Pagination",
	},
	"ignores a limit below 1": {
		wrap:     func(m *memstore.Store) formsapi.Store { return guessesLimit{m} },
		failsIn:  "Store/ListSubmissions/Limit",
		passesIn: "Store/ListSubmissions/Pagination",
	},
	"ignores the context": {
		wrap:     func(m *memstore.Store) formsapi.Store { return ignoresContext{m} },
		failsIn:  "Store/Context",
		passesIn: "Store/ListSubmissions/Filters",
	},
	"gives every form one incarnation": {
		wrap:     func(m *memstore.Store) formsapi.Store { return oneIncarnation{m} },
		failsIn:  "Lifecycle/FormCreatedAgain",
		passesIn: "Lifecycle/DeleteForm",
		group:    "Lifecycle",
	},
	"keeps one version of a form": {
		wrap:     func(m *memstore.Store) formsapi.Store { return oneVersion{m} },
		failsIn:  "Lifecycle/FormVersion",
		passesIn: "Lifecycle/DeleteSubmission",
		group:    "Lifecycle",
	},
	"keeps one version of a form, read through the handler": {
		wrap:     func(m *memstore.Store) formsapi.Store { return oneVersion{m} },
		failsIn:  "Lifecycle/SummaryFreshAfterWrite",
		passesIn: "Lifecycle/SummarySameAsMemstore",
		group:    "Lifecycle",
	},
	"forgets the fields of deleted submissions": {
		wrap:     func(m *memstore.Store) formsapi.Store { return shrinksFields{m} },
		failsIn:  "Fields/NeverShrunk",
		passesIn: "Fields/Order",
		group:    "Fields",
	},
	"gives fields past the as-of position": {
		wrap:     func(m *memstore.Store) formsapi.Store { return ignoresUpTo{m} },
		failsIn:  "Fields/Range",
		passesIn: "Fields/NeverShrunk",
		group:    "Fields",
	},
	"stores data with its members sorted": {
		wrap:     func(m *memstore.Store) formsapi.Store { return sortsMembers{m} },
		failsIn:  "Export/SameBytesAsMemstore",
		passesIn: "Export/AsOfTokenWithWritersAndDeleters",
		group:    "Export",
	},
	"puts the key in its errors": {
		wrap:     func(m *memstore.Store) formsapi.Store { return leaksKey{m} },
		failsIn:  "Keys/UnknownKey",
		passesIn: "Keys/KnownKeys",
		group:    "Keys",
	},
}

func TestSuitePassesOnMemstore(t *testing.T) {
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store { return load(t, seed) },
		// Another node over a memstore's memory is the store itself: the
		// Nodes clauses pass on a correct store.
		storetest.WithNode(func(_ *testing.T, s formsapi.Store) formsapi.Store { return s }))
}

func TestSuiteCatchesBrokenStores(t *testing.T) {
	for name, b := range brokenStores {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			group := cmp.Or(b.group, "Store")
			is.True(strings.HasPrefix(b.failsIn, group+"/")) // a clause of its group
			// Only the two clauses the assertions read: the whole group
			// for each of the broken stores took most of this package's
			// time under -race.
			cmd := exec.Command(os.Args[0], "-test.run="+runPattern("TestHelperBrokenStore", b.failsIn, b.passesIn), "-test.v")
			cmd.Env = append(os.Environ(), "STORETEST_BROKEN="+name)
			out, err := cmd.CombinedOutput()
			is.True(err != nil)                                                                       // the suite fails on a broken store
			is.True(strings.Contains(string(out), "--- FAIL: TestHelperBrokenStore/"+b.failsIn+" "))  // in the clause it breaks
			is.True(strings.Contains(string(out), "--- PASS: TestHelperBrokenStore/"+b.passesIn+" ")) // and only there
		})
	}
}

// runPattern is a -test.run pattern for the subtests names (each a path
// below the top-level test top) and all that they hold: one alternation
// per level, any name at a level some name does not reach.
func runPattern(top string, names ...string) string {
	levels := [][]string{{top}}
	depth := math.MaxInt
	for _, n := range names {
		depth = min(depth, len(strings.Split(n, "/")))
	}
	for i := range depth {
		var alts []string
		for _, n := range names {
			alts = append(alts, regexp.QuoteMeta(strings.Split(n, "/")[i]))
		}
		levels = append(levels, alts)
	}
	parts := make([]string, len(levels))
	for i, alts := range levels {
		parts[i] = "^(" + strings.Join(alts, "|") + ")$"
	}
	return strings.Join(parts, "/")
}

// TestHelperBrokenStore runs the suite on a broken store when
// TestSuiteCatchesBrokenStores asks for it in a child process.
func TestHelperBrokenStore(t *testing.T) {
	name := os.Getenv("STORETEST_BROKEN")
	if name == "" {
		return // only meaningful in the child process
	}
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store {
		return brokenStores[name].wrap(load(t, seed))
	}, storetest.WithNode(func(t *testing.T, s formsapi.Store) formsapi.Store {
		if o, ok := s.(*ownWritesOnly); ok {
			return o.Store // another node: the same data, not the wrapper's pages
		}
		return s
	}))
}

// TestWriteSuiteCatchesAStoreWithoutSizeLimits runs the write clauses on a
// memstore whose size limits are far beyond formsapi.DefaultLimits, as a
// store that never checked them would be: each size clause must fail,
// and accepting what is within the limits must still pass.
func TestWriteSuiteCatchesAStoreWithoutSizeLimits(t *testing.T) {
	is := is.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperUnlimitedWrites$/^Writes$", "-test.v")
	cmd.Env = append(os.Environ(), "STORETEST_UNLIMITED=1")
	out, err := cmd.CombinedOutput()
	is.True(err != nil) // the suite fails on the store
	for _, clause := range []string{
		"Refused/SubmissionOneByteOverMaxSubmissionBytes",
		"Refused/SubmissionEscapesPastMaxSubmissionBytes",
		"Refused/MetadataOneByteOverMaxMetadataBytes",
		"Refused/FormOneByteOverMaxFormBytes",
		"Refused/FormTitleShortButLongEscaped",
		"Refused/FormAccountIDOneByteOverMaxAccountIDBytes",
		"Refused/KeyAccountIDOneByteOverMaxAccountIDBytes",
	} {
		if !strings.Contains(string(out), "--- FAIL: TestHelperUnlimitedWrites/Writes/"+clause+" ") {
			t.Errorf("the clause %s passes on a store without the limit", clause)
		}
	}
	for _, clause := range []string{"AcceptedIsReadable", "FormsAtLimitsAreReadable", "Refused/DataTooLarge"} {
		if !strings.Contains(string(out), "--- PASS: TestHelperUnlimitedWrites/Writes/"+clause+" ") {
			t.Errorf("the clause %s fails on a store whose limits only differ in size", clause)
		}
	}
}

// TestHelperUnlimitedWrites runs the suite on a memstore without size
// limits when TestWriteSuiteCatchesAStoreWithoutSizeLimits asks for it in
// a child process.
func TestHelperUnlimitedWrites(t *testing.T) {
	if os.Getenv("STORETEST_UNLIMITED") == "" {
		return // only meaningful in the child process
	}
	huge := formsapi.Limits{MaxSubmissionBytes: 1 << 30, MaxMetadataBytes: 1 << 30, MaxFormBytes: 1 << 30, MaxAccountIDBytes: 1 << 30}
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store {
		s := memstore.New(memstore.WithLimits(huge))
		if err := storetest.Load(context.Background(), s, seed); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// grantClocks are the clocks TestHelperGrants gives memstore in a child
// process: none (a host's store that cannot take one), and the suite's
// clock read but the wall clock kept (a store that takes a clock and
// ignores it).
var grantClocks = map[string]func(seed storetest.Seed) []memstore.Option{
	"none": func(storetest.Seed) []memstore.Option { return nil },
	"ignored": func(seed storetest.Seed) []memstore.Option {
		return []memstore.Option{memstore.WithClock(func() time.Time { seed.Clock.Now(); return time.Now() })}
	},
}

// TestGrantSuiteWithoutAClock: a store that cannot take the suite's clock
// still passes the grant clauses, skipping only the expiry clause, with the reason.
func TestGrantSuiteWithoutAClock(t *testing.T) {
	is := is.New(t)
	out, err := grantsChild("none")
	is.NoErr(err)                                                                                            // the suite passes
	is.True(strings.Contains(out, "--- SKIP: TestHelperGrants/Grants/ExpiredKey "))                          // the expiry clause skips
	is.True(strings.Contains(out, "never read seed.Clock"))                                                  // saying why
	is.True(strings.Contains(out, "--- SKIP: TestHelperGrants/Grants/Refused/ExpiresBeforeTheStoresClock ")) // and so does the clause that moves the clock
	is.True(strings.Contains(out, "--- PASS: TestHelperGrants/Grants/ListKeys "))                            // times checked against the wall clock
	is.True(strings.Contains(out, "--- PASS: TestHelperGrants/Grants/LastUsed "))
	is.Equal(strings.Count(out, "--- SKIP: TestHelperGrants/Grants/"), 2) // nothing else skips
}

// TestGrantSuiteCatchesAnIgnoredClock: a store that reads the suite's
// clock but keeps time by the wall clock fails where time is judged.
func TestGrantSuiteCatchesAnIgnoredClock(t *testing.T) {
	is := is.New(t)
	out, err := grantsChild("ignored")
	is.True(err != nil)                                                             // the suite fails
	is.True(strings.Contains(out, "--- FAIL: TestHelperGrants/Grants/ExpiredKey ")) // the key outlives its expiry on the suite's clock
	is.True(strings.Contains(out, "--- FAIL: TestHelperGrants/Grants/ListKeys "))   // CreatedAt is not the clock's
	is.True(strings.Contains(out, "--- FAIL: TestHelperGrants/Grants/LastUsed "))
	is.True(strings.Contains(out, "--- PASS: TestHelperGrants/Grants/ScopedKey ")) // and not elsewhere
}

func grantsChild(clock string) (string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperGrants$/^Grants$", "-test.v")
	cmd.Env = append(os.Environ(), "STORETEST_GRANT_CLOCK="+clock)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestHelperGrants runs the suite on memstore with a clock of
// grantClocks when a test above asks for it in a child process.
func TestHelperGrants(t *testing.T) {
	name := os.Getenv("STORETEST_GRANT_CLOCK")
	if name == "" {
		return // only meaningful in the child process
	}
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store {
		s := memstore.New(grantClocks[name](seed)...)
		if err := storetest.Load(context.Background(), s, seed); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// brokenFeeds each break one clause of the feed contract. The suite must
// fail on each, in the subtest named beside it, and pass on memstore.
var brokenFeeds = map[string]struct {
	wrap     func(*memstore.Store) formsapi.Store
	failsIn  string
	passesIn string
}{
	"numbers before it commits": {
		wrap:     func(m *memstore.Store) formsapi.Store { return &sequenceFeed{Store: m} },
		failsIn:  "ConcurrentWriters",
		passesIn: "Pages",
	},
	"resumes on the last item": {
		wrap:     func(m *memstore.Store) formsapi.Store { return repeatsLast{m} },
		failsIn:  "Pages",
		passesIn: "EmptyForm",
	},
}

func TestFeedSuiteCatchesBrokenFeeds(t *testing.T) {
	for name, b := range brokenFeeds {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBrokenFeed$/^Feed$", "-test.v")
			cmd.Env = append(os.Environ(), "STORETEST_BROKEN_FEED="+name)
			out, err := cmd.CombinedOutput()
			is.True(err != nil)                                                                           // the suite fails on a broken feed
			is.True(strings.Contains(string(out), "--- FAIL: TestHelperBrokenFeed/Feed/"+b.failsIn+" "))  // in the clause it breaks
			is.True(strings.Contains(string(out), "--- PASS: TestHelperBrokenFeed/Feed/"+b.passesIn+" ")) // and not in another
		})
	}
}

// TestHelperBrokenFeed runs the suite on a broken feed when
// TestFeedSuiteCatchesBrokenFeeds asks for it in a child process.
func TestHelperBrokenFeed(t *testing.T) {
	name := os.Getenv("STORETEST_BROKEN_FEED")
	if name == "" {
		return // only meaningful in the child process
	}
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store {
		s := brokenFeeds[name].wrap(memstore.New())
		if err := storetest.Load(context.Background(), s.(formsapi.Writer), seed); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// sequenceFeed numbers submissions as a database sequence would: the
// number is taken when the write starts, and the submission becomes
// visible when it commits. Past the seed (loaded in order), every other
// write commits only once a poller has been shown a later number, so a
// poller reads number 12 before 11 exists, and never sees 11: no timing
// decides it.
type sequenceFeed struct {
	*memstore.Store
	mu      sync.Mutex
	last    int64
	items   []numbered // committed, ascending by pos
	pending []numbered // numbered, committed once a page shows a later number
}

type numbered struct {
	pos int64
	sub formsapi.Submission
}

func (s *sequenceFeed) AddSubmission(ctx context.Context, sub formsapi.Submission, m formsapi.Metadata) error {
	if err := s.Store.AddSubmission(ctx, sub, m); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	n := numbered{s.last, sub}
	if n.pos%2 == 1 && n.pos > 40 {
		s.pending = append(s.pending, n)
		return nil
	}
	s.commit(n)
	return nil
}

// commit makes n visible; s.mu is held.
func (s *sequenceFeed) commit(n numbered) {
	i, _ := slices.BinarySearchFunc(s.items, n.pos, func(n numbered, p int64) int { return cmp.Compare(n.pos, p) })
	s.items = slices.Insert(s.items, i, n)
}

func (s *sequenceFeed) SyncSubmissions(ctx context.Context, account, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	if _, err := s.Store.SyncSubmissions(ctx, account, formID, after, limit); err != nil {
		return formsapi.FeedPage{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := formsapi.FeedPage{Items: []formsapi.Submission{}, Next: after}
	for _, n := range s.items {
		if n.pos <= after || n.sub.FormID != formID {
			continue
		}
		if len(p.Items) == limit {
			p.More = true
			break
		}
		sub := n.sub
		sub.Data = bytes.Clone(sub.Data)
		sub.Attachments = slices.Clone(sub.Attachments)
		p.Items = append(p.Items, sub)
		p.Positions = append(p.Positions, n.pos)
		p.Next = n.pos
	}
	// The writes numbered below what this page showed commit now, behind
	// the poller.
	s.pending = slices.DeleteFunc(s.pending, func(n numbered) bool {
		if n.pos < p.Next {
			s.commit(n)
			return true
		}
		return false
	})
	return p, nil
}

// repeatsLast resumes each page on the last item of the page before.
type repeatsLast struct{ *memstore.Store }

func (s repeatsLast) SyncSubmissions(ctx context.Context, account, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	p, err := s.Store.SyncSubmissions(ctx, account, formID, after, limit)
	if err == nil && len(p.Items) > 0 {
		p.Next--
	}
	return p, err
}

func load(t *testing.T, seed storetest.Seed) *memstore.Store {
	s := memstore.New()
	if err := storetest.Load(context.Background(), s, seed); err != nil {
		t.Fatal(err)
	}
	return s
}

type ignoresAccount struct{ *memstore.Store }

func (s ignoresAccount) ListSubmissions(ctx context.Context, _, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	for _, account := range []string{storetest.AccountA, storetest.AccountB} {
		if p, err := s.Store.ListSubmissions(ctx, account, formID, q); err == nil {
			return p, nil
		}
	}
	return formsapi.Page[formsapi.Submission]{}, formsapi.ErrFormNotFound
}

// offsetPages pages by offset and starts each page on the last item of the
// one before.
type offsetPages struct{ *memstore.Store }

func (s *offsetPages) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	all, err := s.Store.ListSubmissions(ctx, account, formID, formsapi.Query{Limit: 100000, Order: q.Order, Since: q.Since, Until: q.Until})
	if err != nil {
		return all, err
	}
	start := 0
	if q.Cursor != "" {
		start = len(q.Cursor) - 1 // the cursor is a run of n dots
		if strings.Trim(q.Cursor, ".") != "" || start >= len(all.Items) {
			return formsapi.Page[formsapi.Submission]{}, formsapi.ErrInvalidCursor
		}
	}
	end := min(start+q.Limit, len(all.Items))
	p := formsapi.Page[formsapi.Submission]{Items: all.Items[start:end]}
	if end < len(all.Items) {
		p.NextCursor = strings.Repeat(".", end)
	}
	return p, nil
}

type ignoresFilters struct{ *memstore.Store }

func (s ignoresFilters) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	q.Since, q.Until = q.Since.AddDate(0, 0, -1), q.Until.AddDate(0, 0, 1)
	return s.Store.ListSubmissions(ctx, account, formID, q)
}

// ignoresFieldFilters lists every submission of the range, whatever
// q.Filters say.
type ignoresFieldFilters struct{ *memstore.Store }

func (s ignoresFieldFilters) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	q.Filters = nil
	return s.Store.ListSubmissions(ctx, account, formID, q)
}

// textFilters compares a filter's value with the member's JSON text as
// stored, so 42.0 is not 42.
type textFilters struct{ *memstore.Store }

func (s textFilters) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	filters := q.Filters
	q.Filters = nil
	p, err := s.Store.ListSubmissions(ctx, account, formID, q)
	kept := p.Items[:0]
	for _, sub := range p.Items {
		var m map[string]json.RawMessage
		ok := json.Unmarshal(sub.Data, &m) == nil
		for _, f := range filters {
			ok = ok && string(m[f.Field]) == f.Value
		}
		if ok {
			kept = append(kept, sub)
		}
	}
	p.Items = kept
	return p, err
}

// opsAsEquality reads every clause as an equality (an in clause as its
// first value).
type opsAsEquality struct{ *memstore.Store }

func (s opsAsEquality) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	fs := make([]formsapi.Filter, len(q.Filters))
	for i, f := range q.Filters {
		if f.Op == formsapi.FilterIn {
			f.Value = f.Values[0]
		}
		f.Op, f.Values = formsapi.FilterEq, nil
		fs[i] = f
	}
	q.Filters = fs
	return s.Store.ListSubmissions(ctx, account, formID, q)
}

// textRanges orders a member and a range's value by their JSON text, so
// 9 is after 10 and an instant's offset counts.
type textRanges struct{ *memstore.Store }

func (s textRanges) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	var ranges []formsapi.Filter
	q.Filters = slices.DeleteFunc(slices.Clone(q.Filters), func(f formsapi.Filter) bool {
		r := f.Op == formsapi.FilterGt || f.Op == formsapi.FilterGte || f.Op == formsapi.FilterLt || f.Op == formsapi.FilterLte
		if r {
			ranges = append(ranges, f)
		}
		return r
	})
	p, err := s.Store.ListSubmissions(ctx, account, formID, q)
	kept := p.Items[:0]
	for _, sub := range p.Items {
		var m map[string]json.RawMessage
		ok := json.Unmarshal(sub.Data, &m) == nil
		for _, f := range ranges {
			raw, has := m[f.Field]
			c := strings.Compare(string(raw), f.Value)
			ok = ok && has && (f.Op == formsapi.FilterGt && c > 0 || f.Op == formsapi.FilterGte && c >= 0 || f.Op == formsapi.FilterLt && c < 0 || f.Op == formsapi.FilterLte && c <= 0)
		}
		if ok {
			kept = append(kept, sub)
		}
	}
	p.Items = kept
	return p, err
}

// neOfPresent keeps, for ne, only members that are present and not null.
type neOfPresent struct{ *memstore.Store }

func (s neOfPresent) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	fs := slices.Clone(q.Filters)
	for _, f := range q.Filters {
		if f.Op == formsapi.FilterNe {
			fs = append(fs, formsapi.Filter{Field: f.Field, Op: formsapi.FilterExists, Value: "true"})
		}
	}
	q.Filters = fs
	return s.Store.ListSubmissions(ctx, account, formID, q)
}

// ignoresSearch lists every submission its filters keep, whatever
// q.Search says.
type ignoresSearch struct{ *memstore.Store }

func (s ignoresSearch) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	q.Search = ""
	return s.Store.ListSubmissions(ctx, account, formID, q)
}

// offsetFiltered pages a filtered list (a searched one when search is
// set) by its matches' offset: right until a write moves the matches
// under the cursor.
type offsetFiltered struct {
	*memstore.Store
	search bool
}

func (s offsetFiltered) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	if !s.search && len(q.Filters) == 0 || s.search && q.Search == "" {
		return s.Store.ListSubmissions(ctx, account, formID, q)
	}
	all, err := s.Store.ListSubmissions(ctx, account, formID, formsapi.Query{Limit: 100000, Order: q.Order, Since: q.Since, Until: q.Until, Filters: q.Filters, Search: q.Search})
	if err != nil {
		return all, err
	}
	start := 0
	if q.Cursor != "" {
		start = len(q.Cursor) // the cursor is a run of n dots
		if strings.Trim(q.Cursor, ".") != "" || start > len(all.Items) {
			return formsapi.Page[formsapi.Submission]{}, formsapi.ErrInvalidCursor
		}
	}
	end := min(start+q.Limit, len(all.Items))
	p := formsapi.Page[formsapi.Submission]{Items: all.Items[start:end]}
	if end < len(all.Items) {
		p.NextCursor = strings.Repeat(".", end)
	}
	return p, nil
}

// offsetSorted pages a sorted list by offset: right until a write moves
// the items under the cursor. With byText, it orders the items by their
// member's JSON text, as a store without sort keys might.
type offsetSorted struct {
	*memstore.Store
	byText bool
}

func (s offsetSorted) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	if q.Sort == "" {
		return s.Store.ListSubmissions(ctx, account, formID, q)
	}
	all, err := s.Store.ListSubmissions(ctx, account, formID, formsapi.Query{Limit: 100000, Sort: q.Sort, Since: q.Since, Until: q.Until, Filters: q.Filters, Search: q.Search})
	if err != nil {
		return all, err
	}
	if s.byText {
		field := strings.TrimPrefix(q.Sort, "-")
		text := func(d []byte) string {
			var m map[string]json.RawMessage
			_ = json.Unmarshal(d, &m)
			return string(m[field])
		}
		slices.SortStableFunc(all.Items, func(a, b formsapi.Submission) int { return strings.Compare(text(a.Data), text(b.Data)) })
	}
	start := 0
	if q.Cursor != "" {
		start = len(q.Cursor) // the cursor is a run of n dots
		if strings.Trim(q.Cursor, ".") != "" || start > len(all.Items) {
			return formsapi.Page[formsapi.Submission]{}, formsapi.ErrInvalidCursor
		}
	}
	end := min(start+q.Limit, len(all.Items))
	p := formsapi.Page[formsapi.Submission]{Items: all.Items[start:end]}
	if end < len(all.Items) {
		p.NextCursor = strings.Repeat(".", end)
	}
	return p, nil
}

// staleFiltered keeps every filtered page (searched page, when search
// is set) it reads, and serves it again whatever was written since.
type staleFiltered struct {
	*memstore.Store
	search bool
	mu     sync.Mutex
	pages  map[string]formsapi.Page[formsapi.Submission]
}

func (s *staleFiltered) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	if !s.search && len(q.Filters) == 0 || s.search && q.Search == "" {
		return s.Store.ListSubmissions(ctx, account, formID, q)
	}
	key := fmt.Sprintf("%s\x00%s\x00%+v", account, formID, q)
	s.mu.Lock()
	p, ok := s.pages[key]
	s.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := s.Store.ListSubmissions(ctx, account, formID, q)
	if err == nil {
		s.mu.Lock()
		if s.pages == nil {
			s.pages = map[string]formsapi.Page[formsapi.Submission]{}
		}
		s.pages[key] = p
		s.mu.Unlock()
	}
	return p, err
}

// ownWritesOnly keeps every searched or filtered page it reads (sorted
// page, when sorted is set) until a write through it, as a node whose
// cache hears of its own writes only would: writes through another node
// over the same data leave its pages stale.
type ownWritesOnly struct {
	*memstore.Store
	sorted bool
	mu     sync.Mutex
	pages  map[string]formsapi.Page[formsapi.Submission]
}

func (s *ownWritesOnly) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	if s.sorted && q.Sort == "" || !s.sorted && len(q.Filters) == 0 && q.Search == "" {
		return s.Store.ListSubmissions(ctx, account, formID, q)
	}
	key := fmt.Sprintf("%s\x00%s\x00%+v", account, formID, q)
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pages[key]; ok {
		return p, nil
	}
	p, err := s.Store.ListSubmissions(ctx, account, formID, q)
	if err == nil {
		if s.pages == nil {
			s.pages = map[string]formsapi.Page[formsapi.Submission]{}
		}
		s.pages[key] = p
	}
	return p, err
}

func (s *ownWritesOnly) AddSubmission(ctx context.Context, sub formsapi.Submission, m formsapi.Metadata) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages = nil
	return s.Store.AddSubmission(ctx, sub, m)
}

func (s *ownWritesOnly) DeleteSubmission(ctx context.Context, account, formID, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages = nil
	return s.Store.DeleteSubmission(ctx, account, formID, id)
}

// countsAll counts a filtered list as if it had no filters.
type countsAll struct{ *memstore.Store }

func (s countsAll) CountSubmissions(ctx context.Context, account, formID string, q formsapi.Query, exact bool) (formsapi.Total, error) {
	q.Filters = nil
	return s.Store.CountSubmissions(ctx, account, formID, q, exact)
}

// aliases hands out the same slice for the same request every time.
type aliases struct {
	*memstore.Store
	mu    sync.Mutex
	cache map[aliasKey]formsapi.Page[formsapi.Submission]
}

type aliasKey struct {
	form, list, cursor string
	limit, maxBytes    int
}

func newAliasKey(form string, q formsapi.Query) aliasKey {
	return aliasKey{form, string(q.AppendKey(nil)), q.Cursor, q.Limit, q.MaxBytes}
}

func (s *aliases) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.cache[newAliasKey(formID, q)]; ok {
		return p, nil
	}
	p, err := s.Store.ListSubmissions(ctx, account, formID, q)
	if err == nil {
		if s.cache == nil {
			s.cache = map[aliasKey]formsapi.Page[formsapi.Submission]{}
		}
		s.cache[newAliasKey(formID, q)] = p
	}
	return p, err
}

// leaksKey names the key in the error of a refused one, which the Errors
// clause forbids: the handler logs the text.
type leaksKey struct{ *memstore.Store }

func (s leaksKey) ResolveKey(ctx context.Context, key string) (string, error) {
	account, err := s.Store.ResolveKey(ctx, key)
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, key)
	}
	return account, nil
}

type ignoresContext struct{ *memstore.Store }

func (s ignoresContext) ListSubmissions(_ context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	return s.Store.ListSubmissions(context.Background(), account, formID, q)
}

// budgetTimes multiplies a positive byte budget by factor, which may be 0
// for a budget of one byte: one item a page.
type budgetTimes struct {
	*memstore.Store
	factor int
}

func (s budgetTimes) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	if q.MaxBytes > 0 {
		q.MaxBytes = max(q.MaxBytes*s.factor, 1)
	}
	return s.Store.ListSubmissions(ctx, account, formID, q)
}

// guessesLimit lists ten items for a limit below 1 instead of refusing it.
type guessesLimit struct{ *memstore.Store }

func (s guessesLimit) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	if q.Limit < 1 {
		q.Limit = 10
	}
	return s.Store.ListSubmissions(ctx, account, formID, q)
}

// damageModes are the ways damageable reads its damaged data back: the
// suite must fail each but "" in the clause beside it, and pass the case
// beside it, if any (the one case the mode gets right).
var damageModes = map[string]struct{ failsIn, passesIn string }{
	"":                                 {},
	"fails the page":                   {failsIn: "Damage/NotAnObject"},
	"ends the list at the damaged row": {failsIn: "Damage/Truncated"},
	"mends the row into {}":            {failsIn: "Damage/NestsTooDeep", passesIn: "Damage/InvalidUTF8"},
}

// damageable is memstore with storage that a test can damage, as a
// host's store whose rows are edited by hand would be: the damaged
// submission reads back with the damaged data in place of its own, and
// mode says how the store then answers (see damageModes).
type damageable struct {
	*memstore.Store
	mode    string
	mu      sync.Mutex
	damaged map[string][]byte // damaged data by the canonical data it replaced
}

// damage replaces the data of the newest submission of formID, which in
// the seed is the one added last.
func damage(t *testing.T, s formsapi.Store, account, formID string, c storetest.DamageCase) {
	d := s.(*damageable)
	p, err := d.Store.ListSubmissions(context.Background(), account, formID, formsapi.Query{Limit: 1})
	if err != nil || len(p.Items) != 1 {
		t.Fatalf("damage: newest submission: %v", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.damaged = map[string][]byte{storetest.Canonical(p.Items[0].Data): c.Data}
}

// read puts the damaged data in place in items; it reports false if
// the page is to end at item i.
func (d *damageable) read(items []formsapi.Submission) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range items {
		data, ok := d.damaged[storetest.Canonical(items[i].Data)]
		if !ok {
			continue
		}
		switch d.mode {
		case "fails the page":
			return i, errors.New("damageable: submission cannot be decoded")
		case "ends the list at the damaged row":
			return i, nil
		case "mends the row into {}":
			data = []byte(`{}`)
		}
		items[i].Data = bytes.Clone(data)
	}
	return len(items), nil
}

func (d *damageable) ListSubmissions(ctx context.Context, account, formID string, q formsapi.Query) (formsapi.Page[formsapi.Submission], error) {
	p, err := d.Store.ListSubmissions(ctx, account, formID, q)
	if err != nil {
		return p, err
	}
	n, err := d.read(p.Items)
	if n < len(p.Items) {
		p.Items, p.NextCursor = p.Items[:n], ""
	}
	return p, err
}

func (d *damageable) SyncSubmissions(ctx context.Context, account, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	p, err := d.Store.SyncSubmissions(ctx, account, formID, after, limit)
	if err != nil {
		return p, err
	}
	_, err = d.read(p.Items)
	return p, err
}

func openDamageable(mode string) storetest.Open {
	return func(t *testing.T, seed storetest.Seed) formsapi.Store {
		d := &damageable{Store: memstore.New(), mode: mode}
		if err := storetest.Load(context.Background(), d, seed); err != nil {
			t.Fatal(err)
		}
		return d
	}
}

// TestSuitePassesOnADamageableStore: a store that reads damaged data back
// as it is stored, for the handler to leave out, passes every clause,
// the damaged-data ones included.
func TestSuitePassesOnADamageableStore(t *testing.T) {
	storetest.Run(t, openDamageable(""), storetest.WithDamage(damage))
}

// TestDamageSuiteCatchesStoresThatMishandleDamage: a store that fails the
// whole page at a damaged row, ends the list there, or mends the row into
// something else fails the damaged-data clauses.
func TestDamageSuiteCatchesStoresThatMishandleDamage(t *testing.T) {
	for mode, m := range damageModes {
		if mode == "" {
			continue
		}
		t.Run(mode, func(t *testing.T) {
			is := is.New(t)
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDamage$/^Damage$", "-test.v")
			cmd.Env = append(os.Environ(), "STORETEST_DAMAGE="+mode)
			out, err := cmd.CombinedOutput()
			is.True(err != nil)                                                                                      // the suite fails
			is.True(strings.Contains(string(out), "--- FAIL: TestHelperDamage/"+m.failsIn+" "))                      // in a damage clause
			is.True(m.passesIn == "" || strings.Contains(string(out), "--- PASS: TestHelperDamage/"+m.passesIn+" ")) // and not in the one it gets right
		})
	}
}

// TestHelperDamage runs the suite on a damageable store in a mode of
// damageModes when a test above asks for it in a child process.
func TestHelperDamage(t *testing.T) {
	mode, ok := os.LookupEnv("STORETEST_DAMAGE")
	if !ok {
		return // only meaningful in the child process
	}
	storetest.Run(t, openDamageable(mode), storetest.WithDamage(damage))
}

// TestSkipsSayWhy: a store with nothing but the Store methods runs the
// Store clauses and skips every other group, each naming what the store
// lacks.
func TestSkipsSayWhy(t *testing.T) {
	is := is.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReadOnly$", "-test.v")
	cmd.Env = append(os.Environ(), "STORETEST_READONLY=1")
	out, err := cmd.CombinedOutput()
	is.NoErr(err) // the suite passes
	for group, reason := range map[string]string{
		"FastPath":     "no page fast path",
		"Keys":         "does not implement formsapi.KeyResolver",
		"Writes":       "does not implement formsapi.Writer",
		"Lifecycle":    "does not implement formsapi.Writer",
		"Grants":       "does not implement formsapi.KeyManager",
		"Feed":         "does not implement formsapi.FeedStore",
		"FeedFastPath": "does not implement formsapi.FeedStore",
		"Damage":       "no storetest.WithDamage option",
	} {
		is.True(strings.Contains(string(out), "--- SKIP: TestHelperReadOnly/"+group+" ")) // the group skips
		says := regexp.MustCompile(`(?m)^=== RUN   TestHelperReadOnly/` + group + `\n.*` + regexp.QuoteMeta(reason))
		is.True(says.Match(out)) // saying why
	}
	is.True(strings.Contains(string(out), "--- PASS: TestHelperReadOnly/Store ")) // and the Store clauses run
	is.True(strings.Contains(string(out), "--- SKIP: TestHelperReadOnly/Store/ListSubmissions/AddedBetweenPages "))
}

// TestHelperReadOnly runs the suite on a store with only the Store
// methods when TestSkipsSayWhy asks for it in a child process.
func TestHelperReadOnly(t *testing.T) {
	if os.Getenv("STORETEST_READONLY") == "" {
		return // only meaningful in the child process
	}
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store {
		return readOnly{load(t, seed)}
	})
}

// readOnly is a store with nothing but the Store methods.
type readOnly struct{ formsapi.Store }

// unfenced saves a stream whatever the lease's generation: a node paused
// past its lease would move the cursor of the one that took over.
type unfenced struct{ *memstore.Store }

func (s unfenced) SaveStream(ctx context.Context, id string, gen int64, st webhook.Stream, now time.Time, d time.Duration) error {
	l, err := s.ClaimEndpoints(ctx, now.Add(24*time.Hour), d, 100) // steal it, whoever holds it
	if err != nil {
		return err
	}
	for _, x := range l {
		if x.Endpoint.ID == id {
			gen = x.Gen
		}
	}
	return s.Store.SaveStream(ctx, id, gen, st, now, d)
}

// filterless adds endpoints without their filter: a filtered endpoint
// would receive every addition.
type filterless struct{ *memstore.Store }

func (s filterless) AddEndpoint(ctx context.Context, e webhook.Endpoint, streams []webhook.Stream) error {
	e.Filter = ""
	return s.Store.AddEndpoint(ctx, e, streams)
}

// spanless saves a stream's cursor but none of its passed spans: a
// filtered endpoint would be sent the deletions of what it never got.
type spanless struct{ *memstore.Store }

func (s spanless) SaveVerdicts(ctx context.Context, id string, gen int64, st webhook.Stream, v hookstore.Verdicts, now time.Time, d time.Duration) error {
	v.Pass = nil
	return s.Store.SaveVerdicts(ctx, id, gen, st, v, now, d)
}

// doubleClaim forgets its leases: every claim finds every endpoint free.
type doubleClaim struct{ *memstore.Store }

func (s *doubleClaim) ClaimEndpoints(ctx context.Context, now time.Time, d time.Duration, max int) ([]webhook.Lease, error) {
	return s.Store.ClaimEndpoints(ctx, now.Add(24*time.Hour), d, max)
}

// oneIncarnation tells the handler the same incarnation for every form,
// as a store that forgot to change it when a form is created again would:
// a cursor or sync token of a deleted form then reads the new form's.
type oneIncarnation struct{ *memstore.Store }

func (o oneIncarnation) FastPath() storecontract.Self {
	return storecontract.Self{Store: o, Secret: o.Store.FastPath().Secret}
}

func (o oneIncarnation) AppendSubmissions(ctx context.Context, accountID, formID string, q formsapi.Query, p *wire.Page) error {
	err := o.Store.AppendSubmissions(ctx, accountID, formID, q, p)
	p.Incarnation = 1
	return err
}

func (o oneIncarnation) FeedHead(ctx context.Context, accountID, formID string, form *wire.Form) (int64, uint64, error) {
	head, _, err := o.Store.FeedHead(ctx, accountID, formID, form)
	return head, 1, err
}

func (o oneIncarnation) AppendFeed(ctx context.Context, accountID, formID string, q wire.FeedQuery, p *wire.Page) (int64, bool, error) {
	next, more, err := o.Store.AppendFeed(ctx, accountID, formID, q, p)
	p.Incarnation = 1
	return next, more, err
}

// oneVersion tells one version of every form, as a store whose version
// no write changed would: a handler that kept what it read under the
// version would serve it past a write.
type oneVersion struct{ *memstore.Store }

func (o oneVersion) FastPath() storecontract.Self {
	return storecontract.Self{Store: o, Secret: o.Store.FastPath().Secret}
}

func (o oneVersion) FormVersion(ctx context.Context, accountID, formID string, form *wire.Form) (wire.Form, error) {
	f, err := o.Store.FormVersion(ctx, accountID, formID, form)
	f.Version = 1
	return f, err
}

// shrinksFields answers DataFields with only the fields that a
// submission still in the form has, as a store that computed them from
// its rows would: a deletion takes a column away.
type shrinksFields struct{ *memstore.Store }

func (s shrinksFields) DataFields(ctx context.Context, account, formID string, upTo int64, limit int) ([]string, []int64, error) {
	names, first, err := s.Store.DataFields(ctx, account, formID, upTo, limit)
	if err != nil {
		return nil, nil, err
	}
	live := map[string]bool{}
	for after := int64(0); ; {
		p, err := s.Store.SyncSubmissions(ctx, account, formID, after, 1000)
		if err != nil {
			return nil, nil, err
		}
		for _, item := range p.Items {
			for _, n := range wire.FieldNames(item.Data) {
				live[n] = true
			}
		}
		if after = p.Next; !p.More {
			break
		}
	}
	var n2 []string
	var f2 []int64
	for i, n := range names {
		if live[n] {
			n2, f2 = append(n2, n), append(f2, first[i])
		}
	}
	return n2, f2, nil
}

// ignoresUpTo gives every field, whatever upTo is.
type ignoresUpTo struct{ *memstore.Store }

func (s ignoresUpTo) DataFields(ctx context.Context, account, formID string, _ int64, limit int) ([]string, []int64, error) {
	return s.Store.DataFields(ctx, account, formID, 1<<62, limit)
}

// sortsMembers gives each submission's data with its members sorted by
// name, as a store that keeps data in a column of PostgreSQL's jsonb
// would: the export's columns and cells come out in another order.
type sortsMembers struct{ *memstore.Store }

func (s sortsMembers) SyncSubmissions(ctx context.Context, account, formID string, after int64, limit int) (formsapi.FeedPage, error) {
	p, err := s.Store.SyncSubmissions(ctx, account, formID, after, limit)
	for i, item := range p.Items {
		var m map[string]json.RawMessage
		if json.Unmarshal(item.Data, &m) == nil {
			p.Items[i].Data, _ = json.Marshal(m) // encoding/json sorts a map's keys
		}
	}
	return p, err
}

// TestGroupsRunsOnlyThose: with storetest.Groups the named groups run and
// the others are not run at all (neither run nor skipped, so a run that
// treats a skip as a failure passes); a name Run does not know fails it.
func TestGroupsRunsOnlyThose(t *testing.T) {
	is := is.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperGroups$", "-test.v")
	cmd.Env = append(os.Environ(), "STORETEST_GROUPS=Keys,Webhooks")
	out, err := cmd.CombinedOutput()
	is.NoErr(err) // the named groups pass
	for _, g := range []string{"Keys", "Webhooks"} {
		is.True(strings.Contains(string(out), "--- PASS: TestHelperGroups/"+g+" ")) // a named group runs
	}
	is.True(!strings.Contains(string(out), "TestHelperGroups/Store")) // the others are not run
	is.True(!strings.Contains(string(out), "--- SKIP"))               // nor skipped

	cmd = exec.Command(os.Args[0], "-test.run=^TestHelperGroups$", "-test.v")
	cmd.Env = append(os.Environ(), "STORETEST_GROUPS=Keys,Hooks")
	out, err = cmd.CombinedOutput()
	is.True(err != nil)                                                                // an unknown name fails the run
	is.True(strings.Contains(string(out), `storetest.Groups("Hooks"): no such group`)) // naming it
}

// TestHelperGroups runs the groups STORETEST_GROUPS names when
// TestGroupsRunsOnlyThose asks for it in a child process.
func TestHelperGroups(t *testing.T) {
	groups := os.Getenv("STORETEST_GROUPS")
	if groups == "" {
		return // only meaningful in the child process
	}
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store { return load(t, seed) },
		storetest.Groups(strings.Split(groups, ",")...))
}

// TestSharedReadsStayUnchanged: the clauses that only read share one
// store, and a store whose reads write (here: each ListForms adds a
// submission) fails the group that shares it, not only some clause.
func TestSharedReadsStayUnchanged(t *testing.T) {
	is := is.New(t)
	cmd := exec.Command(os.Args[0], "-test.run="+runPattern("TestHelperWritingReads", "Store/ListForms/Limit"), "-test.v")
	cmd.Env = append(os.Environ(), "STORETEST_WRITING_READS=1")
	out, err := cmd.CombinedOutput()
	is.True(err != nil)                                                                                                    // the suite fails
	is.True(strings.Contains(string(out), "a clause that should only read changed the store the read-only clauses share")) // saying why
}

// TestHelperWritingReads runs the suite on a store whose reads write, when
// TestSharedReadsStayUnchanged asks for it in a child process.
func TestHelperWritingReads(t *testing.T) {
	if os.Getenv("STORETEST_WRITING_READS") == "" {
		return // only meaningful in the child process
	}
	storetest.Run(t, func(t *testing.T, seed storetest.Seed) formsapi.Store { return writingReads{load(t, seed)} })
}

// writingReads adds a submission to a form of the account whenever its
// forms are listed.
type writingReads struct{ *memstore.Store }

func (w writingReads) ListForms(ctx context.Context, accountID string, q formsapi.Query) (formsapi.Page[formsapi.Form], error) {
	if accountID == storetest.AccountA {
		if err := w.AddSubmission(ctx, formsapi.Submission{FormID: storetest.FormEmpty, Data: []byte(`{"x":1}`)}, formsapi.Metadata{}); err != nil {
			return formsapi.Page[formsapi.Form]{}, err
		}
	}
	return w.Store.ListForms(ctx, accountID, q)
}
