package identify

import (
	"net"
	"net/http"
	"net/netip"

	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// ClusterIPIndex maps a Service's ClusterIP to the Service. An
// EndpointSource that implements it lets the shared proxy port accept a
// bare ClusterIP as Host, as clients that call a Service by its address
// send.
type ClusterIPIndex interface {
	ServiceForClusterIP(ip string) (clusterview.ServiceRef, bool)
}

// Hosts is the identify layer of the shared proxy port: the Service and
// port come from the Host (or the header Header names), written as a
// Service DNS name or as the Service's ClusterIP.
type Hosts struct {
	// Header names a header that carries the target host instead of Host
	// (the resolver's Config.HostHeader); empty, or absent from a request,
	// means Host.
	Header string
	// ClusterDomain is the suffix accepted after <svc>.<ns>.svc (see
	// ParseHost).
	ClusterDomain string
	// ClusterIPs, when set, lets a bare ClusterIP name its Service.
	ClusterIPs ClusterIPIndex
}

// Identify returns the Service and port req names. The returned error is
// fit to show the client.
func (h Hosts) Identify(req *http.Request) (clusterview.ServiceRef, string, error) {
	host := req.Host
	if h.Header != "" {
		if v := req.Header.Get(h.Header); v != "" {
			host = v
		}
	}
	if svc, port, ok := h.serviceForIPHost(host); ok {
		return svc, port, nil
	}
	name, ns, port, err := ParseHost(host, h.ClusterDomain)
	if err != nil {
		return clusterview.ServiceRef{}, "", err
	}
	return clusterview.ServiceRef{Namespace: ns, Name: name}, port, nil
}

// serviceForIPHost resolves a Host that is an IP address, with or without
// a port, through the ClusterIP index. An IPv6 address comes bracketed, as
// a client writes it in a Host ("[fd00::1]" or "[fd00::1]:80"), or bare.
func (hs Hosts) serviceForIPHost(host string) (clusterview.ServiceRef, string, bool) {
	idx := hs.ClusterIPs
	if idx == nil {
		return clusterview.ServiceRef{}, "", false
	}
	ip, port := stripSchemeAndPath(host), ""
	if h, p, err := net.SplitHostPort(ip); err == nil {
		if !validPort(p) {
			return clusterview.ServiceRef{}, "", false
		}
		ip, port = h, p
	} else if len(ip) > 2 && ip[0] == '[' && ip[len(ip)-1] == ']' {
		ip = ip[1 : len(ip)-1]
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil || addr.Zone() != "" {
		return clusterview.ServiceRef{}, "", false
	}
	// The index holds the apiserver's canonical spelling.
	svc, ok := idx.ServiceForClusterIP(addr.Unmap().String())
	return svc, port, ok
}
