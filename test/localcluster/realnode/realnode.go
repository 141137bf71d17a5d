// Package realnode runs a real Kubernetes node beside the bed's kwok and
// process nodes: a kubelet of the control plane's version with containerd
// 1.6 and runc, so pods run elasti's own images as real containers, with
// the image's user, a read-only root, dropped capabilities, seccomp and
// memory limits enforced by the kernel.
//
// The node lives in the node network namespace of a realnet bed
// (Options.Net), the namespace that bed's nftables kube-proxy programs.
// containerd and the kubelet are started with nsenter --net only (their
// mount namespace stays the host's, so cgroups, containerd's netns mounts
// and its state stay visible to the kubelet and to cleanup), and so the
// CNI bridge plugin builds the pods' bridge and veths there too:
//
//	host 127.0.0.1:<api> ◀── realnet's forwarder on 10.245.0.1:<fwd>
//	node namespace       kube-proxy (realnet); kubelet on NodeIP:10250, its
//	                     node's InternalIP, which the apiserver reaches over
//	                     the veth; containerd; bridge Bridge with GatewayIP;
//	                     nft table ip elasti-realnode: pods' packets to the
//	                     host end of the veth leave masqueraded as NodeIP,
//	                     so the host needs no route to PodCIDR
//	pod namespaces       eth0 on PodCIDR; route 10.0.0.0/8 via GatewayIP
//	                     and nothing else
//
// So a real-node pod reaches ClusterIPs exactly as on a cluster node: the
// packet enters the node namespace, kube-proxy's prerouting DNATs it, and
// the node routes it to a real-node pod (the bridge), a process pod (its
// sandbox veth) or a kwok pod (the node's lo). kube-proxy's --cluster-cidr
// is the process and kwok pods' range, so it masquerades real-node pods'
// service traffic as from outside the cluster CIDR: a reply from a pod on
// the same bridge then comes back through the node, where conntrack undoes
// the DNAT. The kubelet's clusterDNS is realnet's kube-dns Service (CoreDNS
// on the process node), with the usual search path. Pods reach the
// apiserver through realnet's forwarder (PreparePod): it listens on
// loopback only.
//
// Nothing is programmed in the host's own network namespace: no link,
// address, route or firewall rule. Stop removes the bridge and the nft
// table from the node namespace, which outlives the node.
//
// It needs root, and leaves nothing on the host when stopped: every file
// lives under one working directory (containerd's root and state, runc's
// state, kubelet's root, pod logs, network namespace mounts, IPAM), and
// the pods' cgroups sit under a cgroup root of its own. Stop (also run at
// Start, for what a killed run left) kills the processes, unmounts, deletes
// the bridge and its veths, removes the cgroups and the few files that
// containerd and kubelet insist on writing to fixed paths, and restores
// the kernel settings kubelet changes.
//
// Images cannot be pulled (no registry is reachable): everything a pod runs
// is imported first (Options.Images, Node.ImportImage), and pods say
// imagePullPolicy: Never.
package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/podnet"
	"github.com/elasti-dev/elasti/test/localcluster/realnet"
)

const (
	// NodeName is the node the kubelet registers.
	NodeName = "elasti-real-node-0"
	// TaintKey=TaintValue:NoSchedule keeps every pod that does not
	// tolerate it off the real node, so the bed's own pods keep landing on
	// the kwok and process nodes.
	TaintKey   = "elasti.dev/real-node"
	TaintValue = "true"
	// PodCIDR is the real node's pod network: a bridge on the host with
	// GatewayIP, pods from the rest. No other part of the bed uses
	// 10.248.0.0/16 (services 10.0.0.0/16, kwok and process pods
	// 10.244.0.0/16, transfer nets 10.245.0.0/30 and 10.247.0.0/30).
	PodCIDR = "10.248.0.0/24"
	// GatewayIP is the bridge's address in the node namespace, the pods'
	// gateway to 10.0.0.0/8 (ClusterIPs, other pods, the forwarders on
	// the veth's host end). Pods have no default route.
	GatewayIP = "10.248.0.1"
	// NodeIP is the node's InternalIP, where the kubelet serves the
	// apiserver's log and exec requests: the node namespace's end of its
	// veth, which the host reaches directly.
	NodeIP = podnet.NamespaceIP
	// Bridge is the bridge in the node namespace the pods' veths hang off.
	Bridge = "elasti-rn0"
	// Dir is the node's working directory. It is fixed, not a temporary
	// name, so a run that was killed is cleaned up by the next one.
	Dir = "/tmp/elasti-realnode"

	// pauseImage is the sandbox image, built locally (pause.go).
	pauseImage = "elasti.local/pause:v1"
	// cniNetwork names the CNI network, and with it the CNI result cache
	// files containerd's CNI library writes under cniCacheDir.
	cniNetwork = "elasti-realnode"
	// cgroupRoot is the cgroup (in every v1 hierarchy) under which the
	// kubelet makes kubepods, so removing it removes every pod cgroup.
	cgroupRoot = "/elasti-realnode"

	// kubeletPort is the kubelet's server port on NodeIP; the node
	// namespace is the run's own, so the well-known port is free there.
	kubeletPort = 10250
	// nftTable is the node namespace's table that masquerades the pods'
	// packets to the host (host.go).
	nftTable = "elasti-realnode"

	startLimit = 2 * time.Minute
	stopGrace  = 10 * time.Second
)

// Options configure Start.
type Options struct {
	// Cluster is the control plane the kubelet joins.
	Cluster *localcluster.Cluster
	// Net is the bed whose node network namespace the node runs in, with
	// its kube-proxy, cluster DNS and apiserver forwarder.
	Net *realnet.Net
	// Images are docker-archive tarballs (what `make images` and
	// go-containerregistry's tarball.WriteToFile write) imported into
	// containerd before the kubelet starts.
	Images []string
	// Progress receives progress lines; nil discards them.
	Progress io.Writer
}

// Node is a running real node.
type Node struct {
	opts   Options
	logf   func(string, ...any)
	procs  []*localcluster.Process
	unlock func()
	ctr    string
	// netns is the node network namespace's name (ip netns).
	netns string
	// kube is made at Start: Stop may run after the cluster's files are
	// gone (a package's bed stops after its control plane).
	kube kubernetes.Interface
}

// Start brings the node up and returns once it is Ready. On error it has
// already cleaned up.
func Start(ctx context.Context, opts Options) (n *Node, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("realnode: a real node needs root (containerd, runc, network namespaces, cgroups)")
	}
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("realnode: a real node needs Linux, not %s", runtime.GOOS)
	}
	if opts.Cluster == nil || opts.Net == nil {
		return nil, errors.New("realnode: Options.Cluster and Options.Net are required")
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	node := &Node{opts: opts, netns: opts.Net.Network.Name(), logf: func(format string, args ...any) {
		fmt.Fprintf(progress, "[realnode %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}}
	if node.kube, err = kubernetes.NewForConfig(opts.Cluster.RESTConfig()); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startLimit)
	defer cancel()

	tools, err := findTools(opts.Cluster.BinDir)
	if err != nil {
		return nil, err
	}
	if node.unlock, err = lock(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			node.Stop()
		}
	}()
	// A run that was killed left its state behind; remove it first.
	if _, statErr := os.Stat(Dir); statErr == nil {
		node.logf("removing what an earlier run left in %s", Dir)
		if err := cleanup(node.logf); err != nil {
			return nil, fmt.Errorf("realnode: cleaning up an earlier run: %w", err)
		}
	}
	if err := node.prepareHost(ctx); err != nil {
		return nil, err
	}
	node.logf("building the sandbox (pause) image")
	pause, err := buildPauseImage(ctx, filepath.Join(Dir, "images"))
	if err != nil {
		return nil, err
	}
	if err := node.startContainerd(ctx, tools); err != nil {
		return nil, err
	}
	for _, img := range append([]string{pause}, opts.Images...) {
		if err := node.ImportImage(ctx, img); err != nil {
			return nil, err
		}
	}
	if err := node.startKubelet(ctx, tools); err != nil {
		return nil, err
	}
	node.logf("node %s is Ready", NodeName)
	return node, nil
}

// Stop kills the kubelet, containerd and every container, deletes the Node
// object, and removes all the host state the node made. It is safe to call
// more than once.
func (n *Node) Stop() {
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].Stop(stopGrace)
	}
	n.procs = nil
	if err := cleanup(n.logf); err != nil {
		n.logf("cleanup: %v", err)
	}
	// Best effort: the control plane may already be gone.
	if n.kube != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = n.kube.CoreV1().Nodes().Delete(ctx, NodeName, metav1.DeleteOptions{})
		cancel()
	}
	if n.unlock != nil {
		n.unlock()
		n.unlock = nil
	}
}

// Cleanup removes what a killed run of a real node left on the host (a run
// killed with SIGKILL cannot clean up: its shims and containers outlive it,
// and its bridge, mounts, cgroups and sysctls stay). Start does it too;
// call Cleanup first to look at the host before a node starts.
func Cleanup(ctx context.Context, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(progress, "[realnode %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	unlock, err := lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(Dir); err != nil {
		return nil
	}
	logf("removing what an earlier run left in %s", Dir)
	return cleanup(logf)
}

// Toleration lets a pod onto the real node.
func Toleration() corev1.Toleration {
	return corev1.Toleration{Key: TaintKey, Operator: corev1.TolerationOpEqual, Value: TaintValue, Effect: corev1.TaintEffectNoSchedule}
}

// NodeSelector pins a pod to the real node.
func NodeSelector() map[string]string {
	return map[string]string{corev1.LabelHostname: NodeName}
}

// KubeletLog and ContainerdLog are the components' log files, for failure
// messages.
func KubeletLog() string    { return filepath.Join(Dir, "kubelet.log") }
func ContainerdLog() string { return filepath.Join(Dir, "containerd.log") }

// lock serialises real nodes on this host: they share Bridge, PodCIDR and
// Dir. Those are host-wide, so the lock is too: it sits in /tmp beside Dir,
// not in the bed's cache, which another checkout may set elsewhere with
// ELASTI_CACHE_DIR.
func lock(ctx context.Context) (func(), error) {
	f, err := os.OpenFile(Dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("realnode: lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("realnode: another real node holds %s: %w", f.Name(), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
