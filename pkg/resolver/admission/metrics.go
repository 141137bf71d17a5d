package admission

import "github.com/prometheus/client_golang/prometheus"

// The protocols a client speaks, as the metrics label them: HTTP, or any
// other TCP on a resolver port of its own.
const (
	ProtocolHTTP = "http"
	ProtocolTCP  = "tcp"
)

// Metrics are admission's series: connections and requests refused by a
// bound, a share or a rate. The resolver's Metrics embeds them.
type Metrics struct {
	// Overflow counts requests refused and connections closed because a
	// hold bound was reached, by scope (service, global, client or bytes).
	Overflow *prometheus.CounterVec
	// WakeRateLimited counts requests answered 429 (http) and connections
	// closed (tcp) because their client had started its share of wakes.
	WakeRateLimited *prometheus.CounterVec
	// WakeRateSources is the number of client addresses whose wakes are
	// being counted, read from the wake limiter when scraped.
	WakeRateSources prometheus.GaugeFunc
	// Connections is the number of client connections open on the proxy
	// port and the resolver ports; ConnectionsRefused counts those closed
	// at once because Config.MaxConnections were open, or
	// Config.MaxConnectionsPerSource of the client's address.
	Connections        prometheus.Gauge
	ConnectionsRefused prometheus.Counter
}

// NewMetrics makes admission's series, each labelled series existing from
// the start. wakeSources, when not nil, counts the client addresses the
// wake limit tracks (WakeLimiter.Sources).
func NewMetrics(wakeSources func() int) Metrics {
	m := Metrics{
		Overflow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_queue_overflow_total",
			Help: "Requests refused (503; 429 for scope client) or connections closed because a hold bound was reached, by scope: service, global, client (one address's share), bytes (held header bytes).",
		}, []string{"scope"}),
		WakeRateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_wake_rate_limited_total",
			Help: "Requests answered 429 (protocol http) or connections closed (tcp) because their client address started more wakes than --source-wake-rate and --source-wake-burst allow.",
		}, []string{"protocol"}),
		WakeRateSources: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "elasti_resolver_wake_rate_limit_sources",
			Help: "Client addresses whose recent wakes the per-source wake rate limit tracks.",
		}, func() float64 {
			if wakeSources == nil {
				return 0
			}
			return float64(wakeSources())
		}),
		Connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "elasti_resolver_client_connections",
			Help: "Client connections open on the proxy port and the resolver ports.",
		}),
		ConnectionsRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "elasti_resolver_client_connections_refused_total",
			Help: "Client connections closed as soon as they were accepted because --max-connections, or --max-connections-per-source of the client address, were open.",
		}),
	}
	for _, s := range []string{ScopeService, ScopeGlobal, ScopeClient, ScopeBytes, ScopeNamespace, ScopeRequests} {
		m.Overflow.WithLabelValues(s)
	}
	for _, p := range []string{ProtocolHTTP, ProtocolTCP} {
		m.WakeRateLimited.WithLabelValues(p)
	}
	return m
}

// Collectors are the series, for a registry.
func (m Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Overflow, m.WakeRateLimited, m.WakeRateSources, m.Connections, m.ConnectionsRefused}
}
