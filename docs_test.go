package formsapi_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docFiles are the documents a reader follows from the README.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md", "BENCHMARKS.md"}, files...)
}

// doc is a document and its text.
type doc struct{ name, text string }

// readmeAndDocs returns the README and docs/*.md, the pages whose prose
// the docs tests hold to the code.
func readmeAndDocs(t *testing.T) []doc {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var docs []doc
	for _, f := range append([]string{"README.md"}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc{f, string(b)})
	}
	return docs
}

// rootSources parses the root package's non-test files with mode.
func rootSources(t *testing.T, mode parser.Mode) []*ast.File {
	t.Helper()
	return goSources(t, ".", mode)
}

// goSources parses the non-test files of the package in dir with mode.
func goSources(t *testing.T, dir string, mode parser.Mode) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, mode|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("%s: no Go files", dir)
	}
	return files
}

// goBlock is one ```go block of a document.
type goBlock struct {
	file string
	line int
	src  string
}

var fence = regexp.MustCompile("(?m)^( *)```(\\S*)\\n")

// goBlocks returns the ```go blocks of the documents.
func goBlocks(t *testing.T) []goBlock {
	t.Helper()
	var blocks []goBlock
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rest, off := string(text), 0
		for {
			m := fence.FindStringSubmatchIndex(rest)
			if m == nil {
				break
			}
			indent, lang := rest[m[2]:m[3]], rest[m[4]:m[5]]
			body := rest[m[1]:]
			end := strings.Index(body, "\n"+indent+"```")
			if end < 0 {
				t.Fatalf("%s: a code block never ends", f)
			}
			if lang == "go" {
				// A block in a list item is indented; the file is not.
				src := strings.ReplaceAll("\n"+body[:end+1], "\n"+indent, "\n")[1:]
				blocks = append(blocks, goBlock{f, 1 + strings.Count(string(text[:off+m[1]]), "\n"), src})
			}
			adv := m[1] + end + len("\n"+indent+"```")
			off += adv
			rest = rest[adv:]
		}
	}
	return blocks
}

// TestDocsGoBlocksCompile builds every ```go block of the README and
// docs/ as a file of its own package, in a module that uses this one
// from the working tree: a block is a whole file (package clause,
// imports), so a reader can paste it and run it, and none of them rots.
// The build is offline (GOPROXY=off), from the module cache the repo's
// own tests use.
func TestDocsGoBlocksCompile(t *testing.T) {
	t.Parallel()
	blocks := goBlocks(t)
	if len(blocks) == 0 {
		t.Fatal("no Go blocks found: the extraction is broken")
	}
	mod := docsModule(t)
	where := map[string]goBlock{}
	for i, b := range blocks {
		if !regexp.MustCompile(`(?m)^package \w+`).MatchString(b.src) {
			t.Errorf("%s:%d: a Go block without a package clause; every Go block must be a whole file", b.file, b.line)
			continue
		}
		dir := fmt.Sprintf("b%02d", i)
		where[dir] = b
		write(t, filepath.Join(mod, dir, "main.go"), []byte(b.src))
	}
	out, err := goIn(mod, "vet", "./...").CombinedOutput()
	if err != nil {
		// Name each failing block by its document and line.
		msg := string(out)
		for dir, b := range where {
			msg = strings.ReplaceAll(msg, "./"+dir+"/main.go", fmt.Sprintf("%s (block at line %d)", b.file, b.line))
			msg = strings.ReplaceAll(msg, dir+"/main.go", fmt.Sprintf("%s (block at line %d)", b.file, b.line))
		}
		t.Fatalf("the docs' Go blocks do not compile:\n%s", msg)
	}
}

// docsModule returns a new module in a temporary directory that uses
// this one from the working tree, for the docs' Go blocks.
func docsModule(t *testing.T) string {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	// The repo's own requirements, so that the module graph is complete
	// without a download; this module stands in for the repo's.
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	gomod = regexp.MustCompile(`(?m)^module .*$`).ReplaceAll(gomod, []byte("module docsexamples"))
	gomod = fmt.Appendf(gomod, "\nrequire github.com/formsapi/formsapi v0.0.0\n\nreplace github.com/formsapi/formsapi => %s\n", root)
	write(t, filepath.Join(mod, "go.mod"), gomod)
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(mod, "go.sum"), sum)
	return mod
}

// goIn is the go command run in dir, offline (GOPROXY=off), from the
// module cache the repo's own tests use.
func goIn(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	return cmd
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile("(?m)^#{1,6} (.+)$")
)

// anchor is GitHub's anchor of a heading.
func anchor(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// withoutCode drops fenced blocks, where # starts a comment, not a heading.
func withoutCode(text []byte) []byte {
	var out bytes.Buffer
	in := false
	for _, l := range bytes.SplitAfter(text, []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimLeft(l, " "), []byte("```")) {
			in = !in
			continue
		}
		if !in {
			out.Write(l)
		}
	}
	return out.Bytes()
}

// TestDocsLinksResolve checks every relative link of the README and
// docs/: the file exists, and a #fragment names a heading of it.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		text, err := os.ReadFile(path)
		if err == nil {
			for _, m := range heading.FindAllSubmatch(withoutCode(text), -1) {
				a[anchor(string(m[1]))] = true
			}
		}
		anchors[path] = a
		return a
	}
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllSubmatch(withoutCode(text), -1) {
			target := string(m[1])
			if regexp.MustCompile(`^[a-z]+:`).MatchString(target) {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			if path == "" {
				path = f
			} else {
				path = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link to %s: no such file", f, target)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[frag] {
				t.Errorf("%s: link to %s: no heading with that anchor", f, target)
			}
		}
	}
}
