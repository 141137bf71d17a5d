package command

import (
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// RuntimeCollectors are the Go runtime's and the process's metrics, for a
// binary's registry: client_golang's defaults, and go_gc_heap_live_bytes,
// the heap the last GC found reachable. A process run with GOMEMLIMIT at
// its container's limit (as manifests/ run both) lets garbage pile up
// until it nears that limit, so its RSS and go_memstats_heap_alloc_bytes
// say little about what it keeps; the live heap says what holding
// requests or watching Services costs.
func RuntimeCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
}
