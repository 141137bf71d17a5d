package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/pkg/localcluster"
)

// Paths under Dir that the kubelet uses.
var (
	kubeletRoot     = filepath.Join(Dir, "kubelet")
	podLogsDir      = filepath.Join(Dir, "pod-logs")
	volumePluginDir = filepath.Join(Dir, "volume-plugins")
)

// kubeletConfig is the KubeletConfiguration, verified on this machine type:
//   - cgroups are v1 (hybrid layout): cgroupfs driver, failCgroupV1: false;
//   - swap may be on: failSwapOn: false;
//   - cgroupRoot keeps kubepods under a cgroup of the node's own;
//   - the server listens on GatewayIP only, for the apiserver's log and
//     exec requests. The apiserver presents no client certificate, so the
//     server allows anonymous requests; it is reachable from this host and
//     from the node's own pods only;
//   - makeIPTablesUtilChains: false, so the kubelet adds no iptables chains;
//   - oomScoreAdj: 0, since root here may not lower it (see containerd.go);
//   - resolvConf: "": no cluster DNS on this node yet, and pods must not
//     use the host's resolvers;
//   - eviction and image GC thresholds at the extremes, so a busy shared
//     disk evicts no test pod and collects no imported image (they cannot
//     be pulled back).
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
readOnlyPort: 0
healthzPort: 0
cgroupDriver: cgroupfs
cgroupRoot: %[3]s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[4]s
imageServiceEndpoint: unix://%[4]s
podLogsDir: %[5]s
volumePluginDir: %[6]s
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
registerNode: true
registerWithTaints:
- key: %[7]s
  value: %[8]q
  effect: NoSchedule
makeIPTablesUtilChains: false
oomScoreAdj: 0
resolvConf: ""
maxPods: 16
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`

// startKubelet writes the kubelet's configuration, starts it and waits until
// its node is Ready.
func (n *Node) startKubelet(ctx context.Context, t tools) error {
	port, err := freePort(GatewayIP)
	if err != nil {
		return err
	}
	for _, d := range []string{kubeletRoot, podLogsDir, volumePluginDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	config := filepath.Join(Dir, "kubelet.yaml")
	body := fmt.Sprintf(kubeletConfig, GatewayIP, port, cgroupRoot, containerdSocket, podLogsDir, volumePluginDir, TaintKey, TaintValue)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		return err
	}
	n.logf("starting kubelet as node %s (server %s:%d)", NodeName, GatewayIP, port)
	p, err := n.startProcess("kubelet", t.kubelet,
		"--config="+config,
		"--kubeconfig="+n.opts.Cluster.Kubeconfig,
		"--root-dir="+kubeletRoot,
		// Not under --root-dir by default: /var/lib/kubelet/pki.
		"--cert-dir="+filepath.Join(kubeletRoot, "pki"),
		"--hostname-override="+NodeName,
		"--node-ip="+GatewayIP,
		"--v=2",
	)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(n.opts.Cluster.RESTConfig())
	if err != nil {
		return err
	}
	return localcluster.WaitFor(ctx, p, func(ctx context.Context) error {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s: Ready=%s: %s", NodeName, c.Status, c.Message)
			}
		}
		return errors.New("node has no Ready condition yet")
	})
}

// freePort picks a free TCP port on ip.
func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("realnode: no free port on %s: %w", ip, err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return strconv.Atoi(port)
}
