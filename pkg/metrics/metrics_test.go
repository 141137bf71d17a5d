package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/elasti-dev/elasti/pkg/idle"
	"github.com/elasti-dev/elasti/pkg/scaleserver"
	"github.com/elasti-dev/elasti/pkg/triggers"
)

// kubeElastiNames break Prometheus naming rules, but existing KubeElasti
// dashboards query them, so they keep their names.
var kubeElastiNames = map[string]bool{"elasti_operator_scale_counter": true}

func TestMetricsPassLintAndMove(t *testing.T) {
	m := NewOperator()
	m.ObserveScaleRequest(scaleserver.OutcomeScaled, 3*time.Millisecond)
	m.ObserveScaleRequest(scaleserver.OutcomeFailed, time.Millisecond)
	m.ObserveIdleEvaluation(idle.OutcomeTriggerError, triggers.ReasonUnreachable)
	m.ObserveIdleEvaluation(idle.OutcomeScaledToZero, "")
	m.ObservePoll(time.Unix(1700000000, 0), 20*time.Millisecond)

	problems, err := testutil.GatherAndLint(m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if kubeElastiNames[p.Metric] {
			continue
		}
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	if got := testutil.ToFloat64(m.ScaleCounter.WithLabelValues("up", "success")); got != 1 {
		t.Errorf("scale up successes = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.ScaleCounter.WithLabelValues("down", "success")); got != 1 {
		t.Errorf("scale down successes = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.IdleEvaluations.WithLabelValues(idle.OutcomeTriggerError, string(triggers.ReasonUnreachable))); got != 1 {
		t.Errorf("trigger errors = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.PollerLastRun); got != 1700000000 {
		t.Errorf("poller last run = %v", got)
	}
}
