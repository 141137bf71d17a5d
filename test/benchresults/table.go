package benchresults

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Headline is one row of the page's table: a figure and the metrics of one
// benchmark that make it, shown as Format says.
type Headline struct {
	Figure    string
	Benchmark string
	// Metrics are the benchmark's metric units, in the order Format
	// takes them.
	Metrics []string
	// Format turns the metrics' values into the row's value cell.
	Format func(v []float64) string
}

// ms formats milliseconds: whole ones from 10 ms, one decimal below, and
// seconds from 10 s.
func ms(v float64) string {
	switch {
	case v >= 10000:
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + " s"
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 0, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
}

// p50p99max is a "p50 / p99 / max" cell of three millisecond metrics.
func p50p99max(v []float64) string {
	return ms(v[0]) + " / " + ms(v[1]) + " / " + ms(v[2])
}

// mib formats MiB.
func mib(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) + " MiB" }

// coldStartRows are the real node's cold starts one app at a time of an
// app that listens 300 ms after its start, per path and direct probing on
// and off: the cold start, and how far past the app's first readiness 200
// the held request arrived.
func coldStartRows(benchmark, where string) []Headline {
	var rows []Headline
	for _, v := range []string{"on", "off"} {
		for _, p := range []struct{ name, words string }{{"short-name", "short name"}, {"cluster-ip", "ClusterIP"}, {"ingress", "ingress"}} {
			prefix := v + "-" + p.name + "-l300ms"
			rows = append(rows, Headline{
				Figure:    fmt.Sprintf("Cold start %s, an app that listens 300 ms after its start, by %s, direct probing %s: p50 / p99 / max (beyond its first readiness 200)", where, p.words, v),
				Benchmark: benchmark,
				Metrics: []string{prefix + "-cold-p50-ms", prefix + "-cold-p99-ms", prefix + "-cold-max-ms",
					prefix + "-beyond-first-200-p50-ms", prefix + "-beyond-first-200-p99-ms", prefix + "-beyond-first-200-max-ms"},
				Format: func(x []float64) string { return p50p99max(x[:3]) + " (" + p50p99max(x[3:]) + ")" },
			})
		}
	}
	return rows
}

// kwokColdStartRows are the kwok gate's cold starts per path: 100
// Services woken at once on each, kwok pods (no container), from the
// client's first byte and beyond the moment the new pod was seen Ready.
func kwokColdStartRows() []Headline {
	var rows []Headline
	for _, p := range []struct{ name, words string }{{"short-name", "short name"}, {"cluster-ip", "ClusterIP"}, {"ingress", "ingress"}, {"gateway", "Gateway API"}, {"raw-tcp", "raw TCP"}} {
		rows = append(rows, Headline{
			Figure:    fmt.Sprintf("Cold start on kwok, 100 Services woken at once per round (5 rounds), by %s: p50 / p99 / max (beyond the new pod's Ready)", p.words),
			Benchmark: "BenchmarkColdStartGate",
			Metrics: []string{p.name + "-p50-ms", p.name + "-p99-ms", p.name + "-max-ms",
				p.name + "-beyond-ready-p50-ms", p.name + "-beyond-ready-p99-ms", p.name + "-beyond-ready-max-ms"},
			Format: func(x []float64) string { return p50p99max(x[:3]) + " (" + p50p99max(x[3:]) + ")" },
		})
	}
	return rows
}

// fleetRows are the operator's figures with a fleet of n ElastiServices.
func fleetRows(n int, words string) []Headline {
	benchmark := fmt.Sprintf("BenchmarkFleet/N=%d", n)
	return []Headline{{
		Figure:    fmt.Sprintf("Fleet of %s ElastiServices (kwok pods, the operator as a process): every Service fronted / in proxy after going idle; every one serving after the wake", words),
		Benchmark: benchmark,
		Metrics:   []string{"idle-fronted-s", "idle-proxy-s", "all-serve-s"},
		Format: func(v []float64) string {
			return fmt.Sprintf("%.1f s / %.1f s; %.1f s", v[0], v[1], v[2])
		},
	}, {
		Figure:    fmt.Sprintf("The same %s: the operator's restart converged, its writes; its RSS and peak; Services left with no endpoint", words),
		Benchmark: benchmark,
		Metrics:   []string{"restart-converge-s", "restart-writes", "rss-MiB", "peak-rss-MiB", "dark-services"},
		Format: func(v []float64) string {
			return fmt.Sprintf("%.1f s, %.0f writes; %s, %s; %.0f", v[0], v[1], mib(v[2]), mib(v[3]), v[4])
		},
	}}
}

// Headlines are the page's rows, in order.
var Headlines = append(append(append(append(append(coldStartRows("BenchmarkColdStartOneAtATimeOnTheRealNode", "on the real node, one app at a time"),
	kwokColdStartRows()...), fleetRows(200, "200")...), fleetRows(1000, "1,000")...), fleetRows(10000, "10,000")...),
	Headline{
		Figure:    "The cold-start soak on kwok, every client path, a resolver pod deleted and the apiserver killed once under held requests: cold starts, failed; beyond the new pod's Ready p99 / max outside the fault rounds; max in them",
		Benchmark: "BenchmarkColdStartSoak",
		Metrics:   []string{"cold-starts", "failed", "beyond-ready-p99-ms", "beyond-ready-max-ms", "fault-beyond-ready-max-ms"},
		Format: func(v []float64) string {
			return fmt.Sprintf("%.0f, %.0f failed; %s / %s; %s", v[0], v[1], ms(v[2]), ms(v[3]), ms(v[4]))
		},
	},
	Headline{
		Figure:    "An app that is ready 5 minutes after its start, 1,000 requests held for it by short name, ClusterIP, ingress and HTTP/2: errors; worst answer beyond its first readiness 200",
		Benchmark: "BenchmarkSlowStartOnTheRealNode",
		Metrics:   []string{"errors", "short-name-beyond-first-200-max-ms", "cluster-ip-beyond-first-200-max-ms", "ingress-beyond-first-200-max-ms", "http2-beyond-first-200-max-ms"},
		Format: func(v []float64) string {
			return fmt.Sprintf("%.0f errors; %s", v[0], ms(max(v[1], v[2], v[3], v[4])))
		},
	},
	Headline{
		Figure:    "The same: the resolvers' live heap (both replicas, go_gc_heap_live_bytes) before, after their first collection with the 1,000 held, and its growth while they stayed held; the slowest 503 past the Service's bound (after the request was sent); the longest the wake status showed another stage than the pod's",
		Benchmark: "BenchmarkSlowStartOnTheRealNode",
		Metrics:   []string{"resolver-live-heap-before-MiB", "resolver-live-heap-held-first-MiB", "resolver-live-heap-growth-while-held-MiB", "past-bound-503-max-ms", "stage-mismatch-max-ms"},
		Format: func(v []float64) string {
			return fmt.Sprintf("%s → %s (growth %s); %s; %s", mib(v[0]), mib(v[1]), mib(v[2]), ms(v[3]), ms(v[4]))
		},
	},
	Headline{
		Figure:    "The resolver's heap and stacks holding 2,000 plain requests (the default --global-queue; in one process, after a collection), per held request, and its growth while they stayed held 5 s",
		Benchmark: "BenchmarkHeldMemory/held=2000",
		Metrics:   []string{"MiB-heap+stacks", "KiB/held-request", "MiB-growth-while-held"},
		Format: func(v []float64) string {
			return fmt.Sprintf("%s, %.1f KiB each (growth %.1f MiB)", mib(v[0]), v[1], v[2])
		},
	},
)

// TableStart and TableEnd enclose the table on the page.
const (
	TableStart = "<!-- results table: written by `make bench-page` from docs/benchmarks/results.json; test/release checks it -->"
	TableEnd   = "<!-- end of results table -->"
)

// Table is the page's table for f: a row per headline whose benchmark has
// a run in f with every metric the row needs, and the runs' details
// (date, commit, machine, load, command) once per benchmark below it.
func Table(f *File) string {
	var b strings.Builder
	b.WriteString("| figure | value | run |\n|---|---|---|\n")
	var runs []string
	seen := map[string]bool{}
	for _, h := range Headlines {
		run, ok := f.Runs[h.Benchmark]
		if !ok {
			continue
		}
		values := make([]float64, len(h.Metrics))
		complete := true
		for i, m := range h.Metrics {
			v, ok := run.Metrics[m]
			complete = complete && ok
			values[i] = v
		}
		if !complete {
			continue
		}
		if !seen[h.Benchmark] {
			seen[h.Benchmark] = true
			runs = append(runs, h.Benchmark)
		}
		fmt.Fprintf(&b, "| %s | %s | [%s](#%s) |\n", h.Figure, h.Format(values), h.Benchmark, anchor(h.Benchmark))
	}
	for _, name := range runs {
		r := f.Runs[name]
		fmt.Fprintf(&b, "\n#### %s\n%s, commit %s, %s; load average %s before it (%s): `%s`\n", name, r.Date, r.Commit, r.Machine, r.Load, r.Package, r.Command)
	}
	return b.String()
}

// Replace returns page with the text between TableStart and TableEnd
// replaced by table; an error when the markers are missing.
func Replace(page, table string) (string, error) {
	i := strings.Index(page, TableStart)
	j := strings.Index(page, TableEnd)
	if i < 0 || j < i {
		return "", fmt.Errorf("the page has no %q … %q", TableStart, TableEnd)
	}
	return page[:i+len(TableStart)] + "\n" + table + page[j:], nil
}

// anchor is the #fragment of a heading of text, as GitHub makes it:
// lower case, spaces as hyphens, letters, digits, hyphens and
// underscores kept, the rest dropped.
func anchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ' || r == '-':
			b.WriteRune('-')
		case r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
