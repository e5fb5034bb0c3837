package formsapi_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
	"github.com/formsapi/formsapi/memstore"
	"github.com/formsapi/formsapi/pgstore"
	"github.com/formsapi/formsapi/sqlitestore"
	"github.com/formsapi/formsapi/webhook/hookstore"
)

// testName is a name of a test, fuzz target, benchmark or example as a
// document mentions it; a trailing * stands for every name it begins.
var testName = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark|Example)[A-Z_]\w*\*?`)

// testClaim is prose that says a test holds something: "a test checks
// this", "(a test, mount/mount_test.go, holds each", "tests check the
// plans". Such a paragraph must name the test.
var testClaim = regexp.MustCompile(`(?i)\b(?:(?:a|another|one) test(?: \([^)]*\)|, [^,]{1,60},)?|tests) (?:checks?|runs?|holds?|counts?|cuts?|opens?|makes?|does|fails?|shows?|keeps?|proves?|walks?|reads?|builds?|compares?|finds?|asserts?|covers?)\b`)

// declaredTests returns the names of the module's tests, fuzz targets,
// benchmarks and examples: every func of a _test.go file whose name
// has one of those prefixes.
func declaredTests(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)\w*)\(`)
	names := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// testClaims returns what is wrong with the prose of text (fenced blocks
// left out, where names are code): a test name that no test file
// declares, and a paragraph that says a test holds something without
// naming one.
func testClaims(text string, declared map[string]bool) []string {
	var bad []string
	for _, para := range paragraphs(string(withoutCode([]byte(text)))) {
		if strings.HasPrefix(para, "#") {
			continue // a heading ("What the tests check") claims nothing
		}
		para = strings.Join(strings.Fields(para), " ")
		named := false
		for _, name := range testName.FindAllString(para, -1) {
			ok := declared[name]
			if prefix, wild := strings.CutSuffix(name, "*"); wild {
				for d := range declared {
					ok = ok || strings.HasPrefix(d, prefix)
				}
			}
			if !ok {
				bad = append(bad, name+" is no test of the module")
			}
			named = named || name != "TestMain" // a package's set-up, not a test of the claim
		}
		if m := testClaim.FindString(para); m != "" && !named {
			bad = append(bad, "\""+m+"\" names no test: "+para)
		}
	}
	return bad
}

// listItem starts an item of a Markdown list.
var listItem = regexp.MustCompile(`\n *(?:[-*]|\d+\.) `)

// paragraphs splits text at blank lines and before each list item, so
// that a claim and the test it names are in the same item.
func paragraphs(text string) []string {
	var out []string
	for _, p := range strings.Split(text, "\n\n") {
		idx := listItem.FindAllStringIndex(p, -1)
		start := 0
		for _, i := range idx {
			out = append(out, strings.TrimSpace(p[start:i[0]]))
			start = i[0]
		}
		out = append(out, strings.TrimSpace(p[start:]))
	}
	return out
}

// TestDocsNameRealTests: every test, fuzz target, benchmark or example
// the README and docs/*.md name outside code blocks is one a test file
// of the module declares (TestReplica* stands for those it begins), and
// every paragraph that says a test holds something ("a test checks
// this") names the test, so that a reader can run it and a claim cannot
// outlive its test. The planted subtest shows both checks fail.
func TestDocsNameRealTests(t *testing.T) {
	t.Parallel()
	declared := declaredTests(t)
	if len(declared) < 300 {
		t.Fatalf("found %d tests: the search is broken", len(declared))
	}
	t.Run("planted", func(t *testing.T) {
		text := "It links neither driver (a test checks this).\n\n" +
			"A test, `mount/mount_test.go`, holds each pattern.\n\n" +
			"Tests check the plans (TestExplain).\n\n" +
			"`TestGone` and `TestReplica*` and `TestNope*`.\n\n" +
			"```go\nfunc TestMyStore(t *testing.T) {}\n```\n"
		got := testClaims(text, declared)
		want := []string{
			`"a test checks" names no test: It links neither driver (a test checks this).`,
			`"A test, ` + "`mount/mount_test.go`" + `, holds" names no test: A test, ` + "`mount/mount_test.go`" + `, holds each pattern.`,
			"TestGone is no test of the module",
			"TestNope* is no test of the module",
		}
		if !slices.Equal(got, want) {
			t.Errorf("planted text:\n got %q\nwant %q", got, want)
		}
	})
	for _, d := range readmeAndDocs(t) {
		for _, bad := range testClaims(d.text, declared) {
			t.Errorf("%s: %s", d.name, bad)
		}
	}
}

// storeContracts are the contracts a store may implement, by the name a
// doc gives them: every exported interface of the root package (a new
// one fails TestStoreDocsNameTheirContracts until it is listed here) and
// package hookstore's, by which the stores keep webhook endpoints.
var storeContracts = map[string]reflect.Type{
	"formsapi.Store":         reflect.TypeFor[formsapi.Store](),
	"formsapi.FeedStore":     reflect.TypeFor[formsapi.FeedStore](),
	"formsapi.FieldStore":    reflect.TypeFor[formsapi.FieldStore](),
	"formsapi.KeyResolver":   reflect.TypeFor[formsapi.KeyResolver](),
	"formsapi.KeyAuthorizer": reflect.TypeFor[formsapi.KeyAuthorizer](),
	"formsapi.KeyManager":    reflect.TypeFor[formsapi.KeyManager](),
	"formsapi.Writer":        reflect.TypeFor[formsapi.Writer](),
	"formsapi.BatchWriter":   reflect.TypeFor[formsapi.BatchWriter](),
	"formsapi.Counter":       reflect.TypeFor[formsapi.Counter](),
	"hookstore.Store":        reflect.TypeFor[hookstore.Store](),
}

// contractsMissing returns the contracts of storeContracts that typ
// implements and doc does not name, and those doc names that typ does
// not implement.
func contractsMissing(doc string, typ reflect.Type) (missing, wrong []string) {
	for name, iface := range storeContracts {
		named := regexp.MustCompile(regexp.QuoteMeta(name) + `\b`).MatchString(doc)
		switch impl := typ.Implements(iface); {
		case impl && !named:
			missing = append(missing, name)
		case !impl && named:
			wrong = append(wrong, name)
		}
	}
	slices.Sort(missing)
	slices.Sort(wrong)
	return missing, wrong
}

// typeDoc returns the doc comment of type name in the package in dir.
func typeDoc(t *testing.T, dir, name string) string {
	t.Helper()
	for _, f := range goSources(t, dir, parser.ParseComments) {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				if ts := s.(*ast.TypeSpec); ts.Name.Name == name {
					if ts.Doc != nil {
						return ts.Doc.Text()
					}
					return g.Doc.Text()
				}
			}
		}
	}
	t.Fatalf("%s: no type %s", dir, name)
	return ""
}

// TestStoreDocsNameTheirContracts: the doc comment of each store type of
// the module (memstore.Store, sqlitestore.Store, pgstore.Store) names
// every contract the type implements, and none it does not, so that a
// host reading one type's doc learns all it can be given to; and every
// exported interface of the root package is one of the contracts checked.
// The planted subtest shows the check fails on the doc pgstore.Store
// had, which named 3 of its 10 (8 before BatchWriter and Counter).
func TestStoreDocsNameTheirContracts(t *testing.T) {
	t.Parallel()
	t.Run("planted", func(t *testing.T) {
		missing, wrong := contractsMissing("Store is a formsapi.Store, formsapi.KeyResolver and formsapi.Writer on\nPostgreSQL; not a formsapi.Limiter.", reflect.TypeFor[*pgstore.Store]())
		want := []string{"formsapi.BatchWriter", "formsapi.Counter", "formsapi.FeedStore", "formsapi.FieldStore", "formsapi.KeyAuthorizer", "formsapi.KeyManager", "hookstore.Store"}
		if !slices.Equal(missing, want) || len(wrong) != 0 {
			t.Errorf("planted doc: missing %q, wrong %q; want missing %q", missing, wrong, want)
		}
	})
	// Every exported interface of the root package is a contract above.
	n := 0
	for _, f := range rootSources(t, 0) {
		ast.Inspect(f, func(nd ast.Node) bool {
			if ts, ok := nd.(*ast.TypeSpec); ok && ts.Name.IsExported() {
				if _, ok := ts.Type.(*ast.InterfaceType); ok {
					n++
					if storeContracts["formsapi."+ts.Name.Name] == nil {
						t.Errorf("formsapi.%s is an interface the stores' docs are not checked against: add it to storeContracts", ts.Name.Name)
					}
				}
			}
			return true
		})
	}
	if n < 5 {
		t.Fatalf("found %d interfaces in the root package: the search is broken", n)
	}
	for _, c := range []struct {
		dir string
		typ reflect.Type
	}{
		{"memstore", reflect.TypeFor[*memstore.Store]()},
		{"sqlitestore", reflect.TypeFor[*sqlitestore.Store]()},
		{"pgstore", reflect.TypeFor[*pgstore.Store]()},
	} {
		missing, wrong := contractsMissing(typeDoc(t, c.dir, "Store"), c.typ)
		if len(missing) > 0 {
			t.Errorf("%s.Store implements %q, which its doc comment does not name", c.dir, missing)
		}
		if len(wrong) > 0 {
			t.Errorf("%s.Store's doc comment names %q, which it does not implement", c.dir, wrong)
		}
	}
}
