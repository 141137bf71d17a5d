// Package benchresults is make bench's results file
// (docs/benchmarks/results.json) and the table docs/benchmarks.md opens
// with, made from it: every figure on the page comes from a benchmark's
// own output, with its run's date, commit, machine, load and command, and
// test/release fails when the page and the file disagree.
//
// A benchmark's figures are what it reports (testing.B.ReportMetric), read
// from go test's output; a later run of the same benchmark replaces them,
// and the others' stay, so one benchmark can be run again alone.
package benchresults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// File is the results file: each benchmark's last run, by name.
type File struct {
	Runs map[string]Run `json:"runs"`
}

// Run is one benchmark's last run.
type Run struct {
	// Package is the Go package the benchmark is in.
	Package string `json:"package"`
	// Date is when the run ended (RFC 3339, UTC); Commit the tree's
	// commit, with "-dirty" when it had changes.
	Date   string `json:"date"`
	Commit string `json:"commit"`
	// Machine is its cores, CPU model and memory; Load the load average
	// before the run (1, 5 and 15 minutes).
	Machine string `json:"machine"`
	Load    string `json:"load"`
	// Command reproduces it.
	Command string `json:"command"`
	// Metrics are what it reported, by unit (ns/op among them).
	Metrics map[string]float64 `json:"metrics"`
}

// Read reads the results file at path; a file that does not exist is an
// empty one.
func Read(path string) (*File, error) {
	f := &File{Runs: map[string]Run{}}
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return f, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Runs == nil {
		f.Runs = map[string]Run{}
	}
	return f, nil
}

// Write writes f to path, indented, its keys sorted (encoding/json sorts
// map keys), so a rerun's diff shows only what changed.
func (f *File) Write(path string) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// benchLine is a benchmark's result line in go test's output: its name
// (with -GOMAXPROCS), its iterations, then value-unit pairs.
var benchLine = regexp.MustCompile(`^(Benchmark[^\s]+?)(?:-\d+)?\s+(\d+)\s+(.+)$`)

// pkgLine is go test's line for a package that passed: "ok  <pkg>  <time>".
var pkgLine = regexp.MustCompile(`^ok\s+(\S+)\s`)

// Parsed is a benchmark's figures from go test's output.
type Parsed struct {
	Package string
	Metrics map[string]float64
}

// Parse reads go test's output (plain or -v) and returns each
// benchmark's metrics by name; a package's benchmarks are named in its
// "ok" line, which comes after them. A benchmark whose package failed has
// no ok line and is left out: its figures are not a result.
func Parse(r io.Reader) (map[string]Parsed, error) {
	out := map[string]Parsed{}
	var pending []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := pkgLine.FindStringSubmatch(line); m != nil {
			for _, name := range pending {
				p := out[name]
				p.Package = m[1]
				out[name] = p
			}
			pending = nil
			continue
		}
		if strings.HasPrefix(line, "FAIL") {
			for _, name := range pending {
				delete(out, name)
			}
			pending = nil
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fields := strings.Fields(m[3])
		if len(fields)%2 != 0 {
			continue // a log line that happens to start like one
		}
		metrics := map[string]float64{}
		for i := 0; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				metrics = nil
				break
			}
			metrics[fields[i+1]] = v
		}
		if metrics == nil {
			continue
		}
		out[m[1]] = Parsed{Metrics: metrics}
		pending = append(pending, m[1])
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, name := range pending {
		delete(out, name) // no ok line: the package did not pass
	}
	return out, nil
}

// Merge records parsed as the benchmarks' last runs, each with run's
// date, commit, machine, load and command; the benchmarks parsed does not
// name keep theirs. It returns the names merged, sorted.
func (f *File) Merge(parsed map[string]Parsed, run Run) []string {
	var names []string
	for name, p := range parsed {
		r := run
		r.Package, r.Metrics = p.Package, p.Metrics
		f.Runs[name] = r
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
