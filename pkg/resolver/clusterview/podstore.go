package clusterview

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elasti-dev/elasti/pkg/wakestage"
)

// maxViewPodBytes bounds one pod as the view keeps it (its trimmed
// protobuf size). A pod's spec is its owner's to write, up to the
// apiserver's object limit of about 1.5 MiB; past the bound the view
// keeps only what vouches for its address (name, UID, addresses,
// Ready), and direct probing reads its probes with a GET as before.
// MaxPodViews * MaxViewPods * maxViewPodBytes is 32 MiB at most; a
// typical trimmed pod is 1-2 KiB.
const maxViewPodBytes = 16 << 10

// podStore is a reflector's store of one view: at most max pods,
// trimmed to what the resolver reads. A pod past max is left out, and
// the store says it is not whole until the next list (Replace) fits.
type podStore struct {
	max     int
	changed func()

	// listing is closed by the first list, or when there will be none.
	listing      chan struct{}
	listingEnded sync.Once

	mu     sync.Mutex
	listed bool
	over   bool
	pods   map[string]*corev1.Pod
}

func newPodStore(max int, changed func()) *podStore {
	return &podStore{max: max, changed: changed, pods: map[string]*corev1.Pod{}, listing: make(chan struct{})}
}

// firstList returns a channel closed once the store was first listed,
// or endListing said it will not be.
func (s *podStore) firstList() <-chan struct{} { return s.listing }

func (s *podStore) endListing() { s.listingEnded.Do(func() { close(s.listing) }) }

// list returns the pods, by name, and whether they are all of them.
func (s *podStore) list() ([]*corev1.Pod, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pods := make([]*corev1.Pod, 0, len(s.pods))
	for _, p := range s.pods {
		pods = append(pods, p)
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, s.listed && !s.over
}

func (s *podStore) put(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	s.mu.Lock()
	if _, known := s.pods[pod.Name]; !known && len(s.pods) >= s.max {
		s.over = true
	} else {
		s.pods[pod.Name] = trimPod(pod)
	}
	s.mu.Unlock()
	s.changed()
}

// Add implements cache.ReflectorStore.
func (s *podStore) Add(obj any) error { s.put(obj); return nil }

// Update implements cache.ReflectorStore.
func (s *podStore) Update(obj any) error { s.put(obj); return nil }

// Delete implements cache.ReflectorStore.
func (s *podStore) Delete(obj any) error {
	var name string
	switch o := obj.(type) {
	case *corev1.Pod:
		name = o.Name
	case metav1.Object:
		name = o.GetName()
	default:
		return nil
	}
	s.mu.Lock()
	delete(s.pods, name)
	s.mu.Unlock()
	s.changed()
	return nil
}

// Replace implements cache.ReflectorStore: the watch listed again.
func (s *podStore) Replace(objs []any, _ string) error {
	pods := map[string]*corev1.Pod{}
	over := false
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			if len(pods) >= s.max {
				over = true
				break
			}
			pods[pod.Name] = trimPod(pod)
		}
	}
	s.mu.Lock()
	s.pods, s.over, s.listed = pods, over, true
	s.mu.Unlock()
	s.endListing()
	s.changed()
	return nil
}

// Resync implements cache.ReflectorStore.
func (s *podStore) Resync() error { return nil }

// trimPod keeps of pod what the view, direct probing and the wake's stage
// (package wakestage) read: its identity and labels, its node, its
// addresses, phase, scheduling, sandbox and Ready conditions and its
// containers' states and restarts, and its containers' ports and probes.
// Of the messages and reasons a pod's status carries it keeps only the
// reasons wakestage may show. The reflector decoded pod for this store
// alone, so it is not copied.
func trimPod(pod *corev1.Pod) *corev1.Pod {
	t := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, Labels: pod.Labels,
			DeletionTimestamp: pod.DeletionTimestamp, ResourceVersion: pod.ResourceVersion, CreationTimestamp: pod.CreationTimestamp},
		Spec: corev1.PodSpec{HostNetwork: pod.Spec.HostNetwork, NodeName: pod.Spec.NodeName, InitContainers: trimContainers(pod.Spec.InitContainers),
			Containers: trimContainers(pod.Spec.Containers)},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs,
			InitContainerStatuses: trimStatuses(pod.Status.InitContainerStatuses), ContainerStatuses: trimStatuses(pod.Status.ContainerStatuses)},
	}
	for _, c := range pod.Status.Conditions {
		switch c.Type {
		case corev1.PodReady, corev1.PodScheduled, corev1.PodReadyToStartContainers:
			t.Status.Conditions = append(t.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status,
				Reason: wakestage.Problem(c.Reason), LastTransitionTime: c.LastTransitionTime})
		}
	}
	if t.Size() > maxViewPodBytes {
		t.Labels, t.Spec = nil, corev1.PodSpec{HostNetwork: pod.Spec.HostNetwork, NodeName: pod.Spec.NodeName}
		t.Status.InitContainerStatuses, t.Status.ContainerStatuses = nil, nil
		t.Annotations = map[string]string{SpecDroppedAnnotation: "true"}
	}
	return t
}

// SpecDroppedAnnotation marks a pod the view keeps without its spec
// (maxViewPodBytes): direct probing reads it from the apiserver.
const SpecDroppedAnnotation = "elasti.truefoundry.com/view-spec-dropped"

func trimContainers(cs []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, 0, len(cs))
	for _, c := range cs {
		out = append(out, corev1.Container{Name: c.Name, Ports: c.Ports, ReadinessProbe: c.ReadinessProbe,
			StartupProbe: c.StartupProbe, RestartPolicy: c.RestartPolicy})
	}
	return out
}

func trimStatuses(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(ss))
	for _, s := range ss {
		t := corev1.ContainerStatus{Name: s.Name, State: trimState(s.State), Ready: s.Ready, Started: s.Started, RestartCount: s.RestartCount}
		if last := s.LastTerminationState.Terminated; last != nil {
			t.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: last.ExitCode, Reason: wakestage.Problem(last.Reason)}
		}
		out = append(out, t)
	}
	return out
}

// trimState is a container's state without its messages, and with only
// the reasons wakestage may show.
func trimState(st corev1.ContainerState) corev1.ContainerState {
	var t corev1.ContainerState
	if w := st.Waiting; w != nil {
		t.Waiting = &corev1.ContainerStateWaiting{Reason: wakestage.Problem(w.Reason)}
	}
	if r := st.Running; r != nil {
		t.Running = &corev1.ContainerStateRunning{StartedAt: r.StartedAt}
	}
	if x := st.Terminated; x != nil {
		t.Terminated = &corev1.ContainerStateTerminated{ExitCode: x.ExitCode, Reason: wakestage.Problem(x.Reason), StartedAt: x.StartedAt, FinishedAt: x.FinishedAt}
	}
	return t
}
