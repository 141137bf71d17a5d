package realnode_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/clustertest"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
	"github.com/elasti-dev/elasti/test/localcluster/realnode"
	"github.com/elasti-dev/elasti/test/testenv"
)

// In a network namespace of its own, beside the other pod-network suites.
func TestMain(m *testing.M) {
	clustertest.Isolate()
	os.Exit(clustertest.Main(m))
}

// manifestResolver is the resolver Deployment of manifests/30-resolver.yaml.
func manifestResolver(t *testing.T, root string) *appsv1.Deployment {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "manifests", "30-resolver.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := &appsv1.Deployment{}
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(d); err != nil || d.Kind != "Deployment" {
		t.Fatalf("manifests/30-resolver.yaml: first document is not the resolver Deployment (%v)", err)
	}
	return d
}

// hostSnapshot is the host state the node must leave as it found it.
// Links, addresses, routes, network namespaces and mounts are filtered to
// what could be the node's (veths, its bridge and CIDR, containerd's and
// the kubelet's paths): other test packages build network namespaces of
// their own on this host at the same time. Firewall rules are compared
// whole: nothing in the bed adds any outside its own namespaces.
func hostSnapshot(t *testing.T) map[string]string {
	t.Helper()
	ours := regexp.MustCompile(`veth|` + realnode.Bridge + `|10\.248\.|elasti-realnode|containerd|kubelet|cni-|kubepods`)
	snap := map[string]string{}
	for _, cmd := range []struct {
		name   string
		args   []string
		filter bool
	}{
		{"links", []string{"ip", "-o", "link", "show"}, true},
		{"addrs", []string{"ip", "-o", "addr", "show"}, true},
		{"routes", []string{"ip", "route", "show", "table", "all"}, true},
		{"netns", []string{"ip", "netns", "list"}, true},
		{"nft", []string{"nft", "list", "ruleset"}, false},
		{"iptables", []string{"iptables-save"}, false},
	} {
		out, err := exec.Command(cmd.args[0], cmd.args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(cmd.args, " "), err, out)
		}
		var keep []string
		for _, l := range strings.Split(string(out), "\n") {
			// iptables-save stamps its comments with the time.
			if !strings.HasPrefix(l, "#") && (!cmd.filter || ours.MatchString(l)) {
				keep = append(keep, l)
			}
		}
		snap[cmd.name] = strings.Join(keep, "\n")
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.Split(string(mounts), "\n") {
		if ours.MatchString(l) {
			keep = append(keep, l)
		}
	}
	snap["mounts"] = strings.Join(keep, "\n")
	for _, p := range []string{"/var/log/containers", "/var/lib/cni", "/var/lib/kubelet", "/var/lib/containerd", "/run/containerd",
		"/opt/containerd", "/etc/cni", "/opt/cni", "/var/log/pods", "/usr/libexec/kubernetes", realnode.Dir,
		"/sys/fs/cgroup/memory/elasti-realnode", "/sys/fs/cgroup/cpu/elasti-realnode", "/sys/fs/cgroup/memory/kubepods"} {
		_, err := os.Lstat(p)
		snap["exists "+p] = strconv.FormatBool(err == nil)
	}
	for _, k := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "net/ipv4/ip_forward"} {
		b, _ := os.ReadFile(filepath.Join("/proc/sys", k))
		snap["sysctl "+k] = string(b)
	}
	return snap
}

// The real node runs elasti's own resolver image as a real container,
// beside the kwok and process nodes: the manifests' security settings hold
// (user 65532, no capabilities, seccomp, no new privileges, read-only
// root), the memory limit is in the kernel's cgroup, the image is the one
// built from this tree, and the node leaves the host as it found it.
func TestResolverImageRunsOnRealNode(t *testing.T) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := clustertest.Get(t)
	cs := clustertest.Clientset(t)
	ns := clustertest.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	resolverImg, err := realnode.BuildElastiImage(ctx, root, "elasti-resolver", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ref, version, imageID := resolverImg.Ref, resolverImg.Version, resolverImg.ID
	// A killed earlier run's leftovers are not this run's to answer for.
	if err := realnode.Cleanup(ctx, os.Stderr); err != nil {
		t.Fatalf("cleaning up after an earlier run: %v", err)
	}
	// The node runs in the node network namespace of a realnet bed, whose
	// kube-proxy and CoreDNS its pods use. The bed's own host changes (its
	// veth and route) are its package's to check; this test compares the
	// host with the bed up, before and after the node.
	rnet, err := realnet.Start(ctx, realnet.Options{Cluster: c, Logf: t.Logf})
	if err != nil {
		t.Fatalf("the real-traffic bed did not start: %v", err)
	}
	clustertest.OnInterrupt(rnet.Close)
	t.Cleanup(rnet.Close)
	before := hostSnapshot(t)

	sample, err := realnode.BuildSampleApp(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	node, err := realnode.Start(ctx, realnode.Options{Cluster: c, Net: rnet, Images: []string{resolverImg.Tarball, sample.Tarball}, Progress: os.Stderr})
	if err != nil {
		t.Fatalf("the real node did not start: %v", err)
	}
	clustertest.OnInterrupt(node.Stop)
	t.Cleanup(node.Stop)
	t.Logf("real node Ready after %s", time.Since(start).Round(time.Millisecond))
	diagnose := func() string {
		return fmt.Sprintf("\n--- kubelet log ---\n%s\n--- containerd log ---\n%s",
			localcluster.Tail(realnode.KubeletLog(), 40), localcluster.Tail(realnode.ContainerdLog(), 20))
	}

	// Side by side: the kwok node is still there, and the real node keeps
	// unknown pods off with its taint.
	if _, err := cs.CoreV1().Nodes().Get(ctx, localcluster.NodeName, metav1.GetOptions{}); err != nil {
		t.Errorf("the kwok node is gone: %v", err)
	}
	rn, err := cs.CoreV1().Nodes().Get(ctx, realnode.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rn.Spec.Taints) != 1 || rn.Spec.Taints[0].Key != realnode.TaintKey || rn.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("real node taints = %v, want only %s=%s:NoSchedule", rn.Spec.Taints, realnode.TaintKey, realnode.TaintValue)
	}
	if !strings.HasPrefix(rn.Status.NodeInfo.KubeletVersion, "v1.36") || !strings.HasPrefix(rn.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
		t.Errorf("real node runs kubelet %q on %q, want v1.36 on containerd", rn.Status.NodeInfo.KubeletVersion, rn.Status.NodeInfo.ContainerRuntimeVersion)
	}

	d := manifestResolver(t, root)
	template := d.Spec.Template.Spec
	mc := template.Containers[0]
	if mc.Image != ref {
		t.Fatalf("manifests/30-resolver.yaml runs %s, but this tree builds %s", mc.Image, ref)
	}
	limit := mc.Resources.Limits.Memory()
	if limit.IsZero() {
		t.Fatal("manifests/30-resolver.yaml sets no memory limit")
	}
	// pod builds a pod of the manifest's resolver container on the real node.
	pod := func(name string, restart corev1.RestartPolicy, edit func(*corev1.Container, *corev1.PodSpec)) *corev1.Pod {
		ctr := *mc.DeepCopy()
		ctr.ImagePullPolicy = corev1.PullNever
		spec := corev1.PodSpec{
			SecurityContext:               template.SecurityContext.DeepCopy(),
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			RestartPolicy:                 restart,
			NodeSelector:                  realnode.NodeSelector(),
			Tolerations:                   []corev1.Toleration{realnode.Toleration()},
			Volumes:                       template.Volumes,
			AutomountServiceAccountToken:  ptr.To(false),
		}
		edit(&ctr, &spec)
		spec.Containers = []corev1.Container{ctr}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	}

	// 1. --version: the container runs the image's binary and exits 0.
	versionPod := pod("resolver-version", corev1.RestartPolicyNever, func(c *corev1.Container, _ *corev1.PodSpec) {
		c.Args = []string{"--version"}
		c.LivenessProbe, c.ReadinessProbe, c.Ports = nil, nil, nil
	})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, versionPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(ctx, t, cs, ns, versionPod.Name, diagnose, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if p.Spec.NodeName != realnode.NodeName {
		t.Errorf("pod ran on %q, want %s", p.Spec.NodeName, realnode.NodeName)
	}
	st := p.Status.ContainerStatuses[0]
	if st.ImageID != imageID && !strings.HasSuffix(st.ImageID, "@"+imageID) {
		t.Errorf("imageID = %q, want the image built from this tree, %s", st.ImageID, imageID)
	}
	if !strings.HasPrefix(st.ContainerID, "containerd://") {
		t.Errorf("containerID = %q, want containerd://…", st.ContainerID)
	}
	logs, err := cs.CoreV1().Pods(ns).GetLogs(versionPod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("pod log API: %v%s", err, diagnose())
	}
	if !strings.Contains(string(logs), version) {
		t.Errorf("--version printed %q, want %s", logs, version)
	}

	// 2. The resolver itself, with the manifest's env, probes and ports:
	// it reaches the apiserver through the bed's forwarder and becomes
	// Ready by its own /readyz, once its informers (ElastiServices among
	// them) have synced.
	testenv.InstallCRD(t)
	kubeconfig := podKubeconfig(t, c, "https://"+rnet.APIServer())
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "resolver-kubeconfig"},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	resolverPod := pod("resolver", corev1.RestartPolicyAlways, func(c *corev1.Container, spec *corev1.PodSpec) {
		c.Args = []string{"--kubeconfig=/etc/elasti/kubeconfig"}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "kubeconfig", MountPath: "/etc/elasti", ReadOnly: true})
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: "resolver-kubeconfig"}}})
	})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, resolverPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = waitPod(ctx, t, cs, ns, resolverPod.Name, diagnose, podReady)
	if !strings.HasPrefix(p.Status.PodIP, "10.248.0.") {
		t.Errorf("pod IP %q is not in %s", p.Status.PodIP, realnode.PodCIDR)
	}
	// The kernel enforces what the manifest asks: the container's memory
	// cgroup carries the limit, and its process runs as 65532 with no
	// capabilities, seccomp filtering, no new privileges and a read-only
	// root.
	cid := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	qos := strings.ToLower(string(p.Status.QOSClass))
	cg := filepath.Join("/sys/fs/cgroup/memory/elasti-realnode/kubepods", qos, "pod"+string(p.UID), cid)
	if qos == "guaranteed" {
		cg = filepath.Join("/sys/fs/cgroup/memory/elasti-realnode/kubepods", "pod"+string(p.UID), cid)
	}
	b, err := os.ReadFile(filepath.Join(cg, "memory.limit_in_bytes"))
	if err != nil {
		t.Fatalf("the container's memory cgroup: %v", err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.FormatInt(limit.Value(), 10) {
		t.Errorf("memory.limit_in_bytes = %s, want the manifest's %s (%d)", got, limit, limit.Value())
	}
	procs, err := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
	if err != nil || len(strings.Fields(string(procs))) == 0 {
		t.Fatalf("no process in %s: %v", cg, err)
	}
	pid := strings.Fields(string(procs))[0]
	// Its CPU is weighed as the node's against the host's other
	// processes: it runs under the node's cgroup, which weighs
	// NodeCPUShares.
	cgroups, err := os.ReadFile(filepath.Join("/proc", pid, "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(strings.Split(string(cgroups), "\n"), func(l string) bool { return strings.Contains(l, ":cpu:/elasti-realnode/") }) {
		t.Errorf("container process %s is not in the node's cpu cgroup: %s", pid, cgroups)
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/cpu/elasti-realnode/cpu.shares"); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(realnode.NodeCPUShares) {
		t.Errorf("the node's cpu.shares = %q (%v), want %d", b, err, realnode.NodeCPUShares)
	}
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532", "Gid:\t65532\t65532\t65532\t65532",
		"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(string(status), want+"\n") {
			t.Errorf("container process %s: /proc/%s/status lacks %q", pid, pid, want)
		}
	}
	mounts, err := os.ReadFile(filepath.Join("/proc", pid, "mounts"))
	if err != nil {
		t.Fatal(err)
	}
	if root := mountOptions(string(mounts), "/"); !strings.HasPrefix(root, "ro,") {
		t.Errorf("container root is mounted %q, want read-only", root)
	}

	// 3. A real-node pod reaches a Service by its short name, through the
	// cluster DNS (CoreDNS on the process node, behind the kube-dns
	// ClusterIP) and kube-proxy's rules in the node namespace, to a pod on
	// the same bridge; and the host's network is untouched meanwhile.
	web := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			SecurityContext:               template.SecurityContext.DeepCopy(),
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{Name: "web", Image: realnode.SampleAppImage,
				SecurityContext: mc.SecurityContext.DeepCopy(),
				Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/", Port: intstr.FromString("http")}}, PeriodSeconds: 1}}},
		},
	}
	if err := node.PreparePod(ctx, cs, ns, &web.Spec); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(ctx, t, cs, ns, web.Name, diagnose, podReady)
	// kube-proxy applies a new endpoint after its sync period; until then
	// the ClusterIP refuses.
	if err := rnet.WaitKubeProxyFollows(ctx, ns, "web", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			SecurityContext:              template.SecurityContext.DeepCopy(),
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "client", Image: realnode.SampleAppImage, Args: []string{"get", "http://web/"},
				SecurityContext: mc.SecurityContext.DeepCopy()}},
		},
	}
	if err := node.PreparePod(ctx, cs, ns, &client.Spec); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p = waitPod(ctx, t, cs, ns, client.Name, diagnose, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	logs, err = cs.CoreV1().Pods(ns).GetLogs(client.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("client pod %s: %s", p.Status.PodIP, logs)
	if !strings.Contains(string(logs), `"servedBy":"web"`) {
		t.Errorf("client pod's GET http://web/ printed %q, want web's answer", logs)
	}
	during := hostSnapshot(t)
	for _, k := range []string{"links", "addrs", "routes", "nft", "iptables"} {
		if during[k] != before[k] {
			t.Errorf("with pods running, the host's %s changed (the node must program only its own namespaces):\nbefore:\n%s\nnow:\n%s", k, before[k], during[k])
		}
	}

	// 4. Stop leaves the host as it was. The pods go first, at once, so
	// none is left Terminating on a node that is gone.
	for _, name := range []string{versionPod.Name, resolverPod.Name, web.Name, client.Name} {
		if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
	}
	stop := time.Now()
	node.Stop()
	t.Logf("real node stopped and cleaned up in %s", time.Since(stop).Round(time.Millisecond))
	after := hostSnapshot(t)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("host %s changed:\nbefore:\n%s\nafter:\n%s", k, v, after[k])
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// waitPod waits until done(pod) holds, failing with the pod's state and the
// node's logs after 2 minutes.
func waitPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, diagnose func() string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	logs := func() string {
		b, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{TailLines: ptr.To[int64](20)}).DoRaw(ctx)
		if err != nil {
			return fmt.Sprintf("\n--- pod log: %v", err)
		}
		return "\n--- pod log ---\n" + string(b)
	}
	deadline := time.Now().Add(2 * time.Minute)
	var p *corev1.Pod
	for {
		var err error
		p, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && done(p) {
			return p
		}
		if err == nil && p.Status.Phase == corev1.PodFailed {
			t.Fatalf("pod %s failed: %s%s%s", name, realnet.DescribePod(p), logs(), diagnose())
		}
		if time.Now().After(deadline) {
			desc := fmt.Sprint(err)
			if p != nil {
				desc = realnet.DescribePod(p)
			}
			t.Fatalf("pod %s not done after 2m: %s%s%s", name, desc, logs(), diagnose())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// podKubeconfig is the admin kubeconfig with server as the address: the
// apiserver's certificate does not name the bridge, so it verifies the
// name kubernetes.default.svc.
func podKubeconfig(t *testing.T, c *localcluster.Cluster, server string) []byte {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	out := clientcmdapi.NewConfig()
	out.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca, TLSServerName: "kubernetes.default.svc"}
	for name, a := range cfg.AuthInfos {
		out.AuthInfos[name] = a
		out.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	}
	out.CurrentContext = "local"
	b, err := clientcmd.Write(*out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mountOptions returns the options of the last mount at mountpoint in a
// /proc/<pid>/mounts listing.
func mountOptions(mounts, mountpoint string) string {
	var opts string
	for _, l := range strings.Split(mounts, "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[1] == mountpoint {
			opts = f[3]
		}
	}
	return opts
}
