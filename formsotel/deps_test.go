package formsotel_test

import (
	"strings"
	"testing"

	"github.com/formsapi/formsapi/internal/testenv"
)

// TestOnlyThisPackageImportsOpenTelemetry: the handler, package observe
// and the stores link nothing of OpenTelemetry or Prometheus; only a
// program that imports formsotel does.
func TestOnlyThisPackageImportsOpenTelemetry(t *testing.T) {
	t.Parallel()
	testenv.LinkedOnlyThrough(t, "github.com/formsapi/formsapi/formsotel", "go.opentelemetry.io/otel/metric", func(dep string) bool {
		return strings.HasPrefix(dep, "go.opentelemetry.io/") || strings.Contains(dep, "prometheus")
	})
}
