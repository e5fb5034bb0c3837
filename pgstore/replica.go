package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
)

// WithReplica has the store read from replica, a pool of connections to
// a PostgreSQL streaming replica (a hot standby) of the store's database,
// what a request reads after its key: pages of submissions and of the
// forms list that the read cache does not hold, and pages of the sync
// feed and of exports. What must be current is still read from the
// primary, in the request's one lookup: the key, its grant and
// revocation, and the version of the requested form (or of the
// account's forms list), as without a replica (a following node's
// rounds may read them on the replica too: WithReplicaRounds).
//
// A replica is never served from when it has not yet replayed what the
// request needs: every page statement reads, in the page's own
// snapshot, the version of the form (or list) the page is of, and a
// page whose version is not the one the primary gave the request is
// dropped before any of it is used, and read again from the primary at
// once (no waiting for the replica). So is a page whose statement
// failed on the replica before its first row (a replica down or
// restarting, a query cancelled by recovery). A version names one state
// of a form's submissions (see the package documentation): a page of
// that version on the replica is the page the primary gave at the
// lookup, byte for byte.
//
// Only the handler's reads through the combined lookup use the replica
// (a store given to formsapi.NewHandler as both its Store and its
// KeyResolver; that is where the version comes from): ListSubmissions,
// SyncSubmissions and ListForms called on their own, writes, keys, the
// export's feed head, webhooks and the rate limiter use the primary.
// The replica must replicate the store's schema (physical streaming
// replication does), and the pool must reach it with the same search
// path rules as the primary's (the store names its schema in every
// statement). The store never closes replica; the host does, after
// Close. It panics if replica is nil.
func WithReplica(replica *pgxpool.Pool) Option {
	if replica == nil {
		panic("pgstore: WithReplica with a nil *pgxpool.Pool")
	}
	return func(c *config) { c.replica = replica }
}

// WithReplicaRounds has a following node's rounds (WithFollow) read the
// replica of WithReplica, which it needs (it does nothing without both),
// once the replica has replayed the primary's WAL up to where the
// primary stood when the round began, the round's position the
// primary's snapshot: the primary answers one statement a round that
// touches no table. A replica still behind after a few milliseconds,
// failing, hanging or not a standby leaves the round to the primary
// (FollowStats counts both). A round so costs its requests the
// replica's replay lag, about a millisecond beside a steady writer on
// the test machine. Every answer stays at least as new as every write
// committed before its request arrived; what a host gives up is
// monotonic reads across a round on the replica and one on the primary,
// under synchronous replication above all (a standby may show a commit
// before the primary's snapshots do): see docs/fleet.md, "Rounds on a
// replica". Off by default.
func WithReplicaRounds() Option {
	return func(c *config) { c.replicaRounds = true }
}

// ReplicaReads counts the page statements a store with WithReplica ran
// on the replica since it was opened, by what came of them: for a host
// to watch how much of its read load the replica takes, and how often
// replication lag sends reads back to the primary.
type ReplicaReads struct {
	// Served counts pages the replica served.
	Served uint64
	// Stale counts pages the replica had at another version than the
	// request's (it had not replayed the request's version yet, or had
	// replayed a later one, or lacked the form), each then read from the
	// primary.
	Stale uint64
	// Failed counts statements that failed on the replica before their
	// first row, each then read from the primary.
	Failed uint64
}

// replicaCounts are a store's ReplicaReads as they grow.
type replicaCounts struct{ served, stale, failed atomic.Uint64 }

// ReplicaReads returns how the store's reads on its replica went since
// it was opened; all zero without WithReplica.
func (s *Store) ReplicaReads() ReplicaReads {
	return ReplicaReads{Served: s.replicaCounts.served.Load(), Stale: s.replicaCounts.stale.Load(), Failed: s.replicaCounts.failed.Load()}
}

// errStale means the replica had not replayed the version the request's
// lookup read on the primary (or had replayed a later one, or had no
// such form): its page is not used.
var errStale = errors.New("the replica is not at the request's version")

// errReplica wraps an error of a replica's statement that came before the
// statement handed on any row: the read can go to the primary instead.
type errReplica struct{ err error }

func (e errReplica) Error() string { return "replica: " + e.err.Error() }
func (e errReplica) Unwrap() error { return e.err }

// source is where one page statement runs: the primary, or the replica,
// whose page must then be of version want.
type source struct {
	db      *pgxpool.Pool
	replica bool
	want    int64
}

// failed returns err, a failure of src's statement, as errReplica when src
// is the replica and none says the read handed on nothing of its page, so
// that fromReplica reads the primary instead.
func (src source) failed(err error, none bool) error {
	if src.replica && none {
		return errReplica{err}
	}
	return err
}

// fromReplica runs read on the replica when the store has one and the
// version the request needs is known (known, want), and on the primary
// when it has none, or when the replica's page was not of want (errStale)
// or its statement failed before its first row. read must leave what it
// was reading into as it found it when it fails with either.
func (s *Store) fromReplica(ctx context.Context, known bool, want int64, read func(src source) error) error {
	if s.replica != nil && known {
		err := read(source{db: s.replica, replica: true, want: want})
		var re errReplica
		switch {
		case err == nil:
			s.replicaCounts.served.Add(1)
			return nil
		case ctx.Err() != nil:
			return err
		case errors.Is(err, errStale):
			s.replicaCounts.stale.Add(1) // read the primary
		case errors.As(err, &re):
			s.replicaCounts.failed.Add(1) // read the primary
		default:
			return fmt.Errorf("replica: %w", err)
		}
	}
	return read(source{db: s.pool})
}
