package formsapi_test

import (
	"go/ast"
	"go/parser"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/formsapi/formsapi"
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

// goDocs returns the package doc of the root package and the doc comment
// of NewHandler, from the source.
func goDocs(t *testing.T) (pkg, newHandler string) {
	t.Helper()
	for _, f := range rootSources(t, parser.ParseComments) {
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
		missing, extra := diff(append(lists[0], "/v1/forms/{formId}/gone"), formsapi.RoutePaths())
		if !slices.Equal(missing, []string{"/v1/forms/{formId}/export", "/v1/forms/{formId}/summary", "/v1/openapi.json"}) || !slices.Equal(extra, []string{"/v1/forms/{formId}/gone"}) {
			t.Errorf("planted list: missing %q, extra %q", missing, extra)
		}
	})
	pkg, newHandler := goDocs(t)
	docs := map[string]string{"the package doc": pkg}
	for _, d := range readmeAndDocs(t) {
		docs[d.name] = d.text
	}
	n := 0
	for where, text := range docs {
		for _, list := range routeLists(text) {
			n++
			missing, extra := diff(list, formsapi.RoutePaths())
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
	for _, p := range formsapi.RoutePaths() {
		if !strings.Contains(newHandler, p) {
			t.Errorf("NewHandler's doc does not name %s", p)
		}
	}
	var headings []string
	for _, m := range routeHeading.FindAllStringSubmatch(docs["docs/api.md"], -1) {
		headings = append(headings, m[1])
	}
	if missing, extra := diff(headings, formsapi.RoutePaths()); len(missing) > 0 || len(extra) > 0 {
		t.Errorf("docs/api.md's sections of routes (## GET <path>) leave out %q and name %q, which the route table does not have", missing, extra)
	}
}
