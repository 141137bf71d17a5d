package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/elasti-dev/elasti/test/benchresults"
)

func TestCDFCountsEachValueOnceAtItsLastRank(t *testing.T) {
	got := cdf([]float64{5, 2, 2, 40}, floorMs)
	want := plotter.XYs{{X: 1, Y: 0}, {X: 2, Y: 0.5}, {X: 5, Y: 0.75}, {X: 40, Y: 1}}
	if len(got) != len(want) {
		t.Fatalf("cdf = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("cdf = %v, want %v", got, want)
		}
	}
}

func TestCDFIsThinnedToItsBoundAndKeepsTheLast(t *testing.T) {
	xs := make([]float64, 10000)
	for i := range xs {
		xs[i] = float64(i + 1)
	}
	got := cdf(xs, floorMs)
	if len(got) > maxCDFPoints+2 {
		t.Errorf("%d points, want at most %d", len(got), maxCDFPoints+2)
	}
	if last := got[len(got)-1]; last != (plotter.XY{X: 10000, Y: 1}) {
		t.Errorf("last point %v, want the largest value at 1", last)
	}
}

func TestDrawSoakWritesAnSVGWithEveryLine(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "soak.json"), filepath.Join(dir, "soak.svg")
	r := soakResults{Rounds: 3, ColdStarts: []coldStart{
		{Path: "short-name", BeyondReadyMs: 0.4}, {Path: "short-name", BeyondReadyMs: 12},
		{Path: "h2c", BeyondReadyMs: 30}, {Path: "h2c", Fault: "apiserver-killed", BeyondReadyMs: 2400},
	}}
	b, _ := json.Marshal(r)
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := drawSoak(in, out); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"<svg", "short-name (2)", "h2c (1)", "fault rounds (all paths) (1)", "4 cold starts in 3 rounds"} {
		if !strings.Contains(string(svg), s) {
			t.Errorf("the SVG does not contain %q", s)
		}
	}
}

func TestDrawSoakRefusesAnEmptyRun(t *testing.T) {
	in := filepath.Join(t.TempDir(), "soak.json")
	if err := os.WriteFile(in, []byte(`{"rounds":1,"coldStarts":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := drawSoak(in, in+".svg"); err == nil || !strings.Contains(err.Error(), "no cold starts") {
		t.Fatalf("drawSoak of an empty run: %v, want an error saying so", err)
	}
}

// The real node's cold starts: a line per path and variant, named with its
// count, and an empty run refused.
func TestDrawColdStartsWritesALinePerPathAndVariant(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "coldstart.json"), filepath.Join(dir, "coldstart.svg")
	body := `{"benchmark":"BenchmarkColdStartOneAtATimeOnTheRealNode","cells":[
	 {"variant":"on","path":"short-name","listenMs":0,"coldMs":[310,320,900]},
	 {"variant":"off","path":"short-name","listenMs":0,"coldMs":[330,10400]},
	 {"variant":"on","path":"ingress","listenMs":300,"coldMs":[600]}]}`
	if err := os.WriteFile(in, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := drawColdStarts(in, out); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"short-name, direct probing on (3)", "short-name, direct probing off (2)", "ingress, direct probing on (1)", "6 cold starts"} {
		if !strings.Contains(string(svg), s) {
			t.Errorf("the SVG does not contain %q", s)
		}
	}
	if err := os.WriteFile(in, []byte(`{"cells":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := drawColdStarts(in, out); err == nil || !strings.Contains(err.Error(), "no cold starts") {
		t.Errorf("an empty run: %v, want an error saying so", err)
	}
}

func TestTheFleetPictureHasALinePerPhaseWithEachRun(t *testing.T) {
	f := &benchresults.File{Runs: map[string]benchresults.Run{
		"BenchmarkFleet/N=1000":        {Metrics: map[string]float64{"reconcile-all-s": 6.5, "idle-proxy-s": 61, "all-serve-s": 47, "restart-converge-s": 0.7}},
		"BenchmarkFleet/N=200":         {Metrics: map[string]float64{"reconcile-all-s": 1.5, "idle-proxy-s": 31, "all-serve-s": 12, "restart-converge-s": 0.2}},
		"BenchmarkHeldMemory/held=250": {Metrics: map[string]float64{"MiB-heap+stacks": 6.4}},
	}}
	out := filepath.Join(t.TempDir(), "fleet.svg")
	if err := drawFleet(f, out); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"every one reconciled (2 runs)", "every one serving (2 runs)", "converged (2 runs)"} {
		if !strings.Contains(string(svg), s) {
			t.Errorf("the SVG does not contain %q", s)
		}
	}
	if got := pointsOf(f, fleetRun, "all-serve-s"); len(got) != 2 || got[0] != (plotter.XY{X: 200, Y: 12}) || got[1] != (plotter.XY{X: 1000, Y: 47}) {
		t.Errorf("points = %v, want N=200 then N=1000", got)
	}
	if err := drawHeldMemory(&benchresults.File{Runs: map[string]benchresults.Run{}}, out); err == nil {
		t.Error("drew the held memory from a results file without its runs")
	}
}
