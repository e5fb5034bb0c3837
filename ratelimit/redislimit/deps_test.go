package redislimit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyThisPackageImportsRedis: the handler, package ratelimit and the
// stores link no Redis client; only a program that imports redislimit
// does.
func TestOnlyThisPackageImportsRedis(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps",
		"github.com/formsapi/formsapi",
		"github.com/formsapi/formsapi/ratelimit",
		"github.com/formsapi/formsapi/memstore",
		"github.com/formsapi/formsapi/sqlitestore",
		"github.com/formsapi/formsapi/pgstore",
	).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/formsapi/formsapi/ratelimit\n") {
		t.Fatalf("go list listed nothing of use:\n%s", out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.Contains(pkg, "redis") {
			t.Errorf("%s is linked without redislimit", pkg)
		}
	}
	out, err = exec.Command("go", "list", "-deps", "github.com/formsapi/formsapi/ratelimit/redislimit").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "github.com/redis/go-redis/v9\n") {
		t.Errorf("go list -deps redislimit does not list go-redis (so the check above proves nothing): %v\n%s", err, out)
	}
}
