package pkgdoc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testutil"
)

// goFiles returns the non-test, non-generated Go files per directory.
func goFiles(t *testing.T, root string) map[string][]string {
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		name := d.Name()
		if d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, ".pb.go") {
			return nil
		}
		dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func TestEveryPackageAndExportedIdentifierIsDocumented(t *testing.T) {
	root := testutil.ModuleRoot(t)
	dirs := goFiles(t, root)
	if len(dirs) < 10 {
		t.Fatalf("found only %d package directories under %s", len(dirs), root)
	}
	for dir, files := range dirs {
		rel, _ := filepath.Rel(root, dir)
		fset := token.NewFileSet()
		hasDoc := false
		for _, f := range files {
			file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if file.Doc != nil && strings.HasPrefix(file.Doc.Text(), packageDocPrefix(file)) {
				hasDoc = true
			}
			for _, missing := range undocumented(file) {
				t.Errorf("%s: exported %s has no doc comment", fset.Position(missing.Pos()).String()[len(root)+1:], name(missing))
			}
		}
		if !hasDoc {
			t.Errorf("package %s has no package comment (\"// %s...\")", rel, packageDocPrefix(nil))
		}
	}
}

func packageDocPrefix(f *ast.File) string {
	if f == nil {
		return "Package x / Command x"
	}
	if f.Name.Name == "main" {
		return "Command "
	}
	return "Package " + f.Name.Name + " "
}

// undocumented returns exported top-level declarations, methods on exported
// types and exported struct fields of exported types that lack a comment.
func undocumented(f *ast.File) []ast.Node {
	var out []ast.Node
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Recv != nil && !exportedRecv(d.Recv) {
				continue
			}
			if d.Doc == nil {
				out = append(out, d.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if d.Doc == nil && s.Doc == nil {
						out = append(out, s.Name)
					}
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, field := range st.Fields.List {
							for _, n := range field.Names {
								if n.IsExported() && field.Doc == nil && field.Comment == nil {
									out = append(out, n)
								}
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
							out = append(out, n)
						}
					}
				}
			}
		}
	}
	return out
}

func exportedRecv(fl *ast.FieldList) bool {
	t := fl.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

func name(n ast.Node) string {
	if id, ok := n.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}
