package clusterview

import (
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/elasti-dev/elasti/pkg/wakestage"
)

// VouchedEndpoints is an EndpointSource whose Lookup is checked against
// the pod view (vouch): what the resolver forwards to and probes.
type VouchedEndpoints struct {
	EndpointSource
	View PodView
}

// Lookup implements EndpointSource.
func (e VouchedEndpoints) Lookup(svc ServiceRef, hostPort string) (Backends, error) {
	b, err := e.EndpointSource.Lookup(svc, hostPort)
	if err != nil {
		return b, err
	}
	pods, whole := e.View.Pods(svc)
	if whole {
		return vouch(b, pods), nil
	}
	return vouchByName(b, pods, func(names []string) ([]*corev1.Pod, bool) { return e.View.Read(svc, names) }), nil
}

// vouch checks b, what the slices say of one port of a Service, against
// pods, all the pods the Service selects as their watch last saw them
// (PodView.Pods, whole):
//
//   - a Ready address of the slices is kept only when a pod that is not
//     going away holds it (status.podIPs): a slice written by anyone who
//     may write slices in the namespace, owner reference and all, cannot
//     send requests elsewhere (issue 38, hole 2);
//   - a pod the kubelet wrote Ready is an endpoint at once, on the port
//     its container gives the Service's targetPort, without waiting for
//     the EndpointSlice controller to list it (Backends.FromPods when it
//     is the only kind);
//   - a not-ready endpoint is kept only when its pod, by name and UID,
//     holds its address, and the not-ready pods the slices do not list
//     yet are added, for direct probing.
func vouch(b Backends, pods []*corev1.Pod) Backends {
	holders := holdersOf(pods)
	out := b
	out.Addrs, out.Unready = nil, nil
	for _, a := range b.Addrs {
		if host, _, err := net.SplitHostPort(a); err == nil && holders[host] != nil {
			out.Addrs = append(out.Addrs, a)
		}
	}
	fromSlices := len(out.Addrs)
	seen := map[types.UID]bool{}
	for _, u := range b.Unready {
		if p := holders[u.IP]; p != nil && p.Name == u.Pod && p.UID == u.UID && !seen[u.UID] {
			seen[u.UID] = true
			out.Unready = append(out.Unready, u)
		}
	}
	for _, p := range pods {
		ip, port, ok := podEndpoint(p, b.family, b.target)
		if !ok || wakestage.Going(p) {
			continue
		}
		if podReady(p) {
			out.Addrs = append(out.Addrs, net.JoinHostPort(ip, strconv.Itoa(int(port))))
		} else if !seen[p.UID] && len(out.Unready) < MaxUnreadyEndpoints {
			seen[p.UID] = true
			out.Unready = append(out.Unready, UnreadyEndpoint{IP: ip, Port: port, Pod: p.Name, UID: p.UID})
		}
	}
	slices.Sort(out.Addrs)
	out.Addrs = slices.Compact(out.Addrs)
	out.FromPods = fromSlices == 0 && len(out.Addrs) > 0
	return out
}

// vouchByName checks b's Ready addresses where the pod view is not whole
// (past its bounds, before its first list, or a Service that selects
// anew): each is kept only when the pod its slice names (targetRef), by
// name and UID, holds it and is not going away, as the view has the pod
// (pods, some of the Service's) or else as a read found it (read, which
// reads in the background what it has not read lately; PodView.Read).
// Past the view's bounds a forged slice is no more trusted than within
// them (issue 38, hole 2). When the resolver may not read pods (read's
// false), the slices are taken as they are. The not-ready endpoints are
// kept: direct probing reads each one's pod and checks the address
// before it probes (podcheck.PlanFor).
func vouchByName(b Backends, pods []*corev1.Pod, read func(names []string) ([]*corev1.Pod, bool)) Backends {
	if len(b.Addrs) == 0 {
		return b
	}
	byName := map[string]*corev1.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	// The view's copy of a pod is as new as a read's: only the pods it
	// lacks are read.
	var unread []string
	for _, a := range b.Addrs {
		host, _, _ := net.SplitHostPort(a)
		if ref, ok := b.readyPods[host]; ok && byName[ref.name] == nil && !slices.Contains(unread, ref.name) {
			if unread = append(unread, ref.name); len(unread) == maxReadsPerLookup {
				break
			}
		}
	}
	if len(unread) > 0 {
		got, ok := read(unread)
		if !ok {
			return b
		}
		for _, p := range got {
			byName[p.Name] = p
		}
	}
	out := b
	out.Addrs = nil
	for _, a := range b.Addrs {
		host, _, _ := net.SplitHostPort(a)
		ref, ok := b.readyPods[host]
		switch {
		case !ok:
		case vouchedBy(byName[ref.name], ref, host):
			out.Addrs = append(out.Addrs, a)
		case byName[ref.name] == nil:
			out.Unread = true // not read yet, or its read was refused
		}
	}
	return out
}

// vouchedBy reports whether p is ref's pod, holds ip and is not going
// away.
func vouchedBy(p *corev1.Pod, ref podRef, ip string) bool {
	return p != nil && p.UID == ref.uid && !wakestage.Going(p) && slices.Contains(podIPs(p), ip)
}

// holdersOf maps each address of pods that are not going away to its pod.
func holdersOf(pods []*corev1.Pod) map[string]*corev1.Pod {
	holders := map[string]*corev1.Pod{}
	for _, p := range pods {
		if !wakestage.Going(p) {
			for _, ip := range podIPs(p) {
				holders[ip] = p
			}
		}
	}
	return holders
}

// podReady reports whether the kubelet wrote p Ready.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podIPs returns p's addresses: status.podIPs, or status.podIP alone as
// older writers leave it.
func podIPs(p *corev1.Pod) []string {
	if len(p.Status.PodIPs) == 0 {
		if p.Status.PodIP == "" {
			return nil
		}
		return []string{p.Status.PodIP}
	}
	ips := make([]string, 0, len(p.Status.PodIPs))
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	return ips
}

// podEndpoint is p's endpoint for a Service port whose targetPort is
// target: the address of family (the Service's first; any when ""), and
// the port, a number or a container port's name as the EndpointSlice
// controller resolves it. A pod on the host's network is left out: its
// address is the node's, and only the slices may name it.
func podEndpoint(p *corev1.Pod, family corev1.IPFamily, target intstr.IntOrString) (string, int32, bool) {
	if p.Spec.HostNetwork {
		return "", 0, false
	}
	ip := ""
	for _, a := range podIPs(p) {
		if family == "" || (family == corev1.IPv6Protocol) == (net.ParseIP(a).To4() == nil) {
			ip = a
			break
		}
	}
	if ip == "" {
		return "", 0, false
	}
	if target.Type == intstr.Int {
		return ip, target.IntVal, target.IntVal > 0 && target.IntVal < 65536
	}
	for _, c := range slices.Concat(p.Spec.Containers, p.Spec.InitContainers) {
		for _, cp := range c.Ports {
			if cp.Name == target.StrVal && target.StrVal != "" && (cp.Protocol == "" || cp.Protocol == corev1.ProtocolTCP) {
				return ip, cp.ContainerPort, true
			}
		}
	}
	return "", 0, false
}
