package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/elasti-dev/elasti/test/localcluster"
)

// tools are the executables the node runs.
type tools struct {
	kubelet, containerd, ctr, runc, ip, nsenter string
}

// cniBinDir is where Debian's containernetworking-plugins puts the plugins
// (hack/build-cluster-bins.sh installs it).
const cniBinDir = "/usr/lib/cni"

// findTools finds kubelet in the cluster's binaries and the rest on the
// host, where hack/build-cluster-bins.sh installs them.
func findTools(binDir string) (tools, error) {
	t := tools{kubelet: filepath.Join(binDir, localcluster.KubeletBinary)}
	var missing []string
	if _, err := os.Stat(t.kubelet); err != nil {
		missing = append(missing, t.kubelet)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"containerd", &t.containerd}, {"ctr", &t.ctr}, {"runc", &t.runc}, {"ip", &t.ip}, {"nsenter", &t.nsenter}} {
		if p := lookPath(f.name); p != "" {
			*f.dst = p
		} else {
			missing = append(missing, f.name)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, plugin))
		}
	}
	if len(missing) > 0 {
		return t, fmt.Errorf("realnode: missing %s; hack/build-cluster-bins.sh builds kubelet and installs containerd, runc and containernetworking-plugins",
			strings.Join(missing, ", "))
	}
	return t, nil
}

// lookPath is exec.LookPath that also looks in sbin, which a PATH may lack.
func lookPath(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// run runs a short command and returns its stdout; the error carries stderr.
func run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// startProcess starts bin in Dir as a process of the node, inside the node
// network namespace, logging to Dir/<name>.log, in a process group of its
// own that the kernel kills when the test binary dies. nsenter enters the
// network namespace only and then execs bin (not `ip netns exec`, which
// also makes a mount namespace with a fresh /sys: the cgroup hierarchies
// and containerd's netns mounts would vanish from the host's view).
// containerd's shims leave that group on purpose; cleanup finds them by
// their command line.
func (n *Node) startProcess(t tools, name, bin string, args ...string) (*localcluster.Process, error) {
	args = append([]string{"--net=" + filepath.Join("/run/netns", n.netns), "--", bin}, args...)
	p, err := localcluster.StartProcess(Dir, name, t.nsenter, args...)
	if err != nil {
		return nil, fmt.Errorf("realnode: %w", err)
	}
	n.procs = append(n.procs, p)
	return p, nil
}
