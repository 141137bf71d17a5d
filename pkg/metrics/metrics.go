// Package metrics defines the operator's Prometheus metrics on a registry of
// its own. Every label takes values from a small fixed set (outcomes and
// reasons), never error strings, URLs or free text.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/command"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// Operator holds the operator's metrics.
type Operator struct {
	Registry *prometheus.Registry

	// ScaleCounter counts scale operations; the name is KubeElasti's.
	ScaleCounter *prometheus.CounterVec
	// WakeRequestDuration times scale-from-zero requests by outcome.
	WakeRequestDuration *prometheus.HistogramVec
	// IdleEvaluations counts the poller's verdicts by outcome and, for
	// trigger errors, the bounded failure reason.
	IdleEvaluations *prometheus.CounterVec
	// PollerLastRun and PollerDuration show the poller is alive.
	PollerLastRun  prometheus.Gauge
	PollerDuration prometheus.Histogram
	// Reconcile times ElastiService syncs; the name is KubeElasti's.
	Reconcile *prometheus.HistogramVec
	// Mode is 1 for proxy and 0 for serve, one series per ElastiService;
	// the name is KubeElasti's.
	Mode *prometheus.GaugeVec
	// ColdStart times a wake: from the scale request to serve mode.
	ColdStart prometheus.Histogram

	// Queues reports workqueue metrics for every named queue.
	Queues workqueue.MetricsProvider

	queues   *queueMetrics
	clientGo *clientGo

	mu      sync.Mutex
	pending map[types.NamespacedName]time.Time
}

// RegisterResolverPorts exports how much of --resolver-port-range is held,
// read from ports at each scrape, so exhaustion can be alerted on before an
// ElastiService reports it.
func (m *Operator) RegisterResolverPorts(ports func() (inUse, size int)) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "elasti_operator_resolver_ports_in_use",
			Help: "Resolver ports assigned to Service ports (see --resolver-port-range).",
		}, func() float64 { n, _ := ports(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "elasti_operator_resolver_ports_capacity",
			Help: "Ports in --resolver-port-range.",
		}, func() float64 { _, n := ports(); return float64(n) }),
	)
}

// NewOperator registers the operator's metrics, plus Go and process
// collectors, on a new registry.
func NewOperator() *Operator {
	m := &Operator{
		Registry: prometheus.NewRegistry(),
		ScaleCounter: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_operator_scale_counter",
			Help: "Scale operations on targets, by direction (up, down) and result (success, failure).",
		}, []string{"direction", "result"}),
		WakeRequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "elasti_operator_scale_request_duration_seconds",
			Help:    "Time to answer a scale-from-zero request, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"outcome"}),
		IdleEvaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_operator_scale_to_zero_evaluations_total",
			Help: "Idle-poller verdicts per ElastiService, by outcome and (for trigger errors) reason.",
		}, []string{"outcome", "reason"}),
		PollerLastRun: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "elasti_operator_poller_last_run_timestamp_seconds",
			Help: "Unix time at which the last idle poll started.",
		}),
		PollerDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "elasti_operator_poller_duration_seconds",
			Help:    "Duration of one idle poll over every ElastiService.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		Reconcile: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "elasti_operator_reconcile",
			Help:    "Duration in seconds of ElastiService syncs, by result (success, waiting for a missing object, requeued to finish later, error).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"result"}),
		Mode: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "elasti_operator_mode",
			Help: "Mode of each ElastiService: 1 proxy (target at zero, traffic to the resolver), 0 serve.",
		}, []string{"namespace", "name"}),
		ColdStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "elasti_operator_cold_start_seconds",
			Help:    "Time from a scale-from-zero request to the ElastiService serving again.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}),
		queues:   newQueueMetrics(),
		clientGo: newClientGo(),
		pending:  map[types.NamespacedName]time.Time{},
	}
	m.Queues = m.queues
	m.Registry.MustRegister(command.RuntimeCollectors()...)
	m.Registry.MustRegister(
		m.ScaleCounter, m.WakeRequestDuration, m.IdleEvaluations, m.PollerLastRun, m.PollerDuration,
		m.Reconcile, m.Mode, m.ColdStart,
	)
	m.Registry.MustRegister(m.queues.collectors()...)
	m.Registry.MustRegister(m.clientGo.collectors()...)
	return m
}

// ObserveSync is the controller's per-sync hook.
func (m *Operator) ObserveSync(d time.Duration, result outcome.Sync) {
	m.Reconcile.WithLabelValues(string(result)).Observe(d.Seconds())
}

// ObserveMode records an ElastiService's current mode.
func (m *Operator) ObserveMode(es types.NamespacedName, mode string) {
	switch mode {
	case elastiv1alpha1.ModeProxy:
		m.Mode.WithLabelValues(es.Namespace, es.Name).Set(1)
	case elastiv1alpha1.ModeServe:
		m.Mode.WithLabelValues(es.Namespace, es.Name).Set(0)
	}
}

// ForgetElastiService drops a deleted ElastiService's series.
func (m *Operator) ForgetElastiService(es types.NamespacedName) {
	m.Mode.DeleteLabelValues(es.Namespace, es.Name)
	m.mu.Lock()
	delete(m.pending, es)
	m.mu.Unlock()
}

// staleWake is how old a cold start's beginning may be before a new wake
// replaces it: far beyond any request the resolver holds (120 s by
// default). A wake whose end was never seen, because its ElastiService's
// status never left serve (its switch to proxy was still waiting to be
// written under a backlog), would otherwise lend its start to the next.
const staleWake = 15 * time.Minute

// WakeStarted marks the start of a cold start, when a request scaled es up.
func (m *Operator) WakeStarted(es types.NamespacedName, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if start, ok := m.pending[es]; !ok || at.Sub(start) > staleWake {
		m.pending[es] = at
	}
}

// ModeSwitched ends a cold start when es reaches serve mode.
func (m *Operator) ModeSwitched(es types.NamespacedName, mode string, at time.Time) {
	if mode != elastiv1alpha1.ModeServe {
		return
	}
	m.mu.Lock()
	start, ok := m.pending[es]
	delete(m.pending, es)
	m.mu.Unlock()
	if ok {
		m.ColdStart.Observe(at.Sub(start).Seconds())
	}
}

// ObserveWakeRequest is the scale server's hook.
func (m *Operator) ObserveWakeRequest(result outcome.Wake, d time.Duration) {
	m.WakeRequestDuration.WithLabelValues(string(result)).Observe(d.Seconds())
	switch result {
	case outcome.WakeScaled:
		m.ScaleCounter.WithLabelValues("up", "success").Inc()
	case outcome.WakeFailed:
		m.ScaleCounter.WithLabelValues("up", "failure").Inc()
	}
}

// ObserveIdleEvaluation is the poller's per-ElastiService hook.
func (m *Operator) ObserveIdleEvaluation(result outcome.Idle, reason triggers.Reason) {
	m.IdleEvaluations.WithLabelValues(string(result), string(reason)).Inc()
	switch result {
	case outcome.IdleScaledToZero:
		m.ScaleCounter.WithLabelValues("down", "success").Inc()
	case outcome.IdleScaleFailed:
		m.ScaleCounter.WithLabelValues("down", "failure").Inc()
	}
}

// ObservePoll is the poller's per-run hook.
func (m *Operator) ObservePoll(start time.Time, d time.Duration) {
	m.PollerLastRun.Set(float64(start.Unix()))
	m.PollerDuration.Observe(d.Seconds())
}
