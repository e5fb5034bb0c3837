package pgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/formsapi/formsapi/internal/testenv"
)

// ReplicaEnvVar enables the tests that need a PostgreSQL primary with a
// streaming hot standby: set to 1, Replica starts both, on this machine,
// from the server binaries of the PostgreSQL installation (initdb,
// pg_ctl, pg_basebackup; /usr/lib/postgresql/<newest>/bin, or the
// directory named by FORMSAPI_TEST_PG_BIN). The shared test server of
// FORMSAPI_TEST_POSTGRES cannot serve: it allows no replication
// connection.
const ReplicaEnvVar = "FORMSAPI_TEST_REPLICA"

// BinEnvVar names the directory of the PostgreSQL server binaries
// Replica runs, when they are not in /usr/lib/postgresql/<version>/bin.
const BinEnvVar = "FORMSAPI_TEST_PG_BIN"

// Pair is a PostgreSQL primary and a hot standby streaming from it,
// started by Replica. Both accept connections as user postgres without a
// password, on 127.0.0.1, database postgres.
type Pair struct {
	// Primary and Standby are the DSNs of the two servers.
	Primary, Standby string

	dir     string // holds both data directories and their logs
	bin     string
	owner   *user.User // runs the servers when the tests run as root
	stopped bool
}

var replica struct {
	sync.Mutex
	pair *Pair
	err  error
	done bool
}

// Replica returns the process's primary and standby, starting them at
// its first call: every test of a package shares the pair (starting one
// takes seconds), so each should keep to a schema of its own on it (see
// ReplicaSchema). Without FORMSAPI_TEST_REPLICA=1 the test is skipped,
// saying how to enable it, or fails when CI is set (see testenv.Get). A
// pair that fails to start fails every test that asks for it.
//
// The pair is stopped and its directory removed by StopReplica, which the
// package's TestMain calls after its tests, and on SIGINT or SIGTERM; a
// watcher process started with the servers stops and removes them too if
// the test process dies without either (a panic, SIGKILL).
func Replica(t testing.TB) *Pair {
	t.Helper()
	if testenv.Get(t, ReplicaEnvVar, "1") != "1" {
		t.Fatalf("pgtest: %s must be 1 to run the replica tests", ReplicaEnvVar)
	}
	replica.Lock()
	defer replica.Unlock()
	if !replica.done {
		replica.done = true
		replica.pair, replica.err = startPair()
		if replica.err == nil {
			stopOnSignal()
		}
	}
	if replica.err != nil {
		t.Fatalf("pgtest: start a primary and a standby: %v", replica.err)
	}
	return replica.pair
}

// StopReplica stops the pair Replica started, if any, and removes its
// directory. A package whose tests call Replica calls it from TestMain
// after m.Run.
func StopReplica() {
	replica.Lock()
	defer replica.Unlock()
	if replica.pair != nil {
		replica.pair.stop()
	}
}

// stopOnSignal stops the pair when the test process is interrupted (go
// test's -timeout sends SIGQUIT, which cannot be caught usefully: the
// watcher covers it), then exits as the signal would have.
func stopOnSignal() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-c
		StopReplica()
		signal.Reset(sig)
		p, _ := os.FindProcess(os.Getpid())
		p.Signal(sig)
	}()
}

// ReplicaSchema returns the DSNs of the pair's primary and standby and a
// new, empty schema on the primary (it reaches the standby by
// replication), dropped with everything in it when the test ends.
func ReplicaSchema(t testing.TB) (p *Pair, schema string) {
	t.Helper()
	p = Replica(t)
	schema = "formsapi_test_" + strings.ToLower(rand.Text()[:12])
	exec(t, p.Primary, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	t.Cleanup(func() { exec(t, p.Primary, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return p, schema
}

// CaughtUp waits until the standby has replayed everything the primary
// had logged when CaughtUp was called (pg_last_wal_replay_lsn against
// pg_current_wal_insert_lsn, which counts WAL not yet flushed, such as
// an asynchronous commit's), asking again every few milliseconds; it
// fails the test if that takes more than 30 seconds (as it does while
// replay is paused).
func (p *Pair) CaughtUp(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	var lsn string
	if err := queryRow(ctx, p.Primary, "SELECT pg_current_wal_insert_lsn()::text", &lsn); err != nil {
		t.Fatalf("pgtest: the primary's LSN: %v", err)
	}
	conn, err := pgx.Connect(ctx, p.Standby)
	if err != nil {
		t.Fatalf("pgtest: connect to the standby: %v", err)
	}
	defer conn.Close(ctx)
	testenv.WaitFor(t, func() bool {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", lsn).Scan(&ok); err != nil {
			t.Fatalf("pgtest: the standby's replay LSN: %v", err)
		}
		return ok
	})
}

// PauseReplay stops the standby's replay of the primary's WAL (it still
// receives it) and waits until the standby says it is paused; the test's
// cleanup resumes it. Until ResumeReplay, reads on the standby see the
// data as it was when replay stopped.
func (p *Pair) PauseReplay(t testing.TB) {
	t.Helper()
	exec(t, p.Standby, "SELECT pg_wal_replay_pause()")
	t.Cleanup(func() { exec(t, p.Standby, "SELECT pg_wal_replay_resume()") })
	ctx := context.Background()
	testenv.WaitFor(t, func() bool {
		var state string
		if err := queryRow(ctx, p.Standby, "SELECT pg_get_wal_replay_pause_state()", &state); err != nil {
			t.Fatalf("pgtest: the standby's replay state: %v", err)
		}
		return state == "paused"
	})
}

// ResumeReplay resumes the standby's replay after PauseReplay.
func (p *Pair) ResumeReplay(t testing.TB) {
	t.Helper()
	exec(t, p.Standby, "SELECT pg_wal_replay_resume()")
}

func queryRow(ctx context.Context, dsn, sql string, dest ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// startPair makes a primary with initdb, a standby from it with
// pg_basebackup, starts both on free ports and waits until the standby
// accepts connections in recovery.
func startPair() (_ *Pair, err error) {
	bin, err := serverBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "formsapi-replica-")
	if err != nil {
		return nil, err
	}
	p := &Pair{dir: dir, bin: bin}
	defer func() {
		if err != nil {
			p.stop()
		}
	}()
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		if p.owner, err = user.Lookup("postgres"); err != nil {
			return nil, fmt.Errorf("the tests run as root and there is no user postgres to run the servers: %w", err)
		}
		uid, _ := strconv.Atoi(p.owner.Uid)
		gid, _ := strconv.Atoi(p.owner.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	primary, standby := filepath.Join(dir, "primary"), filepath.Join(dir, "standby")
	if err := p.run("initdb", "-D", primary, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return nil, err
	}
	conf := strings.Join([]string{
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = '" + dir + "'",
		"wal_level = replica",
		"max_wal_senders = 4",
		"hot_standby = on",
		"hot_standby_feedback = on",
		// A test server: no durability needed, and quick to stop.
		"fsync = off",
		"synchronous_commit = off",
		"full_page_writes = off",
		"shared_buffers = 32MB",
		"max_connections = 60",
		"",
	}, "\n")
	if err := p.appendFile(filepath.Join(primary, "postgresql.conf"), conf); err != nil {
		return nil, err
	}
	if err := p.appendFile(filepath.Join(primary, "pg_hba.conf"), "host replication all 127.0.0.1/32 trust\n"); err != nil {
		return nil, err
	}
	primaryPort, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := p.run("pg_ctl", "-D", primary, "-l", filepath.Join(dir, "primary.log"), "-o", "-p "+strconv.Itoa(primaryPort), "-w", "-t", "60", "start"); err != nil {
		return nil, fmt.Errorf("%w (log: %s)", err, p.tail("primary.log"))
	}
	p.watch()
	if err := p.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primaryPort), "-U", "postgres", "-D", standby, "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return nil, err
	}
	standbyPort, err := freePort()
	if err != nil {
		return nil, err
	}
	if err := p.run("pg_ctl", "-D", standby, "-l", filepath.Join(dir, "standby.log"), "-o", "-p "+strconv.Itoa(standbyPort), "-w", "-t", "60", "start"); err != nil {
		return nil, fmt.Errorf("%w (log: %s)", err, p.tail("standby.log"))
	}
	dsn := func(port int) string {
		return "postgres://postgres@127.0.0.1:" + strconv.Itoa(port) + "/postgres?sslmode=disable"
	}
	p.Primary, p.Standby = dsn(primaryPort), dsn(standbyPort)
	var recovering bool
	if err := queryRow(context.Background(), p.Standby, "SELECT pg_is_in_recovery()", &recovering); err != nil {
		return nil, fmt.Errorf("the standby: %w", err)
	}
	if !recovering {
		return nil, errors.New("the standby is not in recovery")
	}
	return p, nil
}

// serverBin finds the directory of initdb, pg_ctl and pg_basebackup.
func serverBin() (string, error) {
	if d := os.Getenv(BinEnvVar); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_basebackup")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin: install the server (Debian: postgresql) or set %s", BinEnvVar)
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// run runs one of the server's programs, as user postgres when the tests
// run as root, and returns its output with an error when it fails.
func (p *Pair) run(name string, args ...string) error {
	cmd := p.command(name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (p *Pair) command(name string, args ...string) *osexec.Cmd {
	path := filepath.Join(p.bin, name)
	if p.owner != nil {
		return osexec.Command("runuser", append([]string{"-u", p.owner.Username, "--", path}, args...)...)
	}
	return osexec.Command(path, args...)
}

// appendFile appends text to a file of a data directory (the servers'
// user owns it; root may write it as it is).
func (p *Pair) appendFile(name, text string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tail returns the end of a server's log, for an error.
func (p *Pair) tail(name string) string {
	b, _ := os.ReadFile(filepath.Join(p.dir, name))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// stopCommands is the shell text that stops both servers at once and
// removes the pair's directory.
func (p *Pair) stopCommands() string {
	var b strings.Builder
	for _, d := range []string{"standby", "primary"} {
		data := filepath.Join(p.dir, d)
		ctl := filepath.Join(p.bin, "pg_ctl")
		if p.owner != nil {
			fmt.Fprintf(&b, "[ -d %s ] && runuser -u %s -- %s -D %s -m immediate stop >/dev/null 2>&1; ", data, p.owner.Username, ctl, data)
		} else {
			fmt.Fprintf(&b, "[ -d %s ] && %s -D %s -m immediate stop >/dev/null 2>&1; ", data, ctl, data)
		}
	}
	fmt.Fprintf(&b, "rm -rf %s", p.dir)
	return b.String()
}

// watch starts a process, in a session of its own, that outlives the test
// process and, once that has gone without stopping the pair (it
// panicked, or was killed), stops the servers and removes the directory.
// It checks every second whether the test process is alive; that pace
// only bounds how long a crashed run leaves the servers behind.
func (p *Pair) watch() {
	script := fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 1; done; %s", os.Getpid(), p.stopCommands())
	cmd := osexec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if cmd.Start() == nil {
		go cmd.Wait() // reaps the watcher if it ends first
	}
}

// stop stops both servers (immediate: nothing in them is kept) and
// removes the directory.
func (p *Pair) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	osexec.Command("sh", "-c", p.stopCommands()).Run()
}

// freePort returns a TCP port of 127.0.0.1 that nothing listened on a
// moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
