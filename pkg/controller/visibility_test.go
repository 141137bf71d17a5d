package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	core "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
)

// step is one status write of the sleep and wake bookkeeping: the mode
// being written and what the sync saw of the target, at t0+at.
type step struct {
	at       time.Duration
	mode     string
	replicas int32
	memory   targetObservation // seenAtZero and wokenAt only
}

func runSteps(t *testing.T, s *elastiv1alpha1.ElastiServiceStatus, steps ...step) [][]string {
	t.Helper()
	var out [][]string
	for _, st := range steps {
		obs := st.memory
		obs.replicas = st.replicas
		s.Mode = st.mode
		var reasons []string
		for _, ev := range advanceSleepWake(s, obs, t0.Add(st.at)) {
			reasons = append(reasons, ev.reason+": "+ev.message)
		}
		out = append(out, reasons)
	}
	return out
}

func TestSleepAndWakeBookkeeping(t *testing.T) {
	serve, proxy := elastiv1alpha1.ModeServe, elastiv1alpha1.ModeProxy
	s := &elastiv1alpha1.ElastiServiceStatus{}
	events := runSteps(t, s,
		step{at: 0, mode: serve, replicas: 2},                // adopted, serving
		step{at: 10 * time.Minute, mode: proxy, replicas: 0}, // scaled to zero
		step{at: 11 * time.Minute, mode: proxy, replicas: 0}, // nothing new
		step{at: 70 * time.Minute, mode: proxy, replicas: 2}, // scaled up, no pod ready: written with the first
		step{at: 70*time.Minute + 3*time.Second, mode: serve, replicas: 2, // first pod ready
			memory: targetObservation{wokenAt: t0.Add(70 * time.Minute)}},
		step{at: 80 * time.Minute, mode: serve, replicas: 3}, // an HPA adds one
	)
	if len(events[0]) != 0 {
		t.Errorf("adoption recorded %v; want nothing", events[0])
	}
	if len(events[1]) != 1 || !strings.HasPrefix(events[1][0], ReasonSlept+": ") {
		t.Errorf("the scale to zero recorded %v; want one %s", events[1], ReasonSlept)
	}
	if len(events[2])+len(events[3]) != 0 {
		t.Errorf("a sleep and an unready scale-up recorded %v %v; want nothing", events[2], events[3])
	}
	if len(events[4]) != 1 || !strings.HasPrefix(events[4][0], ReasonWoke+": ") ||
		!strings.Contains(events[4][0], "1h0m0s asleep") || !strings.Contains(events[4][0], "3s after") {
		t.Errorf("the first ready pod recorded %v; want one %s with 1h0m0s asleep and a 3s cold start", events[4], ReasonWoke)
	}
	if len(events[5]) != 0 {
		t.Errorf("a replica change while awake recorded %v", events[5])
	}
	if got := s.LastScaledDownTime; got == nil || !got.Time.Equal(t0.Add(10*time.Minute)) {
		t.Errorf("lastScaledDownTime = %v, want the scale to zero", got)
	}
	if got := s.LastScaledUpTime; got == nil || !got.Time.Equal(t0.Add(70*time.Minute)) {
		t.Errorf("lastScaledUpTime = %v, want the scale-up", got)
	}
	if s.Wakes != 1 || s.TimeAsleep == nil || s.TimeAsleep.Duration != time.Hour {
		t.Errorf("wakes %d timeAsleep %v, want 1 and 1h", s.Wakes, s.TimeAsleep)
	}
	if s.LastColdStart == nil || s.LastColdStart.Duration != 3*time.Second ||
		!slices.Equal(s.RecentColdStarts, []metav1.Duration{{Duration: 3 * time.Second}}) {
		t.Errorf("lastColdStart %v recentColdStarts %v, want 3s", s.LastColdStart, s.RecentColdStarts)
	}
	if s.Replicas() != 3 {
		t.Errorf("targetReplicas = %d, want the 3 last seen", s.Replicas())
	}
	if s.Asleep() || s.AsleepFor(t0.Add(100*time.Hour)) != time.Hour {
		t.Errorf("awake target: Asleep %v, AsleepFor %v; want false and the ended sleep's hour", s.Asleep(), s.AsleepFor(t0.Add(100*time.Hour)))
	}
}

// The wake's own record of lastScaledUpTime (idle.Wakes' merge patch) may
// land before or after the sync that sees the scale-up; either way the
// sleep ends at the scale-up, and this replica's memory makes the times
// exact where status holds whole seconds.
func TestWakeTimesComeFromTheWakeNotTheSync(t *testing.T) {
	serve, proxy := elastiv1alpha1.ModeServe, elastiv1alpha1.ModeProxy
	down := t0.Add(time.Minute)
	woke := down.Add(30*time.Minute + 400*time.Millisecond)
	for _, tc := range []struct {
		name   string
		status *metav1.Time // lastScaledUpTime already in status
		memory time.Time
		want   time.Time
	}{
		{"status first, whole seconds", ptrTime(woke.Truncate(time.Second)), time.Time{}, woke.Truncate(time.Second)},
		{"memory, exact", ptrTime(woke.Truncate(time.Second)), woke, woke},
		{"neither: when the sync saw it", nil, time.Time{}, down.Add(45 * time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &elastiv1alpha1.ElastiServiceStatus{}
			runSteps(t, s, step{at: 0, mode: serve, replicas: 1},
				step{at: time.Minute + 5*time.Second, mode: proxy, replicas: 0, memory: targetObservation{seenAtZero: down}})
			if !s.LastScaledDownTime.Time.Equal(down) {
				t.Fatalf("lastScaledDownTime = %v, want %v from memory", s.LastScaledDownTime, down)
			}
			s.LastScaledUpTime = tc.status
			runSteps(t, s, step{at: 46 * time.Minute, mode: serve, replicas: 1, memory: targetObservation{wokenAt: tc.memory}})
			if got := s.TimeAsleep.Duration; got != tc.want.Sub(down) {
				t.Errorf("timeAsleep = %v, want %v", got, tc.want.Sub(down))
			}
			if tc.status == nil && !s.LastScaledUpTime.Time.Equal(tc.want) {
				t.Errorf("lastScaledUpTime = %v, want %v for the cold start", s.LastScaledUpTime, tc.want)
			}
		})
	}
}

// A scale-up that goes back to zero before any pod was Ready is no wake:
// the sleep goes on, with no event and no status write, until a wake
// serves.
func TestScaleUpThatNeverGotReadyIsNoWake(t *testing.T) {
	serve, proxy := elastiv1alpha1.ModeServe, elastiv1alpha1.ModeProxy
	s := &elastiv1alpha1.ElastiServiceStatus{}
	runSteps(t, s, step{at: 0, mode: proxy, replicas: 0}) // adopted asleep
	adopted := s.DeepCopy()
	events := runSteps(t, s,
		step{at: time.Hour, mode: proxy, replicas: 1},     // scaled up
		step{at: 2 * time.Hour, mode: proxy, replicas: 0}, // back to zero, never ready
		step{at: 3 * time.Hour, mode: proxy, replicas: 1}, // scaled up again
	)
	if fmt.Sprint(events) != "[[] [] []]" || !equality.Semantic.DeepEqual(s, adopted) {
		t.Errorf("scale-ups without a Ready pod recorded %v and changed status to %+v", events, s)
	}
	events = runSteps(t, s, step{at: 3*time.Hour + time.Second, mode: serve, replicas: 1,
		memory: targetObservation{wokenAt: t0.Add(3 * time.Hour)}})
	if len(events[0]) != 1 || !strings.Contains(events[0][0], "3h0m0s asleep") {
		t.Errorf("the wake recorded %v", events[0])
	}
	if s.Wakes != 1 || s.TimeAsleep.Duration != 3*time.Hour || s.LastColdStart.Duration != time.Second || len(s.RecentColdStarts) != 1 {
		t.Errorf("wakes %d timeAsleep %v lastColdStart %v recent %v; want 1, 3h, 1s, one", s.Wakes, s.TimeAsleep, s.LastColdStart, s.RecentColdStarts)
	}
}

func TestRecentColdStartsKeepTheLatestSixteen(t *testing.T) {
	serve, proxy := elastiv1alpha1.ModeServe, elastiv1alpha1.ModeProxy
	s := &elastiv1alpha1.ElastiServiceStatus{}
	var steps []step
	for i := range 20 {
		base := time.Duration(i) * time.Hour
		steps = append(steps,
			step{at: base, mode: proxy, replicas: 0},
			step{at: base + time.Minute, mode: proxy, replicas: 1},
			step{at: base + time.Minute + time.Duration(i+1)*time.Second, mode: serve, replicas: 1,
				memory: targetObservation{wokenAt: t0.Add(base + time.Minute)}})
	}
	runSteps(t, s, steps...)
	if s.Wakes != 20 || len(s.RecentColdStarts) != elastiv1alpha1.MaxRecentColdStarts {
		t.Fatalf("wakes %d, %d recent cold starts; want 20 and %d", s.Wakes, len(s.RecentColdStarts), elastiv1alpha1.MaxRecentColdStarts)
	}
	if first, last := s.RecentColdStarts[0].Duration, s.RecentColdStarts[15].Duration; first != 5*time.Second || last != 20*time.Second {
		t.Errorf("recent cold starts run %v..%v; want 5s..20s, oldest first", first, last)
	}
}

// Through the controller: a sleep and a wake, each seen by a different
// operator (converged is a restart), are counted once, from status alone,
// and written with the mode switches they go with.
func TestSleepAndWakeSpanRestarts(t *testing.T) {
	f := newFixture(t)
	proxySeed(f)
	f.deployments[0].Spec.Replicas = ptr.To[int32](2)
	f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(true), false)))
	key := keyOf(f.elastiService("web"))
	f = f.converged(key) // serving

	scaleUp(f, "web", 0)
	f.endpointSlices = nil
	slept := f.clock.Now()
	f = f.converged(key) // a restart later, it sleeps...
	es := f.elastiService("web")
	if es.Status.Mode != elastiv1alpha1.ModeProxy || es.Status.LastScaledDownTime == nil ||
		!es.Status.LastScaledDownTime.Time.Equal(slept) || es.Status.Replicas() != 0 {
		t.Fatalf("after the scale to zero: %s lastScaledDownTime %v targetReplicas %d", es.Status.Mode, es.Status.LastScaledDownTime, es.Status.Replicas())
	}

	scaleUp(f, "web", 2)
	woke := f.clock.Now()
	f = f.converged(key) // ...another restart, it is scaled up, no pod ready yet: nothing to write...
	if got := f.elastiService("web"); !equality.Semantic.DeepEqual(got.Status, es.Status) {
		t.Errorf("a scale-up without a Ready pod wrote status: %+v", got.Status)
	}
	// ...but the wake recorded its time, as idle.Wakes does.
	es = f.elastiService("web")
	es.Status.LastScaledUpTime = ptrTime(woke)

	f.endpointSlices = append(f.endpointSlices, targetSlice("web", ep("10.1.0.1", ptr.To(true), false)))
	ready := f.clock.Now()
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	if err := c.syncElastiService(ctx, key); err != nil {
		t.Fatal(err)
	}
	var updated *elastiv1alpha1.ElastiService
	for _, a := range f.elastiClient.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			if updated != nil {
				t.Errorf("more than one status write for the first ready pod")
			}
			updated = a.(core.UpdateAction).GetObject().(*elastiv1alpha1.ElastiService)
		}
	}
	if updated == nil {
		t.Fatal("no status write for the first ready pod")
	}
	// ...and a third operator sees its first pod ready: the sleep ends and
	// the cold start begins at the scale-up recorded under the second.
	st := updated.Status
	if got := st.LastColdStart; st.Mode != elastiv1alpha1.ModeServe || got == nil || got.Duration != ready.Sub(woke) {
		t.Errorf("first ready pod: mode %s lastColdStart %v; want serve and %v", st.Mode, got, ready.Sub(woke))
	}
	if st.Wakes != 1 || st.TimeAsleep == nil || st.TimeAsleep.Duration != woke.Sub(slept) || st.Replicas() != 2 {
		t.Errorf("after the wake: wakes %d timeAsleep %v targetReplicas %d; want 1, %v, 2", st.Wakes, st.TimeAsleep, st.Replicas(), woke.Sub(slept))
	}
	var reasons []string
	for len(f.recorder.Events) > 0 {
		reasons = append(reasons, strings.Fields(<-f.recorder.Events)[1])
	}
	if !slices.Equal(reasons, []string{ReasonSwitchedToServe, ReasonWoke}) {
		t.Errorf("events %v, want %s then %s", reasons, ReasonSwitchedToServe, ReasonWoke)
	}
}
