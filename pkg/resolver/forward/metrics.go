package forward

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
)

// What became of a TCP connection on a resolver port
// (elasti_resolver_spliced_connections_total).
const (
	SplicedSuccess     = "success"
	SplicedUnreachable = "unreachable"
)

// Metrics are forwarding's series: requests proxied, connections
// spliced, connects that failed.
type Metrics struct {
	// Proxied counts forwarded requests by the class of the status the
	// backend (or the resolver, on a failed connection) answered.
	Proxied *prometheus.CounterVec
	// Spliced counts TCP connections on resolver ports by whether a pod
	// accepted them (success) or none did before the deadline
	// (unreachable).
	Spliced *prometheus.CounterVec
	// ConnectFailures counts connect attempts to pods that failed
	// (refused, unreachable or timed out), including those a later attempt
	// made good.
	ConnectFailures prometheus.Counter
	// EndpointsGone counts requests (http) and connections (tcp) whose
	// Service's Ready pods all went away before one accepted them: they
	// are held again, and the hold wakes the Service (ErrEndpointsGone).
	EndpointsGone *prometheus.CounterVec
}

// NewMetrics makes forwarding's series, each labelled series existing
// from the start.
func NewMetrics() Metrics {
	m := Metrics{
		Proxied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_proxied_requests_total",
			Help: "Requests forwarded to a pod, by response status class.",
		}, []string{"code_class"}),
		Spliced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_spliced_connections_total",
			Help: "TCP connections on resolver ports spliced to a pod (success) or closed because no pod accepted them (unreachable).",
		}, []string{"outcome"}),
		ConnectFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "elasti_resolver_pod_connect_failures_total",
			Help: "Connect attempts to a pod that failed (refused, unreachable or timed out), whether or not a later attempt got through.",
		}),
		EndpointsGone: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_endpoints_gone_total",
			Help: "Requests (protocol http) and connections (tcp) whose Service's Ready pods all went away before one accepted them, as when it is put to sleep under them; each is held again, which wakes the Service.",
		}, []string{"protocol"}),
	}
	for _, p := range []string{admission.ProtocolHTTP, admission.ProtocolTCP} {
		m.EndpointsGone.WithLabelValues(p)
	}
	for _, c := range []string{"1xx", "2xx", "3xx", "4xx", "5xx"} {
		m.Proxied.WithLabelValues(c)
	}
	for _, o := range []string{SplicedSuccess, SplicedUnreachable} {
		m.Spliced.WithLabelValues(o)
	}
	return m
}

// Collectors are the series, for a registry.
func (m Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Proxied, m.Spliced, m.ConnectFailures, m.EndpointsGone}
}

// codeClass maps a status code to its class label.
func codeClass(code int) string {
	switch {
	case code < 200:
		return "1xx"
	case code < 300:
		return "2xx"
	case code < 400:
		return "3xx"
	case code < 500:
		return "4xx"
	default:
		return "5xx"
	}
}
