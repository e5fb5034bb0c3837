package formsapi

import (
	"testing"

	"github.com/formsapi/formsapi/internal/find"
)

// TestCanonicalTextIsFinds: the summary's shortcut gives find.Canonical's
// text for every value, those it takes as they are and those it does not.
func TestCanonicalTextIsFinds(t *testing.T) {
	for _, raw := range []string{`"plain"`, `"a<b>&c"`, `""`, `"tab\t"`, `"é"`, `"\u00e9"`, `"\u2028"`, `"quote\""`, "\"\x7f\"",
		`0`, `-0`, `42`, `-42`, `042`, `42.0`, `4.2e1`, `123456789012345`, `1234567890123456789`, `-`, `true`, `false`, `null`, `{}`, `[1]`} {
		want, wantOK := find.Canonical([]byte(raw))
		got, ok := canonicalText([]byte(raw))
		if ok != wantOK || string(got) != want {
			t.Errorf("%s: got %q %v, want %q %v", raw, got, ok, want, wantOK)
		}
	}
}
