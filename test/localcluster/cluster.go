package localcluster

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

const (
	// NodeName is the single kwok-managed node every pod lands on.
	NodeName = "kwok-node-0"
	// PodCIDR is the cluster's pod range. It is fake: nothing outside a
	// network namespace built by the test run may connect to it.
	PodCIDR = "10.244.0.0/16"
	// KwokPodCIDR is the half of PodCIDR kwok allocates from; the other half
	// is left to the process node (package procnode).
	KwokPodCIDR = "10.244.0.0/17"
	// ServiceCIDR is where ClusterIPs come from.
	ServiceCIDR = "10.0.0.0/16"
	// FeatureGates are the gates the apiserver and the controller manager
	// run with. HPAScaleToZero (alpha since v1.16, still alpha and off by
	// default in v1.36) lets an HPA with an Object or External metric
	// have minReplicas 0.
	FeatureGates = "HPAScaleToZero=true"
	// HPASyncPeriod is how often the HPA controller looks at each HPA.
	HPASyncPeriod = 2 * time.Second
	// FakeNodeTaint keeps pods off the kwok node unless they tolerate it,
	// as kwok's own documentation does: elasti's own pods (which carry no
	// toleration) then land on the process node, where they really run.
	FakeNodeTaint = "kwok.x-k8s.io/node"
	// FakeNodeLabel=FakeNodeLabelValue selects the kwok node, kwok's own
	// convention; apps pin themselves there with a nodeSelector.
	FakeNodeLabel      = "type"
	FakeNodeLabelValue = "kwok"
	// NodeGatewayIP is the host end of the node network's veth pair
	// (podnet.HostIP). The apiserver's certificate names it, so pods reach
	// the apiserver through a forwarder there with full TLS verification.
	NodeGatewayIP = "10.245.0.1"
	// UnprivilegedUser authenticates with the unprivileged kubeconfig and holds
	// no permissions until a test binds a role to it.
	UnprivilegedUser = "elasti-unprivileged"

	stateFile  = "state.json"
	stopGrace  = 10 * time.Second
	startLimit = 3 * time.Minute
)

// Options controls Start.
type Options struct {
	// Dir holds data, logs and kubeconfigs; a temporary one is made if empty.
	Dir string
	// Detach lets the cluster outlive the calling process (make cluster-up).
	Detach bool
	// Progress receives human-readable progress lines; nil discards them.
	Progress io.Writer
	// ReadyAfterAddress leaves starting the kwok node's pods to the pod
	// network's fake kubelet (podnet.Kubelet), which puts a pod's address
	// up first and then writes it Running and Ready, in one status write,
	// as a kubelet writes Ready only after a probe passed on the pod's
	// address. Without it kwok reports a pod Ready as it gives it its
	// address, before anything answers there. Set it only where a fake
	// kubelet runs from the start: nothing else starts such pods.
	ReadyAfterAddress bool
}

// Cluster is a running local control plane.
type Cluster struct {
	Dir                    string `json:"dir"`
	BinDir                 string `json:"binDir"`
	Kubeconfig             string `json:"kubeconfig"`
	UnprivilegedKubeconfig string `json:"unprivilegedKubeconfig"`
	APIServerURL           string `json:"apiServerURL"`
	// AuditLog records every mutating request and every watch (Metadata
	// level), so tests can count the writes a component made and the
	// watches it holds open.
	AuditLog string `json:"auditLog"`
	// CAFile is the certificate authority that signed the apiserver's
	// serving certificate (for 127.0.0.1, NodeGatewayIP, the kubernetes
	// Service's ClusterIP and names); pods get it as their ca.crt.
	CAFile string         `json:"caFile"`
	PIDs   map[string]int `json:"pids"`

	// mu guards procs and PIDs, which RestartAPIServer changes while the
	// cluster runs.
	mu      sync.Mutex
	procs   []*Process
	ownsDir bool
}

// Start builds or reuses the binaries and brings a control plane up. It
// returns only once the apiserver is ready and the kwok node is Ready.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(progress, "[localcluster %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	binDir, err := EnsureBinaries(ctx, progress)
	if err != nil {
		return nil, err
	}

	cluster := &Cluster{Dir: opts.Dir, BinDir: binDir, PIDs: map[string]int{}}
	c = cluster
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "elasti-cluster-"); err != nil {
			return nil, err
		}
		c.ownsDir = true
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		// Not c: "return nil, err" has set it to nil by now.
		if err != nil {
			cluster.Stop()
		}
	}()

	ctx, cancel := context.WithTimeout(ctx, startLimit)
	defer cancel()

	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]
	c.APIServerURL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)

	adminToken, unprivToken := randomToken(), randomToken()
	if err := c.writeAPIServerInputs(adminToken, unprivToken); err != nil {
		return nil, err
	}

	logf("starting etcd on 127.0.0.1:%d", etcdPort)
	etcdURL, err := c.startEtcd(ctx, opts.Detach, etcdPort, peerPort)
	if err != nil {
		return nil, err
	}
	logf("starting kube-apiserver on %s", c.APIServerURL)
	if err := c.startAPIServer(ctx, opts.Detach, etcdURL, apiPort, adminToken); err != nil {
		return nil, err
	}
	if err := c.writeKubeconfigs(adminToken, unprivToken); err != nil {
		return nil, err
	}
	logf("starting kube-controller-manager, kube-scheduler and kwok")
	if err := c.startControllers(opts.Detach); err != nil {
		return nil, err
	}
	if err := c.startKwokNode(ctx, opts.Detach, opts.ReadyAfterAddress); err != nil {
		return nil, err
	}
	if err := c.waitControllerManager(ctx); err != nil {
		return nil, err
	}
	if err := c.saveState(); err != nil {
		return nil, err
	}
	logf("cluster ready; KUBECONFIG=%s", c.Kubeconfig)
	return c, nil
}

// startEtcd starts etcd on etcdPort and waits until it is healthy; it
// returns its client URL.
func (c *Cluster) startEtcd(ctx context.Context, detach bool, etcdPort, peerPort int) (string, error) {
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	etcd, err := c.start("etcd", detach,
		"--name=default",
		"--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--listen-metrics-urls=",
		"--unsafe-no-fsync",
		"--quota-backend-bytes=8589934592",
		"--log-level=warn",
	)
	if err != nil {
		return "", err
	}
	return etcdURL, WaitFor(ctx, etcd, httpOK(etcdURL+"/health", ""))
}

// startAPIServer starts kube-apiserver on apiPort and waits until it is
// ready.
func (c *Cluster) startAPIServer(ctx context.Context, detach bool, etcdURL string, apiPort int, adminToken string) error {
	apiserver, err := c.start("kube-apiserver", detach,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+filepath.Join(c.Dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(c.Dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(c.Dir, "sa.key"),
		"--authorization-mode=RBAC",
		"--token-auth-file="+filepath.Join(c.Dir, "tokens.csv"),
		"--tls-cert-file="+filepath.Join(c.Dir, "apiserver.crt"),
		"--tls-private-key-file="+filepath.Join(c.Dir, "apiserver.key"),
		"--service-cluster-ip-range="+ServiceCIDR,
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		// The real node's kubelet (package realnode) serves logs on its
		// InternalIP; its Hostname address is the node name, which no DNS
		// resolves.
		"--kubelet-preferred-address-types=InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP",
		"--max-requests-inflight=2000",
		"--max-mutating-requests-inflight=1000",
		"--audit-policy-file="+filepath.Join(c.Dir, "audit-policy.yaml"),
		"--audit-log-path="+filepath.Join(c.Dir, "audit.log"),
		"--audit-log-maxsize=500",
		// Without it a SIGTERM waits for every watch to end by itself, a
		// minute (--request-timeout), before the apiserver exits.
		"--shutdown-watch-termination-grace-period=2s",
		// HPAScaleToZero is alpha and off by default in v1.36: without it
		// the apiserver refuses an HPA with minReplicas 0. The HPA suites
		// test elasti next to such an HPA (test/operator's
		// hpa_integration_test.go).
		"--feature-gates="+FeatureGates,
	)
	if err != nil {
		return err
	}
	c.AuditLog = filepath.Join(c.Dir, "audit.log")
	return WaitFor(ctx, apiserver, httpOK(c.APIServerURL+"/readyz", adminToken))
}

// writeKubeconfigs writes the admin and the unprivileged kubeconfig.
func (c *Cluster) writeKubeconfigs(adminToken, unprivToken string) error {
	c.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	c.UnprivilegedKubeconfig = filepath.Join(c.Dir, "unprivileged.kubeconfig")
	if err := WriteKubeconfig(c.Kubeconfig, c.APIServerURL, c.CAFile, "admin", adminToken); err != nil {
		return err
	}
	return WriteKubeconfig(c.UnprivilegedKubeconfig, c.APIServerURL, c.CAFile, UnprivilegedUser, unprivToken)
}

// startControllers starts kube-controller-manager and kube-scheduler.
func (c *Cluster) startControllers(detach bool) error {
	if _, err := c.start("kube-controller-manager", detach,
		"--kubeconfig="+c.Kubeconfig,
		// clusterrole-aggregation-controller fills the built-in edit, view
		// and admin roles from aggregated ClusterRoles such as elasti's;
		// job-controller runs Jobs, such as the chart's uninstall hook;
		// horizontal-pod-autoscaler-controller runs the HPAs that share a
		// target with an ElastiService (it only acts on HPA objects, so a
		// suite without one pays nothing for it).
		"--controllers=deployment-controller,replicaset-controller,statefulset-controller,endpointslice-controller,garbage-collector-controller,namespace-controller,clusterrole-aggregation-controller,job-controller,horizontal-pod-autoscaler-controller",
		// The HPA controller reads the gate too: it decides whether a
		// target at zero is one the HPA scaled there itself.
		"--feature-gates="+FeatureGates,
		// 15s by default; the HPA suites wait for the HPA's passes, so a
		// shorter period keeps them short. It changes only how often the
		// HPA looks, not what it decides.
		"--horizontal-pod-autoscaler-sync-period="+HPASyncPeriod.String(),
		"--leader-elect=false",
		"--secure-port=0",
		"--kube-api-qps=1000",
		"--kube-api-burst=2000",
		"--concurrent-deployment-syncs=20",
		"--concurrent-replicaset-syncs=20",
		"--concurrent-service-endpoint-syncs=20",
		"--concurrent-namespace-syncs=20",
	); err != nil {
		return err
	}
	_, err := c.start("kube-scheduler", detach,
		"--kubeconfig="+c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--kube-api-qps=1000",
		"--kube-api-burst=2000",
	)
	return err
}

// kwokConfiguration raises how many pod stages kwok plays at once from its
// default of 4: each is an apiserver call, and with 10,000 pods going away
// at once four at a time let pods stay Terminating for many minutes (about
// 1.5 deleted a second here), far slower than a kubelet. kwok applies no
// defaults to a configuration it is given, so the rest are its defaults.
const kwokConfiguration = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 32
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enableDebuggingHandlers: true
  enableContentionProfiling: false
  enableProfilingHandler: true
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
`

// startKwokNode starts kwok, creates its fake node and waits until the node
// is Ready. With readyAfterAddress, kwok leaves pods' Ready to a fake
// kubelet (Options.ReadyAfterAddress).
func (c *Cluster) startKwokNode(ctx context.Context, detach, readyAfterAddress bool) error {
	kwokConfig := filepath.Join(c.Dir, "kwok.yaml")
	if err := os.WriteFile(kwokConfig, []byte(kwokConfiguration), 0o600); err != nil {
		return err
	}
	stages := filepath.Join(c.BinDir, KwokStagesFile)
	if readyAfterAddress {
		var err error
		if stages, err = c.writeReadyAfterAddressStages(); err != nil {
			return err
		}
	}
	kwok, err := c.start("kwok", detach,
		"--kubeconfig="+c.Kubeconfig,
		"--config="+stages,
		"--config="+kwokConfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.244.0.1/17", // KwokPodCIDR, written as kwok wants it
		"--node-ip=10.245.0.1",
		"--node-port=0",
	)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	if err := createNode(ctx, cs); err != nil {
		return err
	}
	return WaitFor(ctx, kwok, nodeReady(cs))
}

// probeDeployment is the Deployment Start makes to see the
// kube-controller-manager at work, and deletes again.
const probeDeployment = "localcluster-controller-manager-probe"

// waitControllerManager waits until kube-controller-manager runs its
// controllers: the deployment controller has observed a Deployment with no
// replicas. Until then it is in a startup phase that exits when the
// apiserver is unreachable for 10 s, so a test that restarts the apiserver
// right after Start would otherwise lose it.
func (c *Cluster) waitControllerManager(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	deployments := cs.AppsV1().Deployments(metav1.NamespaceSystem)
	labels := map[string]string{"app": probeDeployment}
	probe := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: probeDeployment},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}},
			},
		},
	}
	if _, err := deployments.Create(ctx, probe, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	kcm := c.lockedComponent(KubeControllerManagerBinary)
	err = WaitFor(ctx, kcm, func(ctx context.Context) error {
		d, err := deployments.Get(ctx, probeDeployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration < d.Generation {
			return errors.New("the deployment controller has not observed the probe Deployment yet")
		}
		return nil
	})
	if err != nil {
		return err
	}
	return deployments.Delete(ctx, probeDeployment, metav1.DeleteOptions{})
}

// RESTConfig returns an admin client config with limits high enough that the
// client never throttles a test or benchmark.
func (c *Cluster) RESTConfig() *rest.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		// The kubeconfig is written by Start; failing to read it is a bug.
		panic(fmt.Sprintf("read kubeconfig %s: %v", c.Kubeconfig, err))
	}
	cfg.QPS, cfg.Burst = 2000, 4000
	return cfg
}

// UnprivilegedRESTConfig authenticates as UnprivilegedUser.
func (c *Cluster) UnprivilegedRESTConfig() *rest.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.UnprivilegedKubeconfig)
	if err != nil {
		panic(fmt.Sprintf("read kubeconfig %s: %v", c.UnprivilegedKubeconfig, err))
	}
	return cfg
}

// Kubectl runs the cluster's own kubectl (matching the server version)
// against the admin kubeconfig and returns its combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir, "kubectl"), append([]string{"--kubeconfig=" + c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// Stop ends every component this process started and removes a temporary
// directory. A detached cluster is stopped with StopDir instead.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ownsDir && len(c.procs) > 0 {
		c.keepWatchMetrics()
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].Stop(stopGrace)
	}
	c.procs = nil
	if c.ownsDir {
		KeepLogs(c.Dir, filepath.Base(c.Dir)) // one directory per cluster of a run
		os.RemoveAll(c.Dir)
	}
}

// Load reads a running cluster's state from its directory.
func Load(dir string) (*Cluster, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("no cluster in %s: %w", dir, err)
	}
	c := &Cluster{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("corrupt %s: %w", filepath.Join(dir, stateFile), err)
	}
	return c, nil
}

// StopDir stops a detached cluster recorded in dir, in reverse start order.
func StopDir(dir string) error {
	c, err := Load(dir)
	if err != nil {
		return err
	}
	for _, name := range []string{"kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		killGroup(c.PIDs[name], stopGrace)
	}
	return os.Remove(filepath.Join(dir, stateFile))
}

func (c *Cluster) start(name string, detach bool, args ...string) (*Process, error) {
	p, err := startProcess(c.Dir, name, filepath.Join(c.BinDir, name), args, detach)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
	c.PIDs[name] = p.cmd.Process.Pid
	return p, nil
}

// saveState records the cluster in its directory, for Load and StopDir.
func (c *Cluster) saveState() error {
	c.mu.Lock()
	b, err := json.MarshalIndent(c, "", "  ")
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.Dir, stateFile), b, 0o600)
}

// auditPolicy logs who wrote what and who watches what, without bodies.
// Leases and events are left out: they are frequent and no test counts them.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
  - group: ""
    resources: ["events"]
  - group: events.k8s.io
    resources: ["events"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
# Watches too: their start and end stages show who holds which watch open.
- level: Metadata
  verbs: ["watch"]
- level: None
`

func (c *Cluster) writeAPIServerInputs(adminToken, unprivToken string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	c.CAFile = filepath.Join(c.Dir, "ca.crt")
	ca, err := newServingCA()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"ca.crt":            ca.caPEM,
		"apiserver.crt":     ca.certPEM,
		"apiserver.key":     ca.keyPEM,
		"sa.key":            pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":            pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv":        fmt.Appendf(nil, "%s,admin,admin,\"system:masters\"\n%s,%s,%s\n", adminToken, unprivToken, UnprivilegedUser, UnprivilegedUser),
		"audit-policy.yaml": []byte(auditPolicy),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(c.Dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// WriteKubeconfig writes a kubeconfig for server that trusts caFile and
// authenticates with a bearer token.
func WriteKubeconfig(path, server, caFile, user, token string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

func createNode(ctx context.Context, cs kubernetes.Interface) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("100000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				FakeNodeLabel:            FakeNodeLabelValue,
				"kubernetes.io/hostname": NodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: FakeNodeTaint, Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func nodeReady(cs kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return errors.New("node not Ready yet")
	}
}

var insecureLoopbackClient = &http.Client{
	Timeout: 2 * time.Second,
	Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed loopback apiserver
	},
}

func httpOK(url, token string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := insecureLoopbackClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
		}
		return nil
	}
}

// freePorts reserves n distinct loopback ports by binding them all at once,
// then releases them for the components to bind.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Healthy reports whether the apiserver answers /readyz.
func (c *Cluster) Healthy(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}
