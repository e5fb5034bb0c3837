package formsapi_test

import (
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/internal/find"
)

// TestTotalKindsAreTheStores: the kinds a host reads in a Total are the
// ones the stores count with (internal/find), so a host's switch on
// formsapi.TotalExact and the others sees every Total a store of this
// module answers.
func TestTotalKindsAreTheStores(t *testing.T) {
	t.Parallel()
	for _, k := range [][2]string{{formsapi.TotalExact, find.Exact}, {formsapi.TotalAtLeast, find.AtLeast}, {formsapi.TotalEstimate, find.Estimate}} {
		if k[0] != k[1] {
			t.Errorf("formsapi's kind %q, the stores' %q", k[0], k[1])
		}
	}
}
