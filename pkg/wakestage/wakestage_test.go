package wakestage

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)

func at(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }

func cond(t corev1.PodConditionType, s corev1.ConditionStatus, reason string, sec int) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: at(sec)}
}

func pod(node string, phase corev1.PodPhase, conds []corev1.PodCondition, init, containers []corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: at(0)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase, Conditions: conds, InitContainerStatuses: init, ContainerStatuses: containers},
	}
}

func waiting(reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "secret tenant text"}}}
}

func running(sec int) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(sec)}}}
}

var scheduledAt2 = cond(corev1.PodScheduled, corev1.ConditionTrue, "", 2)

func TestOfPodNamesEachStage(t *testing.T) {
	oomed := waiting("CrashLoopBackOff")
	oomed.RestartCount = 3
	oomed.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}
	restartedRunning := running(30)
	restartedRunning.RestartCount = 1
	restartedRunning.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}
	initDone := corev1.ContainerStatus{Name: "init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}
	initRunning := corev1.ContainerStatus{Name: "init", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(5)}}}
	initWaiting := corev1.ContainerStatus{Name: "init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}
	initFailed := corev1.ContainerStatus{Name: "init", RestartCount: 2,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}
	sandbox := cond(corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", 4)
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want Progress
	}{
		{"unschedulable", pod("", corev1.PodPending, []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionFalse, "Unschedulable", 1)}, nil, nil),
			Progress{Stage: WaitingForNode, Since: t0, Problem: "Unschedulable"}},
		{"gated", pod("", corev1.PodPending, []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionFalse, "SchedulingGated", 1)}, nil, nil),
			Progress{Stage: WaitingForNode, Since: t0, Problem: "SchedulingGated"}},
		{"a reason not on the list is dropped", pod("", corev1.PodPending, []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionFalse, "<script>alert(1)</script>", 1)}, nil, nil),
			Progress{Stage: WaitingForNode, Since: t0}},
		{"not yet seen by the scheduler", pod("", corev1.PodPending, nil, nil, nil), Progress{Stage: WaitingForNode, Since: t0}},
		{"scheduled, no status yet", pod("node", corev1.PodPending, []corev1.PodCondition{scheduledAt2}, nil, nil),
			Progress{Stage: PullingImage, Since: t0.Add(2 * time.Second)}},
		{"creating, sandbox ready", pod("node", corev1.PodPending, []corev1.PodCondition{scheduledAt2, sandbox}, nil, []corev1.ContainerStatus{waiting("ContainerCreating")}),
			Progress{Stage: PullingImage, Since: t0.Add(4 * time.Second)}},
		{"image pull failing", pod("node", corev1.PodPending, []corev1.PodCondition{scheduledAt2, sandbox}, nil, []corev1.ContainerStatus{waiting("ImagePullBackOff")}),
			Progress{Stage: PullingImage, Since: t0.Add(4 * time.Second), Problem: "ImagePullBackOff"}},
		{"init image pulled next", pod("node", corev1.PodPending, []corev1.PodCondition{scheduledAt2}, []corev1.ContainerStatus{initWaiting}, []corev1.ContainerStatus{waiting("PodInitializing")}),
			Progress{Stage: PullingImage, Since: t0.Add(2 * time.Second), Problem: "ImagePullBackOff"}},
		{"init running", pod("node", corev1.PodPending, []corev1.PodCondition{scheduledAt2}, []corev1.ContainerStatus{initRunning}, []corev1.ContainerStatus{waiting("PodInitializing")}),
			Progress{Stage: Initializing, Since: t0.Add(5 * time.Second)}},
		{"init crashing", pod("node", corev1.PodPending, []corev1.PodCondition{scheduledAt2}, []corev1.ContainerStatus{initFailed}, nil),
			Progress{Stage: Initializing, Problem: "CrashLoopBackOff", Restarts: 2}},
		{"init done, app created next", pod("node", corev1.PodPending, []corev1.PodCondition{scheduledAt2, sandbox}, []corev1.ContainerStatus{initDone}, []corev1.ContainerStatus{waiting("ContainerCreating")}),
			Progress{Stage: PullingImage, Since: t0.Add(4 * time.Second)}},
		{"started, not ready", pod("node", corev1.PodRunning, []corev1.PodCondition{scheduledAt2, cond(corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", 9)}, nil, []corev1.ContainerStatus{running(9)}),
			Progress{Stage: Starting, Since: t0.Add(9 * time.Second)}},
		{"crash looping", pod("node", corev1.PodRunning, []corev1.PodCondition{scheduledAt2}, nil, []corev1.ContainerStatus{oomed}),
			Progress{Stage: Starting, Problem: "CrashLoopBackOff", Restarts: 3}},
		{"running again after an OOM kill", pod("node", corev1.PodRunning, []corev1.PodCondition{scheduledAt2}, nil, []corev1.ContainerStatus{restartedRunning}),
			Progress{Stage: Starting, Since: t0.Add(30 * time.Second), Problem: "OOMKilled", Restarts: 1}},
		{"ready", pod("node", corev1.PodRunning, []corev1.PodCondition{scheduledAt2, cond(corev1.PodReady, corev1.ConditionTrue, "", 12)}, nil, []corev1.ContainerStatus{running(9)}),
			Progress{Stage: Ready, Since: t0.Add(12 * time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := OfPod(tc.pod)
			if !got.Since.Equal(tc.want.Since) {
				t.Errorf("since %v, want %v", got.Since, tc.want.Since)
			}
			got.Since, tc.want.Since = time.Time{}, time.Time{}
			if got != tc.want {
				t.Errorf("%+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestOfTakesTheFurthestLivePod(t *testing.T) {
	if got := Of(nil); got.Stage != ScalingUp {
		t.Errorf("no pod: %v, want ScalingUp", got.Stage)
	}
	pending := pod("", corev1.PodPending, nil, nil, nil)
	startingLate := pod("node", corev1.PodRunning, nil, nil, []corev1.ContainerStatus{running(20)})
	startingEarly := pod("node", corev1.PodRunning, nil, nil, []corev1.ContainerStatus{running(10)})
	readyButDeleted := pod("node", corev1.PodRunning, []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue, "", 1)}, nil, nil)
	readyButDeleted.DeletionTimestamp = &metav1.Time{Time: t0}
	failed := pod("node", corev1.PodFailed, []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue, "", 1)}, nil, nil)
	got := Of([]*corev1.Pod{pending, startingLate, readyButDeleted, failed, startingEarly})
	if got.Stage != Starting || !got.Since.Equal(t0.Add(10*time.Second)) {
		t.Errorf("%+v, want Starting since 10 s (the live pod there longest)", got)
	}
	if got := Of([]*corev1.Pod{readyButDeleted, failed}); got.Stage != ScalingUp {
		t.Errorf("only a deleted and a failed pod: %v, want ScalingUp", got.Stage)
	}
}

func TestProblemKeepsOnlyKnownReasons(t *testing.T) {
	for reason, want := range map[string]string{
		"ImagePullBackOff": "ImagePullBackOff", "imagepullbackoff": "", "ImagePullBackOff ": "", "": "",
		"Unschedulable": "Unschedulable", "my-app-says-hi": "",
	} {
		if got := Problem(reason); got != want {
			t.Errorf("Problem(%q) = %q, want %q", reason, got, want)
		}
	}
	for _, s := range Stages {
		if s.Words() == "" {
			t.Errorf("stage %s has no words", s)
		}
	}
}

func TestSpansOfAWokenPod(t *testing.T) {
	init := corev1.ContainerStatus{Name: "fetch", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, StartedAt: at(20)}}}
	p := pod("node", corev1.PodRunning, []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionTrue, "", 5),
		cond(corev1.PodReady, corev1.ConditionTrue, "", 300)}, []corev1.ContainerStatus{init}, []corev1.ContainerStatus{running(50)})
	scaledUp := t0.Add(-1500 * time.Millisecond)
	got := Spans(p, scaledUp)
	want := []Span{{ScalingUp, 2 * time.Second}, {WaitingForNode, 5 * time.Second}, {PullingImage, 15 * time.Second},
		{Initializing, 30 * time.Second}, {Starting, 250 * time.Second}}
	if !slices.Equal(got, want) {
		t.Errorf("spans %v, want %v", got, want)
	}
	if w := SpansWords(got); w != "creating the pod 2s, waiting for a node 5s, pulling its image 15s, init containers 30s, starting to Ready 4m10s" {
		t.Errorf("words %q", w)
	}
	// No init containers, no scale-up known: those stages are left out.
	p = pod("node", corev1.PodRunning, []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionTrue, "", 1),
		cond(corev1.PodReady, corev1.ConditionTrue, "", 9)}, nil, []corev1.ContainerStatus{running(3)})
	if got := Spans(p, time.Time{}); !slices.Equal(got, []Span{{WaitingForNode, time.Second}, {PullingImage, 2 * time.Second}, {Starting, 6 * time.Second}}) {
		t.Errorf("spans %v", got)
	}
	// Not Ready: none.
	p.Status.Conditions[1].Status = corev1.ConditionFalse
	if got := Spans(p, t0); got != nil {
		t.Errorf("a pod not Ready has spans %v", got)
	}
}
