package podnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/pkg/workloop"
	"github.com/elasti-dev/elasti/test/localcluster"
)

const (
	// kubeletName names the work queue (and its metrics).
	kubeletName = "podnet-kubelet"
	// kubeletWorkers sync that many pods at once. A kubelet gives each
	// pod a worker of its own, so one pod's slow start or status write
	// never holds another's. With a single worker, a wake of 100 pods on
	// a loaded machine (apiserver writes of 0.4-2 s at load average 25)
	// wrote the last pod Running and Ready 100 s after it was scheduled:
	// the cold-start gate's clients gave up at 60 s (docs/development/ci.md).
	kubeletWorkers = 16
)

// Kubelet is a fake kubelet for the pod network: it keeps a pod's IP on the
// namespace's lo while the pod is Ready, so a backend listening in the
// namespace "runs" in every Ready pod. It watches pods in all namespaces and
// touches only IPs inside PodCIDR; pods with other IPs (host network, other
// ranges) are ignored. kwok may hand a deleted pod's IP to a new pod, so an
// IP is removed only when no Ready pod holds it any more.
//
// On a cluster started with localcluster.Options.ReadyAfterAddress it is
// also what starts the kwok node's pods, as a kubelet would: it gives a
// scheduled pod an address from localcluster.KwokPodCIDR, puts it on lo,
// and only then writes the pod Running and Ready, in one status write, so
// no pod is ever Ready before its address answers.
//
// Event handlers only queue pod keys; kubeletWorkers reconcile them, each
// key by one worker at a time, with the bounded retries of workloop.
type Kubelet struct {
	net      *Network
	kube     kubernetes.Interface
	onChange func(ip string, ready bool)

	factory   informers.SharedInformerFactory
	podLister corelisters.PodLister
	podSynced cache.InformerSynced

	loop *workloop.Loop[cache.ObjectName]
	// syncHandler is a field so tests can swap it.
	syncHandler func(ctx context.Context, key cache.ObjectName) error

	mu      sync.Mutex
	podIP   map[cache.ObjectName]string           // IP each pod holds on lo
	holders map[string]sets.Set[cache.ObjectName] // pods holding each IP
	next    netip.Addr                            // where allocate last looked

	started atomic.Bool
	synced  atomic.Bool
	done    chan struct{}
}

// NewKubelet wires a fake kubelet for n to kube. onChange, if not nil, is
// called from the worker after an IP was added (ready true) or removed
// (ready false); it must not block for long. Start it with Run.
func NewKubelet(n *Network, kube kubernetes.Interface, onChange func(ip string, ready bool)) (*Kubelet, error) {
	factory := informers.NewSharedInformerFactory(kube, 0)
	pods := factory.Core().V1().Pods()
	k := &Kubelet{
		net:       n,
		kube:      kube,
		onChange:  onChange,
		factory:   factory,
		podLister: pods.Lister(),
		podSynced: pods.Informer().HasSynced,
		podIP:     map[cache.ObjectName]string{},
		holders:   map[string]sets.Set[cache.ObjectName]{},
		done:      make(chan struct{}),
	}
	k.syncHandler = k.syncPod
	k.loop = workloop.New(kubeletName, func(ctx context.Context, key cache.ObjectName) error {
		return k.syncHandler(ctx, key)
	}, nil)
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.enqueue,
		UpdateFunc: func(_, obj any) { k.enqueue(obj) },
		DeleteFunc: k.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("podnet: pod event handler: %w", err)
	}
	return k, nil
}

// RunKubelet starts a fake kubelet for n in the background; it stops when
// ctx ends (Done then closes). Wait for HasSynced before relying on the IPs
// of pods that already existed.
func (n *Network) RunKubelet(ctx context.Context, kube kubernetes.Interface, onChange func(ip string, ready bool)) (*Kubelet, error) {
	k, err := NewKubelet(n, kube, onChange)
	if err != nil {
		return nil, err
	}
	go k.Run(ctx)
	return k, nil
}

// Run starts the informer, applies every existing pod once, then reconciles
// pod events until ctx ends. It blocks until the worker and the informer
// have stopped. Run may be called once; IPs stay on lo after it returns
// (Network.Close removes everything).
func (k *Kubelet) Run(ctx context.Context) {
	if !k.started.CompareAndSwap(false, true) {
		utilruntime.HandleErrorWithContext(ctx, errors.New("podnet: Kubelet.Run called twice"), "Not starting")
		return
	}
	defer close(k.done)
	logger := klog.FromContext(ctx).WithValues("controller", kubeletName)
	ctx = klog.NewContext(ctx, logger)

	k.factory.Start(ctx.Done())
	defer k.factory.Shutdown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, k.podSynced) {
		k.loop.ShutDown()
		return
	}
	// Apply the initial state before HasSynced reports true. The informer
	// queued the same keys; the worker finds them already done.
	pods, err := k.podLister.List(labels.Everything())
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Listing pods from cache")
	}
	for _, pod := range pods {
		if err := k.syncHandler(ctx, cache.MetaObjectToName(pod)); err != nil {
			logger.V(2).Info("Initial sync failed, the worker retries", "pod", klog.KObj(pod), "err", err)
		}
	}
	k.synced.Store(true)
	logger.V(2).Info("Synced", "pods", len(pods))
	k.loop.Run(ctx, kubeletWorkers)
}

// HasSynced reports whether the pod cache has synced and every pod seen in
// the initial list has been applied.
func (k *Kubelet) HasSynced() bool { return k.synced.Load() }

// Done is closed when Run has returned.
func (k *Kubelet) Done() <-chan struct{} { return k.done }

// enqueue queues a pod's key; it unwraps delete tombstones.
func (k *Kubelet) enqueue(obj any) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("podnet kubelet: key for %T: %w", obj, err))
		return
	}
	k.loop.Add(key)
}

// syncPod makes the IP held for key match the pod's current state; on a
// cluster where it starts the kwok node's pods, it starts a scheduled one.
func (k *Kubelet) syncPod(ctx context.Context, key cache.ObjectName) error {
	want := ""
	pod, err := k.podLister.Pods(key.Namespace).Get(key.Name)
	switch {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		return err
	case toStart(pod):
		return k.startPod(ctx, key, pod)
	default:
		want = servingIP(pod)
	}
	return k.syncIP(ctx, key, want)
}

// toStart reports whether pod is the kwok node's, scheduled and not
// started: on a cluster without kwok's start stage
// (localcluster.Options.ReadyAfterAddress) nobody else starts it.
func toStart(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == localcluster.NodeName && pod.DeletionTimestamp == nil && pod.Status.PodIP == "" &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// startPod gives pod an address (the node's for a host-network pod), puts
// it on lo, and then writes the pod Running and Ready in one status write.
// A failed write is retried by the queue with the same address.
func (k *Kubelet) startPod(ctx context.Context, key cache.ObjectName, pod *corev1.Pod) error {
	ip := HostIP
	if !pod.Spec.HostNetwork {
		var err error
		if ip, err = k.hold(ctx, key); err != nil {
			return err
		}
		if ip == "" {
			return nil // the network is closed: the address does not answer
		}
	}
	if _, err := k.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, startedStatus(pod, ip), metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("podnet kubelet: starting %s: %w", klog.KObj(pod), err)
	}
	klog.FromContext(ctx).V(2).Info("Started pod, Ready once its address answered", "pod", klog.KObj(pod), "ip", ip)
	return nil
}

// hold gives the pod key an address and puts it on lo: the one it holds,
// else a free one of localcluster.KwokPodCIDR, free of every pod's
// address. It picks and takes the address under one lock, so two pods
// started at once never get the same one. It returns "" once the network
// is closed.
func (k *Kubelet) hold(ctx context.Context, key cache.ObjectName) (string, error) {
	k.mu.Lock()
	ip, err := k.freeAddressLocked(key)
	var changes []ipChange
	if err == nil {
		changes, err = k.setIPLocked(klog.FromContext(ctx), key, ip)
	}
	held := k.podIP[key] == ip
	k.mu.Unlock()
	k.notify(changes)
	if err = k.closedIsDone(ctx, key, err); err != nil || !held {
		return "", err
	}
	return ip, nil
}

// freeAddressLocked is the address of the pod key: the one it holds, else
// one no pod holds. k.mu is held.
func (k *Kubelet) freeAddressLocked(key cache.ObjectName) (string, error) {
	if ip := k.podIP[key]; ip != "" {
		return ip, nil
	}
	used := map[string]bool{}
	for ip := range k.holders {
		used[ip] = true
	}
	pods, err := k.podLister.List(labels.Everything())
	if err != nil {
		return "", err
	}
	for _, p := range pods {
		used[p.Status.PodIP] = true
	}
	prefix := netip.MustParsePrefix(localcluster.KwokPodCIDR)
	// From where the last search ended, so freed addresses are reused last.
	for range 1 << (32 - prefix.Bits()) {
		k.next = k.next.Next()
		if !prefix.Contains(k.next) || k.next == prefix.Addr() {
			k.next = prefix.Addr().Next()
		}
		if ip := k.next.String(); !used[ip] {
			return ip, nil
		}
	}
	return "", fmt.Errorf("podnet kubelet: no free address in %s", localcluster.KwokPodCIDR)
}

// startedStatus is pod's status once started at ip: Running, its
// containers running and ready, and Ready with every readiness gate.
func startedStatus(pod *corev1.Pod, ip string) *corev1.Pod {
	pod = pod.DeepCopy()
	now := metav1.Now()
	st := &pod.Status
	set := func(t corev1.PodConditionType) {
		for i := range st.Conditions {
			if st.Conditions[i].Type == t {
				st.Conditions[i].Status, st.Conditions[i].Reason, st.Conditions[i].LastTransitionTime = corev1.ConditionTrue, "", now
				return
			}
		}
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	set(corev1.PodInitialized)
	set(corev1.ContainersReady)
	set(corev1.PodReady)
	for _, g := range pod.Spec.ReadinessGates {
		set(g.ConditionType)
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true), State: running})
	}
	st.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}}}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			cs.Started, cs.State = ptr.To(true), running
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	st.HostIP, st.HostIPs = HostIP, []corev1.HostIP{{IP: HostIP}}
	st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	st.Phase, st.StartTime = corev1.PodRunning, &now
	return pod
}

// ipChange is an address added to lo (ready) or removed from it.
type ipChange struct {
	ip    string
	ready bool
}

// syncIP makes the IP held for key want ("" for none).
func (k *Kubelet) syncIP(ctx context.Context, key cache.ObjectName, want string) error {
	k.mu.Lock()
	changes, err := k.setIPLocked(klog.FromContext(ctx), key, want)
	k.mu.Unlock()
	k.notify(changes)
	return k.closedIsDone(ctx, key, err)
}

// setIPLocked makes the IP held for key want and returns what changed on
// lo. k.mu is held.
func (k *Kubelet) setIPLocked(logger klog.Logger, key cache.ObjectName, want string) ([]ipChange, error) {
	var changes []ipChange
	have := k.podIP[key]
	if have == want {
		return nil, nil
	}
	if have != "" {
		others := k.holders[have].Len() - 1
		if others == 0 {
			if err := k.net.RemoveIP(have); err != nil {
				return changes, err
			}
			changes = append(changes, ipChange{have, false})
			logger.V(2).Info("Removed pod IP", "pod", key, "ip", have)
		} else {
			logger.V(4).Info("Pod IP still held by another pod", "pod", key, "ip", have, "holders", others)
		}
		k.holders[have].Delete(key)
		if k.holders[have].Len() == 0 {
			delete(k.holders, have)
		}
		delete(k.podIP, key)
	}
	if want != "" {
		if k.holders[want].Len() == 0 {
			if err := k.net.AddIP(want); err != nil {
				return changes, err
			}
			changes = append(changes, ipChange{want, true})
			logger.V(2).Info("Added pod IP", "pod", key, "ip", want)
			k.holders[want] = sets.New[cache.ObjectName]()
		}
		k.holders[want].Insert(key)
		k.podIP[key] = want
	}
	return changes, nil
}

// notify tells onChange of changes, outside k.mu.
func (k *Kubelet) notify(changes []ipChange) {
	if k.onChange == nil {
		return
	}
	for _, c := range changes {
		k.onChange(c.ip, c.ready)
	}
}

// closedIsDone is err, except that a closed network ends the work on key:
// there is nothing left to keep in step, and retrying cannot help.
func (k *Kubelet) closedIsDone(ctx context.Context, key cache.ObjectName, err error) error {
	if errors.Is(err, ErrClosed) {
		klog.FromContext(ctx).V(4).Info("Network closed, ignoring pod", "pod", key)
		return nil
	}
	return err
}

// servingIP is the pod IP that should answer for pod, or "" if none: the pod
// must be Ready, not being deleted, and have an IP inside PodCIDR.
func servingIP(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil || !podReady(pod) {
		return ""
	}
	addr, err := ParsePodIP(pod.Status.PodIP)
	if err != nil || sandboxPrefix.Contains(addr) {
		// A sandboxed pod's IP lives in its own namespace; on the node's lo
		// it would capture the pod's traffic.
		return ""
	}
	return addr.String()
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
