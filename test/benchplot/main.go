// Command benchplot draws the pictures docs/benchmarks.md shows from the
// benchmarks' own results files, so a picture is never drawn by hand:
//
//	benchplot -soak soak.json -out docs/benchmarks/soak-beyond-ready.svg
//
// reads BenchmarkColdStartSoak's -soak-results and draws, per client
// path, the share of cold starts answered within a time beyond the new
// pod's Ready (a CDF on a logarithmic axis), with the fault rounds' cold
// starts as one more line.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"

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
	in := flag.String("soak", "", "BenchmarkColdStartSoak's -soak-results file")
	out := flag.String("out", "", "the SVG to write")
	flag.Parse()
	if *in == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: benchplot -soak FILE -out FILE.svg")
		os.Exit(2)
	}
	if err := drawSoak(*in, *out); err != nil {
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
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Cold-start soak: %d cold starts in %d rounds, %d failed", len(r.ColdStarts), r.Rounds, r.Failed)
	p.X.Label.Text = "answer after the new pod's Ready (ms, log scale)"
	p.Y.Label.Text = "share of cold starts answered"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = false, false
	p.Add(plotter.NewGrid())
	for i, name := range names {
		line, err := plotter.NewLine(cdf(byLine[name]))
		if err != nil {
			return err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		if name == "fault rounds (all paths)" {
			line.Color = color.Black
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (%d)", name, len(byLine[name])), line)
	}
	p.Legend.ThumbnailWidth = vg.Points(20)
	p.Legend.Padding = vg.Points(2)
	return p.Save(8*vg.Inch, 4.5*vg.Inch, out)
}

// maxCDFPoints bounds the points of one line: ten thousand cold starts
// would draw each distinct value, and the file would be as large.
const maxCDFPoints = 400

// cdf is the points (x, share of xs at most x) of xs, one per distinct
// value, thinned to at most maxCDFPoints (the last one always kept).
func cdf(xs []float64) plotter.XYs {
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
	return append(plotter.XYs{{X: math.Min(floorMs, pts[0].X), Y: 0}}, pts...)
}
