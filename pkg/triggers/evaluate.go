package triggers

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// Verdict is the outcome of evaluating one ElastiService's triggers.
type Verdict struct {
	// Idle is true only when every trigger is below its threshold.
	Idle bool
	// Reason is bounded, for metrics and conditions: ReasonIdle,
	// ReasonAboveThreshold, ReasonNoTriggers, or the failure's reason.
	Reason Reason
	// Detail is a human-readable explanation for logs and events.
	Detail string
}

// Evaluate decides whether an ElastiService is idle. It parses every trigger
// first, so a typo or a server d does not allow anywhere is reported before
// any query runs; checks each
// distinct Prometheus has been up for the whole cooldown; then runs every
// trigger's query. Any error yields a not-idle verdict with the error's
// reason and the error itself.
//
// Triggers run one after another: the caller evaluates many ElastiServices
// in parallel, and one service's few queries in parallel would only multiply
// the load on Prometheus at the same moment. c may be nil.
func Evaluate(ctx context.Context, c *Client, triggers []v1alpha1.ScaleTrigger, cooldown time.Duration, d Defaults) (Verdict, error) {
	if len(triggers) == 0 {
		return Verdict{Reason: ReasonNoTriggers, Detail: "no triggers, so nothing says the service is idle"}, nil
	}

	if len(triggers) > v1alpha1.MaxTriggers {
		// Refused before anything is parsed or queried, so an oversized
		// list costs nothing each poll.
		return failed(errorf(ReasonInvalidMetadata, "%d triggers, more than the %d allowed", len(triggers), v1alpha1.MaxTriggers))
	}
	parsed := make([]Prometheus, len(triggers))
	for i, t := range triggers {
		if t.Type != v1alpha1.TriggerTypePrometheus {
			return failed(errorf(ReasonInvalidMetadata, "triggers[%d]: unsupported type %q; only %q is supported",
				i, truncate(t.Type, 64), v1alpha1.TriggerTypePrometheus))
		}
		p, err := ParsePrometheus(t.Metadata, d)
		if err != nil {
			return failed(fmt.Errorf("triggers[%d]: %w", i, err))
		}
		// Refused here, with the others parsed but before any health check
		// or query: a server the operator may not query gets no request.
		if !d.allowed(p) {
			return failed(errorf(ReasonServerNotAllowed,
				"triggers[%d]: prometheus at %s is not the operator's default server and not in its allowed servers (--prometheus-allowed-servers); nothing was sent to it",
				i, redactURL(p.ServerAddress)))
		}
		parsed[i] = p
	}

	// Triggers usually share one Prometheus; a memo checks it once. A
	// poll's client brings one shared with the other ElastiServices.
	if c == nil || c.Health == nil {
		var own Client
		if c != nil {
			own = *c
		}
		own.Health = &HealthMemo{}
		c = &own
	}
	for i, p := range parsed {
		healthy, err := c.Healthy(ctx, p, cooldown)
		if err != nil {
			return failed(fmt.Errorf("triggers[%d]: health check: %w", i, err))
		}
		if !healthy {
			return failed(errorf(ReasonPrometheusDown,
				"triggers[%d]: prometheus at %s has not been up{%s} for the whole cooldown of %s; its data may have gaps that look idle",
				i, redactURL(p.ServerAddress), p.UptimeFilter, cooldown))
		}
	}

	// Every trigger runs even after one is busy, so a broken query is
	// reported while the service is busy rather than when it goes quiet.
	busy := -1
	var busyValue float64
	for i, p := range parsed {
		v, err := c.Query(ctx, p, p.Query)
		if err != nil {
			return failed(fmt.Errorf("triggers[%d]: %w", i, err))
		}
		if !(v < p.Threshold) && busy < 0 {
			busy, busyValue = i, v
		}
	}
	if busy >= 0 {
		return Verdict{
			Reason: ReasonAboveThreshold,
			Detail: fmt.Sprintf("triggers[%d]: value %s is not below threshold %s",
				busy, formatFloat(busyValue), formatFloat(parsed[busy].Threshold)),
		}, nil
	}
	return Verdict{
		Idle:   true,
		Reason: ReasonIdle,
		Detail: fmt.Sprintf("all %d triggers below threshold", len(parsed)),
	}, nil
}

func failed(err error) (Verdict, error) {
	return Verdict{Reason: ReasonOf(err), Detail: err.Error()}, err
}

func formatFloat(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64)
}
