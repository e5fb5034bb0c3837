package formsapi_test

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

// domainFiles are the root package's domain half (docs/architecture.md,
// "The root package's two halves"): the types and contracts a host
// writes a store, a key resolver or a collection side against. They
// name nothing of the handler's half, which serves them over HTTP.
var domainFiles = []string{"auth.go", "feed.go", "formid.go", "formsapi.go", "grant.go", "json.go", "limits.go", "store.go", "total.go", "writer.go"}

// TestDomainKnowsNoHandler: no file of the domain half imports net/http
// or names a package-level declaration of the handler's half, so the
// domain reads, and could move, without the handler; and
// docs/architecture.md lists exactly these files. The planted subtest
// shows the check finds a handler name in a domain file.
func TestDomainKnowsNoHandler(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	handlerNames := map[string]string{} // name: the handler file that declares it
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = f
		if slices.Contains(domainFiles, p) {
			continue
		}
		for _, name := range topLevelNames(f) {
			handlerNames[name] = p
		}
	}
	for _, p := range domainFiles {
		f, ok := files[p]
		if !ok {
			t.Errorf("%s: listed as a domain file, but the root package has no such file", p)
			continue
		}
		for _, bad := range handlerUses(f, handlerNames) {
			t.Errorf("%s names %s", p, bad)
		}
	}

	t.Run("planted", func(t *testing.T) {
		src := "package formsapi\nimport \"net/http\"\nfunc f(a *api) http.Handler { return a.handler() }\n"
		f, err := parser.ParseFile(token.NewFileSet(), "planted.go", src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if got := handlerUses(f, map[string]string{"api": "handler.go"}); len(got) != 2 {
			t.Errorf("the planted file's uses of the handler: %v, want net/http and api", got)
		}
	})

	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile("(?s)### The root package's two halves\n(.*?)\n#").FindSubmatch(doc)
	if section == nil {
		t.Fatal(`docs/architecture.md has no section "### The root package's two halves"`)
	}
	line := regexp.MustCompile("(?m)^The domain half: (.*)$").FindSubmatch(section[1])
	if line == nil {
		t.Fatal(`docs/architecture.md's "The root package's two halves" has no line "The domain half: ..."`)
	}
	var listed []string
	for _, m := range regexp.MustCompile("`([a-z]+\\.go)`").FindAllSubmatch(line[1], -1) {
		listed = append(listed, string(m[1]))
	}
	slices.Sort(listed)
	if !slices.Equal(listed, domainFiles) {
		t.Errorf("docs/architecture.md lists the domain half as %v, the test %v", listed, domainFiles)
	}
}

// topLevelNames returns the names f declares at package level: its
// types, functions (not methods), constants and variables.
func topLevelNames(f *ast.File) []string {
	var names []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				names = append(names, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names = append(names, s.Name.Name)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}

// handlerUses returns what f uses of the handler's half: an import of
// net/http, and each identifier that names one of handler (a name: its
// file) other than as a selector, a field or a key, which belong to
// another scope. Without type checking, a name declared anywhere in f
// below package level (a parameter, a variable) is taken as that local
// one wherever it appears.
func handlerUses(f *ast.File, handler map[string]string) []string {
	var uses []string
	for _, imp := range f.Imports {
		if imp.Path.Value == `"net/http"` {
			uses = append(uses, "net/http")
		}
	}
	skip := map[*ast.Ident]bool{}
	local := localNames(f)
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			skip[n.Sel] = true
		case *ast.KeyValueExpr:
			if id, ok := n.Key.(*ast.Ident); ok {
				skip[id] = true
			}
		case *ast.Field:
			for _, id := range n.Names {
				skip[id] = true
			}
		case *ast.Ident:
			if file, ok := handler[n.Name]; ok && !skip[n] && !local[n.Name] {
				uses = append(uses, n.Name+" (of "+file+")")
			}
		}
		return true
	})
	return uses
}

// localNames returns the names f declares below package level:
// parameters, results, receivers, and variables and constants declared
// in functions.
func localNames(f *ast.File) map[string]bool {
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			fieldNames(names, n.Recv, n.Type.Params, n.Type.Results)
		case *ast.FuncLit:
			fieldNames(names, n.Type.Params, n.Type.Results)
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, e := range n.Lhs {
					if id, ok := e.(*ast.Ident); ok {
						names[id.Name] = true
					}
				}
			}
		case *ast.RangeStmt:
			if n.Tok == token.DEFINE {
				for _, e := range []ast.Expr{n.Key, n.Value} {
					if id, ok := e.(*ast.Ident); ok {
						names[id.Name] = true
					}
				}
			}
		case *ast.DeclStmt:
			for _, s := range n.Decl.(*ast.GenDecl).Specs {
				if v, ok := s.(*ast.ValueSpec); ok {
					for _, id := range v.Names {
						names[id.Name] = true
					}
				}
			}
		}
		return true
	})
	return names
}

// fieldNames adds the names of the fields of lists (a function's
// receiver, parameters or results; nil for none) to names.
func fieldNames(names map[string]bool, lists ...*ast.FieldList) {
	for _, l := range lists {
		if l == nil {
			continue
		}
		for _, fd := range l.List {
			for _, id := range fd.Names {
				names[id.Name] = true
			}
		}
	}
}
