package identify

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the resolver ports' listeners'.
type Metrics struct {
	// Listeners is the number of resolver ports open.
	Listeners prometheus.Gauge
	// ListenFailures counts failed attempts to open a resolver port.
	ListenFailures prometheus.Counter
}

// NewMetrics makes the listeners' series.
func NewMetrics() Metrics {
	return Metrics{
		Listeners: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "elasti_resolver_port_listeners",
			Help: "Resolver ports open for per-port routing.",
		}),
		ListenFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "elasti_resolver_port_listen_failures_total",
			Help: "Failed attempts to open a resolver port; each is retried.",
		}),
	}
}

// Collectors are the series, for a registry.
func (m Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Listeners, m.ListenFailures}
}
