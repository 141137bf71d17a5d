package resolver

import (
	"errors"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/directprobe"
	"github.com/elasti-dev/elasti/pkg/resolver/forward"
)

// Label values. Every label is bounded: there are no per-service labels.
const (
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

// Metrics are the resolver's Prometheus metrics, all prefixed
// elasti_resolver_, grouped by the layer that records them. The groups of
// the layers still in this package are embedded (m.Queued); a layer's own
// package names its group (m.Admission.Overflow).
type Metrics struct {
	HoldMetrics
	PortMetrics
	// Answer, Forward, Admission and DirectProbe are the series of the
	// layers that are packages of their own, named as their layer.
	Answer      answer.Metrics
	Forward     forward.Metrics
	Admission   admission.Metrics
	DirectProbe directprobe.Metrics
	// WakeRequests counts wake requests to the operator by outcome; the
	// metric keeps its old name, a contract with dashboards.
	WakeRequests *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg; a nil reg
// leaves them unregistered. Registering twice on one registry is an error.
// wakeSources, when not nil, counts the client addresses the wake rate
// limit tracks.
func NewMetrics(reg prometheus.Registerer, wakeSources func() int) (*Metrics, error) {
	m := &Metrics{
		HoldMetrics: newHoldMetrics(),
		PortMetrics: newPortMetrics(),
		Answer:      answer.NewMetrics(),
		Forward:     forward.NewMetrics(),
		Admission:   admission.NewMetrics(wakeSources),
		DirectProbe: directprobe.NewMetrics(),
		WakeRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_operator_notifications_total",
			Help: "Wake requests sent to the operator, by outcome.",
		}, []string{"outcome"}),
	}
	for _, o := range []string{OutcomeSuccess, OutcomeRejected, OutcomeUnreachable, OutcomeUnauthorized} {
		m.WakeRequests.WithLabelValues(o)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range slices.Concat(m.HoldMetrics.collectors(), m.PortMetrics.collectors(),
		m.Answer.Collectors(), m.Forward.Collectors(), m.Admission.Collectors(), m.DirectProbe.Collectors(), []prometheus.Collector{m.WakeRequests}) {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// Each group below makes every labelled series of its own exist from the
// start, so a rate over it is 0, not absent, before the first event.

// HoldMetrics are the hold's: requests held, how long, how they ended.
type HoldMetrics struct {
	// Queued is the number of requests held right now.
	Queued prometheus.Gauge
	// ColdStartWait is the time from holding a request until a Ready
	// endpoint released it.
	ColdStartWait prometheus.Histogram
	// Timeouts counts held requests answered 504.
	Timeouts prometheus.Counter
	// HeldReleases counts held requests and connections released to a
	// pod, by what said the pod was ready: its direct check
	// (direct_probe), the kubelet's Ready on the pod (pod_ready) or its
	// Ready endpoint (endpoint_ready).
	HeldReleases *prometheus.CounterVec
}

func newHoldMetrics() HoldMetrics {
	m := HoldMetrics{
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
			Help: "Held requests answered 504 because no endpoint became Ready in time.",
		}),
		HeldReleases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_held_releases_total",
			Help: "Held requests and connections released to a pod, by what said the pod was ready: its readiness checks run by the resolver (direct_probe), the kubelet's Ready on the pod before its endpoint was (pod_ready), or its Ready endpoint (endpoint_ready).",
		}, []string{"released_by"}),
	}
	for _, by := range []string{ReleasedByDirectProbe, ReleasedByPodReady, ReleasedByEndpointReady} {
		m.HeldReleases.WithLabelValues(by)
	}
	return m
}

func (m HoldMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Queued, m.ColdStartWait, m.Timeouts, m.HeldReleases}
}

// PortMetrics are the resolver ports' listeners'.
type PortMetrics struct {
	// Listeners is the number of resolver ports open.
	Listeners prometheus.Gauge
	// ListenFailures counts failed attempts to open a resolver port.
	ListenFailures prometheus.Counter
}

func newPortMetrics() PortMetrics {
	return PortMetrics{
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

func (m PortMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Listeners, m.ListenFailures}
}
