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
	"github.com/elasti-dev/elasti/pkg/resolver/identify"
)

// Metrics are the resolver's Prometheus metrics, all prefixed
// elasti_resolver_, grouped by the layer that records them: each layer's
// package declares its series and makes every labelled one exist from the
// start, so a rate over it is 0, not absent, before the first event.
type Metrics struct {
	Identify    identify.Metrics
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
		Identify:    identify.NewMetrics(),
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
	for _, c := range slices.Concat(m.Identify.Collectors(), m.Hold.Collectors(),
		m.Answer.Collectors(), m.Forward.Collectors(), m.Admission.Collectors(), m.DirectProbe.Collectors()) {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}
