package answer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
)

// Metrics count what the resolver answered itself: a probeResponse rule,
// the waiting page, a Service it is not in front of.
type Metrics struct {
	// ProbeResponses counts requests answered by a probeResponse rule.
	ProbeResponses prometheus.Counter
	// WaitingPages counts browser navigations answered with the waiting
	// page (waitpage.go).
	WaitingPages prometheus.Counter
	// WakeStatuses counts requests answered with the wake status they
	// asked for with Prefer (wake.go).
	WakeStatuses prometheus.Counter
	// NotInFront counts requests answered 404 (http) and connections
	// closed (tcp) because the resolver was not in front of their Service.
	NotInFront *prometheus.CounterVec
}

// NewMetrics makes the answers' series, each labelled series existing
// from the start.
func NewMetrics() Metrics {
	m := Metrics{
		ProbeResponses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "elasti_resolver_probe_responses_total",
			Help: "Requests answered by a probeResponse rule without waking the target.",
		}),
		WaitingPages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "elasti_resolver_waiting_pages_total",
			Help: "Browser navigations held for a waking Service that were answered with the waiting page (503, reloading itself) after --waiting-page-after without a Ready pod.",
		}),
		WakeStatuses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "elasti_resolver_wake_statuses_total",
			Help: "Requests held for a waking Service that were answered with the wake status (503, JSON) they asked for with Prefer: respond-async or wait=N.",
		}),
		NotInFront: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_not_in_front_total",
			Help: "Requests answered 404 (protocol http) or connections closed (tcp) because the resolver was not in front of their Service: no resolver EndpointSlice, and none removed within the drain.",
		}, []string{"protocol"}),
	}
	for _, p := range []string{admission.ProtocolHTTP, admission.ProtocolTCP} {
		m.NotInFront.WithLabelValues(p)
	}
	return m
}

// Collectors are the series, for a registry.
func (m Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.ProbeResponses, m.WaitingPages, m.WakeStatuses, m.NotInFront}
}
