// Package metrics defines the operator's Prometheus metrics on a registry of
// its own. Every label takes values from a small fixed set (outcomes and
// reasons), never error strings, URLs or free text.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/elasti-dev/elasti/pkg/idle"
	"github.com/elasti-dev/elasti/pkg/scaleserver"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// Operator holds the operator's metrics.
type Operator struct {
	Registry *prometheus.Registry

	// ScaleCounter counts scale operations; the name is KubeElasti's.
	ScaleCounter *prometheus.CounterVec
	// ScaleRequestDuration times scale-from-zero requests by outcome.
	ScaleRequestDuration *prometheus.HistogramVec
	// IdleEvaluations counts the poller's verdicts by outcome and, for
	// trigger errors, the bounded failure reason.
	IdleEvaluations *prometheus.CounterVec
	// PollerLastRun and PollerDuration show the poller is alive.
	PollerLastRun  prometheus.Gauge
	PollerDuration prometheus.Histogram
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
		ScaleRequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
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
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.ScaleCounter, m.ScaleRequestDuration, m.IdleEvaluations, m.PollerLastRun, m.PollerDuration,
	)
	return m
}

// ObserveScaleRequest is the scale server's hook.
func (m *Operator) ObserveScaleRequest(outcome string, d time.Duration) {
	m.ScaleRequestDuration.WithLabelValues(outcome).Observe(d.Seconds())
	switch outcome {
	case scaleserver.OutcomeScaled:
		m.ScaleCounter.WithLabelValues("up", "success").Inc()
	case scaleserver.OutcomeFailed:
		m.ScaleCounter.WithLabelValues("up", "failure").Inc()
	}
}

// ObserveIdleEvaluation is the poller's per-ElastiService hook.
func (m *Operator) ObserveIdleEvaluation(outcome string, reason triggers.Reason) {
	m.IdleEvaluations.WithLabelValues(outcome, string(reason)).Inc()
	switch outcome {
	case idle.OutcomeScaledToZero:
		m.ScaleCounter.WithLabelValues("down", "success").Inc()
	case idle.OutcomeScaleFailed:
		m.ScaleCounter.WithLabelValues("down", "failure").Inc()
	}
}

// ObservePoll is the poller's per-run hook.
func (m *Operator) ObservePoll(start time.Time, d time.Duration) {
	m.PollerLastRun.Set(float64(start.Unix()))
	m.PollerDuration.Observe(d.Seconds())
}
