package formsclient_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The client is for any Go program: it must pull in nothing but the
// standard library, the root package's types, and internal/keyformat
// (the key format, itself standard library only).
func TestImportsOnlyStdlibAndRoot(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			if p != "github.com/formsapi/formsapi" && p != "github.com/formsapi/formsapi/internal/keyformat" && strings.Contains(first, ".") {
				t.Errorf("%s imports %s", name, p)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}
