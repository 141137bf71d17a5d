package directprobe

import "github.com/prometheus/client_golang/prometheus"

// Metrics are direct probing's series. The resolver's Metrics holds them.
type Metrics struct {
	// DirectProbeFallbacks counts pods direct probing left to the
	// kubelet's Ready, by reason (see the Fallback constants).
	DirectProbeFallbacks *prometheus.CounterVec
	// DirectProbeLead is how long before the resolver saw it Ready (pod
	// view or endpoint) a pod passed its direct check: what direct probing
	// saved.
	DirectProbeLead prometheus.Histogram
}

// NewMetrics makes direct probing's series, every fallback reason's from
// the start.
func NewMetrics() Metrics {
	m := Metrics{
		DirectProbeFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_direct_probe_fallbacks_total",
			Help: "Pods that direct probing left to the kubelet's Ready, by reason: exec, host, named_port, no_probe, host_network, pod_unreadable, pod_mismatch, bound.",
		}, []string{"reason"}),
		DirectProbeLead: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "elasti_resolver_direct_probe_lead_seconds",
			Help:    "Seconds from a starting pod passing the readiness checks the resolver ran to the resolver seeing it Ready (the kubelet's Ready on the pod, or its Ready endpoint, whichever it saw first): how much sooner direct probing released the held requests.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300},
		}),
	}
	for _, reason := range FallbackReasons {
		m.DirectProbeFallbacks.WithLabelValues(reason)
	}
	return m
}

// Collectors are the series, for a registry.
func (m Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.DirectProbeFallbacks, m.DirectProbeLead}
}
