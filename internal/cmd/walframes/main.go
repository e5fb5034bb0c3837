// Command walframes counts the pages a SQLite write dirties, by B-tree:
// the WAL frames each commit of sqlitestore's AddSubmission writes, which
// is most of a write's cost (a frame is a page and two pwrite calls, and
// a checkpoint copies the page again). It opens a store on a new file in
// a temporary directory through sqlitestore.New, on a handle whose
// connections never checkpoint (wal_autocheckpoint 0), loads -per
// submissions into one form (internal/benchdata, in batches), writes -n
// more one at a time as BenchmarkAddSubmission does, then reads the
// write-ahead log's frame headers: the pages of each commit, of the last
// -last commits, are named by the B-tree that holds them now (the dbstat
// table; a page freed and used again since is named by its last owner),
// and it prints the frames a commit, in all and per B-tree. A fold's
// commit counts as one of the commits, so its pages are spread over the
// writes that pay for it.
//
//	go run ./internal/cmd/walframes                  # the search index off
//	go run ./internal/cmd/walframes -search          # on
//	go run ./internal/cmd/walframes -per 100000      # a form of 100,000 first
//
// Not part of `go test` or CI; nothing here changes the store.
package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"

	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/sqlitestore"
	_ "modernc.org/sqlite"
)

func main() {
	n := flag.Int("n", 2048, "writes, one at a time")
	last := flag.Int("last", 1024, "commits counted, the last of the run")
	per := flag.Int("per", 0, "submissions loaded into the form first")
	search := flag.Bool("search", false, "open the store with the search index on")
	flag.Parse()
	if err := run(*n, *last, *per, *search); err != nil {
		log.Fatal(err)
	}
}

func run(n, last, per int, search bool) error {
	dir, err := os.MkdirTemp("", "walframes-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "w.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"+
		"&_pragma=secure_delete(1)&_pragma=wal_autocheckpoint(0)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var opts []sqlitestore.Option
	if search {
		opts = append(opts, sqlitestore.WithSearchIndex())
	}
	s, err := sqlitestore.New(db, opts...)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := benchdata.Load(ctx, s, []int{per}, "", nil); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	form := benchdata.FormID(0)
	for i := range n {
		sub, m := benchdata.Submission(form, per+i)
		if err := s.AddSubmission(ctx, sub, m); err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
	}
	commits, err := walCommits(path + "-wal")
	if err != nil {
		return err
	}
	owner := map[uint32]string{}
	rows, err := db.QueryContext(ctx, `SELECT pageno, name FROM dbstat`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var p uint32
		var name string
		if err := rows.Scan(&p, &name); err != nil {
			rows.Close()
			return err
		}
		owner[p] = name
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	commits = commits[max(0, len(commits)-last):]
	by := map[string]int{}
	frames := 0
	for _, c := range commits {
		frames += len(c)
		for _, p := range c {
			name, ok := owner[p]
			if !ok {
				name = "(free)"
			}
			by[name]++
		}
	}
	fmt.Printf("%d commits, %.2f frames a commit\n", len(commits), float64(frames)/float64(len(commits)))
	names := make([]string, 0, len(by))
	for name := range by {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return by[b] - by[a] })
	for _, name := range names {
		fmt.Printf("%8.2f  %s\n", float64(by[name])/float64(len(commits)), name)
	}
	return s.Close()
}

// walCommits reads a write-ahead log's frame headers and returns the
// pages of each commit, distinct, in the log's order.
func walCommits(path string) ([][]uint32, error) {
	w, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(w) < 32 {
		return nil, errors.New("no write-ahead log")
	}
	size := int(binary.BigEndian.Uint32(w[8:]))
	var commits [][]uint32
	var cur []uint32
	for off := 32; off+24+size <= len(w); off += 24 + size {
		page, commit := binary.BigEndian.Uint32(w[off:]), binary.BigEndian.Uint32(w[off+4:])
		if !slices.Contains(cur, page) {
			cur = append(cur, page)
		}
		if commit != 0 {
			commits = append(commits, cur)
			cur = nil
		}
	}
	return commits, nil
}
