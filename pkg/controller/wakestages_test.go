package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
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

// delays records the keys queued again and after how long.
type delays struct{ after []time.Duration }

func (d *delays) AddAfter(_ types.NamespacedName, after time.Duration) {
	d.after = append(d.after, after)
}

// While a target wakes, each new stage of its pods is an event: waiting
// for a node with the scheduler's reason as a Warning, then started, with
// nothing of the pods' messages; a read within stageRecheck of the last
// lists nothing; Ready is left to the Woke event; and the ElastiService is
// queued again each time, so the next stage is read without any event.
func TestWakeStagesAreEvents(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC))
	scaledUp := clk.Now().Add(-6 * time.Second)
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}
	es.Status.TargetReplicas = ptr.To[int32](0)
	es.Status.LastScaledDownTime = ptrTime(scaledUp.Add(-time.Hour))
	es.Status.LastScaledUpTime = ptrTime(scaledUp)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", Labels: map[string]string{"app": "web"},
		CreationTimestamp: metav1.NewTime(scaledUp.Add(time.Second))},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: secret-gpu-pool", LastTransitionTime: metav1.NewTime(scaledUp.Add(2 * time.Second))}}}}
	other := p.DeepCopy()
	other.Name, other.Labels = "db-1", map[string]string{"app": "db"}
	kube := fake.NewClientset(p, other)
	lists := 0
	kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { lists++; return false, nil, nil })
	rec := record.NewFakeRecorder(10)
	q := &delays{}
	w := newWakeProgress(kube, rec, q, clk)
	_, ctx := ktesting.NewTestContext(t)
	next := func() string {
		select {
		case e := <-rec.Events:
			return e
		default:
			return ""
		}
	}

	w.observe(ctx, es, svc)
	if got, want := next(), "Warning WakeStage Waking: waiting for a node: Unschedulable (for 5s, 6s into the wake)"; got != want {
		t.Errorf("first event %q, want %q", got, want)
	}
	clk.Step(time.Second)
	w.observe(ctx, es, svc)
	if lists != 1 || next() != "" {
		t.Errorf("a second look within %s listed %d times in all, want 1 and no event", stageRecheck, lists)
	}
	if len(q.after) != 2 || q.after[0] != stageRecheck || q.after[1] != time.Second {
		t.Errorf("queued again after %v, want [%s 1s]", q.after, stageRecheck)
	}

	clk.Step(2 * time.Second)
	p.Spec.NodeName = "node-1"
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(clk.Now().Add(-time.Second))}}}}}
	if _, err := kube.CoreV1().Pods("ns").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.observe(ctx, es, svc)
	if got, want := next(), "Normal WakeStage Waking: started, not ready yet (for 1s, 9s into the wake)"; got != want {
		t.Errorf("second event %q, want %q", got, want)
	}
	w.observe(ctx, es, svc) // the same stage, read again later
	clk.Step(stageRecheck)
	w.observe(ctx, es, svc)
	if got := next(); got != "" {
		t.Errorf("the same stage again gave %q, want no event", got)
	}

	clk.Step(stageRecheck)
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	if _, err := kube.CoreV1().Pods("ns").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.observe(ctx, es, svc)
	if got := next(); got != "" {
		t.Errorf("Ready gave %q, want no event: the Woke event says it", got)
	}
	w.forget(es.Key())
	if len(w.seen) != 0 {
		t.Errorf("forget left %d entries", len(w.seen))
	}
}

// A pod that crashes in a loop flips between two stages at each restart:
// one wake records at most maxStageEvents of them. Without the right to
// list pods, it says so once and lists no more.
func TestWakeStageEventsAreBounded(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC))
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}}
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns", Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{NodeName: "n"}}
	kube := fake.NewClientset(p)
	rec := record.NewFakeRecorder(100)
	w := newWakeProgress(kube, rec, &delays{}, clk)
	_, ctx := ktesting.NewTestContext(t)
	for i := range 3 * maxStageEvents {
		running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		if i%2 == 1 {
			running = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: running, RestartCount: int32(i / 2)}}}
		if _, err := kube.CoreV1().Pods("ns").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		w.observe(ctx, es, svc)
		clk.Step(stageRecheck)
	}
	if n := len(rec.Events); n != maxStageEvents {
		t.Errorf("%d events for one wake, want %d", n, maxStageEvents)
	}

	denied := fake.NewClientset()
	lists := 0
	denied.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no list"))
	})
	w = newWakeProgress(denied, rec, &delays{}, clk)
	for range 3 {
		w.observe(ctx, es, svc)
		clk.Step(stageRecheck)
	}
	if lists != 1 {
		t.Errorf("listed %d times without the right to, want 1", lists)
	}
}
