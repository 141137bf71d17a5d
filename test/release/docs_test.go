package release_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeTestName is a test or benchmark the README names as proof of a
// claim, in backquotes.
var readmeTestName = regexp.MustCompile("`((?:Test|Benchmark)[A-Z][A-Za-z0-9_]*)`")

// Every test and benchmark the README cites (the Security table's "proved
// by" column, among others) exists, so a renamed or deleted test cannot
// leave a claim that nothing proves.
func TestReadmeCitesOnlyTestsThatExist(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)\w+)\(`).FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := readmeTestName.FindAllStringSubmatch(string(readme), -1)
	if len(cited) == 0 {
		t.Fatal("the README cites no test; the pattern is broken")
	}
	for _, m := range cited {
		if !defined[m[1]] {
			t.Errorf("README.md cites %s, which no _test.go defines", m[1])
		}
	}
}
