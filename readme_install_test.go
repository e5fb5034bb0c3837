package formsapi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEInstall follows the README's Install section in a new
// module holding the README's program: its go mod edit line (the clone
// at ../formsapi being this working tree) and go mod tidy, after which
// the program builds. And it holds the README to what it says of a
// workspace (go work init . ../formsapi): go mod tidy ignores it and
// fails on this module's packages, so the README must say so wherever
// it names one (it once offered a workspace as the other way).
//
// Offline (GOPROXY=off), from the module cache the repo's tests use,
// tidy runs with -e: the tests of third-party modules import modules
// that are not in that cache, which a networked tidy would fetch.
func TestREADMEInstall(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var program string
	for _, b := range goBlocks(t) {
		if b.file == "README.md" && strings.Contains(b.src, `mount.Prefix("/api"`) {
			program = b.src
		}
	}
	if program == "" {
		t.Fatal(`README.md has no program with mount.Prefix("/api"`)
	}
	_, install, _ := strings.Cut(string(readme), "\n## Install\n")
	install, _, _ = strings.Cut(install, "\n## ")
	edit := regexp.MustCompile(`(?m)^go mod edit .*$`).FindString(install)
	if edit == "" || !strings.Contains(install, "\ngo mod tidy\n") {
		t.Fatalf("README.md's Install section has no go mod edit and go mod tidy lines:\n%s", install)
	}

	// A new module, as a host starts one.
	newModule := func() string {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "main.go"), []byte(program))
		mustGo(t, dir, nil, "mod", "init", "example.com/host")
		// The sums of the modules in the cache, as a networked tidy
		// would find them.
		sum, err := os.ReadFile("go.sum")
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, "go.sum"), sum)
		return dir
	}

	host := newModule()
	mustGo(t, host, nil, strings.Fields(strings.ReplaceAll(edit, "=../formsapi", "="+root))[1:]...)
	mustGo(t, host, nil, "mod", "tidy", "-e")
	mustGo(t, host, nil, "build", "-o", os.DevNull, ".")

	// A workspace: tidy looks this module up, whatever go.work says.
	ws := newModule()
	work := []string{"GOWORK=" + filepath.Join(ws, "go.work")}
	mustGo(t, ws, work, "work", "init", ".", root)
	out, _ := goEnv(ws, work, "mod", "tidy", "-e").CombinedOutput()
	if !regexp.MustCompile(`github.com/formsapi/formsapi/\S+: cannot find module providing package`).Match(out) {
		t.Errorf("go mod tidy in a workspace with this module no longer fails on its packages; the README may offer a workspace again:\n%s", out)
	}
	for _, para := range strings.Split(string(readme), "\n\n") {
		if strings.Contains(para, "go work init") && !strings.Contains(para, "`go mod tidy` ignores workspaces") {
			t.Errorf("README.md names a workspace without saying that `go mod tidy` ignores workspaces (and so fails):\n%s", para)
		}
	}
}

// goEnv is the go command run in dir offline, as goIn, with env added.
func goEnv(dir string, env []string, args ...string) *exec.Cmd {
	cmd := goIn(dir, args...)
	cmd.Env = append(cmd.Env, "GOSUMDB=off")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

func mustGo(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	if out, err := goEnv(dir, env, args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
