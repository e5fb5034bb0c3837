// Command writeparts attributes a SQLite write's CPU to the parts of the
// schema that maintain it: it opens a new store in a temporary directory,
// loads -forms forms of -per submissions each (internal/benchdata, in
// batches), then takes a part away (-drop: triggers; -exec: any SQL, such
// as DROP INDEX), writes -n submissions one at a
// time through AddSubmission, and prints this process's CPU (user and
// system) per write in microseconds. Run it for each variant in turn,
// interleaved, and compare within a run: the machine's noise is larger
// than most parts.
//
//	go run ./internal/cmd/writeparts -n 3000                                   # the write as it is
//	go run ./internal/cmd/writeparts -n 3000 -drop formsapi_submissions_fields  # without the field table
//	go run ./internal/cmd/writeparts -n 3000 -ids -per 10000                   # each write with a metadata ID
//
// (Its -fold, the filters' entries folded every N writes into
// formsapi_find, went with that table: migration 0031 folds them into
// runs.) Not part of `go test` or CI; nothing here changes the store.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/sqlitestore"
	_ "modernc.org/sqlite"
)

func main() {
	n := flag.Int("n", 3000, "writes to measure")
	forms := flag.Int("forms", 1, "forms, written in turn")
	per := flag.Int("per", 1000, "submissions loaded into each form first")
	ids := flag.Bool("ids", false, "give each measured write a metadata ID")
	search := flag.Bool("search", false, "open the store with the search index on")
	drop := flag.String("drop", "", "triggers to drop before the writes, comma-separated")
	exec := flag.String("exec", "", "SQL to run before the writes")
	flag.Parse()
	if err := run(*n, *forms, *per, *ids, *search, *drop, *exec); err != nil {
		log.Fatal(err)
	}
}

func run(n, forms, per int, ids, search bool, drop, exec string) error {
	dir, err := os.MkdirTemp("", "writeparts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "w.db")
	var opts []sqlitestore.Option
	if search {
		opts = append(opts, sqlitestore.WithSearchIndex())
	}
	s, err := sqlitestore.Open(path, opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	counts := make([]int, max(forms, 1))
	for i := range counts {
		counts[i] = per
	}
	if err := benchdata.Load(ctx, s, counts, "", nil); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	// A second handle for the parts taken away.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, t := range strings.Split(drop, ",") {
		if t == "" {
			continue
		}
		if _, err := db.Exec("DROP TRIGGER " + t); err != nil {
			return fmt.Errorf("drop trigger %s: %w", t, err)
		}
	}
	if exec != "" {
		if _, err := db.Exec(exec); err != nil {
			return fmt.Errorf("exec: %w", err)
		}
	}
	start := cpu()
	for i := range n {
		sub, m := benchdata.Submission(benchdata.FormID(i%len(counts)), per+i)
		if ids {
			m.ID = fmt.Sprintf("w%d", i)
		}
		if err := s.AddSubmission(ctx, sub, m); err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
	}
	fmt.Printf("%.1f\n", (cpu()-start)/float64(n))
	return errors.Join(db.Close(), s.Close())
}

// cpu is this process's user and system CPU so far, in microseconds.
func cpu() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}
