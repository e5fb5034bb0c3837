// Command cpuwatch runs a load command and reports the CPU time (user +
// system, from /proc/PID/stat) that given processes spent while it ran,
// so that bench/ scripts can report CPU per request, which a shared and
// noisy machine leaves comparable where throughput is not.
//
//	cpuwatch -pid $SERVER -- wrk -t2 -c32 -d10s http://127.0.0.1:8080/...
//	cpuwatch -pid $SERVER -pg "$DSN" -pg-app bench-x -- feedwalk walk ...
//
// It prints the command's own output, then one line:
//
//	cpuwatch: wall=10.03 pid:1234=5.310 pg=1.204 pgpids=3 client=7.502
//
// pid:N is the CPU seconds process N spent during the command; pg the sum
// over the PostgreSQL backends whose application_name is -pg-app (listed
// from pg_stat_activity every 200 ms, so backends that start during the
// run count too, and one that ends loses at most 200 ms of its time);
// pg2 the same over a second server, -pg2 (a replica), if given;
// client the command's own (its rusage, children included). It exits with
// the command's status.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ticks is USER_HZ, the unit of /proc/PID/stat's times: 100 on Linux.
const ticks = 100

func main() {
	pids := flag.String("pid", "", "comma-separated processes to measure")
	dsn := flag.String("pg", "", "PostgreSQL DSN to list backends from (pg_stat_activity)")
	app := flag.String("pg-app", "", "with -pg: measure the backends with this application_name")
	dsn2 := flag.String("pg2", "", "with -pg-app: a second PostgreSQL server (a replica) whose backends of -pg-app to measure too, as pg2")
	every := flag.Duration("every", 200*time.Millisecond, "how often to list and sample the PostgreSQL backends")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: cpuwatch [-pid P,...] [-pg DSN [-pg2 DSN] -pg-app NAME] -- command args...")
		os.Exit(2)
	}
	var watched []int
	for _, f := range strings.FieldsFunc(*pids, func(r rune) bool { return r == ',' }) {
		p, err := strconv.Atoi(f)
		if err != nil {
			fatal(fmt.Errorf("-pid %q: %w", f, err))
		}
		watched = append(watched, p)
	}
	before := map[int]float64{}
	for _, p := range watched {
		t, err := cpu(p)
		if err != nil {
			fatal(err)
		}
		before[p] = t
	}

	var pg *backends
	if *dsn != "" {
		if *app == "" {
			fatal(fmt.Errorf("-pg needs -pg-app"))
		}
		var err error
		if pg, err = watchBackends(*dsn, *app); err != nil {
			fatal(err)
		}
		pg.sample() // backends alive now start from what they have spent
		pg.started = true
	}
	var pg2 *backends
	if *dsn2 != "" {
		if *app == "" {
			fatal(fmt.Errorf("-pg2 needs -pg-app"))
		}
		var err error
		if pg2, err = watchBackends(*dsn2, *app); err != nil {
			fatal(err)
		}
		pg2.sample()
		pg2.started = true
	}

	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	if pg != nil || pg2 != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(*every)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					for _, b := range []*backends{pg, pg2} {
						if b != nil {
							b.sample()
						}
					}
				}
			}
		}()
	}
	runErr := cmd.Wait()
	wall := time.Since(start)
	close(done)
	wg.Wait()

	line := fmt.Sprintf("cpuwatch: wall=%.2f", wall.Seconds())
	for _, p := range watched {
		t, err := cpu(p)
		if err != nil {
			fatal(fmt.Errorf("process %d ended during the command: %w", p, err))
		}
		line += fmt.Sprintf(" pid:%d=%.3f", p, t-before[p])
	}
	if pg != nil {
		pg.sample()
		total, n := pg.spent()
		line += fmt.Sprintf(" pg=%.3f pgpids=%d", total, n)
		pg.conn.Close(context.Background())
	}
	if pg2 != nil {
		pg2.sample()
		total, n := pg2.spent()
		line += fmt.Sprintf(" pg2=%.3f pg2pids=%d", total, n)
		pg2.conn.Close(context.Background())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		line += fmt.Sprintf(" client=%.3f", tv(ru.Utime)+tv(ru.Stime))
	}
	fmt.Println(line)
	if runErr != nil {
		if ee, ok := runErr.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		fatal(runErr)
	}
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// cpu returns the user + system seconds process pid has spent.
func cpu(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis, where field 3 (state) starts.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseFloat(f[11], 64) // field 14, utime
	st, err2 := strconv.ParseFloat(f[12], 64) // field 15, stime
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return (ut + st) / ticks, nil
}

// backends follows the PostgreSQL backends of one application_name.
type backends struct {
	conn    *pgx.Conn
	app     string
	started bool
	first   map[int]float64 // CPU when first seen (0 for one that started during the run)
	last    map[int]float64
}

func watchBackends(dsn, app string) (*backends, error) {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		return nil, err
	}
	return &backends{conn: conn, app: app, first: map[int]float64{}, last: map[int]float64{}}, nil
}

func (b *backends) sample() {
	rows, err := b.conn.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE application_name = $1", b.app)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpuwatch: pg_stat_activity:", err)
		return
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpuwatch: pg_stat_activity:", err)
		return
	}
	for _, p := range pids {
		t, err := cpu(int(p))
		if err != nil {
			continue // ended since the query, or PostgreSQL is on another machine
		}
		if _, ok := b.first[int(p)]; !ok {
			b.first[int(p)] = 0
			if !b.started {
				b.first[int(p)] = t
			}
		}
		b.last[int(p)] = t
	}
}

func (b *backends) spent() (float64, int) {
	total := 0.0
	for p, t := range b.last {
		total += t - b.first[p]
	}
	return total, len(b.last)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "cpuwatch:", err)
	os.Exit(1)
}
