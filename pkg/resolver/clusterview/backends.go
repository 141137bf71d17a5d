package clusterview

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/elasti-dev/elasti/pkg/endpointready"
)

// ResolveBackends picks the port the way kube-proxy would and lists the Ready
// endpoints of the slices for it, and a few of the not-ready ones with
// their pods (Backends.Unready).
//
// The Service port is the one whose number is hostPort (80 when hostPort is
// empty), else the first. The slices name their ports after the Service's
// and carry the pod's port, with named targetPorts already resolved by the
// EndpointSlice controller.
func ResolveBackends(pub *corev1.Service, list []*discoveryv1.EndpointSlice, hostPort string) (Backends, error) {
	if len(pub.Spec.Ports) == 0 {
		return Backends{}, fmt.Errorf("service %s/%s has no ports", pub.Namespace, pub.Name)
	}
	port := &pub.Spec.Ports[0]
	want := 80 // a Host without a port means port 80, as in KubeElasti
	if hostPort != "" {
		want = -1
		if n, err := strconv.Atoi(hostPort); err == nil {
			want = n
		}
	}
	for i := range pub.Spec.Ports {
		if int(pub.Spec.Ports[i].Port) == want {
			port = &pub.Spec.Ports[i]
			break
		}
	}
	portName, appProtocol := port.Name, port.AppProtocol

	var addrs []string
	var unready []UnreadyEndpoint
	readyPods := map[string]podRef{}
	for _, s := range list {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		var num int32
		found := false
		for _, p := range s.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if name == portName && p.Port != nil {
				num, found = *p.Port, true
				break
			}
		}
		if !found {
			continue
		}
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) == 0 {
				continue
			}
			if !endpointready.Serving(ep) {
				if u, ok := unreadyOf(ep, pub.Namespace, num); ok && len(unready) < MaxUnreadyEndpoints {
					unready = append(unready, u)
				}
				continue
			}
			addrs = append(addrs, net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(num))))
			if ref, ok := podOf(ep, pub.Namespace); ok {
				readyPods[ep.Addresses[0]] = ref
			}
		}
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	b := Backends{Addrs: addrs, H2C: isH2CAppProtocol(appProtocol), AppProtocol: declaredProtocol(portName, appProtocol), Unready: unready,
		target: port.TargetPort, readyPods: readyPods}
	if len(pub.Spec.IPFamilies) > 0 {
		b.family = pub.Spec.IPFamilies[0]
	}
	return b, nil
}

// unreadyOf is ep as an UnreadyEndpoint on port: one listed not ready and
// not terminating whose targetRef names a pod of namespace, the Service's
// own. Anything else is never probed (a terminating pod is going away; a
// targetRef elsewhere is not this Service's pod).
func unreadyOf(ep discoveryv1.Endpoint, namespace string, port int32) (UnreadyEndpoint, bool) {
	if t := ep.Conditions.Terminating; t != nil && *t {
		return UnreadyEndpoint{}, false
	}
	ref, ok := podOf(ep, namespace)
	if !ok {
		return UnreadyEndpoint{}, false
	}
	return UnreadyEndpoint{IP: ep.Addresses[0], Port: port, Pod: ref.name, UID: ref.uid}, true
}

// podOf is the pod ep's targetRef names, when it names one of namespace,
// the Service's own, by name and UID.
func podOf(ep discoveryv1.Endpoint, namespace string) (podRef, bool) {
	ref := ep.TargetRef
	if ref == nil || ref.Kind != "Pod" || ref.Namespace != namespace || ref.Name == "" || ref.UID == "" {
		return podRef{}, false
	}
	return podRef{name: ref.Name, uid: ref.UID}, true
}

// declaredProtocol is what a Service port says it speaks: its appProtocol,
// or without one "http" for a port named http or http-<suffix>, the
// naming convention Istio's protocol selection reads. Either spares an
// HTTP port the sniff, which takes a client that is slow to send its
// first bytes (a loaded ingress controller, a probe) for a server-first
// TCP protocol: it would be spliced, skipping the probe rules, and wake
// the target. "" means nothing is declared.
func declaredProtocol(portName string, appProtocol *string) string {
	switch {
	case appProtocol != nil:
		return *appProtocol
	case portName == "http" || strings.HasPrefix(portName, "http-"):
		return "http"
	}
	return ""
}

func isH2CAppProtocol(p *string) bool {
	if p == nil {
		return false
	}
	switch strings.ToLower(*p) {
	case "kubernetes.io/h2c", "h2c", "grpc":
		return true
	}
	return false
}

// endpointSliceController is the managed-by value of the slices the
// EndpointSlice controller keeps for Services with a selector.
const endpointSliceController = "endpointslice-controller.k8s.io"
