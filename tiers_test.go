package formsapi_test

import (
	"cmp"
	"go/ast"
	"go/parser"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// tiers are the tiers of internal/ (docs/architecture.md, "The tiers of
// internal/"): every package under internal/ is in one of them.
var tiers = map[string][]string{
	// Below the root: imported by the root and any package; import no
	// package of the module but each other and observe.
	"below": {"internal/coalesce", "internal/feedwait", "internal/find", "internal/keyformat", "internal/keyuse", "internal/storecontract", "internal/token", "internal/wire"},
	// Beside the stores: import the root (and the tier below, observe and
	// webhook/hookstore); imported by the stores, storetest and each
	// other, never by the root or another public package.
	"kit": {"internal/hookrow", "internal/keyset", "internal/pagecache", "internal/stored"},
	// Tools: the commands of the load runs and the tests' helpers;
	// imported by nothing but tools and tests.
	"tools": {"internal/benchdata", "internal/cmd/...", "internal/pgtest", "internal/redistest", "internal/steps", "internal/testenv", "internal/waittest"},
}

// kitUsers are the packages the kit tier serves.
var kitUsers = []string{"memstore", "sqlitestore", "pgstore", "storetest"}

// tierOf returns the tier of pkg (a path relative to the module), "" for
// a package outside internal/ and "?" for one under it in no tier.
func tierOf(pkg string) string {
	if pkg != "internal" && !strings.HasPrefix(pkg, "internal/") {
		return ""
	}
	for tier, pkgs := range tiers {
		for _, p := range pkgs {
			if p == pkg || strings.HasSuffix(p, "/...") && strings.HasPrefix(pkg, strings.TrimSuffix(p, "...")) {
				return tier
			}
		}
	}
	return "?"
}

// allowed reports whether a non-test file of from may import to (both
// paths relative to the module, "." the root) by the tiers' rules.
func allowed(from, to string) bool {
	ft, tt := tierOf(from), tierOf(to)
	switch {
	case ft == "?" || tt == "?":
		return false
	case ft == "tools":
		return true
	case tt == "tools":
		return false
	case ft == "below":
		return tt == "below" || to == "observe"
	case tt == "kit":
		return ft == "kit" || slices.Contains(kitUsers, from)
	case ft == "kit":
		return to == "." || tt == "below" || to == "observe" || to == "webhook/hookstore"
	}
	return true
}

// TestInternalTiers: every package under internal/ is in a tier, and
// every import by a non-test file of the module follows the tiers' rules
// or is listed, with its reason, in docs/architecture.md's exceptions.
func TestInternalTiers(t *testing.T) {
	const module = "github.com/formsapi/formsapi"
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "### The tiers of internal/"
	i := strings.Index(string(doc), heading)
	if i < 0 {
		t.Fatalf("docs/architecture.md has no section %q", heading)
	}
	section := string(doc[i+len(heading):])
	if j := strings.Index(section, "\n#"); j >= 0 {
		section = section[:j]
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^- `([^`]+)` → `([^`]+)`: \\S").FindAllStringSubmatch(section, -1) {
		listed[m[1]+" → "+m[2]] = true
	}
	seen := map[string]bool{}
	err = walkModuleFiles(parser.ImportsOnly, func(p string, f *ast.File) error {
		from := path.Dir(filepath.ToSlash(p))
		if tierOf(from) == "?" && !seen[from] {
			seen[from] = true
			t.Errorf("package %s is in no tier of internal/: put it in one (docs/architecture.md, and tiers in tiers_test.go)", from)
		}
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := cmp.Or(strings.TrimPrefix(strings.TrimPrefix(imp, module), "/"), ".")
			edge := from + " → " + to
			if seen[edge] {
				continue
			}
			seen[edge] = true
			if !allowed(from, to) && !listed[edge] {
				t.Errorf("%s imports %s against the tiers of internal/: move one of them, or list \"- `%s` → `%s`: <why>\" under %q in docs/architecture.md", from, to, from, to, heading)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for edge := range listed {
		if !seen[edge] {
			t.Errorf("docs/architecture.md lists %s as against the tiers, but no such import is left: remove the line", edge)
		}
	}
}

// TestInternalTiersRules: the rules refuse what they are for.
func TestInternalTiersRules(t *testing.T) {
	for _, c := range []struct {
		from, to string
		want     bool
	}{
		{".", "internal/wire", true},
		{".", "internal/stored", false},               // the root on the kit beside the stores
		{".", "internal/testenv", false},              // a library on a tool
		{"internal/wire", ".", false},                 // below the root, importing it
		{"internal/wire", "observe", true},            //
		{"internal/find", "internal/stored", false},   // below, on the kit
		{"internal/stored", ".", true},                // the kit on the root
		{"internal/stored", "sqlitestore", false},     // the kit on a store
		{"internal/pagecache", "observe", true},       //
		{"webhook", "internal/token", true},           //
		{"webhook", "internal/hookrow", false},        // a public package on the kit
		{"sqlitestore", "internal/pagecache", true},   //
		{"internal/cmd/soak", "sqlitestore", true},    // a tool on anything
		{"internal/pgtest", "internal/testenv", true}, //
		{"formsclient", "internal/benchdata", false},  // a library on a tool
		{"internal/newpkg", ".", false},               // in no tier
	} {
		if got := allowed(c.from, c.to); got != c.want {
			t.Errorf("%s → %s: allowed %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
