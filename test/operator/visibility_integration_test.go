package operator_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/controller"
	"github.com/elasti-dev/elasti/pkg/metrics"
	"github.com/elasti-dev/elasti/pkg/outcome"
	"github.com/elasti-dev/elasti/test/testenv"
)

// A sleep and a wake, with an operator restart in the middle of the sleep,
// show in status, in Events, in kubectl get's columns and in the fleet
// metrics: the sleep begun under one operator ends under the next.
func TestSleepAndWakeAreVisible(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	startScaling(e, prom)
	e.Resolver(1)
	e.App("web", 2)
	e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 2
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
	})
	e.Eventually("targetReplicas 2 while serving", func() (bool, string) {
		es := e.Get("web")
		return es.Status.Mode == elastiv1alpha1.ModeServe && es.Status.Replicas() == 2, testenv.Describe(es)
	})

	// Idle: the poller scales it to zero.
	e.WaitReplicas(elastiv1alpha1.KindDeployment, "web", 0)
	e.WaitMode("web", elastiv1alpha1.ModeProxy)
	var asleep *elastiv1alpha1.ElastiService
	e.Eventually("lastScaledDownTime recorded", func() (bool, string) {
		asleep = e.Get("web")
		return asleep.Status.LastScaledDownTime != nil && asleep.Status.Asleep(), testenv.Describe(asleep)
	})
	if asleep.Status.Wakes != 0 || asleep.Status.Replicas() != 0 {
		t.Errorf("asleep: wakes %d targetReplicas %d, want 0 and 0", asleep.Status.Wakes, asleep.Status.Replicas())
	}
	e.Eventually("a Slept event", func() (bool, string) { return e.HasEvent("web", controller.ReasonSlept) })

	// Busy from now on, so the wake stays up; and a new operator takes
	// over in the middle of the sleep.
	prom.Set("5", "1", "")
	e.Stop()
	scaleURL := startScaling(e, prom)
	m := e.LastOperator.Metrics
	e.Eventually("the new operator to lead", func() (bool, string) { return e.LastOperator.Leading(), "" })
	e.Eventually("the new operator to see the sleep", func() (bool, string) {
		// The first scrape only sets the baseline; this one sees the
		// sleep go on.
		got := metricValue(t, m, "elasti_operator_asleep_targets")
		return got == 1 && metricValue(t, m, "elasti_operator_asleep_seconds_total") > 0, fmt.Sprintf("%v asleep", got)
	})

	code, body := testenv.Post(t, scaleURL, testenv.WakeBody("web", e.NS))
	if code != http.StatusOK || !strings.Contains(body, string(outcome.WakeScaled)) {
		t.Fatalf("wake: %d %s", code, body)
	}
	e.WaitMode("web", elastiv1alpha1.ModeServe)
	var awake *elastiv1alpha1.ElastiService
	e.Eventually("the cold start recorded", func() (bool, string) {
		awake = e.Get("web")
		return awake.Status.LastColdStart != nil, testenv.Describe(awake)
	})
	st := awake.Status
	if st.Wakes != 1 {
		t.Errorf("wakes = %d, want 1", st.Wakes)
	}
	if st.LastScaledDownTime == nil || !st.LastScaledDownTime.Equal(asleep.Status.LastScaledDownTime) {
		t.Errorf("lastScaledDownTime = %v, want the sleep's start %v, kept across the restart", st.LastScaledDownTime, asleep.Status.LastScaledDownTime)
	}
	if st.LastScaledUpTime == nil || st.LastScaledUpTime.Before(st.LastScaledDownTime) {
		t.Errorf("lastScaledUpTime = %v, want the wake, after %v", st.LastScaledUpTime, st.LastScaledDownTime)
	}
	if st.TimeAsleep == nil || st.TimeAsleep.Duration <= 0 {
		t.Errorf("timeAsleep = %v, want the sleep's length", st.TimeAsleep)
	}
	if len(st.RecentColdStarts) != 1 || st.RecentColdStarts[0] != *st.LastColdStart {
		t.Errorf("recentColdStarts = %v, want [lastColdStart %v]", st.RecentColdStarts, st.LastColdStart)
	}
	if st.Replicas() != 2 {
		t.Errorf("targetReplicas = %d, want minTargetReplicas 2", st.Replicas())
	}
	var woke string
	e.Eventually("a Woke event", func() (bool, string) {
		var ok bool
		ok, woke = e.HasEvent("web", controller.ReasonWoke)
		return ok, woke
	})
	if !strings.Contains(woke, "asleep") || !strings.Contains(woke, "cold start") {
		t.Errorf("Woke event %q, want it to say how long the target slept and the cold start", woke)
	}

	// kubectl get elastiservices: the server's Table has the columns filled.
	cells := tableRow(t, e, "web")
	for _, col := range []string{"Mode", "Replicas", "Last Wake", "Ready After"} {
		if v, ok := cells[col]; !ok || v == nil || v == "" {
			t.Errorf("column %s = %v in %v, want it filled", col, v, cells)
		}
	}
	if cells["Replicas"] != float64(2) || cells["Ready After"] != st.LastColdStart.Duration.String() {
		t.Errorf("columns Replicas %v Ready After %v, want 2 and %s", cells["Replicas"], cells["Ready After"], st.LastColdStart.Duration)
	}
	// No resolver held a request here: the Held column is empty.
	if v, ok := cells["Held"]; !ok || (v != nil && v != "") {
		t.Errorf("column Held = %v (present %v), want it empty without a held request", v, ok)
	}

	e.Eventually("the wake in the fleet metrics", func() (bool, string) {
		wakes := metricValue(t, m, "elasti_operator_wakes_total")
		saved := metricValue(t, m, "elasti_operator_saved_pod_seconds_total")
		return wakes == 1 && saved > 0 && metricValue(t, m, "elasti_operator_asleep_targets") == 0,
			fmt.Sprintf("wakes %v saved %v", wakes, saved)
	})
	if n, err := testutil.GatherAndCount(m.Registry, "elasti_operator_scale_up_to_ready_seconds"); err != nil || n != 1 {
		t.Errorf("elasti_operator_scale_up_to_ready_seconds: %d series (%v), want 1", n, err)
	}
}

// metricValue gathers m's registry and returns the unlabelled counter or
// gauge name.
func metricValue(t *testing.T, m *metrics.Operator, name string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name || len(f.GetMetric()) == 0 {
			continue
		}
		mt := f.GetMetric()[0]
		if mt.Counter != nil {
			return mt.GetCounter().GetValue()
		}
		return mt.GetGauge().GetValue()
	}
	return -1
}

// tableRow reads name as kubectl get does, as a server-side Table, and
// returns its cells by column name.
func tableRow(t *testing.T, e *testenv.Env, name string) map[string]any {
	t.Helper()
	raw, err := e.Elasti.ElastiV1alpha1().RESTClient().Get().Namespace(e.NS).Resource("elastiservices").Name(name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(e.Ctx()).Raw()
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(table.ColumnDefinitions) {
		t.Fatalf("table: %d rows, %d columns", len(table.Rows), len(table.ColumnDefinitions))
	}
	cells := map[string]any{}
	for i, c := range table.ColumnDefinitions {
		cells[c.Name] = table.Rows[0].Cells[i]
	}
	return cells
}

// A wake whose pod waits for a node says so while it waits: a WakeStage
// Warning with the scheduler's reason and none of its message, then the
// stage that follows once a node fits, then the Woke event.
func TestAWakeShowsItsStagesAsEvents(t *testing.T) {
	t.Parallel()
	e := testenv.New(t)
	prom := testenv.NewFakePrometheus(t)
	scaleURL := startScaling(e, prom)
	e.Resolver(1)
	e.App("web", 1)
	e.ElastiServiceWith("web", "web", elastiv1alpha1.KindDeployment, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 2
		es.Spec.Triggers = testenv.IdleTrigger("0.5")
	})
	e.Eventually("the target asleep", func() (bool, string) {
		es := e.Get("web")
		return es.Status.Asleep() && es.Status.Mode == elastiv1alpha1.ModeProxy, testenv.Describe(es)
	})
	prom.Set("5", "1", "")
	// While it sleeps, its pods come to need a node no one has.
	setNodeSelector := func(sel string) {
		t.Helper()
		patch := `{"spec":{"template":{"spec":{"nodeSelector":` + sel + `}}}}`
		if _, err := e.Kube.AppsV1().Deployments(e.NS).Patch(e.Ctx(), "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setNodeSelector(`{"elasti.test/pool":"none"}`)
	if code, body := testenv.Post(t, scaleURL, testenv.WakeBody("web", e.NS)); code != http.StatusOK {
		t.Fatalf("wake: %d %s", code, body)
	}
	stageEvents := func() []corev1.Event {
		evs, err := e.Kube.CoreV1().Events(e.NS).List(e.Ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=" + controller.ReasonWakeStage})
		if err != nil {
			t.Fatal(err)
		}
		return evs.Items
	}
	e.Eventually("a WakeStage event: waiting for a node", func() (bool, string) {
		for _, ev := range stageEvents() {
			if strings.HasPrefix(ev.Message, "Waking: waiting for a node: Unschedulable (") && ev.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, fmt.Sprint(stageEvents())
	})

	// A node fits again.
	setNodeSelector(`null`)
	e.WaitMode("web", elastiv1alpha1.ModeServe)
	e.Eventually("a Woke event", func() (bool, string) { return e.HasEvent("web", controller.ReasonWoke) })
	var msgs []string
	for _, ev := range stageEvents() {
		msgs = append(msgs, ev.Type+" "+ev.Message)
		if strings.Contains(ev.Message, "nodes are available") || strings.Contains(ev.Message, "elasti.test/pool") {
			t.Errorf("WakeStage event %q quotes the scheduler's message", ev.Message)
		}
	}
	if len(msgs) < 1 || len(msgs) > 10 {
		t.Errorf("WakeStage events %q, want 1 to 10", msgs)
	}
	t.Logf("WakeStage events: %q", msgs)
}
