// Package realnet gives the local cluster the traffic paths of a real one:
// a node network namespace programmed by a real kube-proxy (nftables
// mode), CoreDNS serving cluster.local behind the kube-dns Service, an
// ingress controller (Traefik) that routes to EndpointSlices, pods that
// really run (package procnode), and client pods that resolve names
// through the cluster DNS with a pod's search path.
//
// The layout, everything in namespaces the run creates (ENGINEERING.md,
// "Real Service networking"):
//
//	host 127.0.0.1:<api>  ◀── forwarder on 10.245.0.1:<fwd> (host end of the node's veth)
//	node namespace        kube-proxy; routes: local 10.0.0.0/16 (ClusterIPs), unreachable 10/8;
//	                      kwok pods' IPs on lo (apps' shared backends listen there);
//	                      a veth and a /32 route per sandbox
//	sandbox namespaces    one per process pod and per client: eth0 with the pod IP,
//	                      default route to the node
//
// No ClusterIP or pod IP is ever dialled from the host's own network
// namespace except pod IPs through podnet's route into the node namespace;
// the node namespace has no route out of 10/8 at all.
package realnet

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/podnet"
	"github.com/elasti-dev/elasti/test/localcluster/procnode"
)

const (
	// IngressNamespace and IngressService name the ingress controller's
	// Service; IngressClass is the class its Ingresses use.
	IngressNamespace = "ingress"
	IngressService   = "traefik"
	IngressClass     = "traefik"
	// DNSNamespace and DNSDeployment name CoreDNS.
	DNSNamespace  = "kube-system"
	DNSDeployment = "coredns"
	// PrometheusNamespace and PrometheusDeployment name the Prometheus
	// server; PrometheusService is its Service, with kube-prometheus's name,
	// so PrometheusURL is manifests/' default
	// PROMETHEUS_TRIGGER_SERVER_ADDRESS.
	PrometheusNamespace  = "monitoring"
	PrometheusDeployment = "prometheus"
	PrometheusService    = "prometheus-operated"
	PrometheusURL        = "http://" + PrometheusService + "." + PrometheusNamespace + ".svc.cluster.local:9090"

	kubeProxyTimeout = 60 * time.Second
	addonTimeout     = 2 * time.Minute
)

//go:embed addons/*.yaml
var addons embed.FS

// Options configure Start.
type Options struct {
	Cluster *localcluster.Cluster
	// Binaries adds images the process node runs, by image name (the last
	// path element, without tag, e.g. "elasti-operator", or with one,
	// "elasti-operator:v2", which wins for that tag).
	Binaries map[string]string
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
	// StateDir keeps the node's logs, kubeconfig and pods' files, and is
	// left in place on Close; empty means a temporary directory that Close
	// removes.
	StateDir string
}

// Net is the running real-traffic test bed.
type Net struct {
	// Network is the node network namespace (and the kwok pods' IPs).
	Network *podnet.Network
	// Node runs the pods scheduled to the process node.
	Node *procnode.Node
	Kube kubernetes.Interface

	cluster   *localcluster.Cluster
	stateDir  string
	keepState bool
	logf      func(format string, args ...any)
	forwarder *Forwarder
	nodeKube  string // kubeconfig for components in the node namespace

	mu        sync.Mutex
	kubeProxy *exec.Cmd
	proxyDone chan struct{}
	proxyMode ProxyMode // the mode StartKubeProxy runs it in; empty is nftables

	cancel   context.CancelFunc
	nodeDone chan struct{}
}

// Start builds the node network, starts kube-proxy and the process node,
// and installs CoreDNS, the ingress controller and Prometheus, returning
// once all three serve. Close it on every path, also when a test fails.
func Start(ctx context.Context, opts Options) (n *Net, err error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	c := opts.Cluster
	binaries := map[string]string{
		"coredns":    filepath.Join(c.BinDir, localcluster.CoreDNSBinary),
		"traefik":    filepath.Join(c.BinDir, localcluster.TraefikBinary),
		"prometheus": filepath.Join(c.BinDir, localcluster.PrometheusBinary),
	}
	for k, v := range opts.Binaries {
		binaries[k] = v
	}
	n = &Net{cluster: c, logf: logf, nodeDone: make(chan struct{}), stateDir: opts.StateDir, keepState: opts.StateDir != ""}
	// Every failure returns a nil Net; what was built so far is torn down
	// through this one.
	started := n
	defer func() {
		if err != nil {
			started.Close()
		}
	}()
	if n.stateDir == "" {
		if n.stateDir, err = os.MkdirTemp("", "elasti-node-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(n.stateDir, 0o755); err != nil {
		return nil, err
	}
	if n.Kube, err = kubernetes.NewForConfig(c.RESTConfig()); err != nil {
		return nil, err
	}
	logf("building the node network namespace")
	if n.Network, err = podnet.Setup(ctx, podnet.Options{Logf: logf}); err != nil {
		return nil, err
	}

	if err := n.forwardAPIServer(c); err != nil {
		return nil, err
	}

	n.Node, err = procnode.New(procnode.Options{
		Network: n.Network, Kube: n.Kube, APIServer: n.forwarder.Addr(), CAFile: c.CAFile,
		Binaries: binaries, StateDir: filepath.Join(n.stateDir, "pods"),
	})
	if err != nil {
		return nil, err
	}
	nodeCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = cancel
	nodeErr := make(chan error, 1)
	go func() {
		defer close(n.nodeDone)
		nodeErr <- n.Node.Run(nodeCtx)
	}()

	logf("starting kube-proxy (%s) in %s", n.kubeProxyMode(), n.Network.Name())
	if err := n.StartKubeProxy(ctx); err != nil {
		return nil, err
	}
	logf("installing CoreDNS, the Traefik ingress controller (Ingress and Gateway API) and Prometheus on node %s", n.Node.NodeName())
	if err := n.installGatewayAPI(ctx); err != nil {
		return nil, err
	}
	if err := n.applyAddons(ctx); err != nil {
		return nil, err
	}
	if err := n.waitAddons(ctx, nodeErr); err != nil {
		return nil, err
	}
	logf("real-traffic test bed ready: kube-proxy, CoreDNS at %s, ingress at %s.%s, Prometheus at %s", procnode.DefaultDNSServer, IngressService, IngressNamespace, PrometheusURL)
	return n, nil
}

// forwardAPIServer forwards the node end of the veth to the apiserver and
// writes the kubeconfig that components in the node namespace use.
func (n *Net) forwardAPIServer(c *localcluster.Cluster) error {
	api, err := url.Parse(c.APIServerURL)
	if err != nil {
		return err
	}
	if n.forwarder, err = Forward(net.JoinHostPort(podnet.HostIP, "0"), api.Host); err != nil {
		return fmt.Errorf("realnet: apiserver forwarder: %w", err)
	}
	token, err := adminToken(c.Kubeconfig)
	if err != nil {
		return err
	}
	n.nodeKube = filepath.Join(n.stateDir, "node.kubeconfig")
	return localcluster.WriteKubeconfig(n.nodeKube, "https://"+n.forwarder.Addr(), c.CAFile, "admin", token)
}

// APIServer is host:port of the apiserver as processes in the node and
// pod namespaces reach it: the forwarder on the host end of the node's
// veth, an address the apiserver's certificate names.
func (n *Net) APIServer() string { return n.forwarder.Addr() }

// NodeKubeconfig is the admin kubeconfig whose server is APIServer, for
// components that run in the node namespace (kube-proxy, a real node's
// kubelet).
func (n *Net) NodeKubeconfig() string { return n.nodeKube }

// waitAddons waits until CoreDNS, the ingress controller and Prometheus
// are ready; if the process node stopped meanwhile, the error says why.
func (n *Net) waitAddons(ctx context.Context, nodeErr <-chan error) error {
	for _, d := range [][2]string{{DNSNamespace, DNSDeployment}, {IngressNamespace, IngressService}, {PrometheusNamespace, PrometheusDeployment}} {
		if err := n.WaitDeploymentReady(ctx, d[0], d[1], addonTimeout); err != nil {
			select {
			case e := <-nodeErr:
				err = errors.Join(err, fmt.Errorf("the process node stopped: %w", e))
			default:
			}
			return err
		}
	}
	return nil
}

func adminToken(kubeconfig string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return "", err
	}
	for _, a := range cfg.AuthInfos {
		if a.Token != "" {
			return a.Token, nil
		}
	}
	return "", fmt.Errorf("realnet: no token in %s", kubeconfig)
}

// StartKubeProxy runs kube-proxy in the node namespace, in the mode
// SwitchKubeProxy last set (nftables at first), and waits until its
// rules exist. The guard test stops and restarts it.
func (n *Net) StartKubeProxy(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.kubeProxy != nil {
		return errors.New("realnet: kube-proxy already runs")
	}
	mode := n.proxyMode.orDefault()
	logPath := filepath.Join(n.stateDir, "kube-proxy.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command("ip", "netns", "exec", n.Network.Name(),
		filepath.Join(n.cluster.BinDir, localcluster.KubeProxyBinary),
		"--kubeconfig="+n.nodeKube,
		"--proxy-mode="+string(mode),
		"--hostname-override="+n.Node.NodeName(),
		"--cluster-cidr="+localcluster.PodCIDR,
		"--conntrack-max-per-core=0",
		// Loopback of the node namespace, not the host's.
		"--metrics-bind-address=127.0.0.1:10249",
		"--healthz-bind-address=127.0.0.1:10256",
		"-v=2",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("realnet: start kube-proxy: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.kubeProxy, n.proxyDone = cmd, done

	deadline := time.Now().Add(kubeProxyTimeout)
	for {
		if n.kubeProxyRulesExist(ctx, mode) {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("realnet: kube-proxy exited at start:\n%s", procnode.TailFile(logPath, 30))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("realnet: kube-proxy made no %s rules within %s:\n%s", mode, kubeProxyTimeout, procnode.TailFile(logPath, 30))
		}
	}
}

// StopKubeProxy stops kube-proxy and removes its rules, as on a node whose
// proxy is gone.
func (n *Net) StopKubeProxy(ctx context.Context) error {
	n.mu.Lock()
	cmd, done := n.kubeProxy, n.proxyDone
	n.kubeProxy, n.proxyDone = nil, nil
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	return n.removeKubeProxyRules(ctx)
}

// KubeProxyLog is the last lines of kube-proxy's log.
func (n *Net) KubeProxyLog(lines int) string {
	return procnode.TailFile(filepath.Join(n.stateDir, "kube-proxy.log"), lines)
}

// NodeExec runs a command inside the node namespace.
func (n *Net) NodeExec(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Network.Name()}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s in %s: %w: %s", strings.Join(args, " "), n.Network.Name(), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (n *Net) applyAddons(ctx context.Context) error {
	entries, err := addons.ReadDir("addons")
	if err != nil {
		return err
	}
	for _, e := range entries {
		data, err := addons.ReadFile("addons/" + e.Name())
		if err != nil {
			return err
		}
		path := filepath.Join(n.stateDir, e.Name())
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		if _, err := n.cluster.Kubectl(ctx, "apply", "-f", path); err != nil {
			return err
		}
	}
	return nil
}

// WaitDeploymentReady waits until every replica of a Deployment is
// updated and Ready, logging progress every 10 s. On timeout the error
// carries the pods' states and their logs from the process node.
func (n *Net) WaitDeploymentReady(ctx context.Context, namespace, name string, timeout time.Duration) error {
	start := time.Now()
	lastLog := start
	var state string
	for {
		d, err := n.Kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil && deploymentReady(d) {
			return nil
		}
		if err != nil {
			state = err.Error()
		} else {
			state = n.podStates(ctx, namespace, d)
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("realnet: deployment %s/%s not ready after %s: %s\n%s", namespace, name, timeout, state,
				n.Node.Logs(namespace, name, 30))
		}
		if time.Since(lastLog) >= 10*time.Second {
			n.logf("waiting for deployment %s/%s (%s): %s", namespace, name, time.Since(start).Round(time.Second), state)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func deploymentReady(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want && s.Replicas == want
}

// podStates describes the Deployment's pods in one line, for progress
// and failure messages.
func (n *Net) podStates(ctx context.Context, namespace string, d *appsv1.Deployment) string {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return err.Error()
	}
	pods, err := n.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return err.Error()
	}
	if len(pods.Items) == 0 {
		return "no pods yet"
	}
	var parts []string
	for _, p := range pods.Items {
		parts = append(parts, DescribePod(&p))
	}
	return strings.Join(parts, "; ")
}

// DescribePod is one line on a pod's node, phase, scheduling and
// containers, for progress and failure messages.
func DescribePod(p *corev1.Pod) string {
	s := fmt.Sprintf("%s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			s += " (unschedulable: " + c.Message + ")"
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		s += fmt.Sprintf(" [%s ready=%t restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
		if w := cs.State.Waiting; w != nil {
			s += " " + w.Reason + ": " + w.Message
		}
		s += "]"
	}
	return s
}

// Close stops kube-proxy, every pod and the forwarder, and removes the
// node network. It is idempotent.
func (n *Net) Close() {
	if n.cancel != nil {
		n.cancel()
		<-n.nodeDone
		n.cancel = nil
	}
	if n.Network != nil {
		_ = n.StopKubeProxy(context.Background())
	}
	if n.forwarder != nil {
		n.forwarder.Close()
	}
	if n.Network != nil {
		if err := n.Network.Close(); err != nil {
			n.logf("realnet: %v", err)
		}
	}
	if n.stateDir != "" && !n.keepState {
		_ = os.RemoveAll(n.stateDir)
	}
}
