package resolver

import (
	"errors"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/elasti-dev/elasti/pkg/resolver/admission"
	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/directprobe"
	"github.com/elasti-dev/elasti/pkg/resolver/forward"
	"github.com/elasti-dev/elasti/pkg/resolver/hold"
)

// Metrics are the resolver's Prometheus metrics, all prefixed
// elasti_resolver_, grouped by the layer that records them. The groups of
// the layers still in this package are embedded (m.Listeners); a layer's
// own package names its group (m.Hold.Queued).
type Metrics struct {
	PortMetrics
	// Hold, Answer, Forward, Admission and DirectProbe are the series of
	// the layers that are packages of their own, named as their layer.
	Hold        hold.Metrics
	Answer      answer.Metrics
	Forward     forward.Metrics
	Admission   admission.Metrics
	DirectProbe directprobe.Metrics
}

// NewMetrics creates the metrics and registers them on reg; a nil reg
// leaves them unregistered. Registering twice on one registry is an error.
// wakeSources, when not nil, counts the client addresses the wake rate
// limit tracks.
func NewMetrics(reg prometheus.Registerer, wakeSources func() int) (*Metrics, error) {
	m := &Metrics{
		PortMetrics: newPortMetrics(),
		Hold:        hold.NewMetrics(),
		Answer:      answer.NewMetrics(),
		Forward:     forward.NewMetrics(),
		Admission:   admission.NewMetrics(wakeSources),
		DirectProbe: directprobe.NewMetrics(),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range slices.Concat(m.Hold.Collectors(), m.PortMetrics.collectors(),
		m.Answer.Collectors(), m.Forward.Collectors(), m.Admission.Collectors(), m.DirectProbe.Collectors()) {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// Each group below makes every labelled series of its own exist from the
// start, so a rate over it is 0, not absent, before the first event.

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
