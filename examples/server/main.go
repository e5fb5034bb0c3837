// Command server runs the forms API on its embedded SQLite default, or on
// PostgreSQL. On first run it creates the tables, seeds a demo account
// with forms and realistic submissions, and prints a demo API key with
// curl lines to try, once, to the terminal (stderr): stdout carries only
// the JSON log, which log collectors keep. Later runs point to the key
// file instead.
//
//	go run ./examples/server                  # serve ./forms.db on 127.0.0.1:8080
//	go run ./examples/server -new-key demo    # issue another key for an account
//	go run ./examples/server -delete contact/contact-2     # delete a submission by its ID
//	go run ./examples/server -erase email=ada@example.com  # erase a respondent
//	FORMSAPI_POSTGRES=postgres://... go run ./examples/server   # serve PostgreSQL
//	FORMSAPI_REDIS=redis://... go run ./examples/server         # share the rate limits through Redis
//
// Cursors, sync tokens and feed refs are sealed with the cursor secret
// the store keeps in its database, which every server over it shares. A
// secret of one's own is read from the file named by -cursor-secret-file
// or from the FORMSAPI_CURSOR_SECRET environment variable, never from the
// command line, which lands in shell history and process lists. Likewise,
// prefer $FORMSAPI_POSTGRES and $FORMSAPI_REDIS to -postgres and -redis
// when the DSN or URL holds a password; neither is ever printed or logged.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/observe"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/pgstore/redisround"
	"github.com/formsapi/formsapi/ratelimit"
	"github.com/formsapi/formsapi/ratelimit/redislimit"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/webhook"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

// The default rate limit of the example server: 600 requests a minute per
// account, in bursts of up to 600, of which a scoped key may take half
// (see -rate-limit and -rate-limit-key); a limiter that does not answer
// within 250 ms is passed by (see -rate-limit-timeout).
const (
	defaultRateLimit        = 600
	defaultRateWindow       = time.Minute
	defaultRateLimitTimeout = 250 * time.Millisecond
)

// Server timeouts. The store budget is below WriteTimeout so a slow query
// ends in a JSON 503 rather than a dropped connection.
const (
	storeTimeout = 5 * time.Second
	writeTimeout = 10 * time.Second
)

// seedTimeout bounds the wait for the seed lock and the seeding itself,
// so that a start stuck behind another server fails rather than hangs.
const seedTimeout = 2 * time.Minute

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	dbPath := fs.String("db", "forms.db", "SQLite database file, created and seeded if missing")
	dsn := fs.String("postgres", os.Getenv("FORMSAPI_POSTGRES"), "serve PostgreSQL at this DSN instead of SQLite (default $FORMSAPI_POSTGRES); pool_max_conns in the DSN sizes the pool")
	schema := fs.String("schema", "", "PostgreSQL schema for the tables (default: the connection's current schema)")
	replicaDSN := fs.String("replica", os.Getenv("FORMSAPI_REPLICA"), "with -postgres: read page misses, feed pages and exports from the streaming replica at this DSN (default $FORMSAPI_REPLICA); see docs/fleet.md")
	replicaRounds := fs.Bool("replica-rounds", false, "with -replica and -follow: run the rounds on the replica once it has replayed what they need (pgstore.WithReplicaRounds); see docs/fleet.md")
	keyFile := fs.String("demo-key-file", "", "where the demo key is kept for later runs (default: the -db path + .demo-key, or postgres.demo-key)")
	secretFile := fs.String("cursor-secret-file", "", "file holding a cursor secret of your own, at least 32 characters, the same on every node (default $FORMSAPI_CURSOR_SECRET, else the file -db + .cursor-secret or postgres.cursor-secret if an earlier version left one, else the secret the store keeps in its database, shared by every node over it)")
	newKey := fs.String("new-key", "", "issue a new API key for this account, print it once and exit")
	deleteArg := fs.String("delete", "", "delete the submission FORM/ID (its Metadata.ID: the demo's are contact-1 to contact-6, newsletter-1 to newsletter-6, job-application-1 to job-application-3) of -account, print the curl line that shows it in the sync feed and exit")
	eraseArg := fs.String("erase", "", "erase a respondent: delete every submission of -account whose data's top-level FIELD holds the string VALUE (FIELD=VALUE, email=ada@example.com), print the curl lines that show it in the sync feeds and exit")
	account := fs.String("account", demoAccount, "with -delete and -erase: the account whose submissions they delete")
	accessLog := fs.Bool("access-log", true, "log one line per request")
	pageMiB := fs.Int("page-mib", formsapi.DefaultPageBytes>>20, "byte budget of a page of submissions in MiB; 0 turns it off")
	staleness := fs.Duration("staleness", 0, "with -follow: let the node answer lists from its copy of keys and forms up to this old, without a round (pgstore.WithStaleness; the Data-Age header says how old); see docs/fleet.md (default: 0, exact)")
	follow := fs.Duration("follow", -1, "with -postgres: follow the change log (pgstore.WithFollow, issue 38) with rounds at least this far apart, 0 for no spacing; see docs/fleet.md (default: off)")
	roundBatch := fs.Int("round-batch", 0, "with -follow: space the rounds so that each serves about this many requests, rounds at most -round-max-spacing apart (pgstore.WithRoundBatch); see docs/fleet.md (default: 0, rounds spaced by -follow alone)")
	roundMax := fs.Duration("round-max-spacing", 10*time.Millisecond, "with -round-batch: the longest a round waits for its requests after the last one started")
	notify := fs.Bool("notify", false, "with -postgres: listen for PostgreSQL's notices of changes on a connection of its own, so that a write through another node reaches a waiting sync request (wait=) at once rather than at the next check (pgstore.WithNotify; not through a pooler in transaction mode); see docs/fleet.md")
	sharedRounds := fs.Bool("shared-rounds", false, "with -follow and -redis: share the rounds with the other nodes on the same Redis and -redis-prefix, one leader running them for all (pgstore.WithSharedRounds, pgstore/redisround); see docs/fleet.md")
	keyCopy := fs.Bool("sqlite-key-copy", true, "over SQLite: answer key lookups from the store's copy after one check of the file for every waiting request (PRAGMA data_version), exact as a lookup per request (sqlitestore.WithKeyCopy); false looks every request's key up; see docs/stores.md")
	cacheMiB := fs.Int("cache-mib", sqlitestore.DefaultCacheSize>>20, "read cache size in MiB, over SQLite and over PostgreSQL; 0 turns it off")
	searchIndex := fs.Bool("search-index", true, "open the store with its search index (WithSearchIndex), so that q= costs its matches; the setting persists in the database, so false leaves a fresh database without the index but does not turn an existing index off")
	sortIndex := fs.Bool("sort-index", false, "open the store with its sort index (WithSortIndex), so that sort=<field> is served (501 without it); it costs every write an entry per kept top-level member; the setting persists in the database, so false does not turn an existing index off")
	sortFields := fs.String("sort-fields", "", "with -sort-index, the top-level fields the sort index keeps, comma-separated (sort by another is a 501); empty keeps every field; a change is built (or dropped) when the store opens")
	rateLimit := fs.Int("rate-limit", defaultRateLimit, "requests each account may make per -rate-window (a burst of as many, then an even rate); 0 turns rate limiting off")
	rateWindow := fs.Duration("rate-window", defaultRateWindow, "the window of -rate-limit, in whole seconds")
	rateKey := fs.Int("rate-limit-key", 0, "the most one scoped key (an integration) may make of its account's -rate-limit per -rate-window; 0 means half")
	rateTimeout := fs.Duration("rate-limit-timeout", defaultRateLimitTimeout, "how long the rate limiter's database or Redis has to answer a decision once it is sent, before the request is served anyway (or refused, with -rate-limit-fail-closed); a decision may first wait as long in this node's queue, and is refused with 429 past that")
	redisURL := fs.String("redis", os.Getenv("FORMSAPI_REDIS"), "share the rate limits through the Redis at this URL, redis://[user:password@]host:port/db or rediss://… (default $FORMSAPI_REDIS), rather than in memory or in PostgreSQL; never printed")
	redisPrefix := fs.String("redis-prefix", redislimit.DefaultPrefix, "with -redis: the start of the rate limiter's keys, so that several deployments can share one Redis")
	rateFailClosed := fs.Bool("rate-limit-fail-closed", false, "answer 503 when the rate limiter fails, instead of serving the request")
	inFlightKey := fs.Int("in-flight-key", 0, fmt.Sprintf("requests of one API key served at once, more answered 429 at once; 0 means %d, -1 no bound", ratelimit.DefaultInFlightPerKey))
	inFlightAccount := fs.Int("in-flight-account", 0, fmt.Sprintf("requests of one account's keys together served at once; 0 means %d, -1 no bound", ratelimit.DefaultInFlightPerAccount))
	bytesMiB := fs.Int("bytes-in-flight-mib", 0, fmt.Sprintf("MiB of pages the server holds at once, every request together, more waiting a second for room and then answered 503; 0 means %d (16 per CPU, at least 32), -1 no bound", ratelimit.DefaultBytesInFlight()>>20))
	stall := fs.Duration("stall-timeout", 0, fmt.Sprintf("how long a client may leave each 64 KiB of an answer unread before it is cut off; 0 means %s, -1ns none", ratelimit.DefaultStallTimeout))
	keyForms := fs.String("key-forms", "", "with -new-key: the only forms the key may read, comma-separated (default: every form of the account)")
	keyTTL := fs.Duration("key-ttl", 0, "with -new-key: the key stops working after this long (default: never)")
	baseURL := fs.String("base-url", "", "the API's public URL as clients reach it, through a proxy that changes the host or terminates TLS (https://forms.example.com/api): the next-page links start with it (default: from each request)")
	corsOrigins := fs.String("cors-origins", "", "comma-separated origins of browser apps allowed to call the API (https://app.example.com,http://localhost:5173), or * for any (default: none)")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics, on a listener of its own (default: off)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file, for go tool pprof, when the server stops (default: none)")
	fileSecret := fs.String("attachment-secret-file", "", "sign the attachments' URLs (pages, feed, exports, webhook events) with the secret in this file, at least 32 characters, as URLs of this server's own /files route, which checks them and serves a stand-in for each file: the demo of a private bucket's presigned URLs (default: URLs as stored)")
	fileLifetime := fs.Duration("attachment-url-lifetime", 10*time.Minute, "with -attachment-secret-file: how long a signed attachment URL is valid; every URL a client receives is valid for at least half of it")
	migrateOnly := fs.Bool("migrate", false, "migrate the store to this version (and build the search index, with -search-index) and exit, logging the progress: a deploy step ahead of the new servers, which then start without waiting")
	hooks := addWebhookFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: every setting is a flag (see -h)", fs.Arg(0))
	}
	commands := 0
	for _, c := range []string{*newKey, *deleteArg, *eraseArg} {
		if c != "" {
			commands++
		}
	}
	if *migrateOnly {
		commands++
	}
	if commands > 1 {
		return errors.New("give one of -new-key, -delete, -erase and -migrate at a time")
	}
	if *deleteArg != "" {
		if _, _, err := parseDelete(*deleteArg); err != nil {
			return err
		}
	}
	if *eraseArg != "" {
		if _, _, err := parseErase(*eraseArg); err != nil {
			return err
		}
	}

	// The options from flags are checked before anything is opened or
	// seeded: a typo stops the server before it makes a demo key.
	var flagOpts []formsapi.Option
	var files *fileSigner
	if *fileSecret != "" {
		key, err := readFileSecret(*fileSecret)
		if err != nil {
			return err
		}
		files = &fileSigner{key: key, lifetime: *fileLifetime, now: time.Now}
		o, err := checked("-attachment-url-lifetime", func() formsapi.Option { return formsapi.WithAttachmentURLs(files.sign, *fileLifetime) })
		if err != nil {
			return err
		}
		flagOpts = append(flagOpts, o)
		hooks.signer = files.sign
	}
	if *baseURL != "" {
		o, err := checked("-base-url", func() formsapi.Option { return formsapi.WithBaseURL(*baseURL) })
		if err != nil {
			return err
		}
		flagOpts = append(flagOpts, o)
	}
	if *corsOrigins != "" { // a value that lists no origin (",") is an error, not CORS off
		origins := splitList(*corsOrigins)
		o, err := checked("-cors-origins", func() formsapi.Option { return formsapi.WithCORS(origins...) })
		if err != nil {
			return err
		}
		flagOpts = append(flagOpts, o)
	}

	// Without a secret given, the handler uses the one the store keeps in
	// its database, unless an earlier version of this server kept one in
	// a file beside the data: the tokens it sealed must keep working.
	legacySecret := *dbPath + ".cursor-secret"
	if *dsn != "" {
		legacySecret = "postgres.cursor-secret"
	}
	secret, secretFrom, err := cursorSecret(*secretFile, legacySecret)
	if err != nil {
		return err
	}
	sf := storeFlags{dsn: *dsn, replicaDSN: *replicaDSN, replicaRounds: *replicaRounds, schema: *schema, dbPath: *dbPath, cacheMiB: *cacheMiB, searchIndex: *searchIndex, sortIndex: *sortIndex, sortFields: splitFields(*sortFields), keyCopy: *keyCopy, follow: *follow, staleness: *staleness, roundBatch: *roundBatch, roundMax: *roundMax, notify: *notify}
	if *sharedRounds {
		if *redisURL == "" || *follow < 0 {
			return errors.New("-shared-rounds needs -follow and -redis")
		}
		sf.sharedRedis, sf.sharedPrefix = *redisURL, *redisPrefix+"rounds:"
	}
	if *keyFile == "" {
		*keyFile = *dbPath + ".demo-key"
		if *dsn != "" {
			*keyFile = "postgres.demo-key"
		}
	}
	logger := slog.New(slog.NewJSONHandler(stdout, nil))
	if *migrateOnly {
		return migrateAhead(ctx, sf, logger, stderr)
	}

	if *newKey != "" || *deleteArg != "" || *eraseArg != "" || hooks.isCommand() {
		// A command's output is on stdout: the store's progress, if its
		// start takes long, goes to stderr.
		o, err := openBackend(ctx, sf, slog.New(slog.NewTextHandler(stderr, nil)))
		if err != nil {
			return err
		}
		defer o.close()
		store := o.store
		switch {
		case *newKey != "":
			key, err := formsapi.NewKey()
			if err != nil {
				return err
			}
			var o formsapi.KeyOptions
			if *keyForms != "" {
				o.Forms = strings.Split(*keyForms, ",")
			}
			if *keyTTL > 0 {
				o.ExpiresAt = time.Now().Add(*keyTTL)
			}
			if err := store.AddKeyWith(ctx, key, *newKey, o); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "new API key for account %q (shown once, only its hash is stored):\n%s\n", *newKey, key)
			return nil
		case *deleteArg != "" || *eraseArg != "":
			auth := "'Authorization: Bearer YOUR_KEY'"
			if _, err := os.Stat(*keyFile); err == nil {
				auth = keyFileAuth(*keyFile)
			}
			if *deleteArg != "" {
				return deleteSubmission(ctx, store, *account, *deleteArg, stdout, serverURL(*addr), auth)
			}
			return erase(ctx, store, *account, *eraseArg, stdout, serverURL(*addr), auth)
		}
		hooks.apiBase = *baseURL
		_, err = hooks.command(ctx, store, secret, stdout)
		return err
	}
	hooks.apiBase = *baseURL

	// Listen before the store opens: a port taken must stop the server
	// before it migrates anything or makes a demo key that it would then
	// never show; and while the store opens (migrations, a search index
	// to build: minutes on a big database), /healthz answers 200 and
	// /readyz and the API 503 (see startGate), and the store logs its
	// progress.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *addr, err)
	}
	defer ln.Close() // if the start fails; Serve closes it otherwise
	var m *metrics
	if *metricsAddr != "" {
		if m, err = newMetrics(*metricsAddr, sf.dbSystem(), logger); err != nil {
			return err
		}
		defer m.ln.Close()
	}
	base := "http://" + ln.Addr().String()
	gate := &startGate{}
	srv := &http.Server{
		Handler:           withHealth(gate, gate.ready, logger),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    128 << 10, // the longest nextCursor the API hands out is about 92 KB (docs/api.md, Limits)
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	stopEarly := func(err error) error {
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return errors.Join(err, srv.Shutdown(shutdown))
	}
	logger.Info("starting", slog.String("url", base))
	fmt.Fprintf(stderr, "forms API starting on %s: /healthz answers now, /readyz and the API once the store is open (its progress is logged)\n", base)

	if hook, ok := ctx.Value(beforeOpen{}).(func()); ok {
		hook() // a test's: the store takes as long to open as it says
	}
	o, err := openBackend(ctx, sf, logger)
	if err != nil {
		return stopEarly(err)
	}
	defer o.close()
	store, where := o.store, o.where
	demoKey, created, err := seed(ctx, store, *keyFile, o.lockSeeding)
	if err != nil {
		return stopEarly(err)
	}

	opts := []formsapi.Option{formsapi.WithLogger(logger), formsapi.WithStoreTimeout(storeTimeout), formsapi.WithPageBytes(*pageMiB << 20)}
	if secret != nil {
		opts = append(opts, formsapi.WithCursorSecret(secret))
	}
	opts = append(opts, flagOpts...)
	if m != nil {
		opts = append(opts, formsapi.WithObserver(m.observer))
	}
	limiter := "off"
	access := ratelimit.Options{InFlightPerKey: *inFlightKey, InFlightPerAccount: *inFlightAccount, StallTimeout: *stall}
	switch {
	case *bytesMiB < 0:
		access.BytesInFlight = -1
	case *bytesMiB > 0:
		access.BytesInFlight = *bytesMiB << 20
	}
	if *rateLimit > 0 {
		p := ratelimit.Policy{Name: "default", Quota: *rateLimit, Window: *rateWindow, KeyQuota: *rateKey}
		if err := p.Validate(); err != nil {
			return fmt.Errorf("-rate-limit, -rate-window, -rate-limit-key: %w", err)
		}
		if *rateTimeout <= 0 {
			return fmt.Errorf("-rate-limit-timeout %s: want more than 0", *rateTimeout)
		}
		// Through Redis the budget is shared by every node on it, at no
		// database write; over PostgreSQL, by every node on the
		// database; over SQLite one process serves the file anyway.
		var l ratelimit.Limiter = ratelimit.NewMemory()
		limiter = "memory"
		pg, onPostgres := store.(*pgstore.Store)
		switch {
		case *redisURL != "":
			rl, closeRedis, err := redisLimiter(ctx, *redisURL, *redisPrefix)
			if err != nil {
				return err
			}
			defer closeRedis() // after the server's shutdown
			l, limiter = rl, "redis"
		case onPostgres:
			l, limiter = pg.RateLimiter(), "postgres"
		}
		access.Limiter, access.Policy, access.Timeout, access.FailClosed = l, p, *rateTimeout, *rateFailClosed
	}
	opts = append(opts, formsapi.WithRateLimit(access))
	api := formsapi.NewHandler(store, store, opts...)
	handler := api
	if *accessLog {
		handler = logRequests(logger, api)
	}
	if files != nil {
		files.base = strings.TrimSuffix(cmp.Or(*baseURL, base), "/")
		handler = withFiles(handler, files)
	}
	gate.open(handler, storeReady(store))
	attrs := []any{slog.String("url", base), slog.String("store", where), slog.String("rate_limiter", limiter), slog.String("cursor_secret", secretFrom)}
	if m != nil {
		attrs = append(attrs, slog.String("metrics", m.url()))
	}
	logger.Info("listening", attrs...)
	printBanner(stderr, base, where, *keyFile, demoKey, created, sameStore(*dbPath, *dsn != "", *schema))

	var deliveries observe.DeliveryObserver
	if m != nil {
		deliveries = m.observer
	}
	dispatcher, stopDispatcher := context.WithCancel(ctx)
	waitDispatcher := hooks.start(dispatcher, store, secret, logger, deliveries)
	defer func() { // its leases are released before the store closes
		stopDispatcher()
		waitDispatcher()
	}()

	if m != nil {
		go func() { errc <- m.serve() }()
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Let in-flight requests finish; the deferred Close runs after.
	shutdown, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	o.replicaLog(logger)
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	if m != nil {
		if err := m.shutdown(shutdown); err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	return nil
}

// printBanner tells the person at the terminal where the API is and how
// to call it. The demo key itself appears only on the run that created it;
// later runs read it from keyFile in the curl lines. flags are the flags
// that name the store, for the command lines of -delete and -erase.
func printBanner(w io.Writer, base, where, keyFile, key string, created bool, flags string) {
	fmt.Fprintf(w, "forms API on %s over %s\n", base, where)
	auth := "'Authorization: Bearer " + key + "'"
	switch {
	case created:
		fmt.Fprintf(w, "demo API key (shown this once; kept in %s, mode 0600): %s\n", keyFile, key)
	case key != "":
		auth = keyFileAuth(keyFile)
		fmt.Fprintf(w, "demo API key: in %s (not printed again)\n", absPath(keyFile))
	default:
		fmt.Fprintf(w, "demo API key: not kept; issue one with -new-key %s\n", demoAccount)
		auth = "'Authorization: Bearer YOUR_KEY'"
	}
	fmt.Fprintf(w, "\ntry:\n")
	for _, p := range []string{"/v1/forms", "/v1/forms/contact/submissions?limit=2", "/v1/forms/job-application/submissions?order=asc", "/v1/forms/contact/submissions?sync=start"} {
		fmt.Fprintf(w, "  curl -H %s '%s%s'\n", auth, base, p)
	}
	fmt.Fprintf(w, "  curl -H %s '%s/v1/forms/contact/export?format=csv' > contact.csv\n", auth, base)
	fmt.Fprintf(w, "  curl -g -H %s '%s/v1/forms/contact/submissions?filter[email]=ada@example.com&total=exact'\n", auth, base)
	fmt.Fprintf(w, "\ndelete a submission, erase a respondent (in another terminal; docs/example-server.md walks it):\n")
	fmt.Fprintf(w, "  go run ./examples/server%s -delete contact/contact-2\n", flags)
	fmt.Fprintf(w, "  go run ./examples/server%s -erase email=ada@example.com\n", flags)
	fmt.Fprintln(w)
}

// keyFileAuth is the curl header that reads the key from keyFile, named
// by its absolute path, so that the line works from any directory.
func keyFileAuth(keyFile string) string {
	return `"Authorization: Bearer $(cat ` + shellQuote(absPath(keyFile)) + `)"`
}

func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// sameStore returns the flags that name this run's store, for a command
// line printed to run against it: -db unless it is the default, or over
// PostgreSQL the DSN from its environment variable (never the DSN
// itself) and -schema.
func sameStore(dbPath string, postgres bool, schema string) string {
	switch {
	case postgres && schema != "":
		return ` -postgres "$FORMSAPI_POSTGRES" -schema ` + shellQuote(schema)
	case postgres:
		return ` -postgres "$FORMSAPI_POSTGRES"`
	case dbPath != "forms.db":
		return " -db " + shellQuote(dbPath)
	}
	return ""
}

// shellQuote quotes s for a POSIX shell, inside double quotes' $(...).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// maxLoggedPath bounds the path in an access-log line: a client can send a
// path of any length, and the log should not keep it whole.
const maxLoggedPath = 256

// logRequests writes one structured line per request, with the
// X-Request-Id the handler gave the response. It logs the path (cut to
// maxLoggedPath bytes, with path_bytes giving the whole length) but never
// headers or the query, so neither the API key nor a cursor reaches the
// log.
func logRequests(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", truncatePath(r.URL.Path)),
			slog.Int("status", sw.status), slog.Duration("duration", time.Since(start)),
			slog.String("request_id", w.Header().Get("X-Request-Id"))}
		if len(r.URL.Path) > maxLoggedPath {
			attrs = append(attrs, slog.Int("path_bytes", len(r.URL.Path)))
		}
		logger.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
	})
}

// truncatePath cuts p to at most maxLoggedPath bytes, at a character
// boundary, and marks the cut with "…[truncated]".
func truncatePath(p string) string {
	if len(p) <= maxLoggedPath {
		return p
	}
	cut := maxLoggedPath
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	return p[:cut] + "…[truncated]"
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

const demoAccount = "demo"

// backend is what the server needs of a store: sqlitestore and pgstore
// both are one.
type backend interface {
	formsapi.Store
	formsapi.KeyResolver
	formsapi.BatchWriter
	formsapi.KeyManager
	formsapi.FeedStore
	webhook.Store
}

// minSecret is the shortest cursor secret the server accepts.
const minSecret = 32

// cursorSecret returns the cursor secret for the handler and where it
// came from (for the log): the file at path, or else
// $FORMSAPI_CURSOR_SECRET, or else the file legacy, which an earlier
// version of this server made beside the data and whose tokens must keep
// working, if it is there. With none of them it returns nil and "store":
// the handler then uses the secret the store keeps in its database. A
// file named by path must exist. Surrounding white space is not part of
// the secret.
func cursorSecret(path, legacy string) (secret []byte, from string, err error) {
	var s string
	switch {
	case path != "":
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, "", fmt.Errorf("read cursor secret: %w", err)
		}
		s, from = string(b), "-cursor-secret-file"
	case os.Getenv("FORMSAPI_CURSOR_SECRET") != "":
		s, from = os.Getenv("FORMSAPI_CURSOR_SECRET"), "$FORMSAPI_CURSOR_SECRET"
	default:
		b, err := os.ReadFile(legacy)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "store", nil
		}
		if err != nil {
			return nil, "", fmt.Errorf("cursor secret kept in %s: %w", legacy, err)
		}
		s, from = string(b), legacy
	}
	s = strings.TrimSpace(s)
	if len(s) < minSecret {
		return nil, "", fmt.Errorf("the cursor secret has %d characters, want at least %d (try: openssl rand -base64 32)", len(s), minSecret)
	}
	return []byte(s), from, nil
}

// openPool makes the server's PostgreSQL pool from dsn, which may carry
// pgxpool's own parameters (pool_max_conns and the other pool_ ones); a
// plain pgx connection would send them to the server as settings, which
// it refuses. The seed lock holds one connection while the store seeds
// through others, so the pool has at least two.
func openPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The parse error may quote the DSN, password and all.
		return nil, errors.New("the PostgreSQL DSN cannot be parsed")
	}
	cfg.MaxConns = max(cfg.MaxConns, 2)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL pool: %w", err)
	}
	return pool, nil
}

// redisPingTimeout bounds the check at start that the Redis of -redis
// answers.
const redisPingTimeout = 5 * time.Second

// redisLimiter returns the rate limiter over the Redis at rawURL, with
// keys starting with prefix, and a func that closes its client. It checks
// at start that Redis answers, so that a wrong URL stops the server
// rather than letting it serve unlimited, failing open on every request.
// The client ends each call at the handler's limiter deadline
// (ContextTimeoutEnabled), so that a Redis that hangs holds no connection
// past it. Nothing it returns quotes rawURL, which may hold a password.
func redisLimiter(ctx context.Context, rawURL, prefix string) (*redislimit.Limiter, func() error, error) {
	c, err := redisClient(ctx, rawURL, "-redis")
	if err != nil {
		return nil, nil, err
	}
	return redislimit.New(c, redislimit.WithPrefix(prefix)), c.Close, nil
}

// redisClient opens a client of the Redis at rawURL whose calls end at
// their context's deadline (ContextTimeoutEnabled), and checks that
// Redis answers; its errors name flag and never quote rawURL.
func redisClient(ctx context.Context, rawURL, flag string) (*redis.Client, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		// The parse error may quote the URL, password and all.
		return nil, errors.New(flag + ": the Redis URL cannot be parsed")
	}
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(ctx, redisPingTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: Redis does not answer: %w", flag, err)
	}
	return c, nil
}

// roundExchange returns the exchange of shared rounds over the Redis at
// rawURL (-shared-rounds), its keys starting with prefix, and a func that
// closes its client, checking at start that Redis answers. Nothing it
// returns quotes rawURL.
func roundExchange(ctx context.Context, rawURL, prefix string) (*redisround.Exchange, func(), error) {
	c, err := redisClient(ctx, rawURL, "-shared-rounds")
	if err != nil {
		return nil, nil, err
	}
	return redisround.New(c, redisround.WithPrefix(prefix)), func() { c.Close() }, nil
}

// seedLockKey is the advisory lock that serialises seeding of one schema.
func seedLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("formsapi demo seed\x00" + schema))
	return int64(h.Sum64())
}

// seedLock takes the advisory lock for seeding schema in a transaction of
// its own on pool, until unlock ends the transaction: servers starting
// together on an empty database seed one after another, so the first
// seeds and the others find the demo data there. The lock is
// transaction-level because a session-level one outlives its user behind
// a transaction-mode pooler (PgBouncer), held by whichever pooled server
// connection ran it, and every later start would wait for it forever. A
// transaction's lock ends with the transaction, and with the connection
// of a server that dies holding it; the wait ends with ctx.
func seedLock(ctx context.Context, pool *pgxpool.Pool, schema string) (unlock func(), err error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("seed lock: %w", err)
	}
	end := func() {
		// Nothing was written: rolling back releases the lock. If that
		// fails, pgx closes the connection, which releases it too.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		tx.Rollback(ctx)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", seedLockKey(schema)); err != nil {
		end()
		return nil, fmt.Errorf("seed lock: %w", err)
	}
	return end, nil
}

// seed runs seedDemo under the lock that lock takes, if any, within
// seedTimeout.
func seed(ctx context.Context, store backend, keyFile string, lock func(context.Context) (func(), error)) (key string, created bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, seedTimeout)
	defer cancel()
	if lock != nil {
		unlock, err := lock(ctx)
		if err != nil {
			return "", false, err
		}
		defer unlock()
	}
	return seedDemo(ctx, store, keyFile)
}

// seedDemo fills an empty database with the demo account and returns its
// key, and whether this call created it. The store keeps only the key's
// hash, so the demo key itself is kept in keyFile (mode 0600) beside the
// database, for later runs to point to. The key is "" if the database
// was seeded without the file (it was deleted, say).
func seedDemo(ctx context.Context, store backend, keyFile string) (key string, created bool, err error) {
	savedKey := func() (string, bool, error) {
		b, err := os.ReadFile(keyFile)
		if errors.Is(err, fs.ErrNotExist) {
			return "", false, nil
		}
		return strings.TrimSpace(string(b)), false, err
	}
	forms, err := store.ListForms(ctx, demoAccount, formsapi.Query{Limit: 1})
	if err != nil {
		return "", false, err
	}
	if len(forms.Items) > 0 {
		return savedKey()
	}
	for i, f := range demoForms() {
		err := store.AddForm(ctx, demoAccount, f)
		if i == 0 && errors.Is(err, formsapi.ErrFormExists) {
			return savedKey() // another process is seeding the same file
		}
		if err != nil {
			return "", false, err
		}
	}
	// One transaction for them all (formsapi.BatchWriter).
	err = store.AddSubmissions(ctx, func(yield func(formsapi.Submission, formsapi.Metadata) bool) {
		for _, s := range demoSubmissions() {
			if !yield(s.sub, s.meta) {
				return
			}
		}
	})
	if err != nil {
		return "", false, err
	}
	key, err = formsapi.NewKey()
	if err != nil {
		return "", false, err
	}
	if err := store.AddKey(ctx, key, demoAccount); err != nil {
		return "", false, err
	}
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("save demo key: %w", err)
	}
	return key, true, nil
}

// splitFields is -sort-fields' names: nil for none (every field).
func splitFields(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
