package formsapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// routeLine is one line of a list of the API's routes: "GET /v1/forms",
// indented or not (a Go doc comment's code block is).
var routeLine = regexp.MustCompile(`^\s*(?:GET|HEAD) (/v1/\S*)`)

// routeHeading is a heading of docs/api.md that documents a route.
var routeHeading = regexp.MustCompile(`(?m)^## (?:GET|HEAD) (/v1/\S+)\s*$`)

// routeLists returns the route lists of text: every run of two or more
// consecutive lines that each name a route, as the paths they name.
func routeLists(text string) [][]string {
	var lists [][]string
	var run []string
	flush := func() {
		if len(run) >= 2 {
			lists = append(lists, run)
		}
		run = nil
	}
	for _, line := range strings.Split(text, "\n") {
		if m := routeLine.FindStringSubmatch(line); m != nil {
			run = append(run, m[1])
			continue
		}
		flush()
	}
	flush()
	return lists
}

// routesMissing returns the paths of the route table that list leaves
// out, and those it names that the table does not have.
func routesMissing(list []string) (missing, extra []string) {
	var paths []string
	for _, rt := range routes {
		paths = append(paths, rt.path)
		if !slices.Contains(list, rt.path) {
			missing = append(missing, rt.path)
		}
	}
	for _, p := range list {
		if !slices.Contains(paths, p) {
			extra = append(extra, p)
		}
	}
	return missing, extra
}

// goDocs returns the package doc of the root package and the doc comment
// of NewHandler, from the source.
func goDocs(t *testing.T) (pkg, newHandler string) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			pkg += f.Doc.Text()
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "NewHandler" {
				newHandler = fn.Doc.Text()
			}
		}
	}
	if pkg == "" || newHandler == "" {
		t.Fatal("no package doc or no doc of NewHandler: the search is broken")
	}
	return pkg, newHandler
}

// TestRouteListsNameEveryRoute: the prose that lists the API's routes
// cannot drift from the route table (route.go). Every list of routes
// (two or more lines "GET /v1/...") in the package doc, the README and
// docs/*.md names every route of the table and no other; NewHandler's
// doc names every route's path; and docs/api.md has a section "## GET
// <path>" for each. The package doc listed 2 of the 4 routes; the
// planted subtest shows the check fails on it.
func TestRouteListsNameEveryRoute(t *testing.T) {
	t.Parallel()
	t.Run("planted", func(t *testing.T) {
		old := "Package formsapi serves...\n\n\tGET /v1/forms                          the forms of the key's account\n" +
			"\tGET /v1/forms/{formId}/submissions     the submissions of one of them\n\nRequests authenticate..."
		lists := routeLists(old)
		if len(lists) != 1 {
			t.Fatalf("found %d lists in the planted doc, want 1", len(lists))
		}
		missing, extra := routesMissing(append(lists[0], "/v1/forms/{formId}/gone"))
		if !slices.Equal(missing, []string{pathExport, pathOpenAPI}) || !slices.Equal(extra, []string{"/v1/forms/{formId}/gone"}) {
			t.Errorf("planted list: missing %q, extra %q", missing, extra)
		}
	})
	pkg, newHandler := goDocs(t)
	docs := map[string]string{"the package doc": pkg}
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{"README.md"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs[f] = string(b)
	}
	n := 0
	for where, text := range docs {
		for _, list := range routeLists(text) {
			n++
			missing, extra := routesMissing(list)
			if len(missing) > 0 {
				t.Errorf("%s lists the routes %q without %q", where, list, missing)
			}
			if len(extra) > 0 {
				t.Errorf("%s lists %q, which the route table does not have", where, extra)
			}
		}
	}
	if len(routeLists(pkg)) == 0 {
		t.Error("the package doc lists no routes")
	}
	if n < 2 {
		t.Errorf("found %d route lists: the search is broken", n)
	}
	for _, rt := range routes {
		if !strings.Contains(newHandler, rt.path) {
			t.Errorf("NewHandler's doc does not name %s", rt.path)
		}
	}
	var headings []string
	for _, m := range routeHeading.FindAllStringSubmatch(docs["docs/api.md"], -1) {
		headings = append(headings, m[1])
	}
	if missing, extra := routesMissing(headings); len(missing) > 0 || len(extra) > 0 {
		t.Errorf("docs/api.md's sections of routes (## GET <path>) leave out %q and name %q, which the route table does not have", missing, extra)
	}
}
