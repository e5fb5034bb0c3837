package pgstore

import (
	"context"
	"iter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/feedwait"
	"github.com/formsapi/formsapi/internal/keyformat"
)

// WithReplicaRoundWait sets how long a following store's round waits
// for its replica to replay the round's position, and how long the round
// may take there, in place of replicaRoundWait and replicaRoundTimeout:
// for tests whose pair's primary other parallel tests write to, so that
// the standby's lag behind it is theirs, not the round's.
func WithReplicaRoundWait(wait, timeout time.Duration) Option {
	return func(c *config) { c.replicaWait = [2]time.Duration{wait, max(timeout, wait)} }
}

// Pool returns the pool the store works through.
func Pool(s *Store) *pgxpool.Pool { return s.pool }

// CacheWentBack is how many times the store's read cache saw a version go
// back (internal/pagecache's WentBack).
func CacheWentBack(s *Store) int64 { return s.cache.WentBack() }

// MigrationCount is the number of embedded migrations.
func MigrationCount() int {
	ms, err := migrations()
	if err != nil {
		panic(err)
	}
	return len(ms)
}

// ListSQL returns the statement the store runs for a page of forms
// (table "forms", with the forms list's version), submissions ("submissions") or encoded submissions ("encoded",
// the handler's fast path) in order o.
func ListSQL(s *Store, table string, o formsapi.Order) string {
	asc := o == formsapi.Oldest
	switch {
	case table == "forms" && asc:
		return s.sql.formsAsc
	case table == "forms":
		return s.sql.formsDesc
	case table == "encoded" && asc:
		return s.sql.encodedAsc
	case table == "encoded":
		return s.sql.encodedDesc
	case asc:
		return s.sql.subsAsc
	default:
		return s.sql.subsDesc
	}
}

// ListArgs returns the arguments the store binds to ListSQL for q, after
// the owner's: the keyset bounds and the row count to fetch.
func ListArgs(q formsapi.Query) ([]any, error) {
	b, err := bounds(q)
	if err != nil {
		return nil, err
	}
	return []any{b.lo.At, b.lo.Seq, b.hi.At, b.hi.Seq, b.fetch}, nil
}

// AllSQL returns every statement the store runs.
func AllSQL(s *Store) []string {
	q := s.sql
	return []string{q.formsDesc, q.formsAsc, q.subsDesc, q.subsAsc, q.encodedDesc, q.encodedAsc,
		q.formListVersion, q.authorizeBatch,
		q.formOf, q.resolveKey, q.authorizeForm, q.addForm, q.addSubmission, q.addKey, q.revokeKey,
		q.listKeys, q.touchKeys, q.rateLimit, q.rateCharge, q.ratePrune, q.feed, q.feedEncoded, q.checkWaits, q.feedKeyed}
}

// LookupSQL returns the store's key and form lookups with example
// arguments: the single-row statements, and the batch of several.
func LookupSQL(s *Store) map[string][]any {
	return map[string][]any{
		s.sql.formOf:          {"form-id", "account-id"},
		s.sql.formListVersion: {"account-id"},
		s.sql.resolveKey:      {make([]byte, 32)},
		s.sql.authorizeForm:   {make([]byte, 32), "form-id"},
		// Three lookups: of a form, of another, of the forms list.
		s.sql.authorizeBatch: {[][]byte{make([]byte, 32), make([]byte, 32), make([]byte, 32)}, []string{"form-id", "other-id", ""}},
		// A following node's rounds: after the snapshot 100:100:, with
		// a feed, and one lookup.
		s.sql.roundLog: {"100", []string{}, []byte("\x00form-id\x00\x00\x00\x00\x00\x00\x00\x00\x04"), maxFeedRows + 1},
		s.sql.round: {"100", []string{}, []byte("\x00form-id\x00\x00\x00\x00\x00\x00\x00\x00\x04"), maxFeedRows + 1,
			[][]byte{make([]byte, 32)}, []string{"form-id"}},
		s.sql.roundLogLean: {"100", []string{}},
		s.sql.roundLean:    {"100", []string{}, [][]byte{make([]byte, 32)}, []string{"form-id"}},
		s.sql.roundProbe:   {"100", []string{"99"}},
	}
}

// AddSubmissionSQL returns the statement AddSubmission runs, with its
// arguments: form ID, createdAt, data, attachments, json, client IP, user
// agent, geo, trace ID, encoding version, host ID and index keys.
func AddSubmissionSQL(s *Store) string { return s.sql.addSubmission }

// FeedSQL returns the statements of the sync feed, its fast path and the
// fast path with keys, whose arguments are form ID, account ID, after and
// the rows to fetch (then the byte room, and the keys).
func FeedSQL(s *Store) []string { return []string{s.sql.feed, s.sql.feedEncoded, s.sql.feedKeyed} }

// CachedPages returns how many lists and bytes the store's cache holds.
func CachedPages(s *Store) (pages, bytes int) { return s.cache.Stats() }

// WaitingLookups is how many key lookups wait for the next statement.
func WaitingLookups(s *Store) int {
	return s.lookups.Waiting()
}

// SpliceSQL returns the statement that reads what was added to a form
// since a cached page of it (incremental pages).
func SpliceSQL(s *Store) string { return s.sql.splice }

// MaxFeedRows is the most rows a following node's feed of a form keeps.
const MaxFeedRows = maxFeedRows

// FindSQL returns the statements of filtered reads, by name. The pages'
// ("page/…", "encoded/…", in each order) take the form's seq, the walked
// key, the keyset bounds (lower at and seq, upper at and seq) and the
// entries to read, as does an exact total's walk ("count/matches", the
// oldest-first page statement read in batches); "count/entries" takes the
// form's seq, the bounds and the key. Those of searches ("search/…",
// "…/search") walk the form's unfolded tail beside the key's entries.
func FindSQL(s *Store) map[string]string {
	q := s.sql
	return map[string]string{
		"page/newest": q.findDesc, "page/oldest": q.findAsc,
		"encoded/newest": q.findEncodedDesc, "encoded/oldest": q.findEncodedAsc,
		"count/entries": q.countEntries, "count/matches": q.findAsc,
		"search/page/newest": q.searchDesc, "search/page/oldest": q.searchAsc,
		"search/encoded/newest": q.searchEncodedDesc, "search/encoded/oldest": q.searchEncodedAsc,
		"count/entries/search": q.countSearchEntries, "count/matches/search": q.searchAsc,
	}
}

// ScanSQL returns the statements of a search while the search index is
// off, by name: the pages' ("scan/…", "scan-encoded/…", in each order)
// take the form's seq, the keyset bounds and the rows to read;
// "count/rows" (the range's rows, for its totals) the form's seq and the
// bounds.
func ScanSQL(s *Store) map[string]string {
	q := s.sql
	return map[string]string{
		"scan/newest": q.scanDesc, "scan/oldest": q.scanAsc,
		"scan-encoded/newest": q.scanEncodedDesc, "scan-encoded/oldest": q.scanEncodedAsc,
		"count/rows": q.countRows,
	}
}

// ProbeSQL is the statement of a search's probe (walkKey).
func ProbeSQL(s *Store) string { return s.sql.probe }

// SearchIndexOn reports whether opts turn the search index on.
func SearchIndexOn(opts ...Option) bool {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	return cfg.searchIndex
}

// SortIndexOn reports whether opts turn the sort index on.
func SortIndexOn(opts ...Option) bool {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	return cfg.sortIndex
}

// WithProgressClock gives the store's start-up progress log (see
// WithLogger) the clock now and the ticker tick, which tests move and
// send on instead of waiting.
func WithProgressClock(now func() time.Time, tick func(time.Duration) (<-chan time.Time, func())) Option {
	return func(c *config) { c.progress.Now, c.progress.Tick = now, tick }
}

// LockKey is the advisory lock under which the schema is migrated.
func LockKey(schema string) int64 { return lockKey(schema) }

// AddBulk writes batch as AddSubmissions does, but only in statements of
// many submissions: it returns the error that makes AddSubmissions write
// the batch again one statement a submission rather than do so.
func AddBulk(ctx context.Context, s *Store, batch iter.Seq2[formsapi.Submission, formsapi.Metadata]) error {
	var rs []newSubmission
	for sub, m := range batch {
		r, err := s.prepareSubmission(sub, m)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	for {
		retry, err := s.addBulk(ctx, rs, s.searchOn.Load())
		if !retry {
			return err
		}
		s.searchOn.Store(true)
	}
}

// WaitHub returns the store's hub of waiting sync requests.
func WaitHub(s *Store) *feedwait.Hub { return s.wait }

// KeyHash is the hash the store keeps of key.
func KeyHash(key string) [32]byte { return keyformat.Hash(key) }

// SortSQL returns the statements of sorted pages by name: the ordered
// index's walk ("sorted/…") takes the form's seq, the place (the field's
// prefix and a key, created_at, seq) and the end of the field's run;
// the submissions without a key ("unsorted/…") the form's seq and the
// keyset bounds.
func SortSQL(s *Store) map[string]string {
	q := s.sql
	return map[string]string{
		"sorted/asc": q.sorted[1][0], "sorted/desc": q.sorted[1][1], "sorted/size/asc": q.sorted[0][0], "sorted/size/desc": q.sorted[0][1],
		"unsorted/asc": q.unsorted[1][0], "unsorted/desc": q.unsorted[1][1],
	}
}

// SortPrefix is the first bytes of the ordered index's entries of field.
func SortPrefix(field string) []byte { return sortPrefix(field) }

// WithNoticeRenew sets how often a store made WithNotify renews the
// lease that makes writers notify (20 s otherwise); after WithNotify.
func WithNoticeRenew(d time.Duration) Option {
	return func(c *config) { c.noticeRenew = d }
}

// NoticeTicks returns how many renewal periods a store made WithNotify's
// listener has passed while listening.
func NoticeTicks(s *Store) uint64 { return s.notices.ticks.Load() }

// Notices returns what a store made WithNotify's listener did:
// connections made, notices received, failures; and the process ID of
// its listening backend (0 before the first).
func Notices(s *Store) (connects, received, failures uint64, pid uint32) {
	return s.notices.connects.Load(), s.notices.received.Load(), s.notices.failures.Load(), s.notices.pid.Load()
}

// DeleteSubmissionSQL is DeleteSubmission's statement, its tables
// qualified by s's schema.
func DeleteSubmissionSQL(s *Store) string { return s.sql.deleteSubmission }
