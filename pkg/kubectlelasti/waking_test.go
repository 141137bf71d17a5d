package kubectlelasti

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "github.com/elasti-dev/elasti/pkg/apis/elasti/v1alpha1"
	"github.com/elasti-dev/elasti/pkg/wakestage"
)

// wakingFixture has llm waking (asleep in status, scaled up since), its
// pod loading for 4 minutes; web and api are not waking.
func wakingFixture(t *testing.T, pod *corev1.Pod) *fixture {
	f := newFixture(t,
		elastiService("shop", "llm", func(es *elastiv1alpha1.ElastiService) {
			es.Status.Mode, es.Status.TargetReplicas = elastiv1alpha1.ModeProxy, ptr.To[int32](0)
			es.Status.LastScaledDownTime = at(time.Hour)
			es.Status.LastScaledUpTime = at(5 * time.Minute)
		}),
		elastiService("shop", "api", func(es *elastiv1alpha1.ElastiService) {
			es.Status.Mode, es.Status.TargetReplicas = elastiv1alpha1.ModeProxy, ptr.To[int32](0)
			es.Status.LastScaledDownTime = at(time.Hour)
			es.Status.LastScaledUpTime = at(2 * time.Hour) // the wake before the sleep
		}),
	)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "llm"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "llm"}}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "other", Labels: map[string]string{"app": "db"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	for _, o := range []runtime.Object{svc, pod, other} {
		if err := f.kube.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func loadingPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "llm-1", Labels: map[string]string{"app": "llm"}},
		Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: *at(4 * time.Minute)}}}}}}
}

// status's WAKING column shows the stage of a waking ElastiService's
// pods, the pods its Service selects (not the namespace's other pods),
// with how long it has lasted; -o json has it as waking. An
// ElastiService that is not waking reads no pods.
func TestStatusShowsTheWakingStage(t *testing.T) {
	f := wakingFixture(t, loadingPod())
	if code := f.run("status"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(f.out.String()), "\n")[1:] {
		fields := strings.Fields(line)
		rows[fields[0]] = fields
	}
	if got := rows["llm"]; strings.Join(got[len(got)-2:], " ") != "Starting 4m" {
		t.Errorf("llm's WAKING %q, want Starting 4m:\n%s", got, f.out.String())
	}
	if got := rows["api"]; got[len(got)-1] != "-" {
		t.Errorf("api is not waking, WAKING %q", got[len(got)-1])
	}
	podLists := 0
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "pods" {
			podLists++
		}
	}
	if podLists != 1 {
		t.Errorf("%d pod lists, want 1 (llm's only)", podLists)
	}
	if code := f.run("status", "llm", "-o", "json"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	var list SummaryList
	if err := json.Unmarshal(f.out.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if w := list.Items[0].Waking; w == nil || w.Stage != wakestage.Starting || w.Since == nil || !w.Since.Equal(at(4*time.Minute)) {
		t.Errorf("json waking %+v", w)
	}
}

// A pod that waits for a node says so and why; a user who may not list
// pods is told once, and the column still says the wake is under way.
func TestStatusWakingStageVariants(t *testing.T) {
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "llm-1", Labels: map[string]string{"app": "llm"}, CreationTimestamp: *at(3 * time.Minute)},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}}}
	f := wakingFixture(t, pending)
	if code := f.run("status", "llm"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	if !strings.Contains(f.out.String(), "WaitingForNode 3m (Unschedulable)") {
		t.Errorf("status:\n%s", f.out.String())
	}

	f = wakingFixture(t, loadingPod())
	f.kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", nil)
	})
	if code := f.run("status"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, f.err.String())
	}
	if !strings.Contains(f.out.String(), " yes\n") || strings.Count(f.err.String(), "warning:") != 1 ||
		!strings.Contains(f.err.String(), "forbidden: you may not list pods") {
		t.Errorf("status:\n%s\nstderr:\n%s", f.out.String(), f.err.String())
	}
}
