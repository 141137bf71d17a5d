// Package podnet gives the local test cluster a pod network that can really
// be reached, so a backend can "run" in every Ready pod.
//
// kwok hands pods fake 10.244.x.y addresses. Setup builds a network
// namespace that stands in for every pod at once (ENGINEERING.md, "A pod
// network that can really be reached"):
//
//	host  elpnXXXXXXXXh 10.245.0.1/30 ──veth── elpnXXXXXXXXn 10.245.0.2/30  namespace
//	host  route 10.244.0.0/16 via 10.245.0.2                   lo: <pod IP>/32 per Ready pod
//	                                                           route blackhole 10.244.0.0/16
//
// A backend listening on 0.0.0.0:<port> inside the namespace (see
// [Network.Listen]) answers on every live pod IP and on no other pod IP (it
// also answers on the transfer address 10.245.0.2); a removed IP hits the
// blackhole route and the host's connection attempt times out. [Kubelet]
// keeps the pod IPs on lo in step with the pods' readiness.
//
// The route for 10.244.0.0/16 can exist only once per network namespace.
// A test binary that called [Isolate] runs in a namespace of its own, so
// its Setups wait only for each other and the suites that need a pod
// network run side by side. Any other caller is on the host, where Setup
// takes an exclusive flock on [LockPath] and holds it until Close; users in
// other goroutines and processes wait their turn. Everything needs root and
// iproute2.
//
// Always release the network, also when a test fails:
//
//	n, err := podnet.Setup(ctx, podnet.Options{Logf: t.Logf})
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(func() { _ = n.Close() })
//
// Register that cleanup before anything that dials pod IPs, so it runs last:
// once Close has removed the host route, packets to 10.244.x.y would follow
// the machine's default route, and only addresses in a namespace the test
// made itself are allowed targets.
package podnet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

const (
	// PodCIDR is the range kwok gives pod IPs from; it is routed into the
	// namespace.
	PodCIDR = "10.244.0.0/16"
	// HostIP is the host end of the transfer net (also kwok's node IP).
	HostIP = "10.245.0.1"
	// NamespaceIP is the namespace end of the transfer net, the host
	// route's gateway.
	NamespaceIP = "10.245.0.2"
	// ServiceCIDR is the cluster's ClusterIP range; inside the namespace it
	// is a local route, so only kube-proxy's rules give it meaning.
	ServiceCIDR = "10.0.0.0/16"
	// transferCIDR is the /30 the veth pair sits in.
	transferCIDR = "10.245.0.0/30"

	// LockPath is the machine-wide lock that serialises pod networks. It is
	// under /run, not os.TempDir, so processes with different TMPDIRs still
	// see the same lock.
	LockPath = "/run/elasti-podnet.lock"

	// NamespacePrefix starts the name of every namespace Setup creates.
	// Leftovers with this prefix are removed by the next Setup.
	NamespacePrefix = "elasti-podnet-"
	// LinkPrefix starts both veth names (elpn + 8 hex + h|n = 13 chars, the
	// kernel allows 15).
	LinkPrefix = "elpn"

	// DefaultLockTimeout bounds how long Setup waits for another user of
	// the pod network when Options.LockTimeout is zero. The suites isolate
	// themselves and never wait for each other, but users on the host (this
	// package's tests, the demo, runs with a reused cluster) still take
	// LockPath in turn, and one of them may hold it for about 15 minutes on
	// a loaded 2-core machine; the Makefile's TEST_TIMEOUT leaves room for
	// the wait and the run.
	DefaultLockTimeout = 30 * time.Minute
	// DefaultDialTimeout is Reachable's timeout when ctx has no earlier
	// deadline.
	DefaultDialTimeout = time.Second

	lockLogInterval = 10 * time.Second
	closeTimeout    = 30 * time.Second
)

var podPrefix = netip.MustParsePrefix(PodCIDR)

// ErrClosed is returned by methods of a Network after Close.
var ErrClosed = errors.New("podnet: network is closed")

// Options configure Setup. The zero value is ready to use.
type Options struct {
	// Logf receives progress lines, e.g. while waiting for the lock; pass
	// t.Logf in tests. Nil logs through klog.FromContext(ctx).
	Logf func(format string, args ...any)
	// LockTimeout bounds the wait for the machine-wide lock; zero means
	// DefaultLockTimeout. The wait also ends with ctx.
	LockTimeout time.Duration
}

// Network is one pod network namespace with its veth pair and host route.
// Its methods are safe for concurrent use.
type Network struct {
	name          string // network namespace
	sandboxPrefix string // starts the names of its sandbox namespaces
	hostLink      string // veth end on the host
	nsLink        string // veth end inside the namespace
	logf          func(format string, args ...any)

	// mu is held for reading by everything that uses the namespace or the
	// route (including Reachable's dial), and for writing by Close, so no
	// dial can leave through the default route after the host route is gone.
	mu        sync.RWMutex
	closed    bool
	lock      *os.File // LockPath, held on the host
	release   func()   // the isolated process's slot (Isolate)
	listeners []net.Listener
}

// Setup waits for the machine-wide pod network lock, removes leftovers of a
// crashed earlier run and builds the namespace, veth pair and routes. The
// caller must Close the returned Network (t.Cleanup or defer), also on
// failure paths. It needs root and iproute2; iproute2 is installed with
// apt-get if it is missing.
func Setup(ctx context.Context, opts Options) (n *Network, err error) {
	logf := opts.Logf
	if logf == nil {
		logger := klog.FromContext(ctx)
		logf = func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...)) }
	}
	if euid := os.Geteuid(); euid != 0 {
		return nil, fmt.Errorf("podnet: must run as root to create network namespaces, running as euid %d", euid)
	}
	if _, err := ipBinary(ctx, logf); err != nil {
		return nil, err
	}
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	suffix, err := randomHex(4)
	if err != nil {
		return nil, err
	}
	n = &Network{
		name:          fmt.Sprintf("%s%d-%s", NamespacePrefix, os.Getpid(), suffix),
		sandboxPrefix: SandboxPrefix,
		hostLink:      LinkPrefix + suffix + "h",
		nsLink:        LinkPrefix + suffix + "n",
		logf:          logf,
	}
	// In a namespace of its own (Isolate) the route is this process's
	// alone, so only its own Setups wait for each other; on the host,
	// every user on the machine does.
	if isolated {
		n.name = fmt.Sprintf("%s%d-%s", IsolatedNamespacePrefix, os.Getpid(), suffix)
		n.sandboxPrefix = fmt.Sprintf("%s%d-", IsolatedSandboxPrefix, os.Getpid())
		if n.release, err = takeIsolatedSlot(ctx, timeout); err != nil {
			return nil, err
		}
	} else {
		if n.lock, err = acquireLock(ctx, LockPath, timeout, logf); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			_ = n.unlock() // releases the flock or the slot
		}
	}()

	if err := removeStale(ctx, logf); err != nil {
		return nil, err
	}
	if err := n.build(ctx); err != nil {
		if terr := n.teardown(); terr != nil {
			err = errors.Join(err, terr)
		}
		return nil, err
	}
	logf("podnet: namespace %s ready, %s routed via %s (%s)", n.name, PodCIDR, NamespaceIP, n.hostLink)
	return n, nil
}

// build runs the steps from ENGINEERING.md.
func (n *Network) build(ctx context.Context) error {
	steps := [][]string{
		{"netns", "add", n.name},
		{"link", "add", n.hostLink, "type", "veth", "peer", "name", n.nsLink},
		{"link", "set", n.nsLink, "netns", n.name},
		{"addr", "add", HostIP + "/30", "dev", n.hostLink},
		{"link", "set", n.hostLink, "up"},
		{"-n", n.name, "addr", "add", NamespaceIP + "/30", "dev", n.nsLink},
		{"-n", n.name, "link", "set", n.nsLink, "up"},
		{"-n", n.name, "link", "set", "lo", "up"},
		// blackhole, not unreachable: the node forwards (for the pod
		// sandboxes), and a pod IP whose address is not on lo yet must
		// drop a SYN, so the client retries as with a pod that is still
		// starting, rather than fail at once with "no route to host".
		{"-n", n.name, "route", "add", "blackhole", PodCIDR},
		// The namespace is also the node that kube-proxy programs. Nothing
		// else of 10/8 may leave it, and a ClusterIP needs a route before
		// kube-proxy's output hook can DNAT a locally made packet: "local"
		// makes an unprogrammed ClusterIP refuse inside the namespace.
		{"-n", n.name, "route", "add", "unreachable", "10.0.0.0/8"},
		{"-n", n.name, "route", "add", "local", ServiceCIDR, "dev", "lo"},
		{"route", "add", PodCIDR, "via", NamespaceIP, "dev", n.hostLink},
	}
	for _, args := range steps {
		if _, err := runIP(ctx, args...); err != nil {
			return err
		}
	}
	// Pod sandboxes reach the host's forwarders (apiserver, scale
	// endpoint) through the node, which routes between its veths. The
	// sysctl is the namespace's own; the host's is untouched.
	return n.Sysctl(ctx, "net/ipv4/ip_forward", "1")
}

// Sysctl sets a sysctl of the node namespace (path relative to
// /proc/sys), leaving the host's value alone.
func (n *Network) Sysctl(ctx context.Context, path, value string) error {
	return sysctl(ctx, n.name, path, value)
}

// sysctl writes /proc/sys/<path> from inside namespace ns, where the
// net/ tree is that namespace's own.
func sysctl(ctx context.Context, ns, path, value string) error {
	if strings.ContainsAny(path+value, " '\"\n;$`") || strings.Contains(path, "..") {
		return fmt.Errorf("podnet: bad sysctl %q=%q", path, value)
	}
	_, err := runIP(ctx, "netns", "exec", ns, "sh", "-c", fmt.Sprintf("echo %s > /proc/sys/%s", value, path))
	return err
}

// Name is the network namespace's name (usable with `ip netns exec`).
func (n *Network) Name() string { return n.name }

// HostLink is the host end of the veth pair.
func (n *Network) HostLink() string { return n.hostLink }

// NamespacePath is the namespace's bind mount, /run/netns/<name>.
func (n *Network) NamespacePath() string { return "/run/netns/" + n.name }

// Close closes the listeners made by Listen, removes the host route, the
// veth pair and the namespace, and releases the lock. It is idempotent and
// does not depend on any caller context, so it works from t.Cleanup after
// the test's context is gone.
func (n *Network) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	for _, l := range n.listeners {
		_ = l.Close()
	}
	n.listeners = nil
	err := n.teardown()
	if cerr := n.unlock(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("podnet: release lock: %w", cerr))
	}
	if err == nil {
		n.logf("podnet: namespace %s removed", n.name)
	}
	return err
}

// unlock releases the machine-wide lock or the isolated process's slot,
// whichever Setup took.
func (n *Network) unlock() error {
	var err error
	if n.lock != nil {
		err = n.lock.Close()
		n.lock = nil
	}
	if n.release != nil {
		n.release()
		n.release = nil
	}
	return err
}

// teardown removes what build made, tolerating parts that never existed.
func (n *Network) teardown() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var errs []error
	// Only our own route: the dev pins it to our veth.
	if _, err := runIP(ctx, "route", "del", PodCIDR, "via", NamespaceIP, "dev", n.hostLink); err != nil && !isGone(err) {
		errs = append(errs, err)
	}
	// Deleting one end of a veth pair deletes both.
	if _, err := runIP(ctx, "link", "del", n.hostLink); err != nil && !isGone(err) {
		errs = append(errs, err)
	}
	if _, err := runIP(ctx, "netns", "del", n.name); err != nil && !isGone(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// AddIP puts a pod IP on the namespace's lo, so a backend listening there
// answers on it. The IP must be inside PodCIDR. Adding an IP that is already
// there is not an error.
func (n *Network) AddIP(ip string) error { return n.changeIP(ip, "add", isExists) }

// RemoveIP takes a pod IP off the namespace's lo; afterwards it no longer
// answers. Removing an IP that is not there is not an error.
func (n *Network) RemoveIP(ip string) error { return n.changeIP(ip, "del", isNoAddr) }

// changeIP runs `ip addr <op>` for a pod IP inside the namespace; errors
// that only say the change was already made are ignored.
func (n *Network) changeIP(ip, op string, alreadyDone func(error) bool) error {
	addr, err := ParsePodIP(ip)
	if err != nil {
		return err
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	if _, err := runIP(ctx, "-n", n.name, "addr", op, addr.String()+"/32", "dev", "lo"); err != nil && !alreadyDone(err) {
		return err
	}
	return nil
}

// isExists reports whether ip refused to add an address that is already
// there (the wording differs between iproute2 versions).
func isExists(err error) bool {
	s := err.Error()
	return strings.Contains(s, "File exists") || strings.Contains(s, "already assigned")
}

// isNoAddr reports whether ip refused to delete an address that is not
// there.
func isNoAddr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot assign requested address") || strings.Contains(s, "Address not found")
}

// IPs lists the pod IPs currently on the namespace's lo, in the kernel's
// order.
func (n *Network) IPs() ([]string, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := runIP(ctx, "-n", n.name, "-o", "-4", "addr", "show", "dev", "lo")
	if err != nil {
		return nil, err
	}
	var ips []string
	// Lines look like: "1: lo    inet 10.244.3.4/32 scope global lo ...".
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "inet" {
				continue
			}
			p, err := netip.ParsePrefix(f[i+1])
			if err == nil && podPrefix.Contains(p.Addr()) {
				ips = append(ips, p.Addr().String())
			}
		}
	}
	return ips, nil
}

// Reachable dials ip:port over TCP from the host through the pod route and
// closes the connection at once. It waits at most DefaultDialTimeout, less
// if ctx ends sooner. ip must be inside PodCIDR, and the dial happens only
// while the Network is open, so it never leaves the machine.
func (n *Network) Reachable(ctx context.Context, ip string, port int) error {
	addr, err := ParsePodIP(ip)
	if err != nil {
		return err
	}
	if port <= 0 || port > 65535 {
		return fmt.Errorf("podnet: bad port %d", port)
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultDialTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addr.String(), strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return conn.Close()
}

// ParsePodIP parses ip and checks that it is an IPv4 address inside
// PodCIDR. Loopback and every other address are refused.
func ParsePodIP(ip string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("podnet: bad pod IP %q: %w", ip, err)
	}
	if !addr.Is4() || !podPrefix.Contains(addr) {
		return netip.Addr{}, fmt.Errorf("podnet: %s is not a pod IP: only %s is routed into the pod network", ip, PodCIDR)
	}
	return addr, nil
}

// acquireLock takes an exclusive flock on path. It waits in a blocking
// flock, not a poll, so a waiter takes the lock the moment its holder lets
// go; the wait can still end with ctx or timeout, and it logs while it waits.
func acquireLock(ctx context.Context, path string, timeout time.Duration, logf func(string, ...any)) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("podnet: open lock file: %w", err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err != nil && !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
		_ = f.Close()
		return nil, fmt.Errorf("podnet: lock %s: %w", path, err)
	}
	if err != nil {
		if err := waitLock(ctx, f, path, timeout, logf); err != nil {
			return nil, err
		}
	}
	// Record the holder for the log line of the next waiter.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d\n", os.Getpid())), 0)
	}
	return f, nil
}

// waitLock blocks in flock on f until the lock is f's, ctx ends or timeout
// passes; on those two it closes f. A flock blocked in the kernel cannot be
// cancelled, so an abandoned one is left to finish: it then closes f at
// once, which releases the lock it just took.
func waitLock(ctx context.Context, f *os.File, path string, timeout time.Duration, logf func(string, ...any)) error {
	start := time.Now()
	logf("podnet: waiting for %s, the pod network is in use by %s", path, lockHolder(path))
	got := make(chan error, 1)
	go func() {
		for {
			err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
			if !errors.Is(err, unix.EINTR) {
				got <- err
				return
			}
		}
	}()
	abandon := func() { go func() { <-got; _ = f.Close() }() }
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	progress := time.NewTicker(lockLogInterval)
	defer progress.Stop()
	for {
		select {
		case err := <-got:
			if err != nil {
				_ = f.Close()
				return fmt.Errorf("podnet: lock %s: %w", path, err)
			}
			logf("podnet: got %s after %s", path, time.Since(start).Round(time.Millisecond))
			return nil
		case <-progress.C:
			logf("podnet: waiting for %s, the pod network is in use by %s", path, lockHolder(path))
		case <-deadline.C:
			abandon()
			return fmt.Errorf("podnet: gave up after %s waiting for %s (held by %s)", timeout, path, lockHolder(path))
		case <-ctx.Done():
			abandon()
			return fmt.Errorf("podnet: waiting for %s: %w", path, ctx.Err())
		}
	}
}

func lockHolder(path string) string {
	b, err := os.ReadFile(path)
	if s := strings.TrimSpace(string(b)); err == nil && s != "" {
		return s
	}
	return "another user"
}

// removeStale deletes what a crashed earlier run left behind. The caller
// holds the lock, so every elasti-podnet namespace and elpn link in this
// network namespace is stale; of the isolated processes' namespaces, those
// whose process is gone are (staleIsolated).
// A 10.244.0.0/16 or 10.245.0.0/30 route that survives that belongs to
// someone else and is not touched: Setup fails instead.
func removeStale(ctx context.Context, logf func(string, ...any)) error {
	out, err := runIP(ctx, "netns", "list")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		// On the host, the lock makes every host-mode namespace stale; in
		// an isolated process it does not, since those never wait for it.
		hostMode := !isolated && (strings.HasPrefix(f[0], NamespacePrefix) || strings.HasPrefix(f[0], SandboxPrefix))
		if !hostMode && !staleIsolated(f[0], pidAlive) {
			continue
		}
		logf("podnet: removing stale namespace %s", f[0])
		if _, err := runIP(ctx, "netns", "del", f[0]); err != nil && !isGone(err) {
			return err
		}
	}
	// A host end whose peer never made it into a namespace, or whose
	// namespace is kept alive by something else.
	out, err = runIP(ctx, "-o", "link", "show")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		// "7: elpn0123abcdh@if6: <BROADCAST,..."
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if !strings.HasPrefix(name, LinkPrefix) {
			continue
		}
		logf("podnet: removing stale link %s", name)
		if _, err := runIP(ctx, "link", "del", name); err != nil && !isGone(err) {
			return err
		}
	}
	for _, cidr := range []string{PodCIDR, transferCIDR} {
		out, err := runIP(ctx, "route", "show", "exact", cidr)
		if err != nil {
			return err
		}
		if r := strings.TrimSpace(out); r != "" {
			return fmt.Errorf("podnet: the host already has a route for %s that is not from podnet: %q; "+
				"remove it (ip route del %s) if it is a leftover", cidr, r, cidr)
		}
	}
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("podnet: random name: %w", err)
	}
	return hex.EncodeToString(b), nil
}
