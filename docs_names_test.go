package formsapi_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The docs' prose is checked the way their code blocks are: every
// qualified Go name they mention (`formsapi.WithCORS`,
// `ratelimit.Options.BytesInFlight`, `formsclient.Export`) names
// something the module declares outside its test files, and docs/embedding.md's
// list of handler options is the root package's With* options. The
// module is read with go/parser, one file at a time: no type checking,
// no dependency, a second or less.

// goPackage is what the docs may name in one package name's directories
// (several directories with one name are merged).
type goPackage struct {
	names   map[string]string              // top-level name → its type's name, "" if not one of this package
	members map[string]map[string]string   // type → its fields and methods → the field's type name, if of this package
	embeds  map[string][]qualifiedTypeName // type → the types it embeds (struct or interface)
	aliases map[string]qualifiedTypeName   // type alias → what it names
}

// qualifiedTypeName is a type of a package of the module, by package name.
type qualifiedTypeName struct{ pkg, name string }

// goIndex is every library package of the module (not main, not _test),
// by package name.
type goIndex map[string]*goPackage

// moduleIndex reads every non-test .go file of the module under the
// current directory (the module root) but testdata and hidden
// directories.
func moduleIndex(t *testing.T) goIndex {
	t.Helper()
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	modPath := regexp.MustCompile(`(?m)^module (\S+)`).FindSubmatch(gomod)
	if modPath == nil {
		t.Fatal("go.mod: no module line")
	}
	type file struct {
		dir string
		f   *ast.File
	}
	var files []file
	dirName := map[string]string{} // directory → its package's name
	err = walkModuleFiles(parser.SkipObjectResolution, func(path string, f *ast.File) error {
		if f.Name.Name == "main" {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		files = append(files, file{dir, f})
		dirName[dir] = f.Name.Name
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Go files found: run from the module root")
	}
	idx := goIndex{}
	for _, fl := range files {
		p := idx[fl.f.Name.Name]
		if p == nil {
			p = &goPackage{names: map[string]string{}, members: map[string]map[string]string{},
				embeds: map[string][]qualifiedTypeName{}, aliases: map[string]qualifiedTypeName{}}
			idx[fl.f.Name.Name] = p
		}
		// imports: the file's name for each package of the module it imports.
		imports := map[string]string{}
		for _, is := range fl.f.Imports {
			path, _ := strconv.Unquote(is.Path.Value)
			rel, ok := strings.CutPrefix(path, string(modPath[1]))
			if !ok {
				continue
			}
			dir := strings.TrimPrefix(rel, "/")
			if dir == "" {
				dir = "."
			}
			name := filepath.Base(dir)
			if is.Name != nil {
				name = is.Name.Name
			}
			imports[name] = dir
		}
		// typeOf names the type of expression e when it is a type of the
		// module (T, *T, pkg.T, T[X]), "" otherwise.
		typeOf := func(e ast.Expr) qualifiedTypeName {
			for {
				switch x := e.(type) {
				case *ast.StarExpr:
					e = x.X
					continue
				case *ast.IndexExpr:
					e = x.X
					continue
				case *ast.IndexListExpr:
					e = x.X
					continue
				case *ast.CompositeLit:
					e = x.Type
					continue
				case *ast.UnaryExpr: // &T{…}
					e = x.X
					continue
				case *ast.Ident:
					return qualifiedTypeName{fl.f.Name.Name, x.Name}
				case *ast.SelectorExpr:
					if id, ok := x.X.(*ast.Ident); ok {
						if dir, ok := imports[id.Name]; ok {
							return qualifiedTypeName{"@" + dir, x.Sel.Name} // the directory, named once all are read
						}
					}
				}
				return qualifiedTypeName{}
			}
		}
		member := func(typ, name string, of qualifiedTypeName) {
			if p.members[typ] == nil {
				p.members[typ] = map[string]string{}
			}
			if of.pkg == fl.f.Name.Name {
				p.members[typ][name] = of.name
			} else if _, ok := p.members[typ][name]; !ok {
				p.members[typ][name] = ""
			}
		}
		for _, decl := range fl.f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					p.names[d.Name.Name] = ""
					continue
				}
				if recv := typeOf(d.Recv.List[0].Type); recv.name != "" {
					member(recv.name, d.Name.Name, qualifiedTypeName{})
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						var typ qualifiedTypeName
						if s.Type != nil {
							typ = typeOf(s.Type)
						} else if len(s.Values) == len(s.Names) && len(s.Values) > 0 {
							typ = typeOf(s.Values[0])
						}
						for _, n := range s.Names {
							p.names[n.Name] = ""
							if typ.pkg == fl.f.Name.Name {
								p.names[n.Name] = typ.name
							}
						}
					case *ast.TypeSpec:
						name := s.Name.Name
						p.names[name] = name
						if s.Assign.IsValid() {
							if to := typeOf(s.Type); to.name != "" {
								p.aliases[name] = to
							}
							continue
						}
						var fields []*ast.Field
						switch ty := s.Type.(type) {
						case *ast.StructType:
							fields = ty.Fields.List
						case *ast.InterfaceType:
							fields = ty.Methods.List
						}
						for _, f := range fields {
							if len(f.Names) == 0 {
								if e := typeOf(f.Type); e.name != "" {
									p.embeds[name] = append(p.embeds[name], e)
									member(name, e.name, e) // an embedded field is named by its type
								}
								continue
							}
							for _, n := range f.Names {
								member(name, n.Name, typeOf(f.Type))
							}
						}
					}
				}
			}
		}
	}
	// Name the imported types' packages, now that every directory's
	// package name is known.
	fix := func(q qualifiedTypeName) qualifiedTypeName {
		if dir, ok := strings.CutPrefix(q.pkg, "@"); ok {
			q.pkg = dirName[dir]
		}
		return q
	}
	for _, p := range idx {
		for typ, es := range p.embeds {
			for i, e := range es {
				p.embeds[typ][i] = fix(e)
			}
		}
		for typ, a := range p.aliases {
			p.aliases[typ] = fix(a)
		}
	}
	return idx
}

// hasMember reports whether type pkg.typ has a field or method name,
// its own or promoted from what it embeds or aliases, and the member's
// type when it is a field of a type of pkg.
func (idx goIndex) hasMember(pkg, typ, name string, depth int) (string, bool) {
	p := idx[pkg]
	if p == nil || depth > 8 {
		return "", false
	}
	if a, ok := p.aliases[typ]; ok {
		return idx.hasMember(a.pkg, a.name, name, depth+1)
	}
	if of, ok := p.members[typ][name]; ok {
		return of, true
	}
	for _, e := range p.embeds[typ] {
		if of, ok := idx.hasMember(e.pkg, e.name, name, depth+1); ok {
			return of, true
		}
	}
	return "", false
}

// resolves reports whether the qualified name pkg.A.B… names something
// the module declares: A a top-level name of pkg (or, as the docs write
// a method of a package's client or store, a method of one of its
// types), and each further part a field or method of the part before,
// when that part's type is known.
func (idx goIndex) resolves(pkg string, parts []string) bool {
	p := idx[pkg]
	if p == nil {
		return false
	}
	typ, ok := p.names[parts[0]]
	if !ok {
		if len(parts) > 1 {
			return false
		}
		for t := range p.members {
			if _, ok := idx.hasMember(pkg, t, parts[0], 0); ok && ast.IsExported(t) {
				return true
			}
		}
		return false
	}
	for _, part := range parts[1:] {
		if typ == "" {
			return false // a part past what go/parser can follow: name it otherwise
		}
		if typ, ok = idx.hasMember(pkg, typ, part, 0); !ok {
			return false
		}
	}
	return true
}

// qualifiedNames returns every mention of a name qualified by one of
// idx's package names in text: `pkg.Name`, `pkg.Type.Field`, each part
// exported (a lower-case word after a dot is prose, a path or a host).
func (idx goIndex) qualifiedNames(text string) [][]string {
	pkgs := make([]string, 0, len(idx))
	for name := range idx {
		pkgs = append(pkgs, regexp.QuoteMeta(name))
	}
	slices.Sort(pkgs)
	re := regexp.MustCompile(`(?:^|[^\w./-])(` + strings.Join(pkgs, "|") + `)((?:\.[A-Z]\w*)+)`)
	var out [][]string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		out = append(out, append([]string{m[1]}, strings.Split(m[2][1:], ".")...))
	}
	return out
}

// unresolved returns the qualified names of text that resolve to
// nothing in idx, each once, in order.
func (idx goIndex) unresolved(text string) []string {
	var bad []string
	for _, q := range idx.qualifiedNames(text) {
		name := strings.Join(q, ".")
		if !idx.resolves(q[0], q[1:]) && !slices.Contains(bad, name) {
			bad = append(bad, name)
		}
	}
	return bad
}

// optionsDoc is the document whose "Options:" paragraph lists the
// handler's options.
const optionsDoc = "docs/embedding.md"

// optionList returns the With* names of the paragraph of a document that
// begins "Options:", through the blank line that ends it.
func optionList(readme string) []string {
	_, rest, ok := strings.Cut("\n"+readme, "\nOptions:")
	if !ok {
		return nil
	}
	para, _, _ := strings.Cut(rest, "\n\n")
	var names []string
	for _, m := range regexp.MustCompile(`(?:^|[^\w.])(With[A-Z]\w*)`).FindAllStringSubmatch(para, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return names
}

// handlerOptions returns the root package's exported With* functions
// that return an Option, from its non-test files.
func handlerOptions(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, f := range rootSources(t, 0) {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "With") || !fn.Name.IsExported() {
				continue
			}
			if r := fn.Type.Results; r != nil && len(r.List) == 1 {
				if id, ok := r.List[0].Type.(*ast.Ident); ok && id.Name == "Option" {
					names = append(names, fn.Name.Name)
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// diff returns what is in want and not in got ("missing") and the other
// way round ("extra").
func diff(got, want []string) (missing, extra []string) {
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	return missing, extra
}

// TestDocsNamesResolve: every qualified Go name of the README and
// docs/*.md names something the module declares outside its tests, and
// docs/embedding.md's "Options:" paragraph lists exactly the root package's
// handler options. The planted subtests show both checks fail on a
// document that is wrong.
func TestDocsNamesResolve(t *testing.T) {
	t.Parallel()
	idx := moduleIndex(t)
	t.Run("planted", func(t *testing.T) {
		fake := "Call `formsapi.WithNothing(d)` or `formsapi.NewHandler`, set `ratelimit.Options.BytesInFlight` " +
			"(not `ratelimit.Options.Nope`), `formsclient.Export` resumes; `webhook.Store.SaveStream` (an alias's method), " +
			"`sqlitestore.Store.AddSubmission`, `formsapi.DefaultLimits.PrepareKeyOptions`; `formsapi.WithClock` is a test's. " +
			"Not names: https://formsapi.example/x, github.com/formsapi/formsapi.Gone, go test ./pgstore/."
		got := idx.unresolved(fake)
		want := []string{"formsapi.WithNothing", "ratelimit.Options.Nope", "formsapi.WithClock"}
		if !slices.Equal(got, want) {
			t.Errorf("unresolved in the planted text: %q, want %q", got, want)
		}
		missing, extra := diff(optionList("Intro.\n\nOptions: `WithLogger`, `WithClock(now)` and `WithPageSize(d, m)`.\nMore.\n\nAfter: `WithCORS`."), handlerOptions(t))
		if !slices.Contains(missing, "WithCORS") || !slices.Equal(extra, []string{"WithClock"}) {
			t.Errorf("planted option list: missing %q, extra %q; want WithCORS among the missing and WithClock the one extra", missing, extra)
		}
	})
	n := 0
	for _, d := range readmeAndDocs(t) {
		n += len(idx.qualifiedNames(d.text))
		for _, name := range idx.unresolved(d.text) {
			t.Errorf("%s: %s names nothing in the module (outside its tests)", d.name, name)
		}
	}
	if n < 100 {
		t.Errorf("found %d qualified names in the docs: the search is broken", n)
	}
	options, err := os.ReadFile(optionsDoc)
	if err != nil {
		t.Fatal(err)
	}
	opts := handlerOptions(t)
	if len(opts) < 5 {
		t.Fatalf("found %d handler options: the search is broken", len(opts))
	}
	missing, extra := diff(optionList(string(options)), opts)
	if len(missing) > 0 {
		t.Errorf("%s's Options: paragraph leaves out %q", optionsDoc, missing)
	}
	if len(extra) > 0 {
		t.Errorf("%s's Options: paragraph lists %q, which the package does not offer (outside its tests)", optionsDoc, extra)
	}
}

// walkModuleFiles parses, with mode, every non-test .go file of the
// module under the current directory (the module root) but those of
// testdata and hidden directories, and calls fn with each.
func walkModuleFiles(mode parser.Mode, fn func(path string, f *ast.File) error) error {
	fset := token.NewFileSet()
	return filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, mode)
		if err != nil {
			return err
		}
		return fn(path, f)
	})
}
