// Command tenants makes and drives the multi-tenant load run of
// bench/mixed.sh.
//
//	tenants gen -db mixed.db -keys mixed.keys   # 20 accounts × 10 forms × 500 submissions
//	tenants write -db mixed.db -keys mixed.keys -every 2ms -duration 8s
//	tenants gen -postgres DSN -schema formsapi_mixed -keys mixed-pg.keys
//
// With -postgres, both work on pgstore in the given schema instead of a
// SQLite file; gen drops the schema first, so the dataset starts fresh.
//
// gen creates the database: each account with its own API key and forms,
// each form with realistic submissions (internal/benchdata), and writes
// the keys file that bench/mixed.lua reads, one line per account: the key,
// then the IDs of its forms, separated by spaces. The file holds live keys,
// so it is written with mode 0600.
//
// write is the collection side in a second process: it opens the same file
// through sqlitestore (with no read cache) and adds one submission to a
// random form of the keys file on every tick, until the duration is over.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tenants:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: tenants gen|write [flags]")
	}
	switch args[0] {
	case "gen":
		return gen(args[1:])
	case "write":
		return write(args[1:])
	}
	return fmt.Errorf("unknown command %q: want gen or write", args[0])
}

func gen(args []string) error {
	fs := flag.NewFlagSet("tenants gen", flag.ContinueOnError)
	db := fs.String("db", "mixed.db", "database file to create (must not exist)")
	keysPath := fs.String("keys", "mixed.keys", "keys file to write (mode 0600)")
	accounts := fs.Int("accounts", 20, "accounts, each with its own key")
	forms := fs.Int("forms", 10, "forms per account")
	perForm := fs.Int("per-form", 500, "submissions per form")
	pg := pgFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *accounts < 1 || *forms < 1 || *perForm < 0 {
		return errors.New("-accounts and -forms must be at least 1, -per-form at least 0")
	}
	if pg.dsn == nil || *pg.dsn == "" {
		if _, err := os.Stat(*db); err == nil {
			return fmt.Errorf("%s exists; remove it first", *db)
		}
	} else if err := pg.drop(); err != nil {
		return err
	}
	store, err := pg.open(*db)
	if err != nil {
		return err
	}
	defer store.Close()
	start := time.Now()
	ts, err := benchdata.LoadTenants(context.Background(), store, *accounts, *forms, *perForm, func(done int) {
		fmt.Fprintf(os.Stderr, "\r%d submissions", done)
	})
	if err != nil {
		return err
	}
	var lines strings.Builder
	for _, t := range ts {
		lines.WriteString(t.Key + " " + strings.Join(t.Forms, " ") + "\n")
	}
	if err := os.WriteFile(*keysPath, []byte(lines.String()), 0o600); err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Fprintf(os.Stderr, "\r")
	fmt.Printf("wrote %d accounts, %d forms, %d submissions in %s; keys in %s\n",
		*accounts, *accounts**forms, *accounts**forms**perForm, d.Round(time.Millisecond), *keysPath)
	return nil
}

// readForms returns every form ID of the keys file.
func readForms(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var forms []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 1 {
			forms = append(forms, fields[1:]...)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(forms) == 0 {
		return nil, fmt.Errorf("%s lists no forms", path)
	}
	return forms, nil
}

func write(args []string) error {
	fs := flag.NewFlagSet("tenants write", flag.ContinueOnError)
	db := fs.String("db", "mixed.db", "database file to add submissions to")
	keysPath := fs.String("keys", "mixed.keys", "keys file naming the forms")
	every := fs.Duration("every", 2*time.Millisecond, "one submission per tick of this period")
	duration := fs.Duration("duration", 8*time.Second, "how long to write")
	writers := fs.Int("writers", 1, "writes in flight at once, sharing the ticks: one writer's rate is capped by a write's latency")
	pg := pgFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *every <= 0 {
		return errors.New("-every must be positive")
	}
	if *writers < 1 {
		return errors.New("-writers must be at least 1")
	}
	forms, err := readForms(*keysPath)
	if err != nil {
		return err
	}
	store, err := pg.open(*db)
	if err != nil {
		return err
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	tick := time.NewTicker(*every)
	defer tick.Stop()
	start := time.Now()
	var seq, n atomic.Int64
	errs := make(chan error, *writers)
	var wg sync.WaitGroup
	for w := range *writers {
		r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				s, m := benchdata.Submission(forms[r.IntN(len(forms))], 1_000_000+int(seq.Add(1)))
				s.CreatedAt = time.Time{} // now: the newest end of the form
				if err := store.AddSubmission(context.Background(), s, m); err != nil {
					errs <- err
					cancel()
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Printf("writer: %d submissions in %s (%.0f/s) to %d forms, %d in flight at most\n", n.Load(), d.Round(time.Millisecond), float64(n.Load())/d.Seconds(), len(forms), *writers)
	return nil
}

// pgOptions are the -postgres and -schema flags.
type pgOptions struct{ dsn, schema *string }

func pgFlags(fs *flag.FlagSet) pgOptions {
	return pgOptions{
		dsn:    fs.String("postgres", "", "use pgstore at this DSN instead of the SQLite file"),
		schema: fs.String("schema", "formsapi_mixed", "PostgreSQL schema of the dataset (with -postgres)"),
	}
}

// writer is the write side of either store.
type writer interface {
	formsapi.Writer
	Close() error
}

// pgWriter gives pgstore.Store the Close of writer.
type pgWriter struct{ *pgstore.Store }

func (w pgWriter) Close() error { w.Store.Close(); return nil }

// open opens the SQLite file at db, or pgstore with -postgres.
func (o pgOptions) open(db string) (writer, error) {
	if *o.dsn == "" {
		return sqlitestore.Open(db, sqlitestore.WithCacheSize(0))
	}
	s, err := pgstore.Open(context.Background(), *o.dsn, pgstore.WithSchema(*o.schema))
	if err != nil {
		return nil, err
	}
	return pgWriter{s}, nil
}

// drop drops the -schema, so gen starts from an empty one.
func (o pgOptions) drop() error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, *o.dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{*o.schema}.Sanitize()+" CASCADE")
	return err
}
