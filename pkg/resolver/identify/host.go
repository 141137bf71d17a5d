package identify

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/elasti-dev/elasti/pkg/portalloc"
)

// DefaultClusterDomain is the cluster domain ParseHost takes when it is
// given none (the resolver's Config.ClusterDomain).
const DefaultClusterDomain = "cluster.local"

// hostForms is the accepted syntax, quoted in every parse error.
const hostForms = "<service>.<namespace>[.svc[.<cluster domain>]][:port]"

// maxQuotedHost bounds how much of a bad host an error repeats: the error
// goes back to the client and into the log, and the header may be 64 KiB.
const maxQuotedHost = 160

// ParseHost splits a Host header value into the public Service, its
// namespace and the port, if any. It accepts
//
//	<svc>.<ns>.svc.<clusterDomain>[:port]
//	<svc>.<ns>.svc[:port]
//	<svc>.<ns>[:port]
//
// ASCII-case-insensitively and with an optional trailing dot. As in
// KubeElasti, an "http://" or "https://" prefix and anything from the first
// "/" are dropped first: Istio's X-Envoy-Decorator-Operation, a common
// HEADER_FOR_HOST, carries values like "web.team.svc.cluster.local:80/*".
// Anything else is an error whose message is fit to show a client.
func ParseHost(host, clusterDomain string) (svc, ns, port string, err error) {
	raw := host
	host = stripSchemeAndPath(host)
	if host == "" {
		return "", "", "", fmt.Errorf("empty host: want %s", hostForms)
	}
	if strings.Contains(host, ":") {
		h, p, splitErr := net.SplitHostPort(host)
		if splitErr != nil {
			return "", "", "", fmt.Errorf("host %s: %s: want %s", quoteHost(raw), addrErrorText(splitErr), hostForms)
		}
		if !validPort(p) {
			return "", "", "", fmt.Errorf("host %s: port %s is not a number in 1-65535", quoteHost(raw), quoteHost(p))
		}
		host, port = h, p
	}
	// Only ASCII folds: strings.ToLower would turn the Kelvin sign into
	// "k" and let a non-ASCII header value name an ASCII Service.
	host = strings.TrimSuffix(asciiLower(host), ".")
	domain := strings.Trim(asciiLower(strings.Trim(clusterDomain, asciiSpace)), ".")
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
		return "", "", "", fmt.Errorf("host %s is not a Kubernetes service name in cluster domain %s: want %s",
			quoteHost(raw), quoteHost(domain), hostForms)
	}
	svc, ns = labels[0], labels[1]
	if errs := validation.IsDNS1035Label(svc); len(errs) > 0 {
		return "", "", "", fmt.Errorf("host %s: %s is not a valid service name: %s", quoteHost(raw), quoteHost(svc), strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", "", "", fmt.Errorf("host %s: %s is not a valid namespace: %s", quoteHost(raw), quoteHost(ns), strings.Join(errs, "; "))
	}
	return svc, ns, port, nil
}

// asciiSpace is what Go's HTTP server would trim around a header value.
const asciiSpace = " \t\r\n"

// stripSchemeAndPath drops surrounding spaces, an "http://" or "https://"
// prefix and everything from the first "/", the parts of a URL-like
// HEADER_FOR_HOST value that do not name the host.
func stripSchemeAndPath(host string) string {
	host = strings.Trim(host, asciiSpace)
	for _, scheme := range []string{"http://", "https://"} {
		if len(host) >= len(scheme) && strings.EqualFold(host[:len(scheme)], scheme) {
			host = host[len(scheme):]
			break
		}
	}
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	return host
}

// validPort reports whether p is a port as a Host spells it: decimal,
// 1-65535, without sign or leading zeros, so that one port has one
// spelling.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && portalloc.IsPort(n) && strconv.Itoa(n) == p
}

// addrErrorText is why net.SplitHostPort failed, without the address,
// which it repeats in full.
func addrErrorText(err error) string {
	if ae, ok := err.(*net.AddrError); ok {
		return ae.Err
	}
	return err.Error()
}

// quoteHost quotes s for an error message, cut to about maxQuotedHost
// bytes of quoted text (escapes make binary input four times longer).
func quoteHost(s string) string {
	q := strconv.Quote(s)
	if len(q) <= maxQuotedHost {
		return q
	}
	return strings.ToValidUTF8(q[:maxQuotedHost], "") + fmt.Sprintf("…\" (%d bytes)", len(s))
}

// asciiLower lowercases ASCII letters only.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + ('a' - 'A')
				}
			}
			return string(b)
		}
	}
	return s
}
