// Package procnode is a kubelet for the local cluster that really runs
// pods: each pod scheduled to its node gets a network namespace of its own
// (a podnet sandbox with a pod IP), a ServiceAccount token at the standard
// path, a resolv.conf pointing at the cluster DNS, and one process per
// container, started from a local binary chosen by the container's image.
// Readiness and liveness come from the pod's own probes; restartPolicy
// decides whether a container that exits starts again, so a Job's pod
// (restartPolicy Never or OnFailure) ends Succeeded or Failed.
//
// kwok runs the test apps on a tainted fake node; pods without that
// toleration (elasti's manifests, CoreDNS, the ingress controller) land
// here, so what runs is exactly what `kubectl apply -f manifests/` asked
// for: a wrong env name, a missing RBAC rule or a probe on the wrong port
// shows up as a pod that never becomes Ready.
//
// What a real kubelet does that this one does not: images (a container's
// image names a local binary by its last path element, e.g.
// ghcr.io/elasti-dev/elasti-operator:1.2 runs the binary registered as
// "elasti-operator"), resource limits, exec probes, init containers and
// volume types other than emptyDir, configMap and secret. A pod that needs
// one of those is reported in its status, never silently half-run.
package procnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/elasti-dev/elasti/pkg/workloop"
	"github.com/elasti-dev/elasti/test/localcluster/podnet"
)

const (
	// DefaultNodeName is the node whose pods this kubelet runs.
	DefaultNodeName = "elasti-node-0"
	// DefaultDNSServer is the kube-dns Service's ClusterIP.
	DefaultDNSServer = "10.0.0.10"
	// DefaultClusterDomain is the DNS suffix of Services.
	DefaultClusterDomain = "cluster.local"

	queueName = "procnode-kubelet"
	// workers sync that many pods at once. A pod's termination holds its
	// worker for up to its grace period (a resolver's drain, seconds),
	// and a kubelet gives each pod a worker of its own: with a few, the
	// pods of a rollout wait on the ones it stops (as podnet's fake
	// kubelet's 100 starts waited on one worker, docs/development/ci.md).
	workers = 16
	// tokenTTL is the lifetime of a pod's ServiceAccount token; no test
	// runs long enough to need the rotation a real kubelet does.
	tokenTTL = 24 * time.Hour
)

// Options configure a Node.
type Options struct {
	// Network is the node network namespace the sandboxes hang off.
	Network *podnet.Network
	Kube    kubernetes.Interface
	// APIServer is host:port of the apiserver as pods reach it (a
	// forwarder on the node gateway); it becomes KUBERNETES_SERVICE_HOST
	// and _PORT.
	APIServer string
	// CAFile is the apiserver's CA, written to each pod as ca.crt.
	CAFile string
	// Binaries maps an image's last path element, with its tag or
	// without (and without digest), to the local binary that runs it; a
	// key with the tag wins.
	Binaries map[string]string
	// StateDir holds the pods' token, resolv.conf, volumes and logs.
	StateDir string

	NodeName      string // DefaultNodeName if empty
	DNSServer     string // DefaultDNSServer if empty
	ClusterDomain string // DefaultClusterDomain if empty
}

// Node runs the pods bound to one node as sandboxed processes.
type Node struct {
	opts Options

	factory   informers.SharedInformerFactory
	podLister corelisters.PodLister
	podSynced cache.InformerSynced
	loop      *workloop.Loop[cache.ObjectName]

	mu   sync.Mutex
	pods map[cache.ObjectName]*pod
	ips  *podnet.IPAllocator
}

// New wires a Node; start it with Run.
func New(opts Options) (*Node, error) {
	if opts.Network == nil || opts.Kube == nil || opts.APIServer == "" || opts.CAFile == "" || opts.StateDir == "" {
		return nil, errors.New("procnode: Network, Kube, APIServer, CAFile and StateDir are required")
	}
	if opts.NodeName == "" {
		opts.NodeName = DefaultNodeName
	}
	if opts.DNSServer == "" {
		opts.DNSServer = DefaultDNSServer
	}
	if opts.ClusterDomain == "" {
		opts.ClusterDomain = DefaultClusterDomain
	}
	// One watch for this node's pods only, as a kubelet does.
	factory := informers.NewSharedInformerFactoryWithOptions(opts.Kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", opts.NodeName).String()
		}))
	pods := factory.Core().V1().Pods()
	n := &Node{
		opts:      opts,
		factory:   factory,
		podLister: pods.Lister(),
		podSynced: pods.Informer().HasSynced,
		pods:      map[cache.ObjectName]*pod{},
		ips:       podnet.NewIPAllocator(),
	}
	n.loop = workloop.New(queueName, n.syncPod, nil)
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    n.enqueue,
		UpdateFunc: func(_, obj any) { n.enqueue(obj) },
		DeleteFunc: n.enqueue,
	}); err != nil {
		return nil, err
	}
	return n, nil
}

// NodeName is the node whose pods run here.
func (n *Node) NodeName() string { return n.opts.NodeName }

// Run registers the node, runs its pods until ctx ends, then stops every
// process and removes every sandbox.
func (n *Node) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("controller", queueName)
	ctx = klog.NewContext(ctx, logger)
	if err := n.register(ctx); err != nil {
		return err
	}
	n.factory.Start(ctx.Done())
	defer n.factory.Shutdown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, n.podSynced) {
		return ctx.Err()
	}
	n.loop.Run(ctx, workers)
	n.stopAll(logger)
	return nil
}

func (n *Node) enqueue(obj any) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	n.loop.Add(key)
}

// register creates (or refreshes) the Node object, Ready and schedulable.
func (n *Node) register(ctx context.Context) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.opts.NodeName,
			Labels: map[string]string{
				"kubernetes.io/hostname": n.opts.NodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
	}
	nodes := n.opts.Kube.CoreV1().Nodes()
	got, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = nodes.Get(ctx, n.opts.NodeName, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("procnode: register node %s: %w", n.opts.NodeName, err)
	}
	now := metav1.Now()
	got = got.DeepCopy()
	got.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "procnode runs this node's pods as local processes", LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: podnet.NamespaceIP}, {Type: corev1.NodeHostName, Address: n.opts.NodeName}},
		NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "procnode", OperatingSystem: "linux", Architecture: "amd64"},
	}
	if _, err := nodes.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("procnode: node %s status: %w", n.opts.NodeName, err)
	}
	return nil
}

// syncPod makes what runs for key match the pod: start it, report its
// status, or stop it and release it when it is being deleted.
func (n *Node) syncPod(ctx context.Context, key cache.ObjectName) error {
	logger := klog.FromContext(ctx).WithValues("pod", key)
	ctx = klog.NewContext(ctx, logger)
	obj, err := n.podLister.Pods(key.Namespace).Get(key.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	n.mu.Lock()
	p := n.pods[key]
	n.mu.Unlock()

	if apierrors.IsNotFound(err) || (p != nil && p.uid != obj.UID) {
		if p != nil {
			n.release(ctx, key, p, 0)
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		p = nil
	}
	if obj.DeletionTimestamp != nil {
		grace := 30 * time.Second
		if obj.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*obj.DeletionGracePeriodSeconds) * time.Second
		}
		if p != nil {
			n.release(ctx, key, p, grace)
		}
		// The kubelet's last word: the pod is gone for good.
		err := n.opts.Kube.CoreV1().Pods(key.Namespace).Delete(ctx, key.Name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(obj.UID)),
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if p == nil {
		if p, err = n.start(ctx, obj); err != nil {
			return err
		}
	}
	return n.updateStatus(ctx, obj, p)
}

// start builds the sandbox and starts every container of obj.
func (n *Node) start(ctx context.Context, obj *corev1.Pod) (*pod, error) {
	key := cache.MetaObjectToName(obj)
	logger := klog.FromContext(ctx)
	p := &pod{uid: obj.UID, key: key, node: n, startTime: metav1.Now(), restartPolicy: obj.Spec.RestartPolicy}
	if msg := unsupported(obj); msg != "" {
		p.failure = msg
		n.track(key, p)
		logger.Info("Pod cannot run on the process node", "reason", msg)
		return p, nil
	}
	sb, releaseSandbox, err := n.NewSandbox(ctx)
	if err != nil {
		return nil, err
	}
	p.sandbox, p.releaseSandbox = sb, releaseSandbox
	p.dir = filepath.Join(n.opts.StateDir, fmt.Sprintf("%s_%s_%s", key.Namespace, key.Name, obj.UID))
	if err := n.prepare(ctx, obj, p); err != nil {
		// Retried: a ServiceAccount, ConfigMap or Secret may still be on
		// its way, as with a real kubelet.
		p.teardown()
		return nil, err
	}
	for i := range obj.Spec.Containers {
		c := newContainer(p, &obj.Spec.Containers[i])
		p.containers = append(p.containers, c)
	}
	n.track(key, p)
	for _, c := range p.containers {
		c.start(ctx)
	}
	logger.V(2).Info("Started pod", "ip", sb.IP, "sandbox", sb.Name, "containers", len(p.containers))
	return p, nil
}

func (n *Node) track(key cache.ObjectName, p *pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pods[key] = p
}

// release stops p's containers within grace and frees its sandbox and IP.
func (n *Node) release(ctx context.Context, key cache.ObjectName, p *pod, grace time.Duration) {
	n.mu.Lock()
	if n.pods[key] == p {
		delete(n.pods, key)
	}
	n.mu.Unlock()
	p.stop(grace)
	p.teardown()
	klog.FromContext(ctx).V(2).Info("Stopped pod")
}

// teardown removes p's sandbox and frees its IP.
func (p *pod) teardown() {
	if p.releaseSandbox != nil {
		p.releaseSandbox()
	}
}

// stopAll ends every pod when the node stops.
func (n *Node) stopAll(logger klog.Logger) {
	n.mu.Lock()
	pods := n.pods
	n.pods = map[cache.ObjectName]*pod{}
	n.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			p.stop(5 * time.Second)
			p.teardown()
		})
	}
	wg.Wait()
	logger.V(2).Info("Stopped every pod", "pods", len(pods))
}

// unsupported names what in obj this kubelet cannot run, or "".
func unsupported(obj *corev1.Pod) string {
	if len(obj.Spec.InitContainers) > 0 {
		return "init containers are not supported by the process node"
	}
	if obj.Spec.HostNetwork {
		return "hostNetwork is not supported by the process node"
	}
	for _, v := range obj.Spec.Volumes {
		if v.EmptyDir == nil && v.ConfigMap == nil && v.Secret == nil {
			return fmt.Sprintf("volume %q: only emptyDir, configMap and secret volumes are supported by the process node", v.Name)
		}
	}
	return ""
}

// binaryFor maps an image to its local binary: the one registered for its
// name and tag ("elasti-operator:v2"), else the one for its name, so a
// test can run another build under another tag, as an upgrade does.
func (n *Node) binaryFor(image string) (string, error) {
	name := image
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if bin, ok := n.opts.Binaries[name]; ok && strings.Contains(name, ":") {
		return bin, nil
	}
	if i := strings.IndexByte(name, ':'); i >= 0 {
		name = name[:i]
	}
	if bin, ok := n.opts.Binaries[name]; ok {
		return bin, nil
	}
	known := make([]string, 0, len(n.opts.Binaries))
	for k := range n.opts.Binaries {
		known = append(known, k)
	}
	sort.Strings(known)
	return "", fmt.Errorf("no local binary for image %q (the process node runs: %s)", image, strings.Join(known, ", "))
}

// LogPath is where a container's output goes (appended across restarts).
func (n *Node) LogPath(namespace, podName, container string) string {
	return filepath.Join(n.opts.StateDir, "logs", fmt.Sprintf("%s_%s_%s.log", namespace, podName, container))
}

// Logs returns the last lines of every container log of the pods whose
// name starts with prefix in namespace, for failure messages.
func (n *Node) Logs(namespace, prefix string, lines int) string {
	var b strings.Builder
	for _, l := range n.ContainerLogs(namespace, prefix, lines) {
		fmt.Fprintf(&b, "--- %s ---\n%s\n", l.File, l.Tail)
	}
	return b.String()
}

// ContainerLog is the last lines of one container's log.
type ContainerLog struct {
	// File is the log's name: namespace_pod_container.log, so evidence
	// can say which replica wrote a line.
	File, Tail string
}

// ContainerLogs is Logs one container at a time, in the files' order.
func (n *Node) ContainerLogs(namespace, prefix string, lines int) []ContainerLog {
	matches, _ := filepath.Glob(filepath.Join(n.opts.StateDir, "logs", namespace+"_"+prefix+"*.log"))
	out := make([]ContainerLog, 0, len(matches))
	for _, m := range matches {
		out = append(out, ContainerLog{File: filepath.Base(m), Tail: TailFile(m, lines)})
	}
	return out
}

// NewSandbox gives a caller that is not a pod (a test's client) a sandbox
// with an IP from the same pool as the pods, so the two never collide.
// release removes it and frees the IP.
func (n *Node) NewSandbox(ctx context.Context) (sb *podnet.Sandbox, release func(), err error) {
	n.mu.Lock()
	ip, err := n.ips.Allocate()
	n.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	sb, err = n.opts.Network.AddSandbox(ctx, ip)
	if err != nil {
		n.mu.Lock()
		n.ips.Release(ip)
		n.mu.Unlock()
		return nil, nil, err
	}
	return sb, func() {
		if err := sb.Remove(); err != nil {
			utilruntime.HandleError(fmt.Errorf("procnode: remove sandbox %s: %w", sb.Name, err))
		}
		n.mu.Lock()
		n.ips.Release(ip)
		n.mu.Unlock()
	}, nil
}

// TailFile is the last lines of the file at path, or why it cannot be read.
func TailFile(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
