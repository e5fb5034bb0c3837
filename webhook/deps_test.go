package webhook_test

import (
	"testing"

	"github.com/formsapi/formsapi/internal/testenv"
)

// TestDeliveryLinkedOnlyThroughWebhook checks that the stores, which keep
// endpoints through package hookstore, link none of package webhook: a
// program that serves the API from memstore, sqlitestore or pgstore
// links neither the dispatcher nor its SSRF-guarded dialer
// (code.dny.dev/ssrf).
func TestDeliveryLinkedOnlyThroughWebhook(t *testing.T) {
	t.Parallel()
	testenv.LinkedOnlyThrough(t, "github.com/formsapi/formsapi/webhook", "code.dny.dev/ssrf", func(dep string) bool {
		return dep == "code.dny.dev/ssrf" || dep == "github.com/formsapi/formsapi/webhook"
	})
}
