package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/procnode"
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
//   - the server listens on NodeIP only, for the apiserver's log and
//     exec requests. The apiserver presents no client certificate, so the
//     server allows anonymous requests; it is reachable from this host and
//     from the node's own pods only;
//   - clusterDNS is the bed's kube-dns Service, so pods resolve Service
//     names with the usual search path;
//   - makeIPTablesUtilChains: false, so the kubelet adds no iptables chains;
//   - oomScoreAdj: 0, since root here may not lower it (see containerd.go);
//   - resolvConf: "": pods must not use the host's resolvers (nor its
//     search path), only the cluster DNS;
//   - eviction and image GC thresholds at the extremes, so a busy shared
//     disk evicts no test pod and collects no imported image (they cannot
//     be pulled back).
//   - maxPods: 40 holds the bed's own pods (elasti's three, CoreDNS,
//     Traefik, a rollout's surge) beside the cold-start gate's eighteen
//     apps (test/e2e/realnode), which all run at once.
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
clusterDNS:
- %[9]s
clusterDomain: cluster.local
maxPods: 40
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`

// KubeletVEnv names the environment variable that sets the kubelet's -v
// (2 without it): at 3 it logs each status patch it sends ("Patch status
// for pod", with the patch) and each request its client-side rate limit
// held back ("Waited before sending request"), which a slow cold start's
// evidence then holds.
const KubeletVEnv = "ELASTI_REALNODE_KUBELET_V"

// kubeletVerbosity is the kubelet's -v: KubeletVEnv's when it is a level
// from 0 to 10, else 2.
func kubeletVerbosity() string {
	if v, err := strconv.Atoi(os.Getenv(KubeletVEnv)); err == nil && v >= 0 && v <= 10 {
		return strconv.Itoa(v)
	}
	return "2"
}

// startKubelet writes the kubelet's configuration, starts it and waits until
// its node is Ready.
func (n *Node) startKubelet(ctx context.Context, t tools) error {
	port := kubeletPort
	for _, d := range []string{kubeletRoot, podLogsDir, volumePluginDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	config := filepath.Join(Dir, "kubelet.yaml")
	body := fmt.Sprintf(kubeletConfig, NodeIP, port, cgroupRoot, containerdSocket, podLogsDir, volumePluginDir, TaintKey, TaintValue,
		procnode.DefaultDNSServer)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		return err
	}
	n.logf("starting kubelet as node %s (server %s:%d)", NodeName, NodeIP, port)
	p, err := n.startProcess(t, "kubelet", t.kubelet,
		"--config="+config,
		// The apiserver listens on the host's loopback; the node namespace
		// reaches it through realnet's forwarder.
		"--kubeconfig="+n.opts.Net.NodeKubeconfig(),
		"--root-dir="+kubeletRoot,
		// Not under --root-dir by default: /var/lib/kubelet/pki.
		"--cert-dir="+filepath.Join(kubeletRoot, "pki"),
		"--hostname-override="+NodeName,
		"--node-ip="+NodeIP,
		"--v="+kubeletVerbosity(),
	)
	if err != nil {
		return err
	}
	return localcluster.WaitFor(ctx, p, func(ctx context.Context) error {
		node, err := n.kube.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
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
