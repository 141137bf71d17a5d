// Package realnode runs a real Kubernetes node beside the bed's kwok and
// process nodes: a kubelet of the control plane's version with containerd
// 1.6 and runc, so pods run elasti's own images as real containers, with
// the image's user, a read-only root, dropped capabilities, seccomp and
// memory limits enforced by the kernel.
//
// It needs root, and leaves nothing on the host when stopped: every file
// lives under one working directory (containerd's root and state, runc's
// state, kubelet's root, pod logs, network namespace mounts, IPAM), the pods
// hang off a bridge of its own on PodCIDR, and their cgroups sit under a
// cgroup root of its own. Stop (also run at Start, for what a killed run
// left) kills the processes, unmounts, deletes the bridge and its veths,
// removes the cgroups and the few files that containerd and kubelet insist
// on writing to fixed paths, and restores the kernel settings kubelet
// changes.
//
// What this node does not do yet: cluster DNS (pods get an empty
// resolv.conf) and kube-proxy, so pods reach no ClusterIP; GatewayIP:port
// forwarders (see Node.Forward) are the way to the host's loopback services.
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

	"github.com/elasti-dev/elasti/pkg/localcluster"
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
	// GatewayIP is the bridge's address: the node's InternalIP (where the
	// apiserver reaches the kubelet for logs) and the address pods reach
	// the host on. Pods have no default route: GatewayIP's subnet is all
	// they can reach.
	GatewayIP = "10.248.0.1"
	// Bridge is the host bridge the pods' veths hang off.
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

	startLimit = 2 * time.Minute
	stopGrace  = 10 * time.Second
)

// Options configure Start.
type Options struct {
	// Cluster is the control plane the kubelet joins.
	Cluster *localcluster.Cluster
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
	if opts.Cluster == nil {
		return nil, errors.New("realnode: Options.Cluster is required")
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	node := &Node{opts: opts, logf: func(format string, args ...any) {
		fmt.Fprintf(progress, "[realnode %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}}
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
	if n.opts.Cluster != nil {
		if cs, err := kubernetes.NewForConfig(n.opts.Cluster.RESTConfig()); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = cs.CoreV1().Nodes().Delete(ctx, NodeName, metav1.DeleteOptions{})
			cancel()
		}
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
