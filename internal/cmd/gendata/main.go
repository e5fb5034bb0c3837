// Command gendata fills a SQLite database, or a PostgreSQL schema, with
// benchmark data: one big form and some small ones, realistic submissions
// with metadata, and an API key. It reports the write throughput of the
// store's AddSubmission.
//
//	go run ./internal/cmd/gendata -db /tmp/bench.db -big 100000 -forms 10 -per-form 1000 -key bench-key
//	go run ./internal/cmd/gendata -postgres "$DSN" -schema formsapi_bench -big 100000 -forms 10 -per-form 1000 -key bench-key
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "gendata:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("gendata", flag.ContinueOnError)
	db := fs.String("db", "bench.db", "database file to create (must not exist)")
	big := fs.Int("big", 100_000, "submissions of the big form "+benchdata.FormID(0))
	forms := fs.Int("forms", 10, "number of small forms besides the big one")
	perForm := fs.Int("per-form", 1000, "submissions of each small form")
	key := fs.String("key", benchdata.Key, "API key to register for account "+benchdata.Account)
	dsn := fs.String("postgres", "", "fill this PostgreSQL database instead of -db")
	schema := fs.String("schema", "formsapi_bench", "PostgreSQL schema to fill (must hold no formsapi data yet)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	var store formsapi.Writer
	if *dsn != "" {
		pg, err := pgstore.Open(ctx, *dsn, pgstore.WithSchema(*schema))
		if err != nil {
			return err
		}
		defer pg.Close()
		if p, err := pg.ListForms(ctx, benchdata.Account, formsapi.Query{Limit: 1}); err != nil {
			return err
		} else if len(p.Items) > 0 {
			return fmt.Errorf("schema %s already holds benchmark data; drop it first", *schema)
		}
		store = pg
	} else {
		if _, err := os.Stat(*db); err == nil {
			return fmt.Errorf("%s exists; remove it first", *db)
		}
		lite, err := sqlitestore.Open(*db)
		if err != nil {
			return err
		}
		defer lite.Close()
		store = lite
	}

	counts := []int{*big}
	for i := 0; i < *forms; i++ {
		counts = append(counts, *perForm)
	}
	start := time.Now()
	err := benchdata.Load(ctx, store, counts, *key, func(done int) {
		fmt.Fprintf(os.Stderr, "\r%d submissions", done)
	})
	if err != nil {
		return err
	}
	total := 0
	for _, c := range counts {
		total += c
	}
	d := time.Since(start)
	fmt.Fprintf(os.Stderr, "\r")
	fmt.Printf("wrote %d forms and %d submissions in %s: %.0f AddSubmission/s (one transaction each)\n",
		len(counts), total, d.Round(time.Millisecond), float64(total)/d.Seconds())
	return nil
}
