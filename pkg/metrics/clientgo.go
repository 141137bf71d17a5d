package metrics

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// clientGo adapts client-go's request metrics. Labels are the HTTP verb,
// the status code and, for latency, the resource: client-go offers the
// request URL and host, which would make every object a series, so the
// resource is read from the URL's path and kept only if it is one the
// operator's role names (knownResources), else "other".
type clientGo struct {
	latency     *prometheus.HistogramVec
	results     *prometheus.CounterVec
	rateLimiter *prometheus.HistogramVec
}

func newClientGo() *clientGo {
	return &clientGo{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_request_duration_seconds", Help: "Latency of requests to the apiserver, by verb and resource.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"verb", "resource"}),
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

// requestLatency is latencyAdapter with the request's resource.
type requestLatency struct{ h *prometheus.HistogramVec }

func (a requestLatency) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	a.h.WithLabelValues(verb, resourceOf(u.Path)).Observe(d.Seconds())
}

// knownResources are the resources (and subresources) in the operator's
// role: the resource label's values, with "other".
var knownResources = map[string]bool{
	"customresourcedefinitions": true, "deployments": true, "deployments/scale": true,
	"elastiservices": true, "elastiservices/status": true, "endpointslices": true,
	"events": true, "horizontalpodautoscalers": true, "leases": true, "pods": true,
	"replicasets": true, "rollouts": true, "rollouts/scale": true, "scaledobjects": true,
	"services": true, "statefulsets": true, "statefulsets/scale": true,
}

// resourceOf is the resource a request's path names ("services",
// "deployments/scale"), or "other" for any path that is not one of the
// operator's resources: /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]] and
// /apis/GROUP/VERSION/... alike.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return "other"
	}
	resource := parts[0]
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	if !knownResources[resource] {
		return "other"
	}
	return resource
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
			RequestLatency:     requestLatency{m.clientGo.latency},
			RequestResult:      resultAdapter{m.clientGo.results},
			RateLimiterLatency: latencyAdapter{m.clientGo.rateLimiter},
		})
	})
}
