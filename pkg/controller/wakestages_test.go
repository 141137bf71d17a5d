package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
)

// The wake's event (Woke) says how long the pod that now serves spent in
// each stage on its way to Ready, read from the pod the operator checked
// before taking the resolver away: here 3 s waiting for a node, 40 s
// pulling its image and 2 minutes loading, of a cold start timed from the
// scale-up.
func TestTheWakeEventSaysWhereTheColdStartWent(t *testing.T) {
	f := newFixture(t)
	es := wakingSeed(f, fenceTimeout+time.Second, podEP("10.1.0.2", "web-new", "uid-new"))
	scaledUp := f.clock.Now().Add(-3 * time.Minute)
	es.Status.TargetReplicas = ptr.To[int32](0)
	es.Status.LastScaledDownTime = ptrTime(scaledUp.Add(-time.Hour))
	es.Status.LastScaledUpTime = ptrTime(scaledUp)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(scaledUp.Add(d).Truncate(time.Second)) }
	p := pod("web-new", "uid-new", nil, "")
	p.CreationTimestamp = at(time.Second)
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(4 * time.Second)},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(164 * time.Second)}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(44 * time.Second)}}}}}
	f.apiOnly = append(f.apiOnly, p)
	_, ctx := ktesting.NewTestContext(t)
	c := f.newController(ctx)
	if err := c.syncElastiService(ctx, keyOf(es)); err != nil {
		t.Fatal(err)
	}
	var woke string
	for len(f.recorder.Events) > 0 {
		if e := <-f.recorder.Events; strings.Contains(e, " "+ReasonWoke+" ") {
			woke = e
		}
	}
	const want = "its stages: creating the pod 1s, waiting for a node 3s, pulling its image 40s, starting to Ready 2m0s"
	if !strings.HasSuffix(woke, want) {
		t.Errorf("the wake's event %q, want it to end %q", woke, want)
	}
}
