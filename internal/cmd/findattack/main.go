// Command findattack re-creates the search attack of issue 42 (RELIABILITY
// cases 103 and 104), for bench/findattack.sh. It uses the module's public
// API alone, so the script builds it in another checkout too, to measure
// that checkout's code. It has two modes:
//
//	findattack -seed 200 -db forms.db    # 200 submissions of 1 MiB into form "attack" of account demo
//	findattack -writes 20                # the CPU of 20 writes of 1 MiB of U+FDFA, of é and of ASCII
//
// The seeded submissions hold "qwer wertz", every trigram of the term
// qwertz, which they do not contain, and a megabyte of é: every one is a
// candidate of q=qwertz, and its check normalizes its values. -writes
// adds its submissions to a new database of its own, with the search
// index off (the stores' default) unless -search-index, and prints the
// process's CPU time (user and system, from getrusage) per write.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/benchdata"
	"github.com/formsapi/formsapi/sqlitestore"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "findattack:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("findattack", flag.ContinueOnError)
	seed := fs.Int("seed", 0, "add this many submissions of the attack to form attack of account demo in -db, then exit")
	db := fs.String("db", "forms.db", "database file to seed")
	writes := fs.Int("writes", 0, "time this many writes of each kind of megabyte in a database of its own")
	searchIndex := fs.Bool("search-index", false, "with -writes: turn the search index on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	switch {
	case *seed > 0:
		var opts []sqlitestore.Option
		if *searchIndex {
			opts = append(opts, sqlitestore.WithSearchIndex())
		}
		s, err := sqlitestore.Open(*db, opts...)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.AddForm(ctx, "demo", formsapi.Form{ID: "attack", Title: "Attack"}); err != nil && !errors.Is(err, formsapi.ErrFormExists) {
			return err
		}
		// 16 a batch: each is 1 MiB.
		return benchdata.AddAll(ctx, s, *seed, 16, func(i int) (formsapi.Submission, formsapi.Metadata) {
			return formsapi.Submission{FormID: "attack", Data: megabyte(i, "é")}, formsapi.Metadata{}
		}, nil)
	case *writes > 0:
		return timeWrites(ctx, *writes, *searchIndex)
	}
	return errors.New("give -seed or -writes")
}

// megabyte is the data of submission i: "qwer wertz", and unit repeated
// to about a megabyte in one value, within the default limits.
func megabyte(i int, unit string) []byte {
	head := fmt.Sprintf(`{"i":%d,"a":"qwer wertz","b":"`, i)
	n := (formsapi.DefaultLimits.MaxDataBytes - len(head) - len(`"}`) - 16) / len(unit)
	return []byte(head + strings.Repeat(unit, n) + `"}`)
}

// timeWrites adds n submissions of a megabyte of each kind to a new
// database and prints the CPU time per write of each.
func timeWrites(ctx context.Context, n int, searchIndex bool) error {
	dir, err := os.MkdirTemp("", "findattack")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var opts []sqlitestore.Option
	if searchIndex {
		opts = append(opts, sqlitestore.WithSearchIndex())
	}
	s, err := sqlitestore.Open(filepath.Join(dir, "w.db"), opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.AddForm(ctx, "demo", formsapi.Form{ID: "w", Title: "Writes"}); err != nil {
		return err
	}
	for _, kind := range []struct{ name, unit string }{{"ASCII", "qwer wertz "}, {"é", "é"}, {"U+FDFA", "\uFDFA"}} {
		before := cpu()
		for i := range n {
			if err := s.AddSubmission(ctx, formsapi.Submission{FormID: "w", Data: megabyte(i, kind.unit)}, formsapi.Metadata{}); err != nil {
				return err
			}
		}
		fmt.Printf("1 MiB of %-7s search index %-5v  cpu/write %7.1f ms\n", kind.name, searchIndex, float64(cpu()-before)/float64(n)/float64(time.Millisecond))
	}
	return nil
}

// cpu is the process's CPU time so far, user and system.
func cpu() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
