package procnode

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/elasti-dev/elasti/test/localcluster/podnet"
)

// serviceAccountDir is where in-cluster clients look for their token.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// pod is one running pod: its sandbox, files and containers.
type pod struct {
	uid     types.UID
	key     cache.ObjectName
	node    *Node
	sandbox *podnet.Sandbox
	// releaseSandbox removes the sandbox and frees its IP.
	releaseSandbox func()
	dir            string
	startTime      metav1.Time
	// restartPolicy says which exits its containers are restarted after.
	restartPolicy corev1.RestartPolicy
	// failure, when set, is why the pod cannot run at all.
	failure string

	// mounts are (host dir or file, path in the pod) pairs, in order.
	mounts     [][2]string
	env        []string
	containers []*container

	stopOnce sync.Once
}

// ResolvConf is the resolv.conf of a pod in namespace with dnsPolicy
// ClusterFirst: the cluster DNS, and the search path that makes "web" and
// "web.<ns>" resolve as they do in a real pod.
func ResolvConf(namespace, clusterDomain, dnsServer string) string {
	d := clusterDomain
	return fmt.Sprintf("search %s.svc.%s svc.%s %s\nnameserver %s\noptions ndots:5\n", namespace, d, d, d, dnsServer)
}

// prepare writes what the pod's processes read: the ServiceAccount token,
// resolv.conf and volumes, and resolves every container's environment.
func (n *Node) prepare(ctx context.Context, obj *corev1.Pod, p *pod) error {
	for _, sub := range []string{"serviceaccount", "volumes"} {
		if err := os.MkdirAll(filepath.Join(p.dir, sub), 0o755); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(n.opts.StateDir, "logs"), 0o755); err != nil {
		return err
	}
	if err := n.writeServiceAccount(ctx, obj, filepath.Join(p.dir, "serviceaccount")); err != nil {
		return err
	}
	p.mounts = append(p.mounts, [2]string{filepath.Join(p.dir, "serviceaccount"), serviceAccountDir})

	resolv := filepath.Join(p.dir, "resolv.conf")
	ns := obj.Namespace
	if err := os.WriteFile(resolv, []byte(ResolvConf(ns, n.opts.ClusterDomain, n.opts.DNSServer)), 0o644); err != nil {
		return err
	}
	p.mounts = append(p.mounts, [2]string{resolv, "/etc/resolv.conf"})

	volumes := map[string]string{}
	for _, v := range obj.Spec.Volumes {
		dir := filepath.Join(p.dir, "volumes", v.Name)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		// MkdirAll is subject to umask; emptyDirs are world-writable as
		// a kubelet makes them, for pods that run as a non-root user.
		if err := os.Chmod(dir, 0o777); err != nil {
			return err
		}
		var data map[string][]byte
		switch {
		case v.ConfigMap != nil:
			cm, err := n.opts.Kube.CoreV1().ConfigMaps(ns).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil && !(apierrors.IsNotFound(err) && optional(v.ConfigMap.Optional)) {
				return fmt.Errorf("volume %q: %w", v.Name, err)
			}
			if cm != nil {
				data = map[string][]byte{}
				for k, s := range cm.Data {
					data[k] = []byte(s)
				}
			}
		case v.Secret != nil:
			s, err := n.opts.Kube.CoreV1().Secrets(ns).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil && !(apierrors.IsNotFound(err) && optional(v.Secret.Optional)) {
				return fmt.Errorf("volume %q: %w", v.Name, err)
			}
			if s != nil {
				data = s.Data
			}
		}
		for k, b := range data {
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(k)), b, 0o644); err != nil {
				return err
			}
		}
		volumes[v.Name] = dir
	}
	for _, c := range obj.Spec.Containers {
		for _, m := range c.VolumeMounts {
			dir, ok := volumes[m.Name]
			if !ok {
				return fmt.Errorf("container %q mounts unknown volume %q", c.Name, m.Name)
			}
			if m.SubPath != "" {
				dir = filepath.Join(dir, filepath.Clean("/"+m.SubPath))
			}
			p.mounts = append(p.mounts, [2]string{dir, m.MountPath})
		}
	}
	return nil
}

// writeServiceAccount asks the apiserver for a token bound to the pod, as
// a kubelet's projected volume does, and writes it with ca.crt and
// namespace.
func (n *Node) writeServiceAccount(ctx context.Context, obj *corev1.Pod, dir string) error {
	sa := obj.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	ttl := int64(tokenTTL / time.Second)
	tr, err := n.opts.Kube.CoreV1().ServiceAccounts(obj.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &ttl,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: obj.Name, UID: obj.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for ServiceAccount %s/%s: %w", obj.Namespace, sa, err)
	}
	ca, err := os.ReadFile(n.opts.CAFile)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"token":     []byte(tr.Status.Token),
		"ca.crt":    ca,
		"namespace": []byte(obj.Namespace),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// environment resolves c's env as a kubelet would, with the apiserver
// reached through the node's forwarder.
func (n *Node) environment(ctx context.Context, obj *corev1.Pod, ip string, c *corev1.Container) ([]string, error) {
	host, port, err := net.SplitHostPort(n.opts.APIServer)
	if err != nil {
		return nil, err
	}
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOSTNAME=" + obj.Name,
		"KUBERNETES_SERVICE_HOST=" + host,
		"KUBERNETES_SERVICE_PORT=" + port,
		"KUBERNETES_SERVICE_PORT_HTTPS=" + port,
	}
	values := map[string]string{}
	for _, e := range c.Env {
		v, err := n.envValue(ctx, obj, ip, c, e, values)
		if err != nil {
			return nil, fmt.Errorf("container %q env %s: %w", c.Name, e.Name, err)
		}
		if v != nil {
			values[e.Name] = *v
			env = append(env, e.Name+"="+*v)
		}
	}
	return env, nil
}

// envValue is one variable's value; nil leaves it unset (an optional
// reference to something missing).
func (n *Node) envValue(ctx context.Context, obj *corev1.Pod, ip string, c *corev1.Container, e corev1.EnvVar, earlier map[string]string) (*string, error) {
	if e.ValueFrom == nil {
		v := expand(e.Value, earlier)
		return &v, nil
	}
	f := e.ValueFrom
	switch {
	case f.FieldRef != nil:
		v, ok := map[string]string{
			"metadata.name":           obj.Name,
			"metadata.namespace":      obj.Namespace,
			"metadata.uid":            string(obj.UID),
			"spec.nodeName":           obj.Spec.NodeName,
			"spec.serviceAccountName": obj.Spec.ServiceAccountName,
			"status.podIP":            ip,
			"status.hostIP":           podnet.NamespaceIP,
		}[f.FieldRef.FieldPath]
		if !ok {
			return nil, fmt.Errorf("fieldRef %s is not supported", f.FieldRef.FieldPath)
		}
		return &v, nil
	case f.ResourceFieldRef != nil:
		return resourceValue(obj, c, f.ResourceFieldRef)
	case f.SecretKeyRef != nil:
		r := f.SecretKeyRef
		sec, err := n.opts.Kube.CoreV1().Secrets(obj.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		var data map[string][]byte
		if err == nil {
			data = sec.Data
		}
		return lookupKey(data, err, "secret", r.Name, r.Key, r.Optional)
	case f.ConfigMapKeyRef != nil:
		r := f.ConfigMapKeyRef
		cm, err := n.opts.Kube.CoreV1().ConfigMaps(obj.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		var data map[string]string
		if err == nil {
			data = cm.Data
		}
		return lookupKey(data, err, "configmap", r.Name, r.Key, r.Optional)
	}
	return nil, fmt.Errorf("valueFrom %v is not supported by the process node", f)
}

// resourceValue is a container's request or limit in units of the
// reference's divisor, rounded up, as the kubelet gives it. A limit that
// is not set would be the node's allocatable there; a process node has
// none to give, so it is an error.
func resourceValue(obj *corev1.Pod, c *corev1.Container, r *corev1.ResourceFieldSelector) (*string, error) {
	if r.ContainerName != "" && r.ContainerName != c.Name {
		i := slices.IndexFunc(obj.Spec.Containers, func(o corev1.Container) bool { return o.Name == r.ContainerName })
		if i < 0 {
			return nil, fmt.Errorf("resourceFieldRef names container %q, which the pod does not have", r.ContainerName)
		}
		c = &obj.Spec.Containers[i]
	}
	kind, name, ok := strings.Cut(r.Resource, ".")
	list := map[string]corev1.ResourceList{"limits": c.Resources.Limits, "requests": c.Resources.Requests}[kind]
	q, set := list[corev1.ResourceName(name)]
	if !ok || !set {
		return nil, fmt.Errorf("resourceFieldRef %s is not set on container %q", r.Resource, c.Name)
	}
	divisor := r.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	v := strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10)
	return &v, nil
}

// lookupKey is one key of a Secret's or ConfigMap's data (read with err);
// nil leaves the variable unset when the reference is optional.
func lookupKey[T ~string | ~[]byte](data map[string]T, err error, kind, name, key string, opt *bool) (*string, error) {
	if apierrors.IsNotFound(err) && optional(opt) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v, ok := data[key]
	if !ok {
		if optional(opt) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s %s has no key %s", kind, name, key)
	}
	s := string(v)
	return &s, nil
}

// expand replaces $(VAR) with earlier variables' values, as a kubelet does
// in env values, command and args; $$ escapes a dollar.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "$$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(s[i:], "$("):
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+end+1])
			}
			i += end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func optional(b *bool) bool { return b != nil && *b }

// stop ends every container within grace.
func (p *pod) stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		var wg sync.WaitGroup
		for _, c := range p.containers {
			wg.Go(func() { c.stop(grace) })
		}
		wg.Wait()
	})
}

// updateStatus reports p's state on obj when it changed.
func (n *Node) updateStatus(ctx context.Context, obj *corev1.Pod, p *pod) error {
	status := p.status(obj)
	if statusEqual(obj.Status, status) {
		return nil
	}
	updated := obj.DeepCopy()
	updated.Status = status
	_, err := n.opts.Kube.CoreV1().Pods(obj.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// status is the PodStatus p's containers add up to.
func (p *pod) status(obj *corev1.Pod) corev1.PodStatus {
	old := obj.Status
	s := corev1.PodStatus{Phase: corev1.PodPending, StartTime: &p.startTime, HostIP: podnet.NamespaceIP,
		HostIPs: []corev1.HostIP{{IP: podnet.NamespaceIP}}}
	if p.sandbox != nil {
		s.PodIP = p.sandbox.IP
		s.PodIPs = []corev1.PodIP{{IP: p.sandbox.IP}}
	}
	ready, started := len(p.containers) > 0, false
	// A pod whose containers have all terminated for good (restartPolicy
	// Never or OnFailure) is done: Succeeded if every one exited 0, else
	// Failed, as a kubelet reports a Job's pod.
	finished, failed := len(p.containers) > 0, false
	for _, c := range p.containers {
		cs := c.status()
		s.ContainerStatuses = append(s.ContainerStatuses, cs)
		ready = ready && cs.Ready
		started = started || cs.State.Running != nil
		if t := cs.State.Terminated; t == nil {
			finished = false
		} else if t.ExitCode != 0 {
			failed = true
		}
	}
	if p.failure != "" {
		s.Reason, s.Message = "UnsupportedByProcessNode", p.failure
	}
	switch {
	case finished && failed:
		s.Phase = corev1.PodFailed
	case finished:
		s.Phase = corev1.PodSucceeded
	case started:
		s.Phase = corev1.PodRunning
	}
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		st := corev1.ConditionFalse
		if ok {
			st = corev1.ConditionTrue
		}
		c := corev1.PodCondition{Type: t, Status: st, LastTransitionTime: metav1.Now()}
		for _, o := range old.Conditions {
			if o.Type == t && o.Status == st {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		return c
	}
	s.Conditions = []corev1.PodCondition{
		cond(corev1.PodScheduled, true),
		cond(corev1.PodInitialized, true),
		cond(corev1.ContainersReady, ready),
		cond(corev1.PodReady, ready),
	}
	return s
}

// statusEqual compares what status reports, ignoring timestamps that only
// move when something else changed.
func statusEqual(a, b corev1.PodStatus) bool {
	if a.Phase != b.Phase || a.PodIP != b.PodIP || a.Reason != b.Reason || len(a.Conditions) != len(b.Conditions) ||
		len(a.ContainerStatuses) != len(b.ContainerStatuses) {
		return false
	}
	for i := range a.Conditions {
		if a.Conditions[i].Type != b.Conditions[i].Type || a.Conditions[i].Status != b.Conditions[i].Status {
			return false
		}
	}
	for i := range a.ContainerStatuses {
		x, y := a.ContainerStatuses[i], b.ContainerStatuses[i]
		if x.Ready != y.Ready || x.RestartCount != y.RestartCount || stateName(x.State) != stateName(y.State) {
			return false
		}
		if x.State.Waiting != nil && y.State.Waiting != nil && x.State.Waiting.Message != y.State.Waiting.Message {
			return false
		}
	}
	return true
}

func stateName(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return "terminated/" + s.Terminated.Reason
	case s.Waiting != nil:
		return "waiting/" + s.Waiting.Reason
	}
	return ""
}
