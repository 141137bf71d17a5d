package release_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// resolverModule is the import path of the resolver's packages.
const resolverModule = "github.com/elasti-dev/elasti/pkg/resolver"

// resolverLayers are the resolver's packages from the top down
// (docs/development/layout.md, pkg/resolver/doc.go): a package may import
// only those after it. pkg/resolver itself, the assembly, is first, so no
// layer reaches back into it. A new package must be placed here, which is
// the decision of where it stands.
var resolverLayers = []string{
	"",
	// identify and hold stand side by side (neither imports the other), as
	// do directprobe, admission and proberules: a line puts one above.
	"identify",
	"hold",
	"forward",
	"answer",
	"directprobe",
	"admission",
	"proberules",
	"clusterview",
}

// resolverFixtures are the packages of fixtures the resolver's tests
// share; only tests import them.
var resolverFixtures = []string{"internal/resolvertest", "clusterview/clusterviewtest"}

// layerImports lists each non-test Go file under dir/pkg/resolver that
// imports a resolver package not below its own in layers, or a fixture
// package, as "file: import path"; and every package directory that is in
// neither list, as "dir: not a layer".
func layerImports(dir string, layers, fixtures []string) ([]string, error) {
	var found []string
	base := filepath.Join(dir, "pkg", "resolver")
	err := filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(base, path)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			rel = ""
		}
		if d.IsDir() {
			if slices.Contains(fixtures, rel) || rel == "testdata" || strings.HasSuffix(rel, "/testdata") {
				return nil
			}
			if goFiles(path) && !slices.Contains(layers, rel) {
				found = append(found, "pkg/resolver/"+rel+": not a layer")
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if pkg == "." {
			pkg = ""
		}
		at := slices.Index(layers, pkg)
		if at < 0 {
			return nil // a fixture's own file, or a directory reported above
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			var target string
			switch {
			case p == resolverModule:
				target = ""
			case strings.HasPrefix(p, resolverModule+"/"):
				target = strings.TrimPrefix(p, resolverModule+"/")
			default:
				continue
			}
			if i := slices.Index(layers, target); i <= at {
				found = append(found, "pkg/resolver/"+rel+": "+p)
			}
		}
		return nil
	})
	return found, err
}

// goFiles reports whether dir holds a non-test Go file.
func goFiles(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true
		}
	}
	return false
}

// TestResolverLayersImportDown: the resolver's layers import one way, each
// only those below it, none the assembly (pkg/resolver) and none the
// tests' fixtures; every package under pkg/resolver is a layer or a
// fixture.
func TestResolverLayersImportDown(t *testing.T) {
	found, err := layerImports(root, resolverLayers, resolverFixtures)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: imports against the resolver's layers (top down: %q)", f, resolverLayers)
	}
}

func TestLayerImportsAreFound(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "pkg/resolver/resolver.go", "package resolver\n\nimport _ \""+resolverModule+"/low\"\n")
	write(t, dir, "pkg/resolver/high/high.go", "package high\n\nimport _ \""+resolverModule+"/low\"\n")
	write(t, dir, "pkg/resolver/low/low.go", "package low\n\nimport (\n\t_ \""+resolverModule+"/high\"\n\t_ \""+resolverModule+"\"\n)\n")
	write(t, dir, "pkg/resolver/low/low_test.go", "package low\n\nimport _ \""+resolverModule+"/internal/fix\"\n")
	write(t, dir, "pkg/resolver/low/fix.go", "package low\n\nimport _ \""+resolverModule+"/internal/fix\"\n")
	write(t, dir, "pkg/resolver/internal/fix/fix.go", "package fix\n\nimport _ \""+resolverModule+"/high\"\n")
	write(t, dir, "pkg/resolver/stray/stray.go", "package stray\n")
	found, err := layerImports(dir, []string{"", "high", "low"}, []string{"internal/fix"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pkg/resolver/low/fix.go: " + resolverModule + "/internal/fix",
		"pkg/resolver/low/low.go: " + resolverModule + "/high",
		"pkg/resolver/low/low.go: " + resolverModule,
		"pkg/resolver/stray: not a layer",
	}
	slices.Sort(found)
	slices.Sort(want)
	if !slices.Equal(found, want) {
		t.Fatalf("found %q, want %q", found, want)
	}
}
