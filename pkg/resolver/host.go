package resolver

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// hostForms is the accepted syntax, quoted in every parse error.
const hostForms = "<service>.<namespace>[.svc[.<cluster domain>]][:port]"

// ParseHost splits a Host header value into the public Service, its
// namespace and the port, if any. It accepts
//
//	<svc>.<ns>.svc.<clusterDomain>[:port]
//	<svc>.<ns>.svc[:port]
//	<svc>.<ns>[:port]
//
// case-insensitively and with an optional trailing dot. As in KubeElasti,
// an "http://" or "https://" prefix and anything from the first "/" are
// dropped first: Istio's X-Envoy-Decorator-Operation, a common
// HEADER_FOR_HOST, carries values like "web.team.svc.cluster.local:80/*".
// Anything else is an error whose message is fit to show a client.
func ParseHost(host, clusterDomain string) (svc, ns, port string, err error) {
	raw := host
	host = strings.TrimSpace(host)
	for _, scheme := range []string{"http://", "https://"} {
		if len(host) >= len(scheme) && strings.EqualFold(host[:len(scheme)], scheme) {
			host = host[len(scheme):]
			break
		}
	}
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	if host == "" {
		return "", "", "", fmt.Errorf("empty host: want %s", hostForms)
	}
	if strings.Contains(host, ":") {
		h, p, splitErr := net.SplitHostPort(host)
		if splitErr != nil {
			return "", "", "", fmt.Errorf("host %q: %v: want %s", raw, splitErr, hostForms)
		}
		if n, convErr := strconv.Atoi(p); convErr != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
			return "", "", "", fmt.Errorf("host %q: port %q is not a number in 1-65535", raw, p)
		}
		host, port = h, p
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	domain := strings.Trim(strings.ToLower(strings.TrimSpace(clusterDomain)), ".")
	if domain == "" {
		domain = DefaultClusterDomain
	}

	labels := strings.Split(host, ".")
	ok := false
	switch {
	case len(labels) == 2:
		ok = true
	case len(labels) == 3:
		ok = labels[2] == "svc"
	case len(labels) > 3:
		ok = labels[2] == "svc" && strings.Join(labels[3:], ".") == domain
	}
	if !ok {
		return "", "", "", fmt.Errorf("host %q is not a Kubernetes service name in cluster domain %q: want %s", raw, domain, hostForms)
	}
	svc, ns = labels[0], labels[1]
	if errs := validation.IsDNS1035Label(svc); len(errs) > 0 {
		return "", "", "", fmt.Errorf("host %q: %q is not a valid service name: %s", raw, svc, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", "", "", fmt.Errorf("host %q: %q is not a valid namespace: %s", raw, ns, strings.Join(errs, "; "))
	}
	return svc, ns, port, nil
}
