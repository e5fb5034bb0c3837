package formsapi_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A path of one machine: under a home directory or another tree that
// only one machine has (the development machine kept its tools and
// checkouts under /work). Preceded by what cannot end a host name or a
// relative path, so that https://host/work/x and ../work/x are not one.
var machinePath = regexp.MustCompile(`(?:^|[^\w.~/-])(/(?:home|Users|root|work|mnt|media)/[^\s'"` + "`" + `),;]*)`)

// A checkout given by a path under /tmp (to build from, to run in): it
// exists only where a command of the same file made it.
var tmpCheckout = regexp.MustCompile(`(?:\bcd |\bSRC=|\bOLD=)(/tmp/[\w.-]+)`)

// machinePaths returns the lines of text (named by where) that name a
// path of one machine, or a /tmp checkout that text does not create
// with git worktree add, each with the path.
func machinePaths(where, text string) []string {
	var bad []string
	for i, line := range strings.Split(text, "\n") {
		if !mayNamePath(line) {
			continue // the regular expressions cost the test most of its time under -race
		}
		for _, m := range machinePath.FindAllStringSubmatch(line, -1) {
			bad = append(bad, where+":"+strconv.Itoa(i+1)+": "+m[1]+" (a path of one machine)")
		}
		for _, m := range tmpCheckout.FindAllStringSubmatch(line, -1) {
			made := regexp.MustCompile(`git worktree add (?:--?[\w-]+ )*` + regexp.QuoteMeta(m[1]) + `\b`)
			if !made.MatchString(text) {
				bad = append(bad, where+":"+strconv.Itoa(i+1)+": "+m[1]+" (a checkout nothing here creates)")
			}
		}
	}
	return bad
}

// mayNamePath reports whether line holds a directory either expression
// above looks for: a cheap test that lets most lines skip them.
func mayNamePath(line string) bool {
	for _, dir := range []string{"/home", "/Users", "/root", "/work", "/mnt", "/media", "/tmp/"} {
		if strings.Contains(line, dir) {
			return true
		}
	}
	return false
}

// trackedFiles returns the repository's files: git's list where this is
// a clone, else every file under the module's root but .git.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("git", "ls-files", "-z").Output(); err == nil && len(out) > 0 {
		return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	}
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestNoMachinePaths: no text file of the repository names a path that
// exists on one machine only: a home directory (under home, Users or
// root), the development machine's own tree (work: its tools, such as
// its quiet-run wrapper, and its checkouts), a mount point; nor a
// checkout under /tmp (cd, SRC= or OLD= of a bench script) that the same
// file does not create with git worktree add. A command in a document
// or a script must run from any clone: a checkout of another commit goes
// beside it (git worktree add ../old COMMIT), a scratch file under /tmp
// is one the command itself makes (mktemp, go build -o, a script's own
// WORK). System paths (/usr, /proc, /etc, /dev) are the same everywhere
// and are not this test's business. The planted subtest shows the check
// fails on the lines BENCHMARKS.md once had.
func TestNoMachinePaths(t *testing.T) {
	t.Parallel()
	t.Run("planted", func(t *testing.T) {
		work, tmp := "/"+"work/", "/"+"tmp/"
		text := strings.Join([]string{
			work + "bin/quiet-run bash bench/find.sh",
			"OLD=" + work + "wt/old16 ROWS=x bash bench/fleet.sh",
			"demo API key: in " + "/" + "home/you/formsapi/forms.db.demo-key",
			"SRC=" + tmp + "fr-old bash bench/mixed.sh",
			"git worktree add " + tmp + "old a290736",
			"(cd " + tmp + "old && go test ./...)",
			"fine: https://host/" + "work/x, ../" + "work/x, /usr/lib/postgresql, flock " + tmp + "loadrun.lock, mktemp -d " + tmp + "x.XXXX",
		}, "\n")
		got := machinePaths("planted", text)
		want := []string{
			"planted:1: " + work + "bin/quiet-run (a path of one machine)",
			"planted:2: " + work + "wt/old16 (a path of one machine)",
			"planted:3: " + "/" + "home/you/formsapi/forms.db.demo-key (a path of one machine)",
			"planted:4: " + tmp + "fr-old (a checkout nothing here creates)",
		}
		if !slices.Equal(got, want) {
			t.Errorf("planted lines:\n got %q\nwant %q", got, want)
		}
	})
	files := trackedFiles(t)
	if len(files) < 100 {
		t.Fatalf("found %d files: the listing is broken", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the working tree, not yet in git's index
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			continue // binary
		}
		for _, bad := range machinePaths(f, string(b)) {
			t.Errorf("%s: write it so that it works from any clone", bad)
		}
	}
}
