package benchresults

import (
	"path/filepath"
	"strings"
	"testing"
)

// go test -v's output, as make bench tees it: logs between a benchmark's
// name and its result line, a benchmark of a package that failed, and a
// log line that looks like a result.
const output = `goos: linux
BenchmarkSlowStartOnTheRealNode
    slowstart_bench_test.go:210: held 5m2s; resolver memory 40 MiB before
BenchmarkSlowStartOnTheRealNode-2   	       1	302000000000 ns/op	         0 errors	        12.50 resolver-rss-before-MiB
BenchmarkNotAResult   the log says 3 things
PASS
ok  	github.com/elasti-dev/elasti/test/e2e/realnode	420.1s
BenchmarkFleet-2   	       1	9000 ns/op	  5.0 converge-s
--- FAIL: BenchmarkOther
FAIL	github.com/elasti-dev/elasti/test/e2e	10.0s
BenchmarkCutShort-2   	       1	10 ns/op
`

func TestParseKeepsOnlyBenchmarksOfPackagesThatPassed(t *testing.T) {
	got, err := Parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("parsed %v, want only BenchmarkSlowStartOnTheRealNode", got)
	}
	p := got["BenchmarkSlowStartOnTheRealNode"]
	if p.Package != "github.com/elasti-dev/elasti/test/e2e/realnode" || p.Metrics["errors"] != 0 || p.Metrics["resolver-rss-before-MiB"] != 12.5 || p.Metrics["ns/op"] != 3.02e11 {
		t.Errorf("parsed %+v", p)
	}
}

// A rerun of one benchmark replaces its run and keeps the others'; the
// file round-trips.
func TestMergeReplacesOnlyTheBenchmarksRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	f, err := Read(path)
	if err != nil || len(f.Runs) != 0 {
		t.Fatalf("a missing file: %v, %v", f, err)
	}
	f.Merge(map[string]Parsed{"BenchmarkA": {Package: "a", Metrics: map[string]float64{"x": 1}}, "BenchmarkB": {Package: "b", Metrics: map[string]float64{"y": 2}}}, Run{Commit: "c1"})
	f.Merge(map[string]Parsed{"BenchmarkA": {Package: "a", Metrics: map[string]float64{"x": 3}}}, Run{Commit: "c2"})
	if err := f.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := back.Runs["BenchmarkA"], back.Runs["BenchmarkB"]; a.Commit != "c2" || a.Metrics["x"] != 3 || b.Commit != "c1" || b.Metrics["y"] != 2 {
		t.Errorf("after the rerun: A %+v, B %+v", a, b)
	}
}

// The table has a row for each headline whose benchmark ran with every
// metric it needs, the run's details once, and nothing for a benchmark
// that has not run; Replace puts it between the markers and nowhere else.
func TestTableShowsWhatTheFileHas(t *testing.T) {
	f := &File{Runs: map[string]Run{"BenchmarkSlowStartOnTheRealNode": {
		Package: "p", Date: "2026-12-02T06:00:00Z", Commit: "abc1234", Machine: "2 cores", Load: "0.10 0.20 0.30", Command: "make bench",
		Metrics: map[string]float64{"errors": 0, "short-name-beyond-first-200-max-ms": 3.25, "cluster-ip-beyond-first-200-max-ms": 12,
			"ingress-beyond-first-200-max-ms": 40.4, "http2-beyond-first-200-max-ms": 2,
			"resolver-live-heap-before-MiB": 21, "resolver-live-heap-held-first-MiB": 30.4, "resolver-live-heap-growth-while-held-MiB": 1.2, "past-bound-503-max-ms": 4.5, "stage-mismatch-max-ms": 480}}}}
	table := Table(f)
	for _, want := range []string{"| 0 errors; 40 ms |", "| 21 MiB → 30 MiB (growth 1 MiB); 4.5 ms; 480 ms |",
		"2026-12-02T06:00:00Z, commit abc1234, 2 cores; load average 0.10 0.20 0.30 before it (p): `make bench`"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "Cold start on the real node") || strings.Count(table, "#### ") != 1 {
		t.Errorf("table shows a benchmark that did not run, or a run twice:\n%s", table)
	}
	page := "# B\n\nbefore\n" + TableStart + "\nold\n" + TableEnd + "\nafter\n"
	got, err := Replace(page, table)
	if err != nil || !strings.Contains(got, TableStart+"\n"+table+TableEnd+"\nafter\n") || strings.Contains(got, "\nold\n") || !strings.HasPrefix(got, "# B\n\nbefore\n") {
		t.Errorf("Replace: %v\n%s", err, got)
	}
	if _, err := Replace("no markers", table); err == nil {
		t.Error("Replace of a page without markers did not fail")
	}
}

func TestMillisecondsReadAsPeopleWriteThem(t *testing.T) {
	for v, want := range map[float64]string{0.44: "0.4 ms", 9.96: "10.0 ms", 10: "10 ms", 612.4: "612 ms", 9999: "9999 ms", 17364: "17.4 s"} {
		if got := ms(v); got != want {
			t.Errorf("ms(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestAnchorsAreGitHubs(t *testing.T) {
	for in, want := range map[string]string{"BenchmarkFleet/N=1000": "benchmarkfleetn1000", "BenchmarkSlowStartOnTheRealNode": "benchmarkslowstartontherealnode", "A b_c-d": "a-b_c-d"} {
		if got := anchor(in); got != want {
			t.Errorf("anchor(%q) = %q, want %q", in, got, want)
		}
	}
}
