package release_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// testBed are the import path prefixes of the test bed and tooling: the local
// cluster, fixtures, end-to-end suites and build scripts. What ships must not
// depend on them, so a binary never links the test bed in.
var testBed = []string{"github.com/elasti-dev/elasti/test/", "github.com/elasti-dev/elasti/hack/"}

// testBedImports lists every non-test Go file under dir's pkg/ and cmd/ that
// imports the test bed, as "file: import path".
func testBedImports(dir string) ([]string, error) {
	var found []string
	for _, top := range []string{"pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(dir, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
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

// The product (pkg/, cmd/) and the test bed (test/, hack/) stay apart: only
// tests may import the bed.
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
	want := filepath.Join("pkg", "a", "a.go") + ": github.com/elasti-dev/elasti/test/localcluster"
	if len(found) != 1 || found[0] != want {
		t.Fatalf("found %q, want only %q", found, want)
	}
}
