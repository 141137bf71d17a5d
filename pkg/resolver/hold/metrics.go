package hold

import "github.com/prometheus/client_golang/prometheus"

// Label values. Every label is bounded: there are no per-service labels.
const (
	// How a wake request to the operator ended
	// (elasti_resolver_operator_notifications_total).
	OutcomeSuccess     = "success"
	OutcomeRejected    = "rejected"
	OutcomeUnreachable = "unreachable"
	// OutcomeUnauthorized is the operator refusing the wake token (or its
	// absence): the two are configured with different tokens.
	OutcomeUnauthorized = "unauthorized"

	// What released a held request (elasti_resolver_held_releases_total).
	ReleasedByDirectProbe   = "direct_probe"
	ReleasedByPodReady      = "pod_ready"
	ReleasedByEndpointReady = "endpoint_ready"
)

// Metrics are the hold's: requests held, how long, how they ended, and
// the wake requests the holds make.
type Metrics struct {
	// Queued is the number of requests held right now.
	Queued prometheus.Gauge
	// ColdStartWait is the time from holding a request until a Ready
	// endpoint released it.
	ColdStartWait prometheus.Histogram
	// Timeouts counts holds that timed out: HTTP requests answered 504
	// (503 past their Service's own timeout), TCP connections closed.
	Timeouts prometheus.Counter
	// HeldReleases counts held requests and connections released to a
	// pod, by what said the pod was ready: its direct check
	// (direct_probe), the kubelet's Ready on the pod (pod_ready) or its
	// Ready endpoint (endpoint_ready).
	HeldReleases *prometheus.CounterVec
	// WakeRequests counts wake requests to the operator by outcome; the
	// metric keeps its old name, a contract with dashboards.
	WakeRequests *prometheus.CounterVec
}

// NewMetrics makes the hold's series, each labelled series existing from
// the start.
func NewMetrics() Metrics {
	m := Metrics{
		Queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "elasti_resolver_queued_requests",
			Help: "Requests held while their service has no Ready endpoint.",
		}),
		ColdStartWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "elasti_resolver_cold_start_wait_seconds",
			Help:    "Seconds a request was held until its service had a Ready endpoint.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300},
		}),
		Timeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "elasti_resolver_queue_timeouts_total",
			Help: "Holds that timed out because no endpoint became Ready in time: HTTP requests answered 504 (503 past their Service's own spec.hold.timeout), TCP connections closed.",
		}),
		HeldReleases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_held_releases_total",
			Help: "Held requests and connections released to a pod, by what said the pod was ready: its readiness checks run by the resolver (direct_probe), the kubelet's Ready on the pod before its endpoint was (pod_ready), or its Ready endpoint (endpoint_ready).",
		}, []string{"released_by"}),
		WakeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_operator_notifications_total",
			Help: "Wake requests sent to the operator, by outcome.",
		}, []string{"outcome"}),
	}
	for _, by := range []string{ReleasedByDirectProbe, ReleasedByPodReady, ReleasedByEndpointReady} {
		m.HeldReleases.WithLabelValues(by)
	}
	for _, o := range []string{OutcomeSuccess, OutcomeRejected, OutcomeUnreachable, OutcomeUnauthorized} {
		m.WakeRequests.WithLabelValues(o)
	}
	return m
}

// Collectors are the series, for a registry.
func (m Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Queued, m.ColdStartWait, m.Timeouts, m.HeldReleases, m.WakeRequests}
}
