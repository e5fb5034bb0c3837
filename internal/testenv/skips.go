package testenv

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// counter counts skipped tests by message.
type counter struct {
	sync.Mutex
	n map[string]int
}

// skips counts the tests of this process that Skip skipped.
var skips counter

// skip counts t under message and skips it.
func (c *counter) skip(t testing.TB, message string) {
	t.Helper()
	c.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[message]++
	c.Unlock()
	t.Skip(message)
}

// Skip skips t for something it needs that is missing here (a server, a
// program), with message, which says what and how to enable it ("set
// FORMSAPI_TEST_POSTGRES=… to run the tests that need it"), and counts it
// for the line Report writes.
func Skip(t testing.TB, message string) {
	t.Helper()
	skips.skip(t, message)
}

// Main runs the package's tests, writes the line of Report about the
// ones Skip skipped, and exits with the tests' code. A package whose
// tests call Skip (or Get, or pgtest's and redistest's helpers) has
// func TestMain(m *testing.M) { testenv.Main(m) }: without -v, go test
// ./... shows nothing of a passing package but its "ok" line, so the
// skips would go unseen.
func Main(m *testing.M) {
	code := m.Run()
	report(callerPackage(2))
	os.Exit(code)
}

// Report writes one line, if any test of this process was skipped by
// Skip, naming the package of its caller (a TestMain), how many tests
// were skipped and how to enable them, where the person who ran go test
// sees it: see Main. A TestMain that does more than Main calls it after
// m.Run.
func Report() {
	report(callerPackage(2))
}

func report(pkg string) {
	line := skips.line(pkg)
	if line == "" {
		return
	}
	w, done := visible()
	defer done()
	io.WriteString(w, line)
}

// line returns the line Report writes for the package pkg: "" when no
// test was skipped, otherwise, after "skip" and pkg (tab-separated, as
// go test's "ok" lines), the number of tests skipped and each message,
// with its count when there are several.
func (c *counter) line(pkg string) string {
	c.Lock()
	defer c.Unlock()
	if len(c.n) == 0 {
		return ""
	}
	msgs := make([]string, 0, len(c.n))
	total := 0
	for m, n := range c.n {
		msgs = append(msgs, m)
		total += n
	}
	sort.Strings(msgs)
	if len(msgs) > 1 {
		for i, m := range msgs {
			msgs[i] = strconv.Itoa(c.n[m]) + ": " + m
		}
	}
	tests := "tests"
	if total == 1 {
		tests = "test"
	}
	return fmt.Sprintf("skip\t%s\t%d %s skipped: %s\n", pkg, total, tests, strings.Join(msgs, "; "))
}

// callerPackage returns the import path of the package of the function
// skip frames up, such as "github.com/formsapi/formsapi/pgstore" for its
// TestMain (of package pgstore or pgstore_test).
func callerPackage(skip int) string {
	pc, _, _, ok := runtime.Caller(skip)
	if !ok {
		return "?"
	}
	name := runtime.FuncForPC(pc).Name() // "github.com/x/y/pgstore_test.TestMain"
	slash := strings.LastIndexByte(name, '/')
	if dot := strings.IndexByte(name[slash+1:], '.'); dot >= 0 {
		name = name[:slash+1+dot]
	}
	return strings.TrimSuffix(name, "_test")
}

// visible returns where a line reaches whoever ran the test binary, and
// what to call when done writing. go test ./... (package list mode)
// without -v keeps a passing package's output to itself and prints only
// its "ok" line, so the line goes around it:
//
//   - with -v (and -json), or when the binary's stdout is its parent's
//     (go test in a package's directory, or the binary run by hand), to
//     stdout, which is shown;
//   - otherwise to the standard error of the parent, the go command, when
//     that is a terminal or a pipe (Linux, through /proc; a regular file
//     is left alone, as a second writer would overwrite it), or else to
//     the controlling terminal (/dev/tty);
//   - and if neither opens, to stdout after all.
func visible() (io.Writer, func()) {
	if testing.Verbose() {
		return os.Stdout, func() {}
	}
	parent := "/proc/" + strconv.Itoa(os.Getppid()) + "/fd/"
	if out, err := os.Stdout.Stat(); err == nil {
		if pout, err := os.Stat(parent + "1"); err == nil && os.SameFile(out, pout) {
			return os.Stdout, func() {}
		}
	}
	if info, err := os.Stat(parent + "2"); err == nil && info.Mode()&(os.ModeCharDevice|os.ModeNamedPipe) != 0 {
		if f, err := os.OpenFile(parent+"2", os.O_WRONLY|os.O_APPEND, 0); err == nil {
			return f, func() { f.Close() }
		}
	}
	if f, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		return f, func() { f.Close() }
	}
	return os.Stdout, func() {}
}
