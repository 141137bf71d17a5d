package realnode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/elasti-dev/elasti/test/localcluster"
	"github.com/elasti-dev/elasti/test/localcluster/podnet"
)

const (
	// stateFile records, before anything changes, what the host looked like:
	// cleanup restores it, also after a killed run.
	stateFile = "host-state.json"
	// cgroupFS holds one directory per cgroup hierarchy.
	cgroupFS = "/sys/fs/cgroup"
	// containerLogLinks is where the kubelet links every container's log; it
	// is fixed in the kubelet's code.
	containerLogLinks = "/var/log/containers"
	// cniCacheDir is where containerd's CNI library caches each attachment's
	// result; containerd 1.6 has no setting for it.
	cniCacheDir = "/var/lib/cni"
	// devicePluginDir is where the kubelet's device manager listens,
	// whatever its --root-dir: a path fixed in the device plugin API.
	devicePluginDir = "/var/lib/kubelet/device-plugins"
	// shimSocketDir is where containerd's runc shims listen, whatever
	// containerd's state directory: a path fixed in the shim. A shim that
	// exits cleanly removes its socket; a killed one leaves it.
	shimSocketDir = "/run/containerd/s"
)

// kernelSettings are the sysctls the kubelet sets at start when
// protectKernelDefaults is off (vm.overcommit_memory=1, kernel.panic=10, ...);
// ip_forward is recorded too, in case a CNI plugin turns it on.
var kernelSettings = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward",
}

// hostState is what stateFile holds.
type hostState struct {
	// Sysctls maps a /proc/sys path to its value before the node started.
	Sysctls map[string]string `json:"sysctls"`
	// Created lists fixed host directories that did not exist before, so
	// cleanup removes them once they are empty.
	Created []string `json:"created"`
	// Netns is the node network namespace (realnet's) holding the bridge
	// and the nft table; it may be gone by the time a killed run's
	// leftovers are cleaned up, and with it both.
	Netns string `json:"netns"`
}

// prepareHost records the host's state, then makes the node's directory,
// its bridge and nft table in the node namespace, and its cgroup root.
func (n *Node) prepareHost(ctx context.Context) error {
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return err
	}
	if err := n.recordHostState(); err != nil {
		return err
	}
	if err := n.makeBridge(ctx); err != nil {
		return err
	}
	return makeCgroupRoot()
}

// recordHostState writes into Dir what cleanup restores or removes: the
// sysctls the node changes and the fixed directories it will create.
func (n *Node) recordHostState() error {
	st := hostState{Sysctls: map[string]string{}, Netns: n.netns}
	for _, k := range kernelSettings {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return fmt.Errorf("realnode: read sysctl %s: %w", k, err)
		}
		st.Sysctls[k] = strings.TrimSpace(string(b))
	}
	// Deepest first, so /var/lib/kubelet is listed when the kubelet makes it.
	for _, d := range []string{containerLogLinks, cniCacheDir, devicePluginDir, filepath.Dir(devicePluginDir), shimSocketDir, filepath.Dir(shimSocketDir)} {
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			st.Created = append(st.Created, d)
		}
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(Dir, stateFile), b, 0o600)
}

// makeBridge makes the pods' bridge in the node namespace and the nft table
// that masquerades their packets to the host.
func (n *Node) makeBridge(ctx context.Context) error {
	ip := lookPath("ip")
	if ip == "" {
		return errors.New("realnode: iproute2 (ip) is missing")
	}
	// "root" lists the routes inside the prefix: none may exist yet.
	if out, err := run(ctx, ip, "-n", n.netns, "-4", "route", "show", "root", "10.248.0.0/16"); err != nil || strings.TrimSpace(out) != "" {
		return fmt.Errorf("realnode: 10.248.0.0/16 must be unused in %s, but it is routed (%s%v)", n.netns, strings.TrimSpace(out), err)
	}
	n.logf("creating bridge %s with %s on %s in %s", Bridge, GatewayIP, PodCIDR, n.netns)
	for _, args := range [][]string{
		{"-n", n.netns, "link", "add", Bridge, "type", "bridge"},
		{"-n", n.netns, "addr", "add", GatewayIP + "/24", "dev", Bridge},
		{"-n", n.netns, "link", "set", Bridge, "up"},
	} {
		if _, err := run(ctx, ip, args...); err != nil {
			return fmt.Errorf("realnode: %w", err)
		}
	}
	// The host routes 10.244.0.0/16 into the node namespace (podnet), but
	// not PodCIDR: a pod's packet to the forwarders on the veth's host end
	// leaves as NodeIP, and the reply comes back to the node, whose
	// conntrack hands it to the pod.
	nft := fmt.Sprintf(`table ip %[1]s {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr %[2]s ip daddr %[3]s masquerade
	}
}
`, nftTable, PodCIDR, podnet.HostIP)
	rules := filepath.Join(Dir, "masquerade.nft")
	if err := os.WriteFile(rules, []byte(nft), 0o644); err != nil {
		return err
	}
	if _, err := run(ctx, ip, "netns", "exec", n.netns, "nft", "-f", rules); err != nil {
		return fmt.Errorf("realnode: %w", err)
	}
	return nil
}

// makeCgroupRoot makes the node's cgroup in every mounted hierarchy.
func makeCgroupRoot() error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		d := filepath.Join(h, cgroupRoot)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("realnode: create cgroup %s: %w", d, err)
		}
		if err := weighNode(d); err != nil {
			return err
		}
		// A new cpuset cgroup starts with no CPUs or memory nodes, and no
		// process could join it.
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("realnode: %s: %w", filepath.Join(d, f), err)
				}
			}
		}
	}
	return nil
}

// NodeCPUShares is the node's weight against the host's other processes
// (cgroup v1 cpu.shares; a process of its own weighs 1024). A real node's
// pods have its CPUs; here the node shares two cores with the other
// beds of a make test, dozens of busy processes each weighing as much as
// the whole node did, and at load average 25 its pods got about a
// twenty-fifth of the machine: probes timed out, a pod took 48 s to
// start, and the operator fell so far behind its watch of a deleted
// namespace's 999 ElastiServices that the apiserver cut it 45 times and
// a new ElastiService went unseen for a minute (docs/development/ci.md).
// Eight processes' worth gives it about a quarter of the machine at that
// load, and all of it when the machine is quiet.
const NodeCPUShares = 8 * 1024

// weighNode gives the node's cgroup d its weight, in the hierarchy that
// has the cpu controller (v1 cpu.shares, or v2 cpu.weight where that
// controller is enabled); other hierarchies have neither file.
func weighNode(d string) error {
	for file, value := range map[string]int{"cpu.shares": NodeCPUShares, "cpu.weight": NodeCPUShares * 100 / 1024} {
		f := filepath.Join(d, file)
		if _, err := os.Stat(f); err != nil {
			continue
		}
		if err := os.WriteFile(f, []byte(strconv.Itoa(value)), 0o644); err != nil {
			return fmt.Errorf("realnode: %s: %w", f, err)
		}
	}
	return nil
}

// cgroupHierarchies lists the mounted cgroup hierarchies (v1 controllers,
// named ones and the unified one) under cgroupFS.
func cgroupHierarchies() ([]string, error) {
	return mountPoints(func(point, fstype string) bool {
		return (fstype == "cgroup" || fstype == "cgroup2") && strings.HasPrefix(point, cgroupFS+"/")
	})
}

// mountPoints lists the mount points of this mount namespace for which
// keep, given the point and its filesystem type, is true. Octal escapes
// (\040 for a space) never occur in the paths asked about.
func mountPoints(keep func(point, fstype string) bool) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// mountinfo: ... mount point (5th) ... " - " fstype source options.
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		if keep(fields[4], fields[sep+1]) {
			out = append(out, fields[4])
		}
	}
	return out, sc.Err()
}

// cleanup removes everything the node (this run's or a killed one's)
// left on the host, in an order that lets each step succeed: processes,
// then mounts (which frees the network namespaces and with them the pods'
// veths), links, cgroups, fixed-path files, sysctls, and last Dir.
func cleanup(logf func(string, ...any)) error {
	var errs []error
	var st hostState
	if b, err := os.ReadFile(filepath.Join(Dir, stateFile)); err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", stateFile, err))
		}
	}
	// Read before Dir goes: the files outside Dir are named inside it.
	left := findLeftovers()

	hierarchies, err := killNodeProcesses(logf)
	if err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(Dir); err != nil {
		errs = append(errs, err)
	}

	// The bridge, its veths and the nft table live in the node namespace;
	// if that is gone (a killed run's bed was removed), so are they.
	if ip := lookPath("ip"); ip != "" && st.Netns != "" {
		if _, err := os.Stat(filepath.Join("/run/netns", st.Netns)); err == nil {
			errs = append(errs, cleanupNetns(ip, st.Netns)...)
		}
	}

	for _, h := range hierarchies {
		if err := removeCgroupTree(filepath.Join(h, cgroupRoot)); err != nil {
			errs = append(errs, err)
		}
	}
	left.remove(st)
	errs = append(errs, restoreSysctls(st)...)
	// One directory per process: both real-node packages of a run use it.
	localcluster.KeepLogs(Dir, fmt.Sprintf("realnode-%d", os.Getpid()))
	if err := os.RemoveAll(Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// leftovers are the files outside Dir that the node's sandboxes and shims
// leave: found through Dir, so found before it is removed.
type leftovers struct {
	sandboxes   []string
	shimSockets []string
}

func findLeftovers() leftovers {
	// containerd's CNI library caches each attachment's result as
	// <network>-<sandbox>-<ifname> in cniCacheDir, for the pod network and
	// for the loopback network it adds ("cni-loopback"). A sandbox that is
	// never torn down leaves both; the sandbox IDs are the CRI's
	// directories under Dir, read before Dir goes.
	sandboxes, _ := filepath.Glob(filepath.Join(containerdRoot, "io.containerd.grpc.v1.cri", "sandboxes", "*"))
	more, _ := filepath.Glob(filepath.Join(containerdState, "io.containerd.grpc.v1.cri", "sandboxes", "*"))
	sandboxes = append(sandboxes, more...)
	// Each shim's task directory records its socket ("unix:///run/containerd/s/<hash>").
	addresses, _ := filepath.Glob(filepath.Join(containerdState, "io.containerd.runtime.v2.task", "*", "*", "address"))
	var shimSockets []string
	for _, a := range addresses {
		if b, err := os.ReadFile(a); err == nil {
			if sock := strings.TrimPrefix(strings.TrimSpace(string(b)), "unix://"); filepath.Dir(sock) == shimSocketDir {
				shimSockets = append(shimSockets, sock)
			}
		}
	}
	return leftovers{sandboxes: sandboxes, shimSockets: shimSockets}
}

// killNodeProcesses kills the node's daemons, shims and containers, and
// returns the cgroup hierarchies it searched.
func killNodeProcesses(logf func(string, ...any)) ([]string, error) {
	// The node's daemons name Dir on their command line (kubelet's
	// --root-dir, containerd's --config, the shims' -address); the
	// containers are found by their cgroups. Shims always outlive
	// containerd: they leave its process group on purpose.
	daemons := killDaemons(Dir)
	// Without the hierarchies (err), the containers cannot be found, but
	// the daemons are killed all the same.
	hierarchies, err := cgroupHierarchies()
	containers := map[int]bool{}
	for range 50 {
		if !killCgroupProcs(hierarchies, containers) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if daemons+len(containers) > 0 {
		logf("cleanup: killed %d daemons and shims, %d container processes", daemons, len(containers))
	}
	return hierarchies, err
}

// remove deletes the leftovers, the kubelet's log links into Dir and the
// directories st records as created by the node, once empty.
func (left leftovers) remove(st hostState) {
	// The kubelet links container logs into containerLogLinks; the links
	// point into Dir.
	if entries, err := os.ReadDir(containerLogLinks); err == nil {
		for _, e := range entries {
			p := filepath.Join(containerLogLinks, e.Name())
			if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, Dir+"/") {
				_ = os.Remove(p)
			}
		}
	}
	for _, sb := range left.sandboxes {
		id := filepath.Base(sb)
		_ = os.Remove(filepath.Join(cniCacheDir, "results", cniNetwork+"-"+id+"-eth0"))
		_ = os.Remove(filepath.Join(cniCacheDir, "results", "cni-loopback-"+id+"-lo"))
	}
	for _, sock := range left.shimSockets {
		_ = os.Remove(sock)
	}
	// The device manager's socket, when the kubelet made its directory; an
	// existing directory may be another kubelet's.
	if slices.Contains(st.Created, devicePluginDir) {
		_ = os.Remove(filepath.Join(devicePluginDir, "kubelet.sock"))
	}
	for _, d := range st.Created {
		// Only once empty: another user may have started using it meanwhile.
		removeEmptyDirs(d)
	}
}

// restoreSysctls sets back each sysctl st recorded that differs now.
func restoreSysctls(st hostState) []error {
	var errs []error
	for k, v := range st.Sysctls {
		p := filepath.Join("/proc/sys", k)
		if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, v, err))
		}
	}
	return errs
}

// cleanupNetns deletes the node's bridge, its pods' veths and its nft
// table from the node namespace netns.
func cleanupNetns(ip, netns string) []error {
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := run(ctx, ip, "-n", netns, "-o", "link", "show", "master", Bridge); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			// A veth also goes by itself once its pod's namespace is
			// freed, perhaps between the listing and the delete.
			if name := linkName(line); name != "" {
				if _, err := run(ctx, ip, "-n", netns, "link", "del", name); err != nil {
					if _, gone := run(ctx, ip, "-n", netns, "link", "show", name); gone == nil {
						errs = append(errs, err)
					}
				}
			}
		}
	}
	if _, err := run(ctx, ip, "-n", netns, "link", "show", Bridge); err == nil {
		if _, err := run(ctx, ip, "-n", netns, "link", "del", Bridge); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := run(ctx, ip, "netns", "exec", netns, "nft", "list", "table", "ip", nftTable); err == nil {
		if _, err := run(ctx, ip, "netns", "exec", netns, "nft", "delete", "table", "ip", nftTable); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// daemonNames are the executables the node runs outside containers.
var daemonNames = []string{"kubelet", "containerd", "containerd-shim-runc-v2"}

// killDaemons SIGKILLs every kubelet, containerd and shim whose command
// line contains dir and returns how many it found.
func killDaemons(dir string) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !slices.Contains(daemonNames, filepath.Base(strings.TrimSuffix(exe, " (deleted)"))) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), dir) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		n++
	}
	return n
}

// killCgroupProcs SIGKILLs every process in a cgroup under cgroupRoot,
// adds it to killed, and reports whether it found any (a killed process
// stays listed until it is reaped).
func killCgroupProcs(hierarchies []string, killed map[int]bool) bool {
	found := false
	for _, h := range hierarchies {
		_ = filepath.WalkDir(filepath.Join(h, cgroupRoot), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					killed[pid] = true
					found = true
				}
			}
			return nil
		})
	}
	return found
}

// unmountUnder detaches every mount at or below dir, deepest first, until
// none is left (mounts can be stacked).
func unmountUnder(dir string) error {
	for range 10 {
		mps, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		slices.SortFunc(mps, func(a, b string) int { return len(b) - len(a) })
		for _, mp := range mps {
			_ = unix.Unmount(mp, unix.MNT_DETACH)
		}
	}
	mps, _ := mountsUnder(dir)
	if len(mps) > 0 {
		return fmt.Errorf("still mounted: %s", strings.Join(mps, ", "))
	}
	return nil
}

func mountsUnder(dir string) ([]string, error) {
	return mountPoints(func(point, _ string) bool { return point == dir || strings.HasPrefix(point, dir+"/") })
}

// linkName reads the name from a line of `ip -o link show`:
// "7: veth1234@if2: <BROADCAST,...".
func linkName(line string) string {
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return ""
	}
	name := strings.TrimSuffix(fields[1], ":")
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	return name
}

// removeCgroupTree removes a cgroup and its children, deepest first. A
// cgroup whose last process has just died can stay busy for a moment.
func removeCgroupTree(root string) error {
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var last error
	for range 50 {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
		last = nil
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				last = fmt.Errorf("remove cgroup %s: %w", d, err)
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

// removeEmptyDirs removes d and its subdirectories if they hold no files.
func removeEmptyDirs(d string) {
	var dirs []string
	_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	for _, p := range dirs {
		_ = syscall.Rmdir(p) // fails, and keeps it, when not empty
	}
}
