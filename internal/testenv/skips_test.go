package testenv

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLineCounts: each skip is counted under its message, subtests
// alike, and the line names the package, the total and every message.
func TestLineCounts(t *testing.T) {
	var c counter
	if got := c.line("example.com/p"); got != "" {
		t.Errorf("no skips: %q, want no line", got)
	}
	t.Run("one", func(t *testing.T) { c.skip(t, "set X=1 to run the tests that need it") })
	if got, want := c.line("example.com/p"), "skip\texample.com/p\t1 test skipped: set X=1 to run the tests that need it\n"; got != want {
		t.Errorf("one skip:\n got %q\nwant %q", got, want)
	}
	t.Run("more", func(t *testing.T) {
		for _, m := range []string{"set X=1 to run the tests that need it", "nginx is not installed", "set X=1 to run the tests that need it"} {
			t.Run("", func(t *testing.T) { t.Parallel(); c.skip(t, m) })
		}
	})
	want := "skip\texample.com/p\t4 tests skipped: 1: nginx is not installed; 3: set X=1 to run the tests that need it\n"
	if got := c.line("example.com/p"); got != want {
		t.Errorf("four skips:\n got %q\nwant %q", got, want)
	}
}

// TestCallerPackage names the package of a TestMain from its function,
// in an external test package too.
func TestCallerPackage(t *testing.T) {
	if got, want := callerPackage(1), "github.com/formsapi/formsapi/internal/testenv"; got != want {
		t.Errorf("callerPackage(1) = %q, want %q", got, want)
	}
}

// TestGoTestShowsTheLine runs go test ./... the way the README says, on
// testdata/skipper, whose tests skip through Skip, and finds its line
// in go test's output: without -v (where go test keeps a passing
// package's output to itself), and once with -v.
func TestGoTestShowsTheLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test in a child process")
	}
	t.Parallel()
	const pkg = "github.com/formsapi/formsapi/internal/testenv/testdata/skipper"
	want := "skip\t" + pkg + "\t3 tests skipped: 1: caddy is not installed; 2: set SKIPPER_SERVER=x to run the tests that need it\n"
	for _, verbose := range []bool{false, true} {
		args := []string{"test", "-count=1", "./testdata/skipper"}
		if verbose {
			args = append(args, "-v")
		}
		cmd := exec.Command("go", args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
		if n := strings.Count(string(out), want); n != 1 {
			t.Errorf("go %v printed the line %d times, want once:\n%s", args, n, out)
		}
		if !strings.Contains(string(out), "ok  \t"+pkg) {
			t.Errorf("go %v: no ok line:\n%s", args, out)
		}
	}
}

// TestSkippingPackagesReport: every package whose tests may skip for a
// missing server or program (they call pgtest's or redistest's helpers,
// Get or Skip) has a TestMain that calls Main or Report, or its skips
// would go unseen without -v.
func TestSkippingPackagesReport(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	needs, reports := map[string]bool{}, map[string]bool{} // by package directory
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if abs, _ := filepath.Abs(path); abs == self || path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s, dir := string(src), filepath.Dir(path)
		for _, call := range []string{"pgtest.", "redistest.", "testenv.Get(", "testenv.Skip("} {
			if strings.Contains(s, call) {
				needs[dir] = true
			}
		}
		if strings.Contains(s, "testenv.Main(m)") || strings.Contains(s, "testenv.Report()") {
			reports[dir] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(needs) < 3 {
		t.Fatalf("found %d packages whose tests skip for a server: the search is broken", len(needs))
	}
	for dir := range needs {
		if !reports[dir] {
			t.Errorf("%s: its tests may skip for a missing server or program, but no TestMain calls testenv.Main or testenv.Report", dir)
		}
	}
}
