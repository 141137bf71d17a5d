package traffic

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elasti-dev/elasti/test/e2e/e2ebed"
	"github.com/elasti-dev/elasti/test/testenv"
)

// The cold-start soak (issue #39): the gate's checks on every path a
// client takes, HTTP/2 among them, for thousands of cold starts in a row,
// with one resolver pod deleted in one round and the apiserver SIGKILLed
// and started again in another, each while that round's requests are
// held. Not one request may fail; it reports how far beyond the new pod's
// Ready each answer came, inside the two fault rounds and outside them,
// as a histogram (docs/benchmarks.md has it as a picture, drawn by
// test/benchplot from -soak-results).

var (
	soakRounds = flag.Int("soak-rounds", 84,
		"BenchmarkColdStartSoak: rounds, each every Service's cold start at once (6 paths × 20 Services: 84 rounds are 10,080 cold starts); the faults need at least 3")
	soakResolverV = flag.Int("soak-resolver-v", 4,
		"BenchmarkColdStartSoak: the resolver's -v; at 4 it logs each hold and its release by Service, which a failed cold start's evidence quotes")
	soakResults = flag.String("soak-results", "",
		"BenchmarkColdStartSoak: a JSON file to write every cold start's figures to (test/benchplot draws them)")
)

// soakPaths are the gate's paths and HTTP/2 by prior knowledge (h2c) by
// short name.
var soakPaths = append(slices.Clone(gatePaths), gatePath{
	name: "h2c", prefix: "h2", h2c: true,
	addr: func(_ *gate, svc string) (string, string) { return svc, "" },
})

// soakColdStart is one cold start of the soak, as -soak-results has it.
type soakColdStart struct {
	Path  string       `json:"path"`
	Round int          `json:"round"`
	Fault e2ebed.Fault `json:"fault,omitempty"`
	// TotalMs is the client's first byte to its answer; BeyondReadyMs the
	// answer's time less the new pod's first Ready as the test's watch
	// saw it.
	TotalMs       float64 `json:"totalMs"`
	BeyondReadyMs float64 `json:"beyondReadyMs"`
}

// soakReport is -soak-results' file.
type soakReport struct {
	Began    time.Time `json:"began"`
	Took     string    `json:"took"`
	Rounds   int       `json:"rounds"`
	Services int       `json:"servicesPerPath"`
	// LoadBefore and LoadAfter are /proc/loadavg at the soak's start and
	// end: the machine's load beside it.
	LoadBefore string          `json:"loadBefore"`
	LoadAfter  string          `json:"loadAfter"`
	Failed     int             `json:"failed"`
	ColdStarts []soakColdStart `json:"coldStarts"`
}

// BenchmarkColdStartSoak runs -soak-rounds rounds of the gate on
// soakPaths with the two faults, fails on any failed cold start, and
// reports the worst time beyond Ready inside the fault rounds and
// outside them.
func BenchmarkColdStartSoak(b *testing.B) {
	if *soakRounds < 1 {
		b.Fatalf("-soak-rounds %d: want at least 1", *soakRounds)
	}
	for range b.N {
		r := runSoak(b, *soakRounds)
		var calm, faulted []time.Duration
		for _, c := range r.ColdStarts {
			d := time.Duration(c.BeyondReadyMs * float64(time.Millisecond))
			if c.Fault == "" {
				calm = append(calm, d)
			} else {
				faulted = append(faulted, d)
			}
		}
		b.ReportMetric(float64(len(r.ColdStarts)), "cold-starts")
		b.ReportMetric(float64(r.Failed), "failed")
		b.ReportMetric(float64(testenv.Percentile(calm, 99).Microseconds())/1000, "beyond-ready-p99-ms")
		b.ReportMetric(float64(slices.Max(append(calm, 0)).Microseconds())/1000, "beyond-ready-max-ms")
		b.ReportMetric(float64(slices.Max(append(faulted, 0)).Microseconds())/1000, "fault-beyond-ready-max-ms")
	}
}

// runSoak runs the soak and returns every cold start's figures; it fails
// tb as the gate does.
func runSoak(tb testing.TB, rounds int) soakReport {
	tb.Helper()
	g := newGate(tb, soakPaths, gateServicesPerPath)
	g.setResolverArgs(fmt.Sprintf("-v=%d", *soakResolverV))
	g.waitResolverListens()
	report := soakReport{Began: time.Now(), Rounds: rounds, Services: g.perPath, LoadBefore: loadAverage()}
	for round := range rounds {
		began := g.waitAllAsleep()
		marks := map[string]int{}
		for _, p := range g.paths {
			marks[p.name] = len(g.figures[p.name].beyondReady)
		}
		fault := e2ebed.FaultAt(round, rounds)
		var inject func()
		if fault != "" {
			inject = func() { e2ebed.Inject(g.ctx, g.t, g.e.Kube, g.bed.cluster, fault) }
		}
		g.fire(round, began, inject)
		for _, p := range g.paths {
			f := g.figures[p.name]
			for i := marks[p.name]; i < len(f.beyondReady); i++ {
				report.ColdStarts = append(report.ColdStarts, soakColdStart{Path: p.name, Round: round, Fault: fault,
					TotalMs: millis(f.total[i]), BeyondReadyMs: millis(f.beyondReady[i])})
			}
		}
		if fault == e2ebed.FaultResolverDeleted {
			g.resolverBack()
		}
	}
	report.Took, report.LoadAfter = time.Since(report.Began).Round(time.Second).String(), loadAverage()
	for _, p := range g.paths {
		report.Failed += len(g.figures[p.name].failed)
	}
	g.report(rounds, time.Since(report.Began))
	tb.Log(soakSummary(report))
	if report.Failed > 0 {
		g.keepElastiLogs()
	}
	if *soakResults != "" {
		out, err := json.Marshal(report)
		if err == nil {
			err = os.WriteFile(*soakResults, out, 0o644)
		}
		if err != nil {
			tb.Errorf("-soak-results: %v", err)
		}
	}
	return report
}

// resolverBack waits, after a resolver pod was deleted, until its
// Deployment is whole again and every Ready replica listens for every
// Service: the next round counts on both.
func (g *gate) resolverBack() {
	g.t.Helper()
	if err := g.bed.WaitDeploymentReady(g.ctx, elastiNamespace, resolverDeployment, gateAsleepTimeout); err != nil {
		g.t.Fatal(err)
	}
	g.waitResolverListens()
}

// keepElastiLogs writes the elasti pods' whole logs to a file that
// outlives the bed, and says where: a failed cold start's evidence quotes
// only their last lines on its Service.
func (g *gate) keepElastiLogs() {
	f, err := os.CreateTemp("", "elasti-soak-logs-*.txt")
	if err == nil {
		_, err = f.WriteString(g.bed.Node.Logs(elastiNamespace, "", 1<<22))
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		g.t.Errorf("keeping elasti's logs: %v", err)
		return
	}
	g.t.Logf("elasti's pods' logs are kept in %s", f.Name())
}

// soakBuckets are the histogram's upper bounds.
var soakBuckets = []time.Duration{
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
}

// soakSummary is the soak's figures: per path and fault window the count,
// p50, p99 and max beyond Ready, then the histogram of both windows.
func soakSummary(r soakReport) string {
	type window struct {
		beyond []time.Duration
		count  []int // per soakBuckets, and one past the last
	}
	windows := map[string]*window{}
	var paths, faults []string // the rows' names, each in its first cold start's order
	add := func(name string, d time.Duration) {
		w := windows[name]
		if w == nil {
			w = &window{count: make([]int, len(soakBuckets)+1)}
			windows[name] = w
			if strings.HasPrefix(name, "all, ") {
				faults = append(faults, name)
			} else {
				paths = append(paths, name)
			}
		}
		w.beyond = append(w.beyond, d)
		i, _ := slices.BinarySearch(soakBuckets, d)
		w.count[i]++
	}
	for _, c := range r.ColdStarts {
		d := time.Duration(c.BeyondReadyMs * float64(time.Millisecond))
		add(c.Path, d)
		if c.Fault == "" {
			add("all, no fault", d)
		} else {
			add("all, "+string(c.Fault), d)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %d cold starts in %d rounds, %d failed, in %s (load average %s before, %s after)\n",
		len(r.ColdStarts), r.Rounds, r.Failed, r.Took, r.LoadBefore, r.LoadAfter)
	fmt.Fprintf(&b, "%-28s %6s %10s %10s %10s\n", "beyond Ready", "cold", "p50", "p99", "max")
	for _, n := range append(paths, faults...) {
		w := windows[n]
		fmt.Fprintf(&b, "%-28s %6d %10s %10s %10s\n", n, len(w.beyond), testenv.Millis(testenv.Percentile(w.beyond, 50)),
			testenv.Millis(testenv.Percentile(w.beyond, 99)), testenv.Millis(slices.Max(w.beyond)))
	}
	fmt.Fprintf(&b, "histogram, beyond Ready:\n%-10s", "up to")
	for _, n := range faults {
		fmt.Fprintf(&b, " %22s", strings.TrimPrefix(n, "all, "))
	}
	b.WriteString("\n")
	for i := range len(soakBuckets) + 1 {
		label := "more"
		if i < len(soakBuckets) {
			label = soakBuckets[i].String()
		}
		fmt.Fprintf(&b, "%-10s", label)
		for _, n := range faults {
			fmt.Fprintf(&b, " %22d", windows[n].count[i])
		}
		b.WriteString("\n")
	}
	return b.String()
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// loadAverage is the first three fields of /proc/loadavg, or why not.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return err.Error()
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
