package release_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// testBed are the import path prefixes of the test bed and tooling: the local
// cluster, fixtures, end-to-end suites and build scripts. What ships must not
// depend on them, so a binary never links the test bed in.
var testBed = []string{"github.com/elasti-dev/elasti/test/", "github.com/elasti-dev/elasti/hack/"}

// testBedImports lists every Go file under dir's pkg/ and cmd/, tests
// included, that imports the test bed, as "file: import path". The bed is a
// module of its own that requires the product's, so a product test that
// imported it would tie the two modules in a cycle.
func testBedImports(dir string) ([]string, error) {
	var found []string
	for _, top := range []string{"pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(dir, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, bed := range testBed {
					if strings.HasPrefix(p, bed) {
						rel, _ := filepath.Rel(dir, path)
						found = append(found, rel+": "+p)
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

// The product (pkg/, cmd/) and the test bed (test/, hack/) stay apart: the
// product's tests do not import the bed either; what needs the bed is a test
// under test/ (the operator's integration tests are test/operator).
func TestProductDoesNotImportTheTestBed(t *testing.T) {
	found, err := testBedImports(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: the product imports the test bed", f)
	}
}

func TestTestBedImportsAreFound(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "pkg/a/a.go", "package a\n\nimport _ \"github.com/elasti-dev/elasti/test/localcluster\"\n")
	write(t, dir, "pkg/a/a_test.go", "package a\n\nimport _ \"github.com/elasti-dev/elasti/test/testenv\"\n")
	write(t, dir, "cmd/b/main.go", "package main\n\nimport _ \"github.com/elasti-dev/elasti/pkg/names\"\n")
	found, err := testBedImports(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		filepath.Join("pkg", "a", "a.go") + ": github.com/elasti-dev/elasti/test/localcluster",
		filepath.Join("pkg", "a", "a_test.go") + ": github.com/elasti-dev/elasti/test/testenv",
	}
	if !slices.Equal(found, want) {
		t.Fatalf("found %q, want %q", found, want)
	}
}
