package metrics

import (
	"k8s.io/utils/ptr"

	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// newES is an ElastiService whose target was last seen at replicas.
func newES(uid types.UID, replicas int32) *elastiv1alpha1.ElastiService {
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: string(uid), UID: uid}}
	es.Spec.MinTargetReplicas = 1
	es.Status.TargetReplicas = &replicas
	return es
}

// The totals follow status through a sleep and a wake, count a sleep seen
// since before the first scrape only from then on, take nothing away when
// an ElastiService goes, and are reported by the leader alone.
func TestMetricSleepTotals(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	web := newES("web", 3) // awake, 3 replicas
	old := newES("old", 0) // asleep for an hour before the operator started
	old.Status.LastScaledDownTime = &metav1.Time{Time: t0.Add(-time.Hour)}
	old.Spec.MinTargetReplicas = 2
	all := []*elastiv1alpha1.ElastiService{web, old}
	leading := true
	reg := prometheus.NewRegistry()
	reg.MustRegister(newSleepTotals(func() ([]*elastiv1alpha1.ElastiService, error) { return all, nil }, func() bool { return leading }, clk))

	value := func(name string) float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == name {
				m := f.GetMetric()[0]
				switch {
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				case m.Gauge != nil:
					return m.GetGauge().GetValue()
				default:
					return float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
		t.Fatalf("no %s", name)
		return 0
	}
	if got := value(asleepSecondsName); got != 0 {
		t.Errorf("first scrape: %v seconds asleep, want 0 (the hour before the first scrape is not counted)", got)
	}
	if got := value(asleepTargetsName); got != 1 {
		t.Errorf("%v targets asleep, want 1", got)
	}

	// web sleeps for 10 minutes, and wakes with a 2s cold start; old
	// sleeps on.
	web.Status.TargetReplicas = ptr.To[int32](0)
	web.Status.LastScaledDownTime = &metav1.Time{Time: t0}
	clk.Step(5 * time.Minute)
	value(asleepSecondsName) // a scrape in the middle of the sleep
	clk.Step(5 * time.Minute)
	web.Status.TargetReplicas = ptr.To[int32](1)
	web.Status.Wakes = 1
	web.Status.TimeAsleep = &metav1.Duration{Duration: 10 * time.Minute}
	web.Status.LastColdStart = &metav1.Duration{Duration: 2 * time.Second}
	wantAsleep := (10*time.Minute + 10*time.Minute).Seconds() // web's sleep and old's 10 minutes
	wantSaved := (10*time.Minute).Seconds()*3 + (10*time.Minute).Seconds()*2
	if got := value(asleepSecondsName); got != wantAsleep {
		t.Errorf("%v seconds asleep, want %v", got, wantAsleep)
	}
	if got := value(savedPodSecondsName); got != wantSaved {
		t.Errorf("%v pod-seconds saved, want %v (web's 3 replicas before its sleep, old's minTargetReplicas 2)", got, wantSaved)
	}
	if got := value(wakesName); got != 1 {
		t.Errorf("%v wakes, want 1", got)
	}
	if got := value(scaleUpToReadyName); got != 1 {
		t.Errorf("%v cold starts observed, want 1", got)
	}
	if got := value(asleepTargetsName); got != 1 {
		t.Errorf("%v targets asleep, want 1", got)
	}

	// old goes: nothing is taken back. A scrape again observes no cold
	// start twice.
	all = []*elastiv1alpha1.ElastiService{web}
	clk.Step(time.Minute)
	if got := value(asleepSecondsName); got != wantAsleep {
		t.Errorf("after a deletion %v seconds asleep, want %v still", got, wantAsleep)
	}
	if got := value(scaleUpToReadyName); got != 1 {
		t.Errorf("%v cold starts observed, want 1 still", got)
	}

	// A follower reports none of them.
	leading = false
	if n, err := testutil.GatherAndCount(reg, asleepSecondsName, savedPodSecondsName, wakesName, asleepTargetsName); err != nil || n != 0 {
		t.Errorf("a follower reports %d sleep series (%v), want none", n, err)
	}

	leading = true
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}
	families, _ := reg.Gather()
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) > 0 {
				t.Errorf("%s has labels %v; the sleep metrics have none, so they do not grow with the fleet", f.GetName(), m.GetLabel())
			}
		}
		if !strings.HasPrefix(f.GetName(), "elasti_operator_") {
			t.Errorf("%s lacks the elasti_operator_ prefix", f.GetName())
		}
	}
}
