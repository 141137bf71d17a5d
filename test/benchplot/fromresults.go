package main

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/elasti-dev/elasti/test/benchresults"
)

// series is one line of a picture drawn from the results file: a metric
// of the runs whose name the pattern matches, against the number the
// pattern's first group takes from the name.
type series struct {
	label, metric string
}

// pointsOf is, for each run of f whose name matches nameX (its first
// group a number), the point (that number, the run's metric), in the
// number's order; runs without the metric are left out.
func pointsOf(f *benchresults.File, nameX *regexp.Regexp, metric string) plotter.XYs {
	var pts plotter.XYs
	for name, run := range f.Runs {
		m := nameX.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		x, err := strconv.ParseFloat(m[1], 64)
		v, ok := run.Metrics[metric]
		if err != nil || !ok {
			continue
		}
		pts = append(pts, plotter.XY{X: x, Y: v})
	}
	slices.SortFunc(pts, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	return pts
}

// drawFromResults draws lines of the results file's runs against the
// number in their names; it fails when no line has a point, so make
// bench does not write an empty picture.
func drawFromResults(f *benchresults.File, nameX *regexp.Regexp, lines []series, title, xLabel, yLabel string, logX bool, out string) error {
	p := plot.New()
	p.Title.Text = title
	// The legend sits at the top of the plot area: room under the title
	// keeps the two apart.
	p.Title.Padding = vg.Points(10)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	if logX {
		p.X.Scale = plot.LogScale{}
	}
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	points := 0
	// Each measured N is labelled where it is: a log axis's own ticks
	// label powers of ten only, which left 200 unnamed.
	var ticks []plot.Tick
	for i, s := range lines {
		pts := pointsOf(f, nameX, s.metric)
		if len(pts) == 0 {
			continue
		}
		points += len(pts)
		for _, pt := range pts {
			if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == pt.X }) {
				ticks = append(ticks, plot.Tick{Value: pt.X, Label: strconv.FormatFloat(pt.X, 'f', -1, 64)})
			}
		}
		line, dots, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		line.Color, dots.Color = plotutil.Color(i), plotutil.Color(i)
		line.Width = vg.Points(1.5)
		dots.Shape = plotutil.Shape(i)
		p.Add(line, dots)
		p.Legend.Add(fmt.Sprintf("%s (%d runs)", s.label, len(pts)), line, dots)
	}
	if points == 0 {
		return fmt.Errorf("no run in the results file matches %s with any of the metrics", nameX)
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.ThumbnailWidth = vg.Points(20)
	return p.Save(8*vg.Inch, 4.5*vg.Inch, out)
}

// fleetRun and heldRun name the runs the two pictures read.
var (
	fleetRun = regexp.MustCompile(`^BenchmarkFleet/N=(\d+)$`)
	heldRun  = regexp.MustCompile(`^BenchmarkHeldMemory/held=(\d+)$`)
)

// drawFleet is the fleet's convergence against its size
// (BenchmarkFleet/N=…).
func drawFleet(f *benchresults.File, out string) error {
	return drawFromResults(f, fleetRun, []series{
		{"created → every one reconciled", "reconcile-all-s"},
		{"idle → every one in proxy (cooldown included)", "idle-proxy-s"},
		{"wake → every one serving", "all-serve-s"},
		{"operator restart → converged", "restart-converge-s"},
	}, "The fleet: seconds until every ElastiService converged, against their number", "ElastiServices (log scale)", "seconds", true, out)
}

// drawHeldMemory is the resolver's memory against the requests it holds
// (BenchmarkHeldMemory/held=…).
func drawHeldMemory(f *benchresults.File, out string) error {
	return drawFromResults(f, heldRun, []series{
		{"heap and stacks once all are held", "MiB-heap+stacks"},
		{"growth after they stayed held", "MiB-growth-while-held"},
	}, "The resolver's memory against the requests it holds", "requests held", "MiB", false, out)
}

// drawResults draws the fleet's picture (fleet) or the held memory's from
// the results file.
func drawResults(results string, fleet bool, out string) error {
	f, err := benchresults.Read(results)
	if err != nil {
		return err
	}
	if fleet {
		return drawFleet(f, out)
	}
	return drawHeldMemory(f, out)
}
