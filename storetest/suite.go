package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/storecontract"
)

// Open makes a fresh store loaded with seed. Run calls it once for each
// clause that writes, once for each group of clauses that only read (they
// share that store, reading it in parallel, and leave it as it was), and
// once more to learn what the store implements. Cleanup belongs in
// t.Cleanup. Each call must give a store of its own: the clauses run in
// parallel (see [Sequential]) and write to it.
type Open func(t *testing.T, seed Seed) formsapi.Store

// Option changes how [Run] checks a store.
type Option func(*config)

type config struct {
	damage     Damage
	sequential bool
	indexed    Open            // see WithSearchIndex
	node       Node            // see WithNode
	groups     map[string]bool // see Groups; nil for every group
}

// groupNames are the names of Run's groups of clauses, in the order it
// runs them.
var groupNames = []string{"Store", "FastPath", "SearchIndex", "Keys", "Writes", "Batch", "Lifecycle", "Grants", "Feed", "FeedFastPath", "Export", "Fields", "Webhooks", "Nodes", "Damage"}

// Groups has Run check only the named groups of clauses (the names of
// [Run]'s list), and leave the others out: they are not run, not skipped.
// It is for a second way of making the same store, a constructor that
// differs from one a full Run already checks only in how the store gets
// its connections, so that only the groups that read and write through
// them need to run again (this module's stores run Store, Keys, Writes,
// Feed and Webhooks on New, everything on Open). A name Run does not know
// fails the run.
func Groups(names ...string) Option {
	return func(c *config) {
		c.groups = map[string]bool{}
		for _, n := range names {
			c.groups[n] = true
		}
	}
}

// Damage damages, behind the store's back, the stored submission of
// formID (a form of accountID) that was added last, the way c says: it
// writes c.Data where the store keeps the submission's data, or c.Object
// where it keeps the whole submission as the JSON the API sends
// (sqlitestore and pgstore keep both, and write both), with SQL, a file
// edit or whatever reaches the store's own storage. It fails t if it
// cannot.
type Damage func(t *testing.T, s formsapi.Store, accountID, formID string, c DamageCase)

// DamageCase is one way stored data is damaged: written by hand, by a
// bug, or before the write side had [formsapi.Limits]. Run damages a
// seed submission each way, one clause per case, and reads its form
// through a handler over the store.
type DamageCase struct {
	Name string
	// Data is the submission's data once damaged.
	Data []byte
	// Object is the whole submission as one stored JSON object once
	// damaged the same way.
	Object []byte
	// Served reports whether the submission is still served, once (its
	// invalid UTF-8 as U+FFFD, or intact where the store cannot hold
	// invalid UTF-8); otherwise it is left out of its page and logged.
	Served bool
}

// WithDamage lets Run check the Store contract's damaged-data clause: d
// damages one stored submission in the store's own storage, and the
// handler over the store must leave it out of its page (or mend its
// UTF-8), log its position and never its content, and serve the rest of
// the page and the pages after it, on every read path the store has.
// Without it that clause is skipped, saying why: a store whose storage
// the test cannot reach (memstore's is its memory) cannot be damaged.
func WithDamage(d Damage) Option {
	return func(c *config) { c.damage = d }
}

// WithSearchIndex runs the search clauses (q=, formsapi.Query.Search)
// again on the stores indexed makes: the same stores as Run's open, but
// with the store's own search index on where open leaves it off (this
// module's database stores index search's trigrams only when asked to,
// and search without them by walking the form). Both must find the same
// submissions; only their cost differs. The other clauses run on open's
// stores alone.
func WithSearchIndex(indexed Open) Option {
	return func(c *config) { c.indexed = indexed }
}

// Node opens another node over the data of s, a store Run's Open (or
// WithSearchIndex's) made: a store of its own, with its own
// connections, caches and counters, reading and writing what s does, as
// a second process of a fleet would (for sqlitestore another Store on
// the same file, for pgstore one on the same schema). It fails t if it
// cannot; the node is closed when t ends.
type Node func(t *testing.T, s formsapi.Store) formsapi.Store

// WithNode runs the group Nodes: searched and filtered walks on one
// store while another node writes (with the search index off, and on
// with WithSearchIndex; through the page fast path too, with it off,
// where the store has one), each write that returned before a walk began found once;
// sorted walks while another node adds and deletes between pages, in
// order, each submission listed before found once; and a form's summary
// through a handler over the store, another after an addition through
// the other node and the first again after its deletion.
// Without it the group is skipped, saying why (a store of one process's
// memory has no other node).
func WithNode(node Node) Option {
	return func(c *config) { c.node = node }
}

// Sequential runs the clauses one at a time, for a store of which Open
// cannot make two at once (one shared database, say). Without it every
// clause runs in parallel with the others, each on its own store.
func Sequential() Option {
	return func(c *config) { c.sequential = true }
}

// parallel marks a clause as one to run in parallel, unless the store is
// checked sequentially.
func (c *config) parallel(t *testing.T) {
	if !c.sequential {
		t.Parallel()
	}
}

// Run checks the store that open makes against every contract it
// implements, each clause a subtest on a fresh store loaded with
// DefaultSeed (the clauses that only read share one), run in parallel. It opens one store first to learn what
// it implements, and runs these groups of clauses, each skipped with the
// reason when it does not apply:
//
//   - Store: the formsapi.Store contract, every store, filters on
//     submitted fields included. The clauses on writes between pages
//     (filtered ones too: exact under concurrent writers, also where a
//     page ends short at the bound of entries it examines) need the
//     store's AddSubmission, and the one on filtered pages read again
//     after additions, deletions and erasures needs formsapi.Writer.
//   - FastPath: the Store clauses again, read through the page fast path
//     that the handler takes on this module's own stores.
//   - SearchIndex: the search clauses of Store again (and of FastPath,
//     where it runs) on stores with their search index on, when
//     [WithSearchIndex] says how to make them.
//   - Keys: the formsapi.KeyResolver contract, with revocation when the
//     store has RevokeKey.
//   - Writes: the formsapi.Writer contract (a Writer that is also a
//     KeyResolver): refused writes change nothing, formsapi.DefaultLimits
//     enforced byte for byte, accepted writes readable through a handler.
//   - Batch: the formsapi.BatchWriter contract, on a store with it and
//     the Writes group's: a batch leaves the same answers (lists, filters,
//     searches, counts, feed, fields) as the same submissions written one
//     at a time, with the search index off and on (see
//     [WithSearchIndex]); a refused batch, whichever of its submissions is
//     refused and why, or a context that ends, writes nothing and names
//     the submission; a reader sees none of a batch or all of it.
//   - Lifecycle: UpdateForm, DeleteForm, DeleteSubmission and Erase of
//     formsapi.Writer (on the same stores as Writes), each seen by the very
//     next read, of the store and of a handler over it, cursors and feed
//     tokens across deletions, refused calls that change nothing; on a
//     FeedStore, copies kept through the feed (by position, and by ref
//     through a handler) exact across deletions and erasures, also while
//     writers add and delete ([RunFeedCopy]), and the retention of
//     deletions at its boundary on the seed's clock (30 days).
//   - Grants: the formsapi.KeyManager contract (scoped and expiring keys,
//     ListKeys, last-used times) on a KeyManager with RevokeKey.
//   - Feed: the formsapi.FeedStore contract, on a FeedStore with
//     AddSubmission, with writers racing a poller.
//   - FeedFastPath: the Feed clauses again, read through the feed's fast
//     path on this module's own stores.
//   - Export: what GET /v1/forms/{formId}/export needs of a FeedStore with
//     formsapi.Writer, through a handler over it: for the same data the
//     same bytes as memstore's in every format and option (refs and
//     positions aside when the store's positions are not memstore's),
//     an export cut at 100 random offsets and resumed after its last
//     complete line byte for byte the whole, and the export plus the
//     feed from its Sync-Token exactly the form while writers and
//     deleters run.
//   - Fields: the formsapi.FieldStore contract (the CSV export's
//     columns), on a FieldStore that is a FeedStore with formsapi.Writer:
//     fields computed from the feed, their order and range, unchanged as
//     of a position while writers add, never shrunk by deletions and
//     erasures, gone with their form.
//   - Webhooks: the webhook.Store contract (endpoints, their streams
//     and the dispatcher's leases, fencing included), on a store that
//     implements it.
//   - Damage: the damaged-data clause of the Store contract, one clause
//     per case, when [WithDamage] says how to damage the store.
func Run(t *testing.T, open Open, opts ...Option) {
	c := &config{}
	for _, o := range opts {
		o(c)
	}
	for n := range c.groups {
		if !slices.Contains(groupNames, n) {
			t.Fatalf("storetest.Groups(%q): no such group; the groups are %v", n, groupNames)
		}
	}
	probe := open(t, DefaultSeed())
	group := func(name, skip string, clauses func(t *testing.T)) {
		if c.groups != nil && !c.groups[name] {
			return
		}
		t.Run(name, func(t *testing.T) {
			if skip != "" {
				t.Skip(skip)
			}
			c.parallel(t)
			clauses(t)
		})
	}

	group("Store", "", func(t *testing.T) { storeClauses(t, open, c) })

	fast := ""
	switch _, ok := probe.(fastStore); {
	case !ok:
		fast = "the store has no page fast path (AppendSubmissions): the handler reads it through ListSubmissions, which Store checks"
	case !storecontract.IsStore(probe):
		fast = "the store embeds one of this module's stores: the handler reads it through its own ListSubmissions, which Store checks, never the embedded fast path"
	case !isWriter(probe):
		fast = "the fast path is checked on stores with formsapi.Writer"
	}
	group("FastPath", fast, func(t *testing.T) {
		storeClauses(t, func(t *testing.T, seed Seed) formsapi.Store {
			return fastLists{as[fastWriter](t, open(t, seed))}
		}, c)
	})

	indexed := ""
	if c.indexed == nil {
		indexed = "no storetest.WithSearchIndex option: the store has no search index to turn on, or the search clauses in Store ran with it"
	}
	group("SearchIndex", indexed, func(t *testing.T) {
		searchClauses(t, c.indexed, c)
		if fast != "" {
			return
		}
		t.Run("FastPath", func(t *testing.T) {
			c.parallel(t)
			searchClauses(t, func(t *testing.T, seed Seed) formsapi.Store {
				return fastLists{as[fastWriter](t, c.indexed(t, seed))}
			}, c)
		})
	})

	keys := ""
	if _, ok := probe.(formsapi.KeyResolver); !ok {
		keys = "the store does not implement formsapi.KeyResolver"
	}
	group("Keys", keys, func(t *testing.T) {
		keyClauses(t, func(t *testing.T, seed Seed) formsapi.KeyResolver {
			return as[formsapi.KeyResolver](t, open(t, seed))
		}, c)
	})

	writes := ""
	switch _, ok := probe.(writeStore); {
	case !isWriter(probe):
		writes = "the store does not implement formsapi.Writer"
	case !ok:
		writes = "the store implements formsapi.Writer but not formsapi.KeyResolver, which the write clauses read keys back with"
	}
	group("Writes", writes, func(t *testing.T) {
		writeClauses(t, func(t *testing.T, seed Seed) writeStore { return as[writeStore](t, open(t, seed)) }, c)
	})
	batch := writes
	if _, ok := probe.(formsapi.BatchWriter); !ok && batch == "" {
		batch = "the store does not implement formsapi.BatchWriter"
	}
	group("Batch", batch, func(t *testing.T) {
		batchClauses(t, func(t *testing.T, seed Seed) batchStore { return as[batchStore](t, open(t, seed)) }, c)
	})
	group("Lifecycle", writes, func(t *testing.T) {
		lifecycleClauses(t, func(t *testing.T, seed Seed) writeStore { return as[writeStore](t, open(t, seed)) }, c)
	})

	grants := ""
	switch _, ok := probe.(grantStore); {
	case !isKeyManager(probe):
		grants = "the store does not implement formsapi.KeyManager"
	case !ok:
		grants = "the store implements formsapi.KeyManager but has no RevokeKey, which the grant clauses revoke keys with"
	}
	group("Grants", grants, func(t *testing.T) {
		grantClauses(t, func(t *testing.T, seed Seed) grantStore { return as[grantStore](t, open(t, seed)) }, c)
	})

	feed := ""
	switch _, ok := probe.(syncStore); {
	case !isFeedStore(probe):
		feed = "the store does not implement formsapi.FeedStore"
	case !ok:
		feed = "the store implements formsapi.FeedStore but has no AddSubmission, which the feed clauses write with"
	}
	group("Feed", feed, func(t *testing.T) {
		feedClauses(t, func(t *testing.T, seed Seed) syncStore { return as[syncStore](t, open(t, seed)) }, c)
	})

	feedFast := feed
	if feedFast == "" {
		switch _, ok := probe.(fastFeedStore); {
		case !ok:
			feedFast = "the store has no feed fast path (AppendFeed): the handler reads its feed through SyncSubmissions, which Feed checks"
		case !storecontract.IsStore(probe):
			feedFast = "the store embeds one of this module's stores: the handler reads its feed through its own SyncSubmissions, which Feed checks"
		}
	}
	group("FeedFastPath", feedFast, func(t *testing.T) {
		feedClauses(t, func(t *testing.T, seed Seed) syncStore {
			return fastFeed{as[fastFeedStore](t, open(t, seed))}
		}, c)
	})

	export := ""
	switch _, ok := probe.(exportStore); {
	case !isFeedStore(probe):
		export = "the store does not implement formsapi.FeedStore, which the export reads"
	case !ok:
		export = "the store implements formsapi.FeedStore but not formsapi.Writer with formsapi.KeyResolver, which the export clauses write and authenticate with"
	}
	group("Export", export, func(t *testing.T) {
		exportClauses(t, func(t *testing.T, seed Seed) exportStore { return as[exportStore](t, open(t, seed)) }, c)
	})

	fields := ""
	switch _, ok := probe.(fieldStore); {
	case !isFieldStore(probe):
		fields = "the store does not implement formsapi.FieldStore: a CSV export reads the whole form once before its first byte for its columns"
	case !ok:
		fields = "the store implements formsapi.FieldStore but not formsapi.FeedStore with formsapi.Writer and formsapi.KeyResolver, which the field clauses read and write with"
	}
	group("Fields", fields, func(t *testing.T) {
		fieldClauses(t, func(t *testing.T, seed Seed) fieldStore { return as[fieldStore](t, open(t, seed)) }, c)
	})

	hooks := ""
	if !isHookStore(probe) {
		hooks = "the store does not implement webhook.Store"
	}
	group("Webhooks", hooks, func(t *testing.T) {
		hookClauses(t, func(t *testing.T) hookStore { return as[hookStore](t, open(t, DefaultSeed())) }, c)
	})

	damage := ""
	if c.damage == nil {
		damage = "no storetest.WithDamage option: the suite cannot damage the store's stored data to check the damaged-data clause"
	}
	nodes := ""
	if c.node == nil {
		nodes = "no storetest.WithNode option: walks while another node writes cannot be checked"
	}
	group("Nodes", nodes, func(t *testing.T) {
		for _, v := range []struct {
			name string
			open Open
		}{{"IndexOff", open}, {"IndexOn", c.indexed}} {
			if v.open == nil {
				continue
			}
			t.Run(v.name+"/SearchWhileAnotherNodeWrites", func(t *testing.T) {
				c.parallel(t)
				s := v.open(t, SearchSeed())
				searchWhileWriting(t, s, c.node(t, s))
			})
			if fast != "" || v.name == "IndexOn" {
				continue // the fast path's caches are the same either way
			}
			t.Run(v.name+"/FastPath/SearchWhileAnotherNodeWrites", func(t *testing.T) {
				c.parallel(t)
				s := v.open(t, SearchSeed())
				searchWhileWriting(t, fastLists{as[fastWriter](t, s)}, c.node(t, s))
			})
		}
		t.Run("SortedPagesWhileAnotherNodeWrites", func(t *testing.T) {
			c.parallel(t)
			s := open(t, FindSeed())
			sortAddedBetweenPages(t, s, c.node(t, s))
		})
		if fast == "" {
			t.Run("FastPath/SortedPagesWhileAnotherNodeWrites", func(t *testing.T) {
				c.parallel(t)
				s := open(t, FindSeed())
				sortAddedBetweenPages(t, fastLists{as[fastWriter](t, s)}, c.node(t, s))
			})
		}
		if writes == "" {
			t.Run("SummaryAfterAnotherNodeWrites", func(t *testing.T) {
				c.parallel(t)
				s := as[writeStore](t, open(t, DefaultSeed()))
				summaryFreshAfterWrite(t, s, as[formsapi.Writer](t, c.node(t, s)))
			})
		}
	})

	group("Damage", damage, func(t *testing.T) { damageClauses(t, open, c) })
}

func isWriter(s formsapi.Store) bool     { _, ok := s.(formsapi.Writer); return ok }
func isKeyManager(s formsapi.Store) bool { _, ok := s.(formsapi.KeyManager); return ok }
func isFeedStore(s formsapi.Store) bool  { _, ok := s.(formsapi.FeedStore); return ok }
func isFieldStore(s formsapi.Store) bool { _, ok := s.(formsapi.FieldStore); return ok }

// as asserts that a store open made implements T, as the one Run probed
// did.
func as[T any](t *testing.T, s formsapi.Store) T {
	t.Helper()
	v, ok := s.(T)
	if !ok {
		var zero T
		t.Fatalf("open made a %T, which is not a %s as the first store it made was", s, typeName(&zero))
	}
	return v
}

func typeName(v any) string { return fmt.Sprintf("%T", v)[1:] }

// writeStore is a store with the shared write side.
type writeStore interface {
	formsapi.Store
	formsapi.KeyResolver
	formsapi.Writer
}

// grantStore is a store with scoped and expiring keys.
type grantStore interface {
	formsapi.Store
	formsapi.KeyManager
	RevokeKey(ctx context.Context, key string) error
}

// syncStore is a store with the sync feed, and the AddSubmission of the
// write side to add submissions while it is read.
type syncStore interface {
	formsapi.Store
	formsapi.FeedStore
	AddSubmission(ctx context.Context, s formsapi.Submission, m formsapi.Metadata) error
}

// readers opens the store that the clauses of a group that only read
// share (see [Open]), on the group's t, and checks once they have all
// ended that it still holds what it held: a clause that writes to it
// would change what the others read.
func readers(t *testing.T, open Open, seed Seed) formsapi.Store {
	s := open(t, seed)
	before := contents(t, s)
	t.Cleanup(func() {
		if after := contents(t, s); after != before {
			t.Errorf("a clause that should only read changed the store the read-only clauses share:\nbefore %s\nafter  %s", before, after)
		}
	})
	return s
}

// contents is every form and submission of the seed's accounts, as JSON.
func contents(t *testing.T, s formsapi.Store) string {
	t.Helper()
	var all []any
	q := formsapi.Query{Limit: MaxLimit}
	for _, account := range []string{AccountA, AccountB} {
		forms := walkForms(t, s, account, q)
		all = append(all, forms)
		for _, f := range forms {
			all = append(all, walkSubmissions(t, s, account, f.ID, q))
		}
	}
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatalf("contents of a store: %v", err)
	}
	return string(b)
}
