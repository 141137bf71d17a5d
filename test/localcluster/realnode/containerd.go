package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/elasti-dev/elasti/test/localcluster"
)

// Paths under Dir that containerd and the CNI plugins use.
var (
	containerdRoot   = filepath.Join(Dir, "containerd", "root")
	containerdState  = filepath.Join(Dir, "containerd", "state")
	containerdSocket = filepath.Join(Dir, "containerd.sock")
	runcRoot         = filepath.Join(Dir, "runc")
	cniConfDir       = filepath.Join(Dir, "cni", "net.d")
	cniIPAMDir       = filepath.Join(Dir, "cni", "ipam")
)

// containerdConfig is containerd 1.6's configuration (version 2). Every
// path is under Dir, so nothing lands in /var/lib/containerd,
// /run/containerd, /opt/containerd or /var/run/netns:
//   - netns_mounts_under_state_dir puts the pods' network namespace mounts
//     in the state directory;
//   - runc's Root keeps its container state out of /run/containerd/runc.
//
// restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, so nothing may
// lower an oom_score_adj below 0, and the kubelet gives sandboxes -998; runc
// then fails with "can't get final child's PID from pipe: EOF". The option
// made for unprivileged nodes clamps the value instead.
//
// No image can be pulled, so the sandbox image is one Start imports.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  address = ""

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[5]q
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = %[6]q
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    enable_selinux = false
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          BinaryName = %[7]q
          Root = %[8]q
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = %[9]q
      conf_dir = %[10]q
      max_conf_num = 1
`

// cniConfig returns the pods' network: a bridge in the node namespace
// (made by prepareHost, with GatewayIP) and host-local addresses from
// PodCIDR, kept under Dir. The one route is 10.0.0.0/8 via GatewayIP
// (ClusterIPs, the other pods, the forwarders); no default route, no
// masquerade and no port maps, so the plugins add no iptables rules.
func cniConfig() ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "0.4.0",
		"name":       cniNetwork,
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      Bridge,
			"isGateway":   false,
			"ipMasq":      false,
			"hairpinMode": false,
			"ipam": map[string]any{
				"type":    "host-local",
				"dataDir": cniIPAMDir,
				"ranges":  [][]map[string]string{{{"subnet": PodCIDR, "gateway": GatewayIP}}},
				"routes":  []map[string]string{{"dst": "10.0.0.0/8", "gw": GatewayIP}},
			},
		}},
	}, "", "  ")
}

// startContainerd writes containerd's and the CNI configuration, starts
// containerd and waits until it answers.
func (n *Node) startContainerd(ctx context.Context, t tools) error {
	for _, d := range []string{containerdRoot, containerdState, runcRoot, cniConfDir, cniIPAMDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	cni, err := cniConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cniConfDir, "10-"+cniNetwork+".conflist"), cni, 0o644); err != nil {
		return err
	}
	config := filepath.Join(Dir, "containerd.toml")
	body := fmt.Sprintf(containerdConfig, containerdRoot, containerdState, containerdSocket, containerdSocket+".ttrpc",
		filepath.Join(Dir, "containerd", "opt"), pauseImage, t.runc, runcRoot, cniBinDir, cniConfDir)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		return err
	}
	n.logf("starting containerd (socket %s)", containerdSocket)
	p, err := n.startProcess(t, "containerd", t.containerd, "--config", config, "--log-level", "info")
	if err != nil {
		return err
	}
	n.ctr = t.ctr
	return localcluster.WaitFor(ctx, p, func(ctx context.Context) error {
		_, err := n.ctrRun(ctx, "version")
		return err
	})
}

// ctrRun runs ctr against the node's containerd, in the CRI's namespace.
func (n *Node) ctrRun(ctx context.Context, args ...string) (string, error) {
	return run(ctx, n.ctr, append([]string{"--address", containerdSocket, "--namespace", "k8s.io"}, args...)...)
}

// ImportImage imports a docker-archive tarball into the CRI's image store,
// unpacked for its snapshotter, so pods with imagePullPolicy: Never run it.
func (n *Node) ImportImage(ctx context.Context, tarball string) error {
	n.logf("importing %s", tarball)
	if _, err := n.ctrRun(ctx, "images", "import", "--snapshotter", "overlayfs", tarball); err != nil {
		return fmt.Errorf("realnode: import %s: %w", tarball, err)
	}
	return nil
}
