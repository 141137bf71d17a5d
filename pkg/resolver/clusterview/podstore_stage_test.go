package clusterview

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elasti-dev/elasti/pkg/wakestage"
)

// The view's trimmed pods keep what the wake's stage reads, so the
// waiting page and the wake status say of a view's pod what the pod
// itself says, and drop every message and every reason not on wakestage's
// list.
func TestTrimmedPodsKeepTheirWakeStage(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(4 * time.Second))
	const secret = "tenant text: /models/secret-weights.bin"
	base := func(node string, phase corev1.PodPhase, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "llm-1", Namespace: "models", UID: "u1", CreationTimestamp: t0,
			Annotations: map[string]string{"note": secret}},
			Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "llm", Image: "registry.example/" + secret}}},
			Status: corev1.PodStatus{Phase: phase, Conditions: conds, Message: secret, Reason: "Evicted"}}
	}
	unschedulable := base("", corev1.PodPending, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: secret, LastTransitionTime: t0})
	oddReason := base("", corev1.PodPending, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: secret})
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t0}
	sandbox := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: t1}
	pulling := base("node-1", corev1.PodPending, scheduled, sandbox)
	pulling.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "llm", Image: secret,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: secret}}}}
	initRunning := base("node-1", corev1.PodPending, scheduled, sandbox)
	initRunning.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "fetch", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t1}}}}
	crashing := base("node-1", corev1.PodRunning, scheduled, sandbox)
	crashing.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "llm", RestartCount: 3,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: secret}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", Message: secret}}}}
	starting := base("node-1", corev1.PodRunning, scheduled, sandbox, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: t1})
	starting.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "llm", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t1}}}}
	ready := starting.DeepCopy()
	ready.Status.Conditions[2] = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t1}

	for name, pod := range map[string]*corev1.Pod{"unschedulable": unschedulable, "an unknown reason": oddReason, "pulling": pulling,
		"init": initRunning, "crash looping": crashing, "starting": starting, "ready": ready} {
		want := wakestage.OfPod(pod)
		trimmed := trimPod(pod.DeepCopy())
		if got := wakestage.OfPod(trimmed); got != want {
			t.Errorf("%s: trimmed %+v, the pod %+v", name, got, want)
		}
		raw, _ := json.Marshal(trimmed)
		if strings.Contains(string(raw), "tenant text") {
			t.Errorf("%s: the view keeps the pod's messages: %s", name, raw)
		}
	}
}
