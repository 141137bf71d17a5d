package resolver

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/elasti-dev/elasti/pkg/resolver/answer"
	"github.com/elasti-dev/elasti/pkg/resolver/clusterview"
)

// ClusterIPIndex maps a Service's ClusterIP to the Service. An
// EndpointSource that implements it lets the shared proxy port accept a
// bare ClusterIP as Host, as clients that call a Service by its address
// send.
type ClusterIPIndex interface {
	ServiceForClusterIP(ip string) (clusterview.ServiceRef, bool)
}

// ServeHTTP implements http.Handler for the shared proxy port, where the
// Host names the Service.
func (r *Resolver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	svc, port, err := r.identifyHost(req)
	if err != nil {
		r.logger.V(4).Info("Rejecting request with a bad host", "host", req.Host, "err", err)
		answer.Error(w, http.StatusBadRequest, err.Error())
		return
	}
	r.serveService(w, req, svc, port)
}

// identifyHost is the identify layer of the shared proxy port: the Service
// and port come from the Host (or the header HostHeader names), written as
// a Service DNS name or as the Service's ClusterIP. The returned error is
// fit to show the client.
func (r *Resolver) identifyHost(req *http.Request) (clusterview.ServiceRef, string, error) {
	host := req.Host
	if r.cfg.HostHeader != "" {
		if h := req.Header.Get(r.cfg.HostHeader); h != "" {
			host = h
		}
	}
	if svc, port, ok := r.serviceForIPHost(host); ok {
		return svc, port, nil
	}
	name, ns, port, err := ParseHost(host, r.cfg.ClusterDomain)
	if err != nil {
		return clusterview.ServiceRef{}, "", err
	}
	return clusterview.ServiceRef{Namespace: ns, Name: name}, port, nil
}

// serviceForIPHost resolves a Host that is an IP address, with or without
// a port, through the ClusterIP index. An IPv6 address comes bracketed, as
// a client writes it in a Host ("[fd00::1]" or "[fd00::1]:80"), or bare.
func (r *Resolver) serviceForIPHost(host string) (clusterview.ServiceRef, string, bool) {
	idx := r.clusterIPs
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

// portRouteContextKey carries the Route of the resolver port an HTTP
// connection arrived on, set by the port listeners.
type portRouteContextKey struct{}

// servePortHTTP is the handler for HTTP that arrived on a resolver port:
// the port alone names the Service, whatever the Host says.
func (r *Resolver) servePortHTTP(w http.ResponseWriter, req *http.Request) {
	route, ok := req.Context().Value(portRouteContextKey{}).(Route)
	if !ok {
		answer.Error(w, http.StatusInternalServerError, fmt.Sprintf("no route for local address %v", req.Context().Value(http.LocalAddrContextKey)))
		return
	}
	r.serveService(w, req, route.Service, strconv.Itoa(int(route.Port)))
}
