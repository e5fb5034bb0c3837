package formsotel_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyThisPackageImportsOpenTelemetry: the handler, package observe
// and the stores link nothing of OpenTelemetry; only a program that
// imports formsotel does.
func TestOnlyThisPackageImportsOpenTelemetry(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps",
		"github.com/formsapi/formsapi",
		"github.com/formsapi/formsapi/observe",
		"github.com/formsapi/formsapi/memstore",
		"github.com/formsapi/formsapi/sqlitestore",
		"github.com/formsapi/formsapi/pgstore",
	).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/formsapi/formsapi/observe\n") {
		t.Fatalf("go list listed nothing of use:\n%s", out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "go.opentelemetry.io/") || strings.Contains(pkg, "prometheus") {
			t.Errorf("%s is linked without formsotel", pkg)
		}
	}
	out, err = exec.Command("go", "list", "-deps", "github.com/formsapi/formsapi/formsotel").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "go.opentelemetry.io/otel/metric\n") {
		t.Errorf("go list -deps formsotel does not list the OpenTelemetry API (so the check above proves nothing): %v\n%s", err, out)
	}
}
