package release_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/elasti-dev/elasti/test/benchresults"
)

// The results page's table is the results file's, as make bench-page
// writes it: a figure changed by hand on the page, or a run recorded in
// the file and not written to the page, fails here. The page stays the
// one-minute read it is meant to be, and every picture it shows exists.
func TestBenchmarksPageIsTheResultsFiles(t *testing.T) {
	results, err := benchresults.Read(filepath.Join(root, "docs", "benchmarks", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(results.Runs) == 0 {
		t.Fatal("docs/benchmarks/results.json has no run: make bench writes it")
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	want, err := benchresults.Replace(page, benchresults.Table(results))
	if err != nil {
		t.Fatal(err)
	}
	if page != want {
		t.Errorf("docs/benchmarks.md's table is not docs/benchmarks/results.json's: run make bench-page")
	}
	if n := strings.Count(page, "\n"); n > 150 {
		t.Errorf("docs/benchmarks.md has %d lines; the results page is at most 150 (the rest goes to docs/benchmarks/)", n)
	}
	for name, run := range results.Runs {
		if run.Date == "" || run.Commit == "" || run.Machine == "" || run.Load == "" || run.Command == "" || len(run.Metrics) == 0 {
			t.Errorf("results.json's %s does not name its run (date, commit, machine, load, command) or has no figures: %+v", name, run)
		}
	}
}
