// Package wakestage names how far a waking Service's pods are, from what
// the scheduler and the kubelet write in the pods' status: waiting for a
// node, pulling images, running init containers, started but not yet
// Ready, Ready. The resolver shows it on the waiting page and in the wake
// status it answers API clients with, and kubectl elasti status in its
// WAKING column, so both say the same thing of the same pods.
//
// Only stage names, durations and a fixed list of the kubelet's and the
// scheduler's reasons leave this package: never a message, an image name
// or anything else a pod's status carries. A page a client sees must not
// leak what the tenant's pods say, and anyone who may write a pod's status
// can write any reason there.
package wakestage

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Stage is how far a pod is on its way to Ready.
type Stage string

// The stages, in the order a pod passes them.
const (
	// ScalingUp: no pod of the Service exists yet; its controller has
	// not created one since the scale-up.
	ScalingUp Stage = "ScalingUp"
	// WaitingForNode: the pod is not scheduled: no node fits it yet (a
	// GPU pod may wait for one to join).
	WaitingForNode Stage = "WaitingForNode"
	// PullingImage: the pod is scheduled and its containers are not
	// created yet: the kubelet sets up its sandbox and pulls its images.
	PullingImage Stage = "PullingImage"
	// Initializing: an init container runs.
	Initializing Stage = "Initializing"
	// Starting: the app's containers run and the pod is not Ready: the
	// app loads (a model server's weights) or fails its readiness check.
	Starting Stage = "Starting"
	// Ready: the kubelet wrote the pod Ready.
	Ready Stage = "Ready"
)

// Stages are every stage, in order.
var Stages = []Stage{ScalingUp, WaitingForNode, PullingImage, Initializing, Starting, Ready}

// Words say a stage for a person: the waiting page's text.
func (s Stage) Words() string {
	switch s {
	case WaitingForNode:
		return "waiting for a node"
	case PullingImage:
		return "pulling its image"
	case Initializing:
		return "running its init containers"
	case Starting:
		return "started, not ready yet"
	case Ready:
		return "ready"
	}
	return "scaling up, no pod yet"
}

func (s Stage) rank() int { return slices.Index(Stages, s) }

// problems are the reasons a stage may show: the scheduler's and the
// kubelet's own constants for a stage that is stuck. Any other reason a
// pod's status carries is dropped.
var problems = map[string]bool{
	corev1.PodReasonUnschedulable:   true,
	corev1.PodReasonSchedulingGated: true,
	"ErrImagePull":                  true,
	"ImagePullBackOff":              true,
	"InvalidImageName":              true,
	"ErrImageNeverPull":             true,
	"CreateContainerConfigError":    true,
	"CreateContainerError":          true,
	"RunContainerError":             true,
	"CrashLoopBackOff":              true,
	"OOMKilled":                     true,
	"PreCreateHookError":            true,
	"PostStartHookError":            true,
	"ContainerStatusUnknown":        true,
}

// Problem returns reason when it is one a stage may show, else "".
func Problem(reason string) string {
	if problems[reason] {
		return reason
	}
	return ""
}

// Progress is how far the furthest of a Service's pods is.
type Progress struct {
	Stage Stage
	// Since is when the pod entered Stage, as its status says; zero when
	// it does not say.
	Since time.Time
	// Problem is what keeps the pod in Stage when its status says so: one
	// of the kubelet's or the scheduler's reasons (Unschedulable,
	// ImagePullBackOff, CrashLoopBackOff...), else "".
	Problem string
	// Restarts are the restarts of the pod's containers so far.
	Restarts int32
}

// Of returns the progress of the furthest along of pods, the pods a
// Service selects: ScalingUp when none is alive. A pod being deleted, or
// ended (Succeeded, Failed), takes no traffic and does not count. Of two
// pods at one stage, the one there longer counts.
func Of(pods []*corev1.Pod) Progress {
	best := Progress{Stage: ScalingUp}
	for _, pod := range pods {
		if Going(pod) {
			continue
		}
		p := OfPod(pod)
		if r, b := p.Stage.rank(), best.Stage.rank(); r > b || r == b && earlier(p.Since, best.Since) {
			best = p
		}
	}
	return best
}

// Going reports whether pod is going away or gone: terminating, or its
// containers ended for good. It takes no traffic, and is at no stage of a
// wake.
func Going(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func earlier(a, b time.Time) bool { return !a.IsZero() && (b.IsZero() || a.Before(b)) }

// OfPod returns pod's progress.
func OfPod(pod *corev1.Pod) Progress {
	st := &pod.Status
	var restarts int32
	for _, cs := range st.ContainerStatuses {
		restarts += cs.RestartCount
	}
	if c := condition(pod, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
		return Progress{Stage: Ready, Since: c.LastTransitionTime.Time, Restarts: restarts}
	}
	scheduled := condition(pod, corev1.PodScheduled)
	if pod.Spec.NodeName == "" && (scheduled == nil || scheduled.Status != corev1.ConditionTrue) {
		p := Progress{Stage: WaitingForNode, Since: pod.CreationTimestamp.Time}
		if scheduled != nil {
			p.Problem = Problem(scheduled.Reason)
		}
		return p
	}
	// Init containers run one at a time, before the app's containers
	// are created; one running, or one waiting that has been created
	// before (a restart), is the init stage.
	for _, cs := range st.InitContainerStatuses {
		if cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 {
			continue
		}
		if cs.State.Running != nil {
			return Progress{Stage: Initializing, Since: cs.State.Running.StartedAt.Time, Restarts: restarts + cs.RestartCount}
		}
		if cs.LastTerminationState.Terminated != nil {
			return Progress{Stage: Initializing, Problem: waitingProblem(cs), Restarts: restarts + cs.RestartCount}
		}
		return created(pod, waitingProblem(cs), restarts)
	}
	var started time.Time
	var problem string
	for _, cs := range st.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			if t := cs.State.Running.StartedAt.Time; started.IsZero() || t.Before(started) {
				started = t
			}
		case cs.State.Waiting != nil && problem == "":
			problem = waitingProblem(cs)
		}
		if problem == "" && cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.Reason == "OOMKilled" {
			problem = "OOMKilled"
		}
	}
	if !started.IsZero() || restarts > 0 {
		return Progress{Stage: Starting, Since: started, Problem: problem, Restarts: restarts}
	}
	return created(pod, problem, restarts)
}

// created is the stage of a scheduled pod whose containers are not
// created yet, since its sandbox was ready, or else since it was
// scheduled.
func created(pod *corev1.Pod, problem string, restarts int32) Progress {
	p := Progress{Stage: PullingImage, Problem: problem, Restarts: restarts}
	if c := condition(pod, corev1.PodReadyToStartContainers); c != nil && c.Status == corev1.ConditionTrue {
		p.Since = c.LastTransitionTime.Time
	} else if c := condition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionTrue {
		p.Since = c.LastTransitionTime.Time
	}
	return p
}

func waitingProblem(cs corev1.ContainerStatus) string {
	if cs.State.Waiting == nil {
		return ""
	}
	return Problem(cs.State.Waiting.Reason)
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// Span is how long a woken pod spent in one stage.
type Span struct {
	Stage Stage
	Took  time.Duration
}

// Spans returns how long a Ready pod, scaled up from zero at scaledUp,
// spent in each stage on its way to Ready, as its status' times say
// (whole seconds, as the API keeps them): from the scale-up to the pod's
// creation (ScalingUp), to its scheduling (WaitingForNode), to its first
// container's start (PullingImage), through its init containers
// (Initializing), to Ready (Starting). A stage whose times the status
// does not give is left out; none when the pod is not Ready.
func Spans(pod *corev1.Pod, scaledUp time.Time) []Span {
	ready := condition(pod, corev1.PodReady)
	if ready == nil || ready.Status != corev1.ConditionTrue {
		return nil
	}
	var spans []Span
	add := func(s Stage, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() && !to.Before(from) {
			spans = append(spans, Span{s, to.Sub(from)})
		}
	}
	created := pod.CreationTimestamp.Time
	var scheduled time.Time
	if c := condition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionTrue {
		scheduled = c.LastTransitionTime.Time
	}
	var firstInit, appStart time.Time
	for _, cs := range pod.Status.InitContainerStatuses {
		switch {
		case cs.State.Terminated != nil && !cs.State.Terminated.StartedAt.IsZero():
			firstInit = earliest(firstInit, cs.State.Terminated.StartedAt.Time)
		case cs.State.Running != nil:
			firstInit = earliest(firstInit, cs.State.Running.StartedAt.Time)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			appStart = earliest(appStart, cs.State.Running.StartedAt.Time)
		}
	}
	if !scaledUp.IsZero() && !created.IsZero() {
		// The scale-up is the operator's clock to the nanosecond, the
		// creation the apiserver's to the second.
		add(ScalingUp, scaledUp.Truncate(time.Second), created)
	}
	add(WaitingForNode, created, scheduled)
	firstStart := appStart
	if !firstInit.IsZero() {
		firstStart = firstInit
	}
	add(PullingImage, scheduled, firstStart)
	if !firstInit.IsZero() {
		add(Initializing, firstInit, appStart)
	}
	add(Starting, appStart, ready.LastTransitionTime.Time)
	return spans
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// spanWords name the stages as an event lists them.
var spanWords = map[Stage]string{ScalingUp: "creating the pod", WaitingForNode: "waiting for a node",
	PullingImage: "pulling its image", Initializing: "init containers", Starting: "starting to Ready"}

// SpansWords says spans for an event: "creating the pod 1s, waiting for
// a node 0s, pulling its image 12s, starting to Ready 4m1s".
func SpansWords(spans []Span) string {
	parts := make([]string, len(spans))
	for i, s := range spans {
		parts[i] = spanWords[s.Stage] + " " + s.Took.Round(time.Second).String()
	}
	return strings.Join(parts, ", ")
}
