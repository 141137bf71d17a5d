package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// queueMetrics implements workqueue.MetricsProvider with the standard
// workqueue_* names, labelled by queue name only.
type queueMetrics struct {
	depthVec, unfinishedVec, longestVec *prometheus.GaugeVec
	addsVec, retriesVec                 *prometheus.CounterVec
	latencyVec, workVec                 *prometheus.HistogramVec
}

func newQueueMetrics() *queueMetrics {
	return &queueMetrics{
		depthVec: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "Current depth of the workqueue."}, []string{"name"}),
		addsVec:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Adds handled by the workqueue."}, []string{"name"}),
		latencyVec: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_queue_duration_seconds",
			Help: "How long an item stays in the workqueue before being processed.", Buckets: prometheus.ExponentialBuckets(1e-6, 10, 10)}, []string{"name"}),
		workVec: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_work_duration_seconds",
			Help: "How long processing an item from the workqueue takes.", Buckets: prometheus.ExponentialBuckets(1e-6, 10, 10)}, []string{"name"}),
		unfinishedVec: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_unfinished_work_seconds",
			Help: "Seconds of work in progress not yet observed by work_duration; large values suggest stuck workers."}, []string{"name"}),
		longestVec: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_longest_running_processor_seconds",
			Help: "Seconds the longest running processor of the workqueue has been running."}, []string{"name"}),
		retriesVec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total", Help: "Retries handled by the workqueue."}, []string{"name"}),
	}
}

func (q *queueMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{q.depthVec, q.addsVec, q.latencyVec, q.workVec, q.unfinishedVec, q.longestVec, q.retriesVec}
}

func (q *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depthVec.WithLabelValues(name)
}
func (q *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.addsVec.WithLabelValues(name)
}
func (q *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latencyVec.WithLabelValues(name)
}
func (q *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.workVec.WithLabelValues(name)
}
func (q *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinishedVec.WithLabelValues(name)
}
func (q *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longestVec.WithLabelValues(name)
}
func (q *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retriesVec.WithLabelValues(name)
}
