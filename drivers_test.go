package formsapi_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStoresLinkOnlyTheirDriver: a program that imports the root package
// or memstore links no database driver, one that imports sqlitestore
// links modernc.org/sqlite and not pgx, and one that imports pgstore
// links pgx and not modernc.org/sqlite (docs/architecture.md,
// "Dependencies"). Each package's wanted driver is checked too, so that
// the check could fail: a package that links nothing proves nothing.
// The Redis client, OpenTelemetry and the SSRF dialer have tests of
// their own (redislimit's TestOnlyThisPackageImportsRedis, formsotel's
// TestOnlyThisPackageImportsOpenTelemetry, webhook's
// TestDeliveryLinkedOnlyThroughWebhook).
func TestStoresLinkOnlyTheirDriver(t *testing.T) {
	t.Parallel()
	const (
		sqlite = "modernc.org/sqlite"
		pgx    = "github.com/jackc/pgx/v5"
		module = "github.com/formsapi/formsapi"
	)
	for _, c := range []struct {
		pkg        string
		links, not []string
	}{
		{module, nil, []string{sqlite, pgx}},
		{module + "/memstore", nil, []string{sqlite, pgx}},
		{module + "/sqlitestore", []string{sqlite}, []string{pgx}},
		{module + "/pgstore", []string{pgx}, []string{sqlite}},
	} {
		out, err := exec.Command("go", "list", "-deps", c.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", c.pkg, err, out)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		for _, d := range c.links {
			if !deps[d] {
				t.Errorf("%s does not link %s", c.pkg, d)
			}
		}
		for _, d := range c.not {
			if deps[d] {
				t.Errorf("%s links %s, a driver it does not use", c.pkg, d)
			}
		}
	}
}
