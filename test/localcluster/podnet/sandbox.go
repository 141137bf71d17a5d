package podnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
)

const (
	// SandboxPrefix starts the name of every pod sandbox namespace.
	// Leftovers are removed by the next Setup, like the node's own.
	SandboxPrefix = "elasti-pod-"
	// sandboxLinkPrefix starts the node end of a sandbox's veth
	// (elps + 8 hex = 12 chars).
	sandboxLinkPrefix = "elps"
	// SandboxGateway is every sandbox's default gateway: the node end of
	// each sandbox veth carries it, as CNI plugins such as Calico do with
	// a link-local next hop, so sandboxes need no subnet of their own.
	SandboxGateway = "169.254.1.1"
)

// Sandbox is one pod's own network namespace, joined to the node namespace
// by a veth pair the way a CNI plugin joins a pod to its node: the pod's IP
// sits on the sandbox end (eth0), the node routes that /32 to the node
// end, and the sandbox's default route points at the node. Processes in a
// sandbox can bind any port without colliding with other pods, reach
// ClusterIPs through the node's kube-proxy rules, and reach nothing the
// node cannot.
type Sandbox struct {
	// Name is the network namespace (usable with `ip netns exec`).
	Name string
	// IP is the pod IP.
	IP string

	net      *Network
	nodeLink string
}

// AddSandbox creates a sandbox for pod IP ip, which must be inside PodCIDR
// and not in use. The caller removes it with Sandbox.Remove.
func (n *Network) AddSandbox(ctx context.Context, ip string) (sb *Sandbox, err error) {
	addr, err := ParsePodIP(ip)
	if err != nil {
		return nil, err
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		return nil, ErrClosed
	}
	suffix, err := randomHex(4)
	if err != nil {
		return nil, err
	}
	sb = &Sandbox{Name: n.sandboxPrefix + suffix, IP: addr.String(), net: n, nodeLink: sandboxLinkPrefix + suffix}
	defer func() {
		if err != nil {
			err = errors.Join(err, sb.remove())
			sb = nil
		}
	}()
	steps := [][]string{
		{"netns", "add", sb.Name},
		{"-n", n.name, "link", "add", sb.nodeLink, "type", "veth", "peer", "name", "eth0", "netns", sb.Name},
		{"-n", n.name, "addr", "add", SandboxGateway + "/32", "dev", sb.nodeLink, "scope", "link"},
		{"-n", n.name, "link", "set", sb.nodeLink, "up"},
		{"-n", n.name, "route", "add", sb.IP + "/32", "dev", sb.nodeLink},
		{"-n", sb.Name, "link", "set", "lo", "up"},
		{"-n", sb.Name, "addr", "add", sb.IP + "/32", "dev", "eth0"},
		{"-n", sb.Name, "link", "set", "eth0", "up"},
		{"-n", sb.Name, "route", "add", SandboxGateway, "dev", "eth0", "scope", "link"},
		{"-n", sb.Name, "route", "add", "default", "via", SandboxGateway, "dev", "eth0"},
	}
	for _, args := range steps {
		if _, err := runIP(ctx, args...); err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// Remove deletes the sandbox namespace; its veth pair and the node's route
// to its IP go with it. It is idempotent.
func (sb *Sandbox) Remove() error {
	sb.net.mu.RLock()
	defer sb.net.mu.RUnlock()
	return sb.remove()
}

func (sb *Sandbox) remove() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var errs []error
	if _, err := runIP(ctx, "-n", sb.net.name, "link", "del", sb.nodeLink); err != nil && !isGone(err) {
		errs = append(errs, err)
	}
	if _, err := runIP(ctx, "netns", "del", sb.Name); err != nil && !isGone(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// SandboxPodCIDR is the half of PodCIDR left to sandboxed pods; kwok's pods
// use the other half, so the two never hand out one address twice.
const SandboxPodCIDR = "10.244.128.0/17"

var sandboxPrefix = netip.MustParsePrefix(SandboxPodCIDR)

// IPAllocator hands out sandbox pod IPs from SandboxPodCIDR. It is not
// safe for concurrent use.
type IPAllocator struct {
	next  netip.Addr
	inUse map[netip.Addr]bool
}

// NewIPAllocator starts at the first usable address of SandboxPodCIDR.
func NewIPAllocator() *IPAllocator {
	p := netip.MustParsePrefix(SandboxPodCIDR)
	return &IPAllocator{next: p.Addr().Next(), inUse: map[netip.Addr]bool{}}
}

// Allocate returns a free IP, cycling through the range so a released
// address is reused as late as possible (stale conntrack entries and
// EndpointSlices for it have time to go).
func (a *IPAllocator) Allocate() (string, error) {
	p := netip.MustParsePrefix(SandboxPodCIDR)
	for range 1 << (32 - p.Bits()) {
		ip := a.next
		a.next = a.next.Next()
		if !p.Contains(a.next) {
			a.next = p.Addr().Next()
		}
		if !a.inUse[ip] && ip.As4()[3] != 0 && ip.As4()[3] != 255 {
			a.inUse[ip] = true
			return ip.String(), nil
		}
	}
	return "", fmt.Errorf("podnet: no free address left in %s", SandboxPodCIDR)
}

// Release returns ip to the pool.
func (a *IPAllocator) Release(ip string) {
	if addr, err := netip.ParseAddr(ip); err == nil {
		delete(a.inUse, addr)
	}
}
