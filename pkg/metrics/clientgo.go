package metrics

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// clientGo adapts client-go's request metrics. Labels are the HTTP verb and
// status code only: client-go also offers the request URL and host, which
// would make every object a series.
type clientGo struct {
	latency     *prometheus.HistogramVec
	results     *prometheus.CounterVec
	rateLimiter *prometheus.HistogramVec
}

func newClientGo() *clientGo {
	return &clientGo{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_request_duration_seconds", Help: "Latency of requests to the apiserver, by verb.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"verb"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total", Help: "Requests to the apiserver, by method and status code.",
		}, []string{"method", "code"}),
		rateLimiter: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_rate_limiter_duration_seconds", Help: "Time requests waited for the client-side rate limiter, by verb.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"verb"}),
	}
}

func (c *clientGo) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.latency, c.results, c.rateLimiter}
}

type latencyAdapter struct{ h *prometheus.HistogramVec }

func (a latencyAdapter) Observe(_ context.Context, verb string, _ url.URL, d time.Duration) {
	a.h.WithLabelValues(verb).Observe(d.Seconds())
}

type resultAdapter struct{ c *prometheus.CounterVec }

func (a resultAdapter) Increment(_ context.Context, code, method, _ string) {
	a.c.WithLabelValues(method, code).Inc()
}

var registerClientGo sync.Once

// RegisterClientGoMetrics makes client-go report to these metrics. client-go
// keeps one global set per process, so only the first call takes effect.
func (m *Operator) RegisterClientGoMetrics() {
	registerClientGo.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestLatency:     latencyAdapter{m.clientGo.latency},
			RequestResult:      resultAdapter{m.clientGo.results},
			RateLimiterLatency: latencyAdapter{m.clientGo.rateLimiter},
		})
	})
}
