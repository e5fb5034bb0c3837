package testenv

import (
	"os/exec"
	"strings"
	"testing"
)

// Core is the module's core: the handler, its hook and rate-limit
// packages, and the stores. What an integration package adds (a Redis
// client, OpenTelemetry) must not be linked into a program that imports
// only these.
var Core = []string{
	"github.com/formsapi/formsapi",
	"github.com/formsapi/formsapi/observe",
	"github.com/formsapi/formsapi/ratelimit",
	"github.com/formsapi/formsapi/memstore",
	"github.com/formsapi/formsapi/sqlitestore",
	"github.com/formsapi/formsapi/pgstore",
}

// LinkedOnlyThrough checks that no package matching foreign is a
// dependency of the Core packages, and that pkg, the integration package
// that brings them, does depend on want (so that the check can fail: a
// matcher that matches nothing would pass it).
func LinkedOnlyThrough(t *testing.T, pkg, want string, foreign func(dep string) bool) {
	t.Helper()
	deps := func(pkgs ...string) []string {
		t.Helper()
		out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %v: %v\n%s", pkgs, err, out)
		}
		return strings.Fields(string(out))
	}
	core := deps(Core...)
	if len(core) < len(Core) {
		t.Fatalf("go list listed nothing of use: %v", core)
	}
	for _, dep := range core {
		if foreign(dep) {
			t.Errorf("%s is linked without %s", dep, pkg)
		}
	}
	for _, dep := range deps(pkg) {
		if dep == want {
			if !foreign(want) {
				t.Errorf("the matcher does not match %s, so it proves nothing", want)
			}
			return
		}
	}
	t.Errorf("go list -deps %s does not list %s (so the check above proves nothing)", pkg, want)
}
