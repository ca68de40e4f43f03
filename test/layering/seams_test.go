package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The docs name what sits at the seams of the tree: the ClickHouse sink's mappings, the steps
// of its flush, and the function deciding each external system's errors. These tests hold
// docs/architecture.md (and the Sink's own doc) to the code, as TestFileMapMatchesTree does
// for the packages.

var root = filepath.Join("..", "..")

// parseDir parses the non-test Go files of dir (relative to the module root), with comments.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return files
}

func architecture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var numberWords = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}

// TestMappingsListed: every type below sinks/ with a Map method that takes the loop's Waiter
// is a mapping of the ClickHouse sink's one loop (clickhouse.Mapping), wherever its package;
// the docs say how many there are and name each, and mapping.go's doc does too.
func TestMappingsListed(t *testing.T) {
	var mappings []string
	var mappingDoc string
	for _, dir := range packagesUnder(t, "sinks") {
		for _, f := range parseDir(t, dir) {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Name.Name == "Map" && d.Recv != nil && takesWaiter(d.Type) {
						mappings = append(mappings, receiverName(d.Recv.List[0].Type))
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == "Mapping" && dir == "sinks/clickhouse" && d.Doc != nil {
							mappingDoc = d.Doc.Text()
						}
					}
				}
			}
		}
	}
	sort.Strings(mappings)
	if len(mappings) < 3 || len(mappings) >= len(numberWords) || mappingDoc == "" {
		t.Fatalf("found mappings %v (and the doc of clickhouse.Mapping: %t): is Map(ctx, Waiter, rec) still the mapping's method?", mappings, mappingDoc != "")
	}
	word := numberWords[len(mappings)]
	doc := architecture(t)
	if want := "**One loop, " + word + " mappings.**"; !strings.Contains(doc, want) {
		t.Errorf("docs/architecture.md does not say %q (mappings in the code: %v)", want, mappings)
	}
	if want := "There are " + word + ":"; !strings.Contains(mappingDoc, want) {
		t.Errorf("the doc of Mapping (mapping.go) does not say %q (mappings in the code: %v)", want, mappings)
	}
	for _, m := range mappings {
		if !strings.Contains(doc, "`"+m+"`") {
			t.Errorf("docs/architecture.md does not name the mapping `%s`", m)
		}
		if !strings.Contains(mappingDoc, m) {
			t.Errorf("the doc of Mapping (mapping.go) does not name %s", m)
		}
	}
}

// takesWaiter reports whether a method's second parameter is the loop's Waiter (Waiter in
// sinks/clickhouse, clickhouse.Waiter elsewhere).
func takesWaiter(ft *ast.FuncType) bool {
	var types []ast.Expr
	for _, p := range ft.Params.List {
		for range max(len(p.Names), 1) {
			types = append(types, p.Type)
		}
	}
	if len(types) < 2 {
		return false
	}
	switch x := types[1].(type) {
	case *ast.Ident:
		return x.Name == "Waiter"
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		return ok && id.Name == "clickhouse" && x.Sel.Name == "Waiter"
	}
	return false
}

// packagesUnder lists dir and every folder below it that holds non-test Go files, relative
// to the module root.
func packagesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		names, _ := filepath.Glob(filepath.Join(p, "*.go"))
		if slices.ContainsFunc(names, func(n string) bool { return !strings.HasSuffix(n, "_test.go") }) {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func receiverName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// flushSteps are the steps of a flush as Sink.land (flush.go) runs them: the mapping's insert,
// then each method of the Sink it calls, in the order of the source.
var flushStepNames = []string{"Insert", "deadLetter", "account", "mark", "commit"}

// TestFlushStepsListed: the steps of a flush, in the order Sink.land takes them, are the steps
// docs/architecture.md lists under "A flush (`Sink.land`), in order:" and the Sink's doc lists
// (sink.go), each step naming its function.
func TestFlushStepsListed(t *testing.T) {
	var code []string
	var sinkDoc string
	for _, f := range parseDir(t, "sinks/clickhouse") {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Name.Name != "land" || d.Recv == nil || receiverName(d.Recv.List[0].Type) != "Sink" {
					continue
				}
				ast.Inspect(d.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					recv := ""
					switch x := sel.X.(type) {
					case *ast.Ident:
						recv = x.Name
					case *ast.SelectorExpr: // s.m.Insert: the mapping's
						if id, ok := x.X.(*ast.Ident); ok && id.Name == "s" && x.Sel.Name == "m" {
							recv = "s.m"
						}
					}
					if (recv == "s" || recv == "s.m") && slices.Contains(flushStepNames, sel.Sel.Name) {
						code = append(code, sel.Sel.Name)
					}
					return true
				})
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == "Sink" && d.Doc != nil {
						sinkDoc = d.Doc.Text()
					}
				}
			}
		}
	}
	if !slices.Equal(code, flushStepNames) {
		t.Fatalf("Sink.land takes the steps %v; this test knows %v: update flushStepNames and the docs together", code, flushStepNames)
	}
	doc := architecture(t)
	_, list, ok := strings.Cut(doc, "A flush (`Sink.land`), in order:\n")
	if !ok {
		t.Fatal("docs/architecture.md has no \"A flush (`Sink.land`), in order:\" list")
	}
	if got := stepsOf(list, regexp.MustCompile("`([A-Za-z]+)`")); !slices.Equal(got, code) {
		t.Errorf("docs/architecture.md lists the flush steps %v, the code takes %v", got, code)
	}
	_, list, ok = strings.Cut(sinkDoc, "A flush (flush.go):\n")
	if !ok {
		t.Fatal(`the Sink's doc (sink.go) has no "A flush (flush.go):" list`)
	}
	if got := stepsOf(list, regexp.MustCompile(`\(([A-Za-z]+)[;)]`)); !slices.Equal(got, code) {
		t.Errorf("the Sink's doc (sink.go) lists the flush steps %v, the code takes %v", got, code)
	}
}

// stepsOf reads a numbered list ("1. ...", up to the first line that is neither an item nor
// its continuation) and returns, per item, the first name that re matches and is a step.
var itemStart = regexp.MustCompile(`^\s*\d+\. `)

func stepsOf(list string, re *regexp.Regexp) []string {
	var items []string
	for _, line := range strings.Split(list, "\n") {
		switch {
		case itemStart.MatchString(line):
			items = append(items, line)
		case len(items) > 0 && strings.HasPrefix(line, "   ") && strings.TrimSpace(line) != "":
			items[len(items)-1] += " " + strings.TrimSpace(line)
		default:
			if len(items) > 0 {
				return firstSteps(items, re)
			}
		}
	}
	return firstSteps(items, re)
}

func firstSteps(items []string, re *regexp.Regexp) []string {
	var out []string
	for _, it := range items {
		for _, m := range re.FindAllStringSubmatch(it, -1) {
			if slices.Contains(flushStepNames, m[1]) {
				out = append(out, m[1])
				break
			}
		}
	}
	return out
}

// deciderNames are the functions that decide an external system's errors.
var deciderNames = []string{"IsRetryable", "IsRejected", "IsFatal"}

// TestDecidersListed: every product package that declares an error decider (IsRetryable,
// IsRejected, IsFatal) is named with it in invariant 4 of docs/architecture.md, and every
// decider named there exists; a system's deciders live in one package.
func TestDecidersListed(t *testing.T) {
	code := map[string]bool{} // "pkg.Func"
	dirs := []string{"avro"}
	for _, top := range []string{"internal", "sinks", "processors", "pipelines"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if m, _ := filepath.Glob(filepath.Join(p, "*.go")); len(m) > 0 {
				dirs = append(dirs, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range dirs {
		for _, f := range parseDir(t, dir) {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && slices.Contains(deciderNames, fd.Name.Name) {
					code[f.Name.Name+"."+fd.Name.Name] = true
				}
			}
		}
	}
	if len(code) < 4 {
		t.Fatalf("found deciders %v: is the tree where this test looks?", code)
	}
	doc := architecture(t)
	_, inv, ok := strings.Cut(doc, "4. **Bad data goes to the DLQ exactly once; outages never do.**")
	if !ok {
		t.Fatal("docs/architecture.md has no invariant 4")
	}
	inv, _, _ = strings.Cut(inv, "\n5. ")
	// `pkg.Func` names a decider; a bare `Func` after one is the same package's.
	named := map[string]bool{}
	pkg := ""
	for _, m := range regexp.MustCompile("`(?:([a-z]+)\\.)?(Is[A-Za-z]+)`").FindAllStringSubmatch(inv, -1) {
		if m[1] != "" {
			pkg = m[1]
		}
		if pkg != "" && slices.Contains(deciderNames, m[2]) {
			named[pkg+"."+m[2]] = true
		}
	}
	for d := range code {
		if !named[d] {
			t.Errorf("%s decides a system's errors but invariant 4 of docs/architecture.md does not name it", d)
		}
	}
	for d := range named {
		if !code[d] {
			t.Errorf("invariant 4 of docs/architecture.md names %s, which the tree does not declare", d)
		}
	}
}
