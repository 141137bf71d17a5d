// Command benchplot turns make bench's output into what
// docs/benchmarks.md shows, so no figure or picture is made by hand:
//
//	benchplot -soak soak.json -out docs/benchmarks/soak-beyond-ready.svg
//	benchplot -coldstart coldstart.json -out docs/benchmarks/coldstart-realnode.svg
//	benchplot -merge go-test.txt -results docs/benchmarks/results.json -command CMD -load-before FILE
//	benchplot -page docs/benchmarks.md -results docs/benchmarks/results.json
//	benchplot -fleet -results docs/benchmarks/results.json -out docs/benchmarks/fleet-vs-n.svg
//	benchplot -held -results docs/benchmarks/results.json -out docs/benchmarks/resolver-memory-vs-held.svg
//
//	(-only REGEXP records only the benchmarks it matches)
//
// -soak reads BenchmarkColdStartSoak's -soak-results and draws, per client
// path, the share of cold starts answered within a time beyond the new
// pod's Ready (a CDF on a logarithmic axis), with the fault rounds' cold
// starts as one more line. -coldstart reads a real-node gate's
// -coldstart-results and draws the cold starts' CDF per path and variant
// (direct probing on and off). -merge records the benchmarks of go test's
// output in the results file (package benchresults) with the run's date,
// commit, machine and load; -page rewrites the page's table from it.
// -fleet and -held draw from the results file: the fleet's convergence
// against its size (BenchmarkFleet/N=…), and the resolver's memory
// against the requests it holds (BenchmarkHeldMemory/held=…).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// coldStart is the part of one of -soak-results' cold starts the picture
// reads (test/e2e/traffic's soakColdStart).
type coldStart struct {
	Path          string  `json:"path"`
	Fault         string  `json:"fault"`
	BeyondReadyMs float64 `json:"beyondReadyMs"`
}

type soakResults struct {
	Rounds     int         `json:"rounds"`
	Took       string      `json:"took"`
	Failed     int         `json:"failed"`
	ColdStarts []coldStart `json:"coldStarts"`
}

// floorMs is where the axis begins: a logarithmic axis has no 0, and
// the test's watch cannot tell times below a millisecond apart.
const floorMs = 1

func main() {
	soak := flag.String("soak", "", "BenchmarkColdStartSoak's -soak-results file, to draw")
	cold := flag.String("coldstart", "", "a real-node gate's -coldstart-results file, to draw")
	out := flag.String("out", "", "the SVG to write")
	merge := flag.String("merge", "", "go test's output, whose benchmarks to record in -results")
	page := flag.String("page", "", "the page whose results table to write from -results")
	results := flag.String("results", "", "the results file (docs/benchmarks/results.json)")
	command := flag.String("command", "", "with -merge: the command that ran the benchmarks")
	loadBefore := flag.String("load-before", "", "with -merge: a copy of /proc/loadavg taken before the run")
	only := flag.String("only", "", "with -merge: record only the benchmarks whose name matches this regular expression")
	fleet := flag.Bool("fleet", false, "draw the fleet's convergence against N from -results")
	held := flag.Bool("held", false, "draw the resolver's memory against held requests from -results")
	flag.Parse()
	var err error
	switch {
	case *soak != "" && *out != "":
		err = drawSoak(*soak, *out)
	case *cold != "" && *out != "":
		err = drawColdStarts(*cold, *out)
	case *merge != "" && *results != "" && *command != "":
		err = mergeRun(*merge, *results, *command, *loadBefore, *only)
	case *page != "" && *results != "":
		err = writePage(*page, *results)
	case (*fleet || *held) && *results != "" && *out != "":
		err = drawResults(*results, *fleet, *out)
	default:
		fmt.Fprintln(os.Stderr, "usage: benchplot -soak FILE -out FILE.svg | -coldstart FILE -out FILE.svg | -merge FILE -results FILE -command CMD [-load-before FILE] | -page FILE -results FILE | -fleet|-held -results FILE -out FILE.svg")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

func drawSoak(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var r soakResults
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(r.ColdStarts) == 0 {
		return fmt.Errorf("%s: no cold starts", in)
	}
	byLine := map[string][]float64{}
	var names []string
	for _, c := range r.ColdStarts {
		name := c.Path
		if c.Fault != "" {
			name = "fault rounds (all paths)"
		}
		if _, ok := byLine[name]; !ok {
			names = append(names, name)
		}
		byLine[name] = append(byLine[name], max(c.BeyondReadyMs, floorMs))
	}
	title := fmt.Sprintf("Cold-start soak: %d cold starts in %d rounds, %d failed", len(r.ColdStarts), r.Rounds, r.Failed)
	return drawCDFs(title, "answer after the new pod's Ready (ms, log scale)", floorMs, false, names, byLine,
		func(i int, name string) (bool, color.Color) {
			if name == "fault rounds (all paths)" {
				return true, color.Black
			}
			return false, plotutil.Color(i)
		}, out)
}

// drawCDFs draws a CDF of each of byLine's lines, in names' order, on a
// logarithmic axis; style(i, name) gives the i-th line's colour and
// whether it is dashed.
func drawCDFs(title, xLabel string, floor float64, legendTopLeft bool, names []string, byLine map[string][]float64, style func(int, string) (bool, color.Color), out string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "share of cold starts answered"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = legendTopLeft, legendTopLeft
	p.Add(plotter.NewGrid())
	for i, name := range names {
		line, err := plotter.NewLine(cdf(byLine[name], floor))
		if err != nil {
			return err
		}
		dashed, c := style(i, name)
		line.Color = c
		line.Width = vg.Points(1.5)
		if dashed {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (%d)", name, len(byLine[name])), line)
	}
	p.Legend.ThumbnailWidth = vg.Points(20)
	p.Legend.Padding = vg.Points(2)
	return p.Save(8*vg.Inch, 4.5*vg.Inch, out)
}

// coldCells is a real-node gate's -coldstart-results (test/e2e/realnode's
// coldCellResults).
type coldCells struct {
	Benchmark string `json:"benchmark"`
	Cells     []struct {
		Variant  string    `json:"variant"`
		Path     string    `json:"path"`
		ListenMs int64     `json:"listenMs"`
		ColdMs   []float64 `json:"coldMs"`
	} `json:"cells"`
}

// drawColdStarts draws the cold starts of a real-node gate's results, a
// CDF per path and variant; direct probing off is dashed.
func drawColdStarts(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var r coldCells
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	byLine := map[string][]float64{}
	var names []string
	total := 0
	for _, c := range r.Cells {
		name := fmt.Sprintf("%s, direct probing %s", c.Path, c.Variant)
		if _, ok := byLine[name]; !ok {
			names = append(names, name)
		}
		for _, v := range c.ColdMs {
			byLine[name] = append(byLine[name], max(v, coldFloorMs))
		}
		total += len(c.ColdMs)
	}
	if total == 0 {
		return fmt.Errorf("%s: no cold starts", in)
	}
	slices.Sort(names)
	title := fmt.Sprintf("%s: %d cold starts of real containers", r.Benchmark, total)
	// A path's two variants share its colour; off is dashed.
	colour := map[string]int{}
	for _, name := range names {
		path, _, _ := strings.Cut(name, ",")
		if _, ok := colour[path]; !ok {
			colour[path] = len(colour)
		}
	}
	return drawCDFs(title, "request to answer (ms, log scale)", coldFloorMs, true, names, byLine,
		func(_ int, name string) (bool, color.Color) {
			path, _, _ := strings.Cut(name, ",")
			return strings.HasSuffix(name, " off"), plotutil.Color(colour[path])
		}, out)
}

// maxCDFPoints bounds the points of one line: ten thousand cold starts
// would draw each distinct value, and the file would be as large.
const maxCDFPoints = 400

// coldFloorMs is where a cold start's axis begins: no container starts
// and answers in less.
const coldFloorMs = 100

// cdf is the points (x, share of xs at most x) of xs, one per distinct
// value, thinned to at most maxCDFPoints (the last one always kept),
// from floor with nothing answered.
func cdf(xs []float64, floor float64) plotter.XYs {
	s := slices.Clone(xs)
	slices.Sort(s)
	var pts plotter.XYs
	for i, x := range s {
		if i+1 < len(s) && s[i+1] == x {
			continue
		}
		pts = append(pts, plotter.XY{X: x, Y: float64(i+1) / float64(len(s))})
	}
	if len(pts) > maxCDFPoints {
		thin := make(plotter.XYs, 0, maxCDFPoints+1)
		for i := 0; i < len(pts)-1; i += (len(pts) + maxCDFPoints - 1) / maxCDFPoints {
			thin = append(thin, pts[i])
		}
		pts = append(thin, pts[len(pts)-1])
	}
	// The line starts at the axis' floor with nothing answered.
	return append(plotter.XYs{{X: math.Min(floor, pts[0].X), Y: 0}}, pts...)
}
