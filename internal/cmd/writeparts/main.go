// Command writeparts attributes a SQLite write's CPU to the parts of the
// schema that maintain it: it opens a new store in a temporary directory,
// loads -forms forms of -per submissions each (internal/benchdata, in
// batches), then takes a part away (-drop: triggers; -exec: any SQL, such
// as DROP INDEX) or defers it (-fold), writes -n submissions one at a
// time through AddSubmission, and prints this process's CPU (user and
// system) per write in microseconds. Run it for each variant in turn,
// interleaved, and compare within a run: the machine's noise is larger
// than most parts.
//
//	go run ./internal/cmd/writeparts -n 3000                                   # the write as it is
//	go run ./internal/cmd/writeparts -n 3000 -drop formsapi_find_insert        # without the filters' index entries
//	go run ./internal/cmd/writeparts -n 3000 -fold 256                         # those entries folded every 256 writes
//	go run ./internal/cmd/writeparts -n 3000 -ids -per 10000                   # each write with a metadata ID
//
// -fold N drops the trigger that writes a submission's filter entries
// (formsapi_find_insert) and instead inserts the entries of the last N
// writes in one sorted statement every N writes, on a second connection:
// the write side of a deferred, batched index (its readers are not
// modelled). Not part of `go test` or CI; nothing here changes the store.
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
	fold := flag.Int("fold", 0, "drop formsapi_find_insert and insert the filter entries every this many writes")
	flag.Parse()
	if err := run(*n, *forms, *per, *ids, *search, *drop, *exec, *fold); err != nil {
		log.Fatal(err)
	}
}

func run(n, forms, per int, ids, search bool, drop, exec string, fold int) error {
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
	// A second handle for the parts taken away and the folds.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if fold > 0 {
		drop = strings.Trim(drop+",formsapi_find_insert", ",")
	}
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
	var last int64
	if err := db.QueryRow("SELECT coalesce(max(seq), 0) FROM formsapi_submissions").Scan(&last); err != nil {
		return err
	}
	foldNow := func() error {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.Exec(`INSERT OR IGNORE INTO formsapi_find (form_seq, key, created_at, seq)
SELECT s.form_seq, j.value, s.created_at, s.seq FROM formsapi_submissions s, json_each(s.find_keys) j
WHERE s.seq > ? AND j.value >= 0 ORDER BY 1, 2, 3, 4`, last); err != nil {
			return fmt.Errorf("fold: %w", err)
		}
		if err := tx.QueryRow("SELECT max(seq) FROM formsapi_submissions").Scan(&last); err != nil {
			return err
		}
		return tx.Commit()
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
		if fold > 0 && (i+1)%fold == 0 {
			if err := foldNow(); err != nil {
				return err
			}
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
