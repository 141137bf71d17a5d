package triggers

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// ServerPrefix is a Prometheus server as the operator's settings name it:
// a scheme, a host, a port and a path prefix. A trigger's server is at a
// prefix when the scheme, host and port are the same and its path is the
// prefix's path or below it, segment by segment: http://prom:9090/prom
// covers http://prom:9090/prom and http://prom:9090/prom/x, not
// http://prom:9090/prometheus. User information, query and fragment
// choose no other server and play no part.
type ServerPrefix struct {
	scheme, host, port, path string
}

// String is the prefix as a URL, for messages.
func (s ServerPrefix) String() string {
	return s.scheme + "://" + net.JoinHostPort(s.host, s.port) + s.path
}

// contains reports whether t, a trigger's server, is at or below s.
func (s ServerPrefix) contains(t ServerPrefix) bool {
	return s.scheme == t.scheme && s.host == t.host && s.port == t.port &&
		(s.path == "" || t.path == s.path || strings.HasPrefix(t.path, s.path+"/"))
}

// ParseServerPrefix reads one entry of --prometheus-allowed-servers: an
// absolute http or https URL with a host, an optional port (the scheme's
// default when left out) and an optional path prefix. An entry with user
// information, a query or a fragment is refused rather than silently
// ignored, since it would suggest a match on them.
func ParseServerPrefix(entry string) (ServerPrefix, error) {
	u, err := url.Parse(entry)
	if err != nil {
		return ServerPrefix{}, fmt.Errorf("%q is not a valid URL", truncate(entry, 128))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return ServerPrefix{}, fmt.Errorf("%q is not an absolute http or https URL, such as http://prometheus.monitoring:9090", truncate(redactURL(entry), 128))
	case u.User != nil:
		return ServerPrefix{}, fmt.Errorf("%q has user information; name the server only", truncate(redactURL(entry), 128))
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return ServerPrefix{}, fmt.Errorf("%q has a query or fragment; name the server and path prefix only", truncate(redactURL(entry), 128))
	}
	return prefixOf(u, ""), nil
}

// ParseServerPrefixes reads --prometheus-allowed-servers: entries separated
// by commas, blanks around them ignored. An empty list allows any server.
func ParseServerPrefixes(list string) ([]ServerPrefix, error) {
	var out []ServerPrefix
	for entry := range strings.SplitSeq(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := ParseServerPrefix(entry)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// prefixOf is the server u names. hostHeader, a trigger's Host header, if
// set, replaces u's host name: a proxy that routes by Host sends such a
// request to another server than u's host, so it must not pass for u's.
// Host names are compared as written, in lower case: prometheus.monitoring
// and prometheus.monitoring.svc.cluster.local are different servers here
// even where DNS makes them the same one.
func prefixOf(u *url.URL, hostHeader string) ServerPrefix {
	host := u.Hostname()
	if hostHeader != "" {
		if h, _, err := net.SplitHostPort(hostHeader); err == nil {
			host = h
		} else {
			host = strings.TrimSuffix(strings.TrimPrefix(hostHeader, "["), "]")
		}
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	// The query URL is JoinPath'd, which cleans the path; compare what is
	// sent. "/" and "" are both the root.
	p := strings.TrimSuffix(path.Clean("/"+u.Path), "/")
	return ServerPrefix{scheme: u.Scheme, host: strings.ToLower(host), port: port, path: p}
}

// serverOf is the server a trigger at addr with headers reaches, or false
// when addr is not an absolute http or https URL.
func serverOf(addr string, headers map[string]string) (ServerPrefix, bool) {
	u, err := url.Parse(addr)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return ServerPrefix{}, false
	}
	var hostHeader string
	for name, value := range headers {
		if http.CanonicalHeaderKey(name) == "Host" {
			hostHeader = strings.TrimSpace(value)
		}
	}
	return prefixOf(u, hostHeader), true
}

// isDefaultServer reports whether server, with a trigger's headers, is the
// operator's default server address or below it. The default Authorization
// header goes only there: it is the operator's credential for its own
// Prometheus, and an ElastiService author who names another server must
// not receive it.
func isDefaultServer(server string, headers map[string]string, defaultAddr string) bool {
	if strings.TrimSpace(defaultAddr) == "" {
		return false
	}
	def, ok := serverOf(strings.TrimSpace(defaultAddr), nil)
	if !ok {
		return false
	}
	t, ok := serverOf(server, headers)
	return ok && def.contains(t)
}

// isListed reports whether server, with a trigger's headers, is at one of
// the prefixes in list.
func isListed(server string, headers map[string]string, list []ServerPrefix) bool {
	if len(list) == 0 {
		return false
	}
	t, ok := serverOf(server, headers)
	if !ok {
		return false
	}
	for _, p := range list {
		if p.contains(t) {
			return true
		}
	}
	return false
}
