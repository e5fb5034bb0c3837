package main

// The server's start: the store it opens, while it already listens, and
// -migrate, which opens nothing but the migrations.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
)

// storeFlags are the flags that say which store to open, and how.
type storeFlags struct {
	dsn, replicaDSN, schema, dbPath string
	replicaRounds                   bool
	cacheMiB                        int
	searchIndex                     bool
	sortIndex                       bool          // -sort-index: WithSortIndex
	sortFields                      []string      // -sort-fields: WithSortIndex's fields (nil: every field)
	keyCopy                         bool          // -sqlite-key-copy: sqlitestore.WithKeyCopy
	follow                          time.Duration // -follow: negative for off
	staleness                       time.Duration // -staleness, with -follow
	roundBatch                      int           // -round-batch, with -follow
	roundMax                        time.Duration // -round-max-spacing, with -round-batch
	notify                          bool          // -notify: WithNotify
	// -shared-rounds, with -follow: the Redis URL (-redis) and the
	// prefix (-redis-prefix, then "rounds:") of the exchange; "" for off.
	sharedRedis, sharedPrefix string
}

// dbSystem is the store's db.system.name, for the metrics.
func (f storeFlags) dbSystem() string {
	if f.dsn != "" {
		return "postgresql"
	}
	return "sqlite"
}

// opened is the store the server runs on, and what goes with it.
type opened struct {
	store       backend
	where       string                                           // for the banner and the log: a file path or a schema, never a DSN
	lockSeeding func(context.Context) (unlock func(), err error) // nil: one process serves the file
	replicaLog  func(*slog.Logger)                               // with -replica or -follow: logs how its reads went
	closers     []func()                                         // in the order close calls them
}

// close closes the store, then its pools.
func (o *opened) close() {
	for _, c := range o.closers {
		c()
	}
}

// openBackend opens the store f names, migrating it (and building its
// search index with -search-index) as it opens: the store logs the
// progress of the steps that take long to logger.
func openBackend(ctx context.Context, f storeFlags, logger *slog.Logger) (_ *opened, err error) {
	o := &opened{replicaLog: func(*slog.Logger) {}}
	defer func() {
		if err != nil {
			o.close()
		}
	}()
	if f.dsn == "" {
		opts := []sqlitestore.Option{sqlitestore.WithCacheSize(f.cacheMiB << 20), sqlitestore.WithLogger(logger), sqlitestore.WithKeyCopy(f.keyCopy)}
		if f.searchIndex { // as pgstore's below
			opts = append(opts, sqlitestore.WithSearchIndex())
		}
		if f.sortIndex {
			opts = append(opts, sqlitestore.WithSortIndex(f.sortFields...))
		}
		lite, err := sqlitestore.Open(f.dbPath, opts...)
		if err != nil {
			return nil, err
		}
		o.closers = append(o.closers, func() { lite.Close() })
		o.store, o.where = lite, f.dbPath
		return o, nil
	}
	// The search index is on unless -search-index=false: the example's
	// seed has "Zoë Ünal" to find with q=zoe, and a search costs its
	// matches, not the form.
	opts := []pgstore.Option{pgstore.WithCacheSize(f.cacheMiB << 20), pgstore.WithLogger(logger)}
	if f.searchIndex {
		opts = append(opts, pgstore.WithSearchIndex())
	}
	if f.sortIndex {
		opts = append(opts, pgstore.WithSortIndex(f.sortFields...))
	}
	if f.schema != "" {
		opts = append(opts, pgstore.WithSchema(f.schema))
	}
	if f.follow >= 0 {
		opts = append(opts, pgstore.WithFollow(f.follow), pgstore.WithStaleness(f.staleness), pgstore.WithRoundBatch(f.roundBatch, f.roundMax))
	}
	if f.notify {
		opts = append(opts, pgstore.WithNotify(""))
	}
	pool, err := openPool(ctx, f.dsn)
	if err != nil {
		return nil, err
	}
	var closePools []func()
	closePools = append(closePools, pool.Close) // after the store's Close, which writes key uses
	if f.sharedRedis != "" && f.follow >= 0 {
		x, closeRedis, err := roundExchange(ctx, f.sharedRedis, f.sharedPrefix)
		if err != nil {
			pool.Close()
			return nil, err
		}
		closePools = append([]func(){closeRedis}, closePools...) // after the store's Close, which resigns the lease
		opts = append(opts, pgstore.WithSharedRounds(x))
	}
	if f.replicaDSN != "" {
		replica, err := openPool(ctx, f.replicaDSN)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("replica: %w", err)
		}
		closePools = append([]func(){replica.Close}, closePools...)
		opts = append(opts, pgstore.WithReplica(replica))
		if f.replicaRounds {
			opts = append(opts, pgstore.WithReplicaRounds())
		}
	}
	pg, err := pgstore.New(ctx, pool, opts...)
	if err != nil {
		o.closers = closePools
		return nil, err
	}
	o.closers = append([]func(){func() { pg.Close() }}, closePools...)
	if f.replicaDSN != "" || f.follow >= 0 {
		o.replicaLog = func(l *slog.Logger) {
			if f.replicaDSN != "" {
				r := pg.ReplicaReads()
				l.Info("replica reads", "served", r.Served, "stale", r.Stale, "failed", r.Failed)
			}
			if f.follow >= 0 {
				r, sh := pg.FollowStats(), pg.SharedStats()
				l.Info("follow rounds", "rounds", r.Rounds, "misses", r.Misses, "resets", r.Resets, "spliced", r.Spliced, "stale", r.Stale, "probed", r.Probed,
					"on_replica", r.OnReplica, "off_replica", r.OffReplica, "leader", sh.Leader, "tickets", sh.Tickets, "published", sh.Published, "applied", sh.Applied, "gaps", sh.Gaps, "fallbacks", sh.Fallbacks)
			}
		}
	}
	o.store, o.where = pg, "PostgreSQL schema "+pg.Schema()
	o.lockSeeding = func(ctx context.Context) (func(), error) { return seedLock(ctx, pool, pg.Schema()) }
	return o, nil
}

// migrateAhead is -migrate: it brings the store to this version with
// the stores' own Migrate, the search index built with -search-index,
// logging the progress of long steps to logger, and says so on stderr.
// It seeds nothing and issues no key.
func migrateAhead(ctx context.Context, f storeFlags, logger *slog.Logger, stderr io.Writer) error {
	var where string
	if f.dsn == "" {
		opts := []sqlitestore.Option{sqlitestore.WithLogger(logger)}
		if f.searchIndex {
			opts = append(opts, sqlitestore.WithSearchIndex())
		}
		if f.sortIndex {
			opts = append(opts, sqlitestore.WithSortIndex(f.sortFields...))
		}
		if err := sqlitestore.Migrate(ctx, f.dbPath, opts...); err != nil {
			return err
		}
		where = f.dbPath
	} else {
		opts := []pgstore.Option{pgstore.WithLogger(logger)}
		if f.searchIndex {
			opts = append(opts, pgstore.WithSearchIndex())
		}
		if f.sortIndex {
			opts = append(opts, pgstore.WithSortIndex(f.sortFields...))
		}
		where = "PostgreSQL, the connection's current schema"
		if f.schema != "" {
			opts = append(opts, pgstore.WithSchema(f.schema))
			where = "PostgreSQL schema " + f.schema
		}
		if err := pgstore.Migrate(ctx, f.dsn, opts...); err != nil {
			return err
		}
	}
	index := "off (unless an earlier start turned it on)"
	if f.searchIndex {
		index = "on"
	}
	logger.Info("migrated", slog.String("store", where), slog.Bool("search_index", f.searchIndex))
	fmt.Fprintf(stderr, "migrated %s to this version; search index %s\n", where, index)
	return nil
}

// beforeOpen is the key of a context value, a func() that run calls
// just before it opens the store to serve: tests hold the start there.
type beforeOpen struct{}

// startRetryAfter is the Retry-After, in seconds, of the API's answers
// while the store opens.
const startRetryAfter = 5

// errStarting is the readiness of a server whose store is still opening.
var errStarting = errors.New("the store is still opening")

// startGate is the server's handler while its store opens: the API
// answers 503 with Retry-After and the JSON error body of the API's own
// 503s, and ready (for /readyz) says errStarting. open puts the API and
// its readiness check in, for every request from then on.
type startGate struct {
	api   atomic.Pointer[http.Handler]
	check atomic.Pointer[func(context.Context) error]
}

func (g *startGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := g.api.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	body := `{"success":false,"message":"service unavailable: the server is starting, retry after the number of seconds in Retry-After"}`
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(startRetryAfter))
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusServiceUnavailable)
	if r.Method != http.MethodHead {
		io.WriteString(w, body)
	}
}

// ready is the server's readiness: errStarting until open, the store's
// own check after.
func (g *startGate) ready(ctx context.Context) error {
	if c := g.check.Load(); c != nil {
		return (*c)(ctx)
	}
	return errStarting
}

// open serves api from now on, ready by ready.
func (g *startGate) open(api http.Handler, ready func(context.Context) error) {
	g.check.Store(&ready)
	g.api.Store(&api)
}
